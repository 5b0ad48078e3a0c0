"""Table tests of each share-partition transition (kaflite.coordinator.share.partition, its rules)."""

from __future__ import annotations

import pytest

from kaflite.coordinator.share.partition import (
    DEFAULT_DELIVERY_COUNT_LIMIT,
    DEFAULT_MAX_RECORD_LOCKS,
    DEFAULT_RECORD_LOCK_DURATION_MS,
    AckType,
    AcquiredRange,
    RecordState,
    ShareConfig,
    SharePartition,
    ShareSnapshot,
    StateBatch,
)

A, Q, K, X = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
ACCEPT, RELEASE, REJECT, GAP = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP
NONE, INVALID_REQUEST, INVALID_RECORD_STATE = 0, 42, 121
LOCK = 1000


def sp(start: int = 0, **kw: object) -> SharePartition:
    return SharePartition(ShareConfig(record_lock_duration_ms=LOCK, **kw), start)  # type: ignore[arg-type]


def take(
    p: SharePartition, member: str, first: int, last: int, now: int = 0, **kw: object
) -> list[AcquiredRange]:
    kw.setdefault("high_watermark", 1_000_000)
    kw.setdefault("max_records", 1_000_000)
    return p.acquire(member, [(first, last)], now=now, **kw)  # type: ignore[arg-type]


def states(p: SharePartition, first: int, last: int) -> list[tuple[RecordState, int, str | None] | None]:
    return [p.state_of(o) for o in range(first, last + 1)]


def test_kafka_defaults() -> None:
    c = ShareConfig()
    assert (c.record_lock_duration_ms, c.delivery_count_limit, c.max_record_locks) == (30_000, 5, 2000)
    assert (DEFAULT_RECORD_LOCK_DURATION_MS, DEFAULT_DELIVERY_COUNT_LIMIT, DEFAULT_MAX_RECORD_LOCKS) == (
        30_000,
        5,
        2000,
    )
    assert (c.auto_offset_reset, c.isolation_level) == ("latest", "read_uncommitted")
    assert [int(s) for s in RecordState] == [0, 1, 2, 4]
    assert [int(t) for t in AckType] == [0, 1, 2, 3]


