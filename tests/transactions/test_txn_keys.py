"""The producer-id and transaction keys that change what the broker does: transaction.partition.verification.enable
(false appends a transactional batch to a partition outside the transaction, as Kafka before 3.6),
producer.id.expiration.check.interval.ms (how often idle producer ids are forgotten, apart from the
retention check), transaction.state.log.load.buffer.size (the read size of a __transaction_state load)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i16, i32, i64

from helpers import wait_until
from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.coordinators.transactions import TransactionService
from kaflite.server.coordinators.writer import InternalTopicWriter, OffsetsTopicWriter
from kaflite.storage.log import Log
from server.kwire import WireClient
from transactions.conftest import TXN_OVERRIDES

E = ErrorCode


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from kaflite.server.embedded import EmbeddedBroker

    overrides = {
        **TXN_OVERRIDES,
        "transaction.partition.verification.enable": "false",
        "transaction.state.log.load.buffer.size": "4096",
        "producer.id.expiration.ms": "500",
        "producer.id.expiration.check.interval.ms": "200",
        "log.retention.check.interval.ms": "600000",  # only the producer-id check can forget them
    }
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("txnkeys"), overrides=overrides, dev=True) as b:
        yield b


def _topic(broker: Any, partitions: int) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    broker.call(broker.server.broker.create_topic, name, partitions, None)
    return name


def _produce(c: WireClient, topic: str, partition: int, pid: int, epoch: int, tid: str | None) -> ErrorCode:
    records = build_record_batch([(None, b"x", [])], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                 is_transactional=tid is not None)
    r = c.request(ProduceRequest(transactional_id=tid, acks=i16(-1), timeout=datetime.timedelta(seconds=5),
                                 topic_data=(TopicProduceData(name=topic, partition_data=(
                                     PartitionProduceData(index=i32(partition), records=records),)),)))
    return ErrorCode(r.responses[0].partition_responses[0].error_code)


def _init(c: WireClient, tid: str | None) -> tuple[int, int]:
    r = c.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
                                        producer_id=i64(-1), producer_epoch=i16(-1)))
    assert r.error_code == E.none
    return int(r.producer_id), int(r.producer_epoch)


def _active_producers(c: WireClient, topic: str) -> list[int]:
    r = c.request(DescribeProducersRequest(topics=(TopicRequest(name=topic, partition_indexes=(i32(0),)),)))
    return [int(s.producer_id) for s in r.topics[0].partitions[0].active_producers]


def test_verification_disabled_appends_outside_the_transaction(broker: Any) -> None:
    # with the default (true) the same produce is INVALID_TXN_STATE (test_txn_wire)
    topic = _topic(broker, 2)
    with WireClient(broker.bootstrap) as c:
        tid = f"unverified-{uuid.uuid4().hex[:6]}"
        pid, epoch = _init(c, tid)
        assert _produce(c, topic, 1, pid, epoch, tid) == E.none  # never added to a transaction


def test_idle_producer_ids_forgotten_every_check_interval(broker: Any) -> None:
    topic = _topic(broker, 1)
    with WireClient(broker.bootstrap) as c:
        pid, epoch = _init(c, None)  # an idempotent producer
        assert _produce(c, topic, 0, pid, epoch, None) == E.none
        assert pid in _active_producers(c, topic)
        # idle 500 ms, checked every 200 ms; the retention check (10 min) never ran meanwhile
        wait_until("the idle producer id forgotten", lambda: pid not in _active_producers(c, topic), timeout=10.0)


def test_transaction_state_load_reads_the_configured_buffer_size(broker: Any, tmp_path: Path) -> None:
    svc = broker.call(TransactionService.of, broker.server.broker)
    assert svc.load_buffer_size == 4096

    # the writer's replay of a partition asks the log for load_buffer_size bytes per read
    lg = Log(tmp_path / "__transaction_state-0")
    for i in range(20):
        lg.append(build_record_batch([(f"k{i}".encode(), b"v" * 300, [])]))
    asked: list[int] = []

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(lg, name)

        def read(self, offset: int, max_bytes: int, **kw: Any) -> Any:
            asked.append(max_bytes)
            return lg.read(offset, max_bytes, **kw)

    broker = type("B", (), {"get_log": staticmethod(lambda topic, partition: Spy())})()
    writer = InternalTopicWriter(broker, "__transaction_state", 5000, 1000)
    got = writer.read(0)
    assert isinstance(got, list)
    assert [k for k, _ in got] == [f"k{i}".encode() for i in range(20)]
    assert asked and set(asked) == {1000} and len(asked) > 1  # 20 batches of ~370 bytes, 1000 at a time
    assert OffsetsTopicWriter.THREAD_MIN_BYTES == 1 << 20
    lg.close()
