"""read_committed reads on a real in-process broker: Fetch stops at the last stable offset and returns the
aborted transactions of the range (from the `.txnindex`), ListOffsets latest is the last stable offset,
and the markers the coordinator writes through `ReplicaManager.append_txn_marker` move it."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaflite.protocol.record_batch import build_record_batch, iter_batches
from kaflite.server.handlers.fetch import handle_fetch
from kaflite.server.handlers.list_offsets import handle_list_offsets
from replica.test_handlers_inprocess import Harness


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def _fetch(h: Harness, offset: int, isolation: int) -> Any:
    q = h.req(1, 12)
    req = q.FetchRequest(max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, isolation_level=isolation,
                         session_id=0, session_epoch=-1, topics=(q.FetchTopic(topic="t", partitions=(
                             q.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                              log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                         forgotten_topics_data=(), rack_id="")
    return h.call(1, 12, handle_fetch, req).responses[0].partitions[0]


def _latest(h: Harness, isolation: int) -> int:
    q = h.req(2, 7)
    req = q.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=(q.ListOffsetsTopic(
        name="t", partitions=(q.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
    return int(h.call(2, 7, handle_list_offsets, req).topics[0].partitions[0].offset)


def _offsets(p: Any) -> list[int]:
    return [b.base_offset for b in iter_batches(p.records or b"")]


def test_read_committed_fetch_and_list_offsets(h: Harness) -> None:
    h.broker.create_topic("t", 1, None)
    rm = h.broker.replica_manager

    def txn(pid: int, seq: int) -> bytes:
        return build_record_batch([(None, b"x", [])], producer_id=pid, producer_epoch=0, base_sequence=seq,
                                  is_transactional=True)

    rm.append_records("t", 0, build_record_batch([(None, b"plain", [])]))  # 0
    rm.append_records("t", 0, txn(7, 0))  # 1: pid 7's transaction
    rm.append_records("t", 0, build_record_batch([(None, b"plain", [])]))  # 2
    assert _latest(h, 0) == 3 and _latest(h, 1) == 1
    committed = _fetch(h, 0, 1)
    assert committed.last_stable_offset == 1 and committed.high_watermark == 3
    assert _offsets(committed) == [0]
    assert _offsets(_fetch(h, 0, 0)) == [0, 1, 2]
    assert _fetch(h, 0, 0).aborted_transactions is None
    rm.append_txn_marker("t", 0, 7, 0, False, 0)  # 3: ABORT
    p = _fetch(h, 0, 1)
    assert p.last_stable_offset == 4 and _offsets(p) == [0, 1, 2, 3]
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(7, 1)]
    assert _latest(h, 1) == 4
    rm.append_records("t", 0, txn(7, 1))  # 4
    rm.append_txn_marker("t", 0, 7, 0, True, 0)  # 5: COMMIT
    p = _fetch(h, 4, 1)
    assert _offsets(p) == [4, 5] and list(p.aborted_transactions) == []
