"""A manual-clock driver for the pure GroupCoordinator (shared by the coordinator tests)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from kaflite.assign.types import TopicPartition
from kaflite.coordinator import CoordinatorConfig, CoordinatorResult, GroupCoordinator
from kaflite.coordinator import messages as m
from kaflite.protocol import consumer_protocol as cp
from kaflite.protocol.errors import ErrorCode


def encode_subscription(topics: list[str]) -> bytes:
    """A version-0 consumer Subscription of `topics` (what a classic member sends in JoinGroup)."""
    return cp.encode_subscription(cp.ConsumerSubscription(list(topics)), version=0)


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    """A version-0 consumer Assignment (what a leader sends in SyncGroup)."""
    tps = [TopicPartition(t, p) for t, ps in partitions.items() for p in ps]
    return cp.encode_assignment(cp.ConsumerAssignment(tps), version=0)


RANGE_RR = (m.Protocol("range", encode_subscription(["t"])), m.Protocol("roundrobin", encode_subscription(["t"])))


class Harness:
    """Drives a coordinator like a shell would: tokens for parked requests, a clock we move by hand."""

    def __init__(self, uuids: bool = False, **config: Any) -> None:
        counter = itertools.count(1)
        new_uuid = None if uuids else (lambda: f"uuid{next(counter)}")
        self.gc = GroupCoordinator(CoordinatorConfig(**config), new_uuid=new_uuid)
        self.now = 0
        self._tokens = itertools.count(1)
        self.answers: dict[int, Any] = {}
        self.results: list[CoordinatorResult] = []

    def _collect(self, result: CoordinatorResult) -> CoordinatorResult:
        self.results.append(result)
        for token, resp in result.responses:
            if token is not None:
                self.answers[token] = resp
        return result

    # --- requests -------------------------------------------------------------------------------

    def join(self, member_id: str = "", group: str | None = "g", instance: str | None = None,
             protocols: tuple[m.Protocol, ...] = RANGE_RR, protocol_type: str = "consumer",
             session: int = 10_000, rebalance: int = 20_000, version: int = 7,
             client_id: str = "client") -> int:
        token = next(self._tokens)
        req = m.JoinGroupRequest(group, member_id, protocol_type, protocols, session, rebalance, instance,
                                 client_id, "/127.0.0.1", version, None, token)
        self._collect(self.gc.handle_join(req, self.now))
        return token

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             group: str = "g", instance: str | None = None, protocol_type: str | None = None,
             protocol_name: str | None = None) -> int:
        token = next(self._tokens)
        req = m.SyncGroupRequest(group, generation, member_id, tuple((assignments or {}).items()), instance,
                                 protocol_type, protocol_name, token)
        self._collect(self.gc.handle_sync(req, self.now))
        return token

    def heartbeat(self, member_id: str, generation: int, group: str = "g", instance: str | None = None) -> ErrorCode:
        res = self._collect(self.gc.handle_heartbeat(m.HeartbeatRequest(group, generation, member_id, instance),
                                                     self.now))
        return res.response().error

    def leave(self, *members: tuple[str, str | None], group: str = "g") -> m.LeaveGroupResponse:
        req = m.LeaveGroupRequest(group, tuple(m.MemberIdentity(mid, iid) for mid, iid in members))
        self.last = self._collect(self.gc.handle_leave(req, self.now))
        return self.last.response()

    def commit(self, offsets: dict[tuple[str, int], int], member_id: str = "", generation: int = -1,
               group: str = "g", instance: str | None = None, version: int = 8,
               metadata: str = "") -> dict[tuple[str, int], ErrorCode]:
        topics: dict[str, list[m.OffsetCommitPartition]] = {}
        for (t, p), off in offsets.items():
            topics.setdefault(t, []).append(m.OffsetCommitPartition(p, off, metadata))
        req = m.OffsetCommitRequest(group, tuple((t, tuple(ps)) for t, ps in topics.items()), generation,
                                    member_id, instance, -1, version)
        resp = self._collect(self.gc.handle_offset_commit(req, self.now)).response()
        return {(t, p): e for t, ps in resp.topics for p, e in ps}

    def fetch(self, group: str = "g", topics: dict[str, list[int]] | None = None) -> dict[tuple[str, int], int]:
        req = m.OffsetFetchRequest(group, None if topics is None else tuple((t, tuple(ps)) for t, ps in topics.items()))
        resp = self._collect(self.gc.handle_offset_fetch(req, self.now)).response()
        return {(t, f.partition): f.offset for t, fs in resp.topics for f in fs}

    # --- clock ----------------------------------------------------------------------------------

    def advance(self, ms: int) -> CoordinatorResult:
        self.now += ms
        return self._collect(self.gc.poll_timers(self.now))

    def advance_until(self, done: Callable[[], bool], step: int = 100, limit_ms: int = 1_000_000) -> None:
        waited = 0
        while not done():
            assert waited <= limit_ms, "condition never met"
            self.advance(step)
            waited += step

    # --- scenarios ------------------------------------------------------------------------------

    def group(self, group: str = "g"):  # noqa: ANN201 - ClassicGroup
        return self.gc.groups[group]

    def join_new(self, **kw: Any) -> int:
        """JoinGroup v4+ as a real client does it: MEMBER_ID_REQUIRED, then rejoin with the id."""
        token = self.join(**kw)
        resp = self.answers.get(token)
        if resp is not None and resp.error is ErrorCode.member_id_required:
            kw["member_id"] = resp.member_id
            token = self.join(**kw)
        return token

    def form_group(self, n: int = 2, instances: list[str | None] | None = None, group: str = "g",
                   assign: bool = True, **kw: Any) -> list[str]:
        """n members join, the join phase completes, and (assign=True) everyone syncs: a Stable group."""
        instances = instances or [None] * n
        tokens = [self.join_new(group=group, instance=instances[i], client_id=f"c{i}", **kw) for i in range(n)]
        self.advance_until(lambda: all(t in self.answers for t in tokens))
        joined = [self.answers[t] for t in tokens]
        assert all(r.error is ErrorCode.none for r in joined), joined
        ids = [r.member_id for r in joined]
        if assign:
            gen = joined[0].generation_id
            leader = joined[0].leader
            plan = {mid: encode_assignment({"t": [i]}) for i, mid in enumerate(ids)}
            self.sync(leader, gen, plan, group=group, instance=instances[ids.index(leader)])
            for i, mid in enumerate(ids):
                if mid != leader:
                    self.sync(mid, gen, group=group, instance=instances[i])
        return ids
