"""The pure fetch-session cache (KIP-227): creation, incremental updates, epochs, forgetting, eviction."""

from __future__ import annotations

from kaflite.protocol.errors import ErrorCode
from kaflite.server.fetch_session import FetchSessionCache

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_initial_then_incremental() -> None:
    cache = FetchSessionCache(10)
    ctx = cache.context(0, 0, [(A0, 5, 100), (A1, 7, 100)])
    assert ctx.error is ErrorCode.none and ctx.session_id > 0 and not ctx.incremental
    assert [(tp, t.fetch_offset) for tp, t in ctx.targets] == [(A0, 5), (A1, 7)]
    sid = ctx.session_id
    # epoch 1: only A0 moved; the session still reads both, incrementally
    ctx = cache.context(sid, 1, [(A0, 9, 100)])
    assert ctx.incremental and [(tp, t.fetch_offset) for tp, t in ctx.targets] == [(A0, 9), (A1, 7)]
    # a repeated epoch is refused, the next one accepted; B0 is added, A1 forgotten
    assert cache.context(sid, 1, []).error is ErrorCode.invalid_fetch_session_epoch
    ctx = cache.context(sid, 2, [(B0, 0, 50)], forgotten=[A1])
    assert [tp for tp, _ in ctx.targets] == [A0, B0]


def test_unknown_session_and_final_epoch() -> None:
    cache = FetchSessionCache(10)
    assert cache.context(42, 3, []).error is ErrorCode.fetch_session_id_not_found
    sid = cache.context(0, 0, [(A0, 0, 1)]).session_id
    ctx = cache.context(sid, -1, [(A0, 3, 1)])  # FINAL: sessionless full fetch, the session is closed
    assert ctx.session_id == 0 and not ctx.incremental and len(cache) == 0
    assert cache.context(sid, 1, []).error is ErrorCode.fetch_session_id_not_found


def test_incremental_answers_carry_only_news() -> None:
    cache = FetchSessionCache(10)
    ctx = cache.context(0, 0, [(A0, 0, 1), (A1, 0, 1)])
    for tp in (A0, A1):
        assert ctx.include(tp, False, ErrorCode.none, 10, 10, 0)  # a full answer has everything
        ctx.sent(tp, 10, 10, 0)
    ctx = cache.context(ctx.session_id, 1, [])
    assert not ctx.include(A0, False, ErrorCode.none, 10, 10, 0)  # unchanged
    assert ctx.include(A0, True, ErrorCode.none, 10, 10, 0)  # records
    assert ctx.include(A1, False, ErrorCode.none, 11, 11, 0)  # the high watermark moved
    assert ctx.include(A1, False, ErrorCode.none, 10, 10, 3)  # the log start moved
    assert ctx.include(A1, False, ErrorCode.offset_out_of_range, 10, 10, 0)  # an error


def test_least_recently_used_session_is_evicted() -> None:
    cache = FetchSessionCache(2)
    s1 = cache.context(0, 0, [(A0, 0, 1)]).session_id
    s2 = cache.context(0, 0, [(A0, 0, 1)]).session_id
    cache.context(s1, 1, [])  # s1 used: s2 is now the least recently used
    cache.context(0, 0, [(A0, 0, 1)])
    assert cache.context(s2, 1, []).error is ErrorCode.fetch_session_id_not_found
    assert cache.context(s1, 2, []).error is ErrorCode.none
    assert FetchSessionCache(0).context(0, 0, [(A0, 0, 1)]).session_id == 0  # no slots: sessionless
