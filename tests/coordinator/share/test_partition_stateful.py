"""Random members acquiring, acknowledging, leaving, the clock moving, the log growing and being truncated,
and restarts through export/import (hypothesis RuleBasedStateMachine), against a small model that only
remembers who holds what, how often each offset was delivered, and which offsets are final. After every
step: no offset held by two members, none delivered while final or past the delivery-count limit, every
offset below the SPSO final (or still held after the log start passed it), the window within
max.record.locks, and the machine's view of each offset equal to the model's."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kaflite.coordinator.share.partition import AckType, RecordState, ShareConfig, SharePartition

MEMBERS = ("m0", "m1", "m2")
LOCK_MS = 100
LIMIT = 2  # Kafka's smallest delivery.count.limit: records reach it often in a short run
MAX_LOCKS = 12


@dataclass
class Model:
    count: dict[int, int] = field(default_factory=dict)  # deliveries per offset
    holder: dict[int, tuple[str, int]] = field(default_factory=dict)  # offset -> (member, deadline)
    accepted: set[int] = field(default_factory=set)
    archived: set[int] = field(default_factory=set)
    log_start: int = 0

    def final(self, off: int) -> bool:
        return off in self.accepted or off in self.archived

    def release(self, off: int) -> None:
        del self.holder[off]
        if self.count[off] >= LIMIT or off < self.log_start:
            self.archived.add(off)

    def expire(self, now: int) -> None:
        for off in sorted(o for o, (_, d) in self.holder.items() if d <= now):
            self.release(off)


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.config = ShareConfig(
            record_lock_duration_ms=LOCK_MS,
            delivery_count_limit=LIMIT,
            max_record_locks=MAX_LOCKS,
            auto_offset_reset="earliest",
        )
        self.sp = SharePartition.initial(self.config, log_start_offset=0, high_watermark=0)
        self.m = Model()
        self.now = 0
        self.hw = 0

    # --- rules --------------------------------------------------------------------------------------
    @rule(n=st.integers(1, 8))
    def produce(self, n: int) -> None:
        self.hw += n

    @rule(ms=st.integers(0, LOCK_MS // 2))
    def tick(self, ms: int) -> None:
        self.now += ms
        released = self.sp.expire(self.now)
        due = sorted(o for o, (_, d) in self.m.holder.items() if d <= self.now)
        assert released == due
        self.m.expire(self.now)

    @rule(
        member=st.sampled_from(MEMBERS),
        max_records=st.integers(1, 10),
        gap=st.integers(0, 3),
        from_zero=st.booleans(),
    )
    def acquire(self, member: str, max_records: int, gap: int, from_zero: bool) -> None:
        self.m.expire(self.now)
        # From the fetch offset, as the broker reads; or the whole log again, held and final records included
        # (a re-read must hand out only what is AVAILABLE).
        start = 0 if from_zero and self.sp.fetch_offset() > 0 else self.sp.fetch_offset()
        if start >= self.hw:
            batches: list[tuple[int, int]] = []
        elif gap and start + 2 + gap < self.hw:
            # Two batches with compacted-away offsets between them.
            batches = [(start, start + 1), (start + 2 + gap, self.hw - 1)]
        else:
            batches = [(start, self.hw - 1)]
        holes = set(range(start + 2, start + 2 + gap)) if len(batches) == 2 else set()
        old_end = self.sp.end_offset
        got = self.sp.acquire(member, batches, high_watermark=self.hw, max_records=max_records, now=self.now)
        offsets = [o for r in got for o in range(r.first_offset, r.last_offset + 1)]
        assert len(offsets) <= max_records and offsets == sorted(set(offsets))
        for r in got:
            for off in range(r.first_offset, r.last_offset + 1):
                assert off not in self.m.holder, (
                    f"{off} handed to {member} while {self.m.holder.get(off)} holds it"
                )
                assert not self.m.final(off), f"{off} redelivered after it was final"
                assert off < self.hw and off >= self.m.log_start
                assert r.delivery_count == self.m.count.get(off, 0) + 1 <= LIMIT
                self.m.count[off] = r.delivery_count
                self.m.holder[off] = (member, self.now + LOCK_MS)
        for off in range(old_end, self.sp.end_offset):
            if off not in offsets:
                assert off in holes, f"new offset {off} neither acquired nor a hole"
                self.m.archived.add(off)
                self.m.count.setdefault(off, 0)

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member: str, data: st.DataObject) -> None:
        self.m.expire(self.now)
        held = sorted(o for o, (h, _) in self.m.holder.items() if h == member)
        if not held:
            return
        chosen = sorted(data.draw(st.sets(st.sampled_from(held), min_size=1)))
        acks: list[tuple[int, int, int]] = []
        for off in chosen:
            kind = data.draw(st.sampled_from([AckType.ACCEPT, AckType.RELEASE, AckType.REJECT]))
            if acks and acks[-1][1] == off - 1 and acks[-1][2] == kind:
                acks[-1] = (acks[-1][0], off, kind)
            else:
                acks.append((off, off, kind))
        assert self.sp.acknowledge(member, acks, self.now).error_code == 0
        for first, last, kind in acks:
            for off in range(first, last + 1):
                if kind == AckType.ACCEPT:
                    del self.m.holder[off]
                    self.m.accepted.add(off)
                elif kind == AckType.REJECT:
                    del self.m.holder[off]
                    self.m.archived.add(off)
                else:
                    self.m.release(off)

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge_what_another_holds(self, member: str, data: st.DataObject) -> None:
        self.m.expire(self.now)
        others = sorted(o for o, (h, _) in self.m.holder.items() if h != member)
        if not others:
            return
        off = data.draw(st.sampled_from(others))
        before = self.sp.state_of(off)
        assert self.sp.acknowledge(member, [(off, off, AckType.ACCEPT)], self.now).error_code == 121
        assert self.sp.state_of(off) == before

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        self.m.expire(self.now)
        held = sorted(o for o, (h, _) in self.m.holder.items() if h == member)
        assert self.sp.release_member(member) == held
        for off in held:
            self.m.release(off)

    @precondition(lambda self: self.hw > self.m.log_start)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        new = data.draw(st.integers(self.m.log_start + 1, self.hw))
        self.sp.move_log_start(new)
        for off in range(self.m.log_start, new):
            if off not in self.m.holder and not self.m.final(off):
                self.m.archived.add(off)
        self.m.log_start = new

    @rule()
    def restart(self) -> None:
        snap = self.sp.export()
        again = SharePartition.from_state(self.config, snap)
        assert again.export() == snap
        assert (again.start_offset, again.end_offset) == (snap.start_offset, self.sp.end_offset)
        self.sp = again
        for off in sorted(self.m.holder):  # locks do not survive; orphans below the SPSO are forgotten
            self.m.release(off)

    # --- invariants ---------------------------------------------------------------------------------
    @invariant()
    def agrees_with_the_model(self) -> None:
        sp, m = self.sp, self.m
        m.expire(self.now)  # the machine expires lazily, on its next call with `now`
        sp.expire(self.now)
        assert sp.in_flight() <= MAX_LOCKS
        assert all(c <= LIMIT for c in m.count.values())
        for off in range(0, sp.start_offset):
            assert m.final(off) or off in m.holder, f"offset {off} below the SPSO is not final"
            if off in m.holder:
                assert sp.state_of(off) == (RecordState.ACQUIRED, m.count[off], m.holder[off][0])
            else:
                assert sp.state_of(off) is None, (
                    f"final offset {off} below the SPSO still kept: {sp.state_of(off)}"
                )
        for off in range(sp.start_offset, sp.end_offset):
            state, count, holder = sp.state_of(off) or (None, None, None)
            assert count == m.count[off]
            if off in m.holder:
                assert (state, holder) == (RecordState.ACQUIRED, m.holder[off][0])
            elif off in m.accepted:
                assert state is RecordState.ACKNOWLEDGED
            elif off in m.archived:
                assert state is RecordState.ARCHIVED
            else:
                assert state is RecordState.AVAILABLE and count < LIMIT
        for off in range(sp.end_offset, self.hw):
            assert off not in m.count, f"offset {off} past the end was delivered"


SharePartitionMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_share_partition_stateful = SharePartitionMachine.TestCase
