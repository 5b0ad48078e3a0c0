"""A stand-in for ZooKeeper's partition state znodes, for the pure controller tests: it applies a
controller's decisions the way cluster.zk does (compare-and-set on the znode version, every write
refused once a newer controller epoch was elected) and reports stale writes back."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaflite.cluster.controller import Controller
from kaflite.cluster.controller.events import (
    ControllerStartup,
    CreatePartitionStates,
    Decision,
    UpdatePartitionStates,
    WriteOutcome,
    WriteTopicAssignment,
)
from kaflite.cluster.zkdata import LeaderAndIsr, TopicAssignment

TP = tuple[str, int]


class Fenced(Exception):
    pass


@dataclass
class SimZk:
    controller_epoch: int = 0
    states: dict[TP, LeaderAndIsr] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    live: dict[int, int] = field(default_factory=dict)
    history: list[tuple[TP, LeaderAndIsr | None, LeaderAndIsr]] = field(default_factory=list)

    def apply(self, decisions: list[Decision]) -> dict[TP, LeaderAndIsr | None]:
        stale: dict[TP, LeaderAndIsr | None] = {}
        for d in decisions:
            if isinstance(d, CreatePartitionStates | UpdatePartitionStates | WriteTopicAssignment):
                if d.controller_epoch != self.controller_epoch:
                    raise Fenced(
                        f"write with controller epoch {d.controller_epoch}, ZooKeeper has {self.controller_epoch}"
                    )
            if isinstance(d, CreatePartitionStates):
                for tp, s in d.states.items():
                    assert s.controller_epoch == d.controller_epoch
                    if tp in self.states:
                        stale[tp] = self.states[tp]
                        continue
                    self._store(tp, s, 0)
            elif isinstance(d, UpdatePartitionStates):
                for tp, s in d.states.items():
                    assert s.controller_epoch == d.controller_epoch
                    cur = self.states.get(tp)
                    if cur is None or cur.zk_version != s.zk_version:
                        stale[tp] = cur
                        continue
                    self._store(tp, s, cur.zk_version + 1)
            elif isinstance(d, WriteTopicAssignment):
                self.topics[d.assignment.topic] = d.assignment
        return stale

    def _store(self, tp: TP, s: LeaderAndIsr, version: int) -> None:
        new = LeaderAndIsr(s.leader, s.leader_epoch, s.isr, s.controller_epoch, version)
        self.history.append((tp, self.states.get(tp), new))
        self.states[tp] = new

    def elect(self, controller: Controller) -> list[Decision]:
        """`controller` wins an election: epoch + 1, started from what this store holds."""
        self.controller_epoch += 1
        return self.run(
            controller,
            ControllerStartup(self.controller_epoch, dict(self.live), dict(self.topics), dict(self.states)),
        )

    def run(self, controller: Controller, event: object) -> list[Decision]:
        """Hand `event` to the controller, apply its decisions, feed stale writes back (bounded)."""
        out = controller.handle(event)  # type: ignore[arg-type]
        decisions = list(out)
        stale = self.apply(out)
        for _ in range(5):
            if not stale:
                break
            out = controller.handle(WriteOutcome(stale))
            decisions += out
            stale = self.apply(out)
        assert not stale, f"writes still stale after 5 rounds: {stale}"
        controller.confirm()  # every write landed, as the shell confirms
        return decisions