@pytest.mark.parametrize("bad", [{"auto_offset_reset": "by_duration:PT1H"}, {"isolation_level": "x"}])
def test_config_refuses_unknown_values(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        ShareConfig(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("reset", "expected"), [("latest", 50), ("earliest", 10)])
def test_initial_start_offset_follows_auto_offset_reset(reset: str, expected: int) -> None:
    p = SharePartition.initial(ShareConfig(auto_offset_reset=reset), log_start_offset=10, high_watermark=50)
    assert (p.start_offset, p.end_offset, p.fetch_offset()) == (expected, expected, expected)


def test_acquire_locks_new_records_with_delivery_count_one() -> None:
    p = sp()
    assert take(p, "m1", 0, 4, now=100) == [AcquiredRange(0, 4, 1)]
    assert states(p, 0, 4) == [(Q, 1, "m1")] * 5
    assert (p.start_offset, p.end_offset, p.next_deadline(), p.fetch_offset()) == (0, 5, 100 + LOCK, 5)


def test_acquire_never_hands_a_record_held_by_another_member() -> None:
    p = sp()
    take(p, "m1", 0, 4)
    assert take(p, "m2", 0, 9) == [AcquiredRange(5, 9, 1)]
    assert p.acquired_by("m1") == [0, 1, 2, 3, 4]
    assert p.acquired_by("m2") == [5, 6, 7, 8, 9]


def test_acquire_respects_max_records() -> None:
    p = sp()
    assert take(p, "m1", 0, 9, max_records=3) == [AcquiredRange(0, 2, 1)]
    assert p.end_offset == 3


def test_acquire_caps_the_window_at_max_record_locks() -> None:
    p = sp(max_record_locks=4)
    assert take(p, "m1", 0, 9) == [AcquiredRange(0, 3, 1)]
    assert take(p, "m2", 0, 9) == []
    assert p.acknowledge("m1", [(0, 1, ACCEPT)], now=0).error_code == NONE
    # Two records acknowledged at the front: the SPSO moved, two more fit.
    assert take(p, "m2", 0, 9) == [AcquiredRange(4, 5, 1)]
    assert (p.start_offset, p.end_offset) == (2, 6)


def test_acquire_caps_at_high_watermark_read_uncommitted() -> None:
    p = sp()
    assert take(p, "m1", 0, 9, high_watermark=5, last_stable_offset=2, aborted=[(0, 1)]) == [
        AcquiredRange(0, 4, 1)
    ]


def test_read_committed_caps_at_last_stable_offset_and_archives_aborted_records() -> None:
    p = sp(isolation_level="read_committed")
    got = take(p, "m1", 0, 9, high_watermark=10, last_stable_offset=8, aborted=[(2, 3), (6, 6)])
    assert got == [AcquiredRange(0, 1, 1), AcquiredRange(4, 5, 1), AcquiredRange(7, 7, 1)]
    assert states(p, 2, 3) == [(X, 0, None)] * 2 and p.state_of(6) == (X, 0, None)
    assert p.end_offset == 8  # nothing at or past the LSO
    p.acknowledge("m1", [(0, 1, ACCEPT)], now=0)
    assert p.start_offset == 4  # the archived aborted records at the front are passed too


def test_offsets_between_fetched_batches_are_archived_without_delivery() -> None:
    p = sp()
    got = p.acquire("m1", [(0, 1), (5, 6)], high_watermark=10, max_records=100, now=0)
    assert got == [AcquiredRange(0, 1, 1), AcquiredRange(5, 6, 1)]
    assert states(p, 2, 4) == [(X, 0, None)] * 3
    assert p.acknowledge("m1", [(0, 6, ACCEPT)], now=0).error_code == INVALID_RECORD_STATE
    assert p.acknowledge("m1", [(0, 1, ACCEPT), (2, 4, GAP), (5, 6, ACCEPT)], now=0).error_code == NONE
    assert (p.start_offset, p.end_offset) == (7, 7)


@pytest.mark.parametrize(
    ("kind", "state", "start"),
    [(ACCEPT, K, 3), (REJECT, X, 3), (GAP, X, 3), (RELEASE, A, 0)],
)
def test_acknowledge_types(kind: AckType, state: RecordState, start: int) -> None:
    p = sp()
    take(p, "m1", 0, 2)
    assert p.acknowledge("m1", [(0, 2, kind)], now=0).error_code == NONE
    assert p.start_offset == start
    if start == 0:
        assert states(p, 0, 2) == [(state, 1, None)] * 3
        assert p.fetch_offset() == 0


def test_released_record_is_redelivered_to_another_member_with_count_two() -> None:
    p = sp()
    take(p, "m1", 0, 2)
    p.acknowledge("m1", [(1, 1, RELEASE)], now=0)
    assert take(p, "m2", 0, 2) == [AcquiredRange(1, 1, 2)]


def test_acknowledge_by_a_member_not_holding_the_lock_is_invalid_record_state_and_changes_nothing() -> None:
    p = sp()
    take(p, "m1", 0, 2)
    take(p, "m2", 3, 5)
    res = p.acknowledge("m1", [(0, 0, ACCEPT), (3, 3, ACCEPT)], now=0)
    assert (res.error_code, res.failed_range) == (INVALID_RECORD_STATE, 1)
    assert p.state_of(0) == (Q, 1, "m1")  # the valid range was not applied either
    assert states(p, 3, 5) == [(Q, 1, "m2")] * 3
    assert p.acknowledge("m1", [(0, 0, ACCEPT)], now=0).error_code == NONE
    assert p.acknowledge("m1", [(0, 0, ACCEPT)], now=0).error_code == INVALID_RECORD_STATE  # already final


@pytest.mark.parametrize(
    "acks",
    [
        [(2, 1, ACCEPT)],  # first > last
        [(0, 1, ACCEPT), (1, 2, ACCEPT)],  # overlapping
        [(2, 2, ACCEPT), (0, 0, ACCEPT)],  # not ascending
        [(0, 0, 7)],  # unknown type
        [(0, 5, ACCEPT)],  # past the end
    ],
)
def test_malformed_acknowledgements_are_invalid_request(acks: list[tuple[int, int, int]]) -> None:
    p = sp()
    take(p, "m1", 0, 2)
    assert p.acknowledge("m1", acks, now=0).error_code == INVALID_REQUEST
    assert states(p, 0, 2) == [(Q, 1, "m1")] * 3


def test_lock_expiry_makes_records_available_and_late_acknowledgement_fails() -> None:
    p = sp()
    take(p, "m1", 0, 1, now=0)
    assert p.expire(LOCK - 1) == []
    assert p.acknowledge("m1", [(0, 1, ACCEPT)], now=LOCK).error_code == INVALID_RECORD_STATE
    assert states(p, 0, 1) == [(A, 1, None)] * 2
    assert take(p, "m2", 0, 1, now=LOCK) == [AcquiredRange(0, 1, 2)]


def test_delivery_count_limit_archives_instead_of_releasing() -> None:
    p = sp(delivery_count_limit=2)
    take(p, "m1", 0, 0, now=0)
    p.expire(LOCK)
    assert take(p, "m1", 0, 0, now=LOCK) == [AcquiredRange(0, 0, 2)]
    assert p.acknowledge("m1", [(0, 0, RELEASE)], now=LOCK).error_code == NONE
    assert p.state_of(0) is None and p.start_offset == 1  # archived, then passed by the SPSO
    assert take(p, "m2", 0, 0, now=LOCK) == []


def test_release_member_releases_only_its_records() -> None:
    p = sp()
    take(p, "m1", 0, 1)
    take(p, "m2", 2, 3)
    assert p.release_member("m1") == [0, 1]
    assert states(p, 0, 3) == [(A, 1, None)] * 2 + [(Q, 1, "m2")] * 2


def test_log_start_moving_past_the_start_offset_archives_and_orphans() -> None:
    p = sp()
    take(p, "m1", 0, 1)
    take(p, "m1", 2, 3)
    p.acknowledge("m1", [(2, 3, RELEASE)], now=0)
    assert p.move_log_start(3) is True
    assert (p.start_offset, p.fetch_offset()) == (3, 3)
    assert p.state_of(2) is None  # the AVAILABLE record 2 was archived
    assert p.state_of(0) == (Q, 1, "m1")  # still held: the holder may still acknowledge it
    assert p.acknowledge("m1", [(0, 0, ACCEPT)], now=0).error_code == NONE
    assert p.release_member("m1") == [1]  # released below the SPSO: archived, never redelivered
    assert p.state_of(1) is None and p.acquired_by("m1") == []
    assert p.move_log_start(2) is False
    assert p.move_log_start(9) is True and (p.start_offset, p.end_offset) == (9, 9)


def test_export_merges_batches_and_acquired_exports_as_available() -> None:
    p = sp(delivery_count_limit=2)
    take(p, "m1", 10, 15)  # a fresh partition at 0: offsets 0..9 are holes, archived and passed
    assert p.start_offset == 10
    p.acknowledge("m1", [(10, 10, RELEASE), (12, 12, ACCEPT), (13, 13, REJECT)], now=0)
    take(p, "m2", 10, 10)  # count 2 == limit: exports as ARCHIVED
    # Offset 10, held at the limit, exports as ARCHIVED: the snapshot starts past it.
    assert p.export() == ShareSnapshot(
        11,
        (
            StateBatch(11, 11, 0, 1),
            StateBatch(12, 12, 2, 1),
            StateBatch(13, 13, 4, 1),
            StateBatch(14, 15, 0, 1),
        ),
    )
    q = SharePartition.from_state(p.config, p.export())
    assert (q.start_offset, q.end_offset) == (11, 16)
    assert q.export() == p.export()
    assert states(q, 11, 11) == [(A, 1, None)]
    assert take(q, "m3", 11, 15) == [AcquiredRange(11, 11, 2), AcquiredRange(14, 15, 2)]


def test_from_state_refuses_holes() -> None:
    with pytest.raises(ValueError):
        SharePartition.from_state(
            ShareConfig(), ShareSnapshot(0, (StateBatch(0, 1, 0, 1), StateBatch(3, 4, 0, 1)))
        )
    with pytest.raises(ValueError):
        SharePartition.from_state(ShareConfig(), ShareSnapshot(0, (StateBatch(1, 1, 0, 1),)))


def test_from_state_clips_below_the_start_and_archives_available_at_the_limit() -> None:
    snap = ShareSnapshot(5, (StateBatch(0, 6, 2, 1), StateBatch(7, 7, 0, 3), StateBatch(8, 8, 0, 5)))
    q = SharePartition.from_state(ShareConfig(), snap)
    assert (q.start_offset, q.end_offset) == (7, 9)
    assert q.state_of(7) == (RecordState.AVAILABLE, 3, None)
    assert q.state_of(8) == (RecordState.ARCHIVED, 5, None)  # count 5 == the limit: never delivered again
