"""The durable share-partition state without sockets: `__share_group_state`'s records
(kaflite.coordinator.share.state_records), the share coordinator's shard (state_shard, its rules), and a
share partition rebuilt from the records replayed after a "restart" (a fresh shard replaying every record
written): acknowledged / archived records never come back, acquired ones are AVAILABLE again."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.coordinator.share.partition import (
    AckType,
    RecordState,
    ShareConfig,
    SharePartition,
    ShareSnapshot,
    StateBatch,
)
from kaflite.coordinator.share.state_records import (
    SNAPSHOT,
    UPDATE,
    ShareStateKey,
    SnapshotValue,
    UpdateValue,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
    kafka_uuid,
    partition_for,
)
from kaflite.coordinator.share.state_shard import ShareStateShard, StateRecord, merge_batches

A, Q, K, X = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
KEY = ShareStateKey("g", uuid.UUID("12345678-1234-5678-1234-567812345678"), 3)
LOCK = 1000


def b(first: int, last: int, state: RecordState, count: int) -> StateBatch:
    return StateBatch(first, last, state.value, count)


def restarted(log: list[StateRecord], snapshot_every: int = 500) -> ShareStateShard:
    """A fresh shard that replayed every record written (what the coordinator runtime's load does)."""
    shard = ShareStateShard(snapshot_every)
    for r in log:
        shard.replay(r.key, r.value)
    return shard


def compacted(log: list[StateRecord]) -> list[StateRecord]:
    """What log compaction leaves of `log`: the last record of each key, in log order."""
    last = {r.key: i for i, r in enumerate(log)}
    return [r for i, r in enumerate(log) if last[r.key] == i]


# --- records ------------------------------------------------------------------------------------------

def test_key_and_values_round_trip() -> None:
    for kind in (SNAPSHOT, UPDATE):
        assert decode_key(encode_key(kind, KEY)) == (kind, KEY)
    snap = SnapshotValue(2, 1, 7, 40, 1000, 2000, (b(40, 41, A, 1), b(42, 42, X, 5)))
    assert decode_snapshot(encode_snapshot(snap)) == snap
    upd = UpdateValue(2, 7, -1, (b(43, 50, K, 1),))
    assert decode_update(encode_update(upd)) == upd


def test_key_layout_is_kafkas() -> None:
    raw = encode_key(UPDATE, KEY)
    # record type, GroupId (int16 length + bytes), TopicId 16 bytes, Partition int32
    assert raw == b"\x00\x01" + b"\x00\x01g" + KEY.topic_id.bytes + b"\x00\x00\x00\x03"


def test_coordinator_key_uses_kafkas_uuid_form() -> None:
    assert kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert KEY.coordinator_key() == f"g:{kafka_uuid(KEY.topic_id)}:3"
    assert 0 <= partition_for(KEY, 50) < 50
    assert partition_for(KEY, 1) == 0


def test_undecodable_records_are_value_errors() -> None:
    for raw in (b"", b"\x00\x07\x00\x01g", encode_key(SNAPSHOT, KEY) + b"x"):
        try:
            decode_key(raw)
        except ValueError:
            continue
        raise AssertionError(raw)


# --- the shard ----------------------------------------------------------------------------------------

def test_first_write_is_a_snapshot_then_updates_carry_only_the_changes() -> None:
    shard = ShareStateShard()
    first = shard.write(KEY, ShareSnapshot(10, (b(10, 19, A, 1),)), now_ms=5)
    [r] = first.records
    assert decode_key(r.key) == (SNAPSHOT, KEY)
    assert r.value is not None and decode_snapshot(r.value).snapshot_epoch == 0
    second = shard.write(KEY, ShareSnapshot(12, (b(12, 14, A, 1), b(15, 15, K, 1), b(16, 19, A, 1))), now_ms=6)
    [u] = second.records
    assert decode_key(u.key) == (UPDATE, KEY)
    assert u.value is not None
    upd = decode_update(u.value)
    assert upd.start_offset == 12 and upd.batches == (b(15, 15, K, 1),)  # 10, 11 dropped by the start offset
    assert shard.read(KEY) == ShareSnapshot(12, (b(12, 14, A, 1), b(15, 15, K, 1), b(16, 19, A, 1)))
    assert shard.write(KEY, shard.read(KEY), now_ms=7).records == []  # nothing changed: nothing written  # type: ignore[arg-type]
    assert restarted(first.records + second.records).read(KEY) == shard.read(KEY)


def test_a_snapshot_replaces_the_updates_every_n_writes() -> None:
    shard = ShareStateShard(snapshot_every=2)
    log: list[StateRecord] = []
    kinds = []
    for i in range(6):
        result = shard.write(KEY, ShareSnapshot(i, (b(i, i + 3, A, 1),)), now_ms=i)
        log += result.records
        kinds += [decode_key(r.key)[0] for r in result.records]
    assert kinds == [SNAPSHOT, UPDATE, UPDATE, SNAPSHOT, UPDATE, UPDATE]
    assert [decode_snapshot(r.value).snapshot_epoch for r in log  # type: ignore[arg-type]
            if decode_key(r.key)[0] == SNAPSHOT] == [0, 1]
    assert restarted(log, 2).read(KEY) == shard.read(KEY) == ShareSnapshot(5, (b(5, 8, A, 1),))
    assert restarted(compacted(log), 2).read(KEY) == shard.read(KEY)


def test_updates_are_cumulative_so_compaction_keeps_the_state() -> None:
    """Three updates changing different offsets: compaction keeps only the last one, which carries every
    change since the snapshot (an update of the changes since the previous update would lose 10 and 11)."""
    shard = ShareStateShard()
    log = shard.write(KEY, ShareSnapshot(10, (b(10, 19, A, 0),)), now_ms=0).records
    state = [b(10, 19, A, 0)]
    for i, off in enumerate((10, 11, 12)):
        state = list(merge_batches(ShareSnapshot(10, tuple(state)), -1, [b(off, off, K, 1)]).batches)
        result = shard.write(KEY, ShareSnapshot(10, tuple(state)), now_ms=i + 1)
        [u] = result.records
        assert u.value is not None and decode_update(u.value).batches == (b(10, off, K, 1),)
        log += result.records
    assert [decode_key(r.key)[0] for r in compacted(log)] == [SNAPSHOT, UPDATE]
    assert restarted(compacted(log)).read(KEY) == shard.read(KEY) == ShareSnapshot(10, (b(10, 12, K, 1),
                                                                                       b(13, 19, A, 0)))


def test_delete_writes_tombstones_for_both_keys() -> None:
    shard = ShareStateShard()
    log = shard.write(KEY, ShareSnapshot(0, ()), now_ms=0).records
    other = ShareStateKey("h", KEY.topic_id, 0)
    log += shard.write(other, ShareSnapshot(0, ()), now_ms=0).records
    gone = shard.delete(shard.keys_of_group("g")).records
    assert [(decode_key(r.key), r.value) for r in gone] == [((SNAPSHOT, KEY), None), ((UPDATE, KEY), None)]
    assert shard.read(KEY) is None and shard.read(other) is not None
    assert restarted(log + gone).read(KEY) is None


def test_merge_splits_a_batch_an_update_overlaps() -> None:
    base = ShareSnapshot(0, (b(0, 9, A, 1),))
    assert merge_batches(base, -1, [b(3, 4, K, 1)]) == ShareSnapshot(
        0, (b(0, 2, A, 1), b(3, 4, K, 1), b(5, 9, A, 1)))
    assert merge_batches(base, 5, [b(3, 6, X, 2)]) == ShareSnapshot(5, (b(5, 6, X, 2), b(7, 9, A, 1)))


# --- a share partition across a restart ---------------------------------------------------------------

def persist(shard: ShareStateShard, sp: SharePartition, log: list[StateRecord], now: int) -> None:
    """What the broker does before answering: write the changed share partition (and clear the flag)."""
    if sp.changed:
        sp.changed = False
        log += shard.write(KEY, sp.export(), now).records


def test_restart_keeps_acknowledged_and_archived_and_frees_the_acquired() -> None:
    config = ShareConfig(record_lock_duration_ms=LOCK, delivery_count_limit=2)
    shard, log = ShareStateShard(), []
    sp = SharePartition.initial(config, 0, 0)
    persist(shard, sp, log, 0)  # the start offset chosen at creation is durable
    sp.acquire("m", [(0, 9)], high_watermark=10, max_records=100, now=0)
    assert not sp.changed  # an acquisition alone is not written
    ack = sp.acknowledge("m", [(0, 2, AckType.ACCEPT), (3, 3, AckType.REJECT), (4, 5, AckType.RELEASE),
                               (7, 7, AckType.ACCEPT)], now=1)
    assert ack.error_code == 0 and sp.changed
    persist(shard, sp, log, 1)
    sp.acquire("m", [(4, 5)], high_watermark=10, max_records=100, now=2)  # second delivery of 4, 5
    sp.acknowledge("m", [(4, 4, AckType.RELEASE)], now=3)  # at the limit of 2: archived
    persist(shard, sp, log, 3)
    # 5, 6, 8, 9 are held by "m" when the broker stops; 5 on its last delivery (2 of 2)
    after = SharePartition.from_state(config, restarted(log).read(KEY))  # type: ignore[arg-type]
    # 0..4 are final (accepted, rejected, archived at the limit), and so is 5: its lock ended with the
    # broker at the delivery limit, which archives it as a lock expiry would
    assert after.start_offset == 6
    assert [after.state_of(o) for o in range(6, 10)] == [(A, 1, None), (K, 1, None), (A, 1, None), (A, 1, None)]
    got = after.acquire("n", [(0, 9)], high_watermark=10, max_records=100, now=10)
    assert [o for r in got for o in range(r.first_offset, r.last_offset + 1)] == [6, 8, 9]


def test_expiry_at_the_limit_is_durable() -> None:
    config = ShareConfig(record_lock_duration_ms=LOCK, delivery_count_limit=2)
    shard, log = ShareStateShard(), []
    sp = SharePartition.initial(config, 0, 0)
    for now in (0, LOCK):  # delivered twice, the lock ending each time
        sp.acquire("m", [(0, 0)], high_watermark=1, max_records=1, now=now)
    sp.expire(2 * LOCK)
    persist(shard, sp, log, 2 * LOCK)
    after = SharePartition.from_state(config, restarted(log).read(KEY))  # type: ignore[arg-type]
    assert after.start_offset == 1
    assert after.acquire("n", [(0, 0)], high_watermark=1, max_records=1, now=0) == []


_ops = st.lists(st.tuples(st.sampled_from(["acquire", "ack", "expire", "log_start"]),
                          st.integers(0, 30), st.integers(0, 5), st.sampled_from([1, 2, 3])), max_size=40)


@settings(max_examples=60, deadline=None)
@given(_ops, st.integers(1, 4))
def test_replayed_state_is_the_exported_state(ops: list[tuple[str, int, int, int]], every: int) -> None:
    """After every persisted step, a fresh shard replaying the whole log holds exactly the share partition's
    export(), and a share partition rebuilt from it exports it again (snapshots and updates mixed)."""
    config = ShareConfig(record_lock_duration_ms=LOCK, delivery_count_limit=3, max_record_locks=20)
    shard, log = ShareStateShard(every), []
    sp = SharePartition.initial(config, 0, 0)
    now, log_start = 0, 0
    for kind, offset, span, ack in ops:
        now += 300
        if kind == "acquire":
            sp.acquire("m", [(offset, offset + span)], high_watermark=40, max_records=8, now=now)
        elif kind == "ack":
            held = sp.acquired_by("m")
            if held:
                first = held[offset % len(held)]
                sp.acknowledge("m", [(first, first, ack)], now)
        elif kind == "expire":
            sp.expire(now + LOCK)
        else:
            log_start = min(40, log_start + span)
            sp.move_log_start(log_start)
        wrote = sp.changed
        persist(shard, sp, log, now)
        durable = restarted(log, every).read(KEY)
        assert durable is not None and durable == shard.read(KEY) == restarted(compacted(log), every).read(KEY)
        if wrote:  # an acquisition alone writes nothing: then the durable state is the one before it
            assert durable == sp.export()
        assert SharePartition.from_state(config, durable).export() == durable


# --- the share coordinator's RPCs (83-87) on the shard --------------------------------------------------

def answer(result: object) -> object:
    [(token, a)] = result.responses  # type: ignore[attr-defined]
    assert token is None
    return a


def test_initialize_write_read_summary_and_fencing() -> None:
    shard, log = ShareStateShard(), []
    assert answer(shard.read_state(KEY, 0, 0)) == answer(ShareStateShard().summary(KEY, 0))  # no state: start -1
    init = shard.initialize(KEY, state_epoch=1, start_offset=10, now_ms=0)
    log += init.records
    assert answer(init).error == 0 and [decode_key(r.key)[0] for r in init.records] == [SNAPSHOT]
    w = shard.write_state(KEY, 1, 3, -1, [b(10, 12, A, 1), b(11, 11, K, 1)], now_ms=1)  # overlapping: last wins
    log += w.records
    assert answer(w).error == 0
    assert shard.read(KEY) == ShareSnapshot(10, (b(10, 10, A, 1), b(11, 11, K, 1), b(12, 12, A, 1)))
    assert answer(shard.write_state(KEY, 1, 2, -1, [], 2)).error == 74  # FENCED_LEADER_EPOCH: 2 < 3
    assert answer(shard.write_state(KEY, 0, 3, -1, [], 2)).error == 124  # FENCED_STATE_EPOCH: 0 < 1
    assert answer(shard.read_state(KEY, 2, 2)).error == 74
    read = shard.read_state(KEY, 5, 3)  # a newer leader epoch is written before the answer
    log += read.records
    a = answer(read)
    assert (a.error, a.start_offset, a.state_epoch, a.leader_epoch) == (0, 10, 1, 5)  # type: ignore[attr-defined]
    assert [decode_key(r.key)[0] for r in read.records] == [UPDATE]
    s = answer(shard.summary(KEY, 5))
    assert (s.start_offset, s.state_epoch, s.leader_epoch, s.batches) == (10, 1, 5, ())  # type: ignore[attr-defined]
    assert answer(shard.summary(KEY, 4)).error == 74  # an older leader's read is fenced
    assert answer(shard.summary(KEY, -1)) == answer(shard.summary(KEY, 5))  # an admin read (-1) is not
    assert answer(shard.initialize(KEY, 0, 0, 4)).error == 124  # an older state epoch is fenced
    again = shard.initialize(KEY, 2, 20, 4)  # a new state epoch resets the state
    log += again.records
    assert shard.read(KEY) == ShareSnapshot(20, ())
    replayed = restarted(log)
    assert replayed.read(KEY) == shard.read(KEY) == restarted(compacted(log)).read(KEY)
    assert (replayed.states[KEY].state_epoch, replayed.states[KEY].leader_epoch) == (2, 5)
