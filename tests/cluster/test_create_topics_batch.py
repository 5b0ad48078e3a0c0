"""CreateTopics of many topics on a three-broker cluster (librdkafka's 0045_subscribe_many_updates): 100
topics of 4 partitions with replication factor 3 in one request, deleted, then created again at once, each
request answered within a bound the old code missed by far (it planned and wrote one topic after another
through the broker's single admin thread, ~15 ZooKeeper round trips each: 8.5 s for the first request; the
second, right after the deletion, was not answered within librdkafka's 30 s), and a small CreateTopics
sent while a big one runs answered too (it queued 22 s behind it)."""

from __future__ import annotations

import threading
import time

import pytest

from cluster.conftest import BrokerProcesses
from helpers import wait_until
from kaflite.cluster.zk import KafkaZkClient

pytestmark = pytest.mark.timeout(240)

N = 100
BOUND_S = 30.0  # librdkafka's request timeout: the answer it waits for


def _create(admin: object, names: list[str], timeout_s: float = BOUND_S) -> tuple[float, dict[str, str]]:
    """Seconds until every topic's result came, and each topic's error name ("" for created)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    start = time.monotonic()
    futures = admin.create_topics([NewTopic(n, 4, 3) for n in names],  # type: ignore[attr-defined]
                                  operation_timeout=timeout_s, request_timeout=timeout_s + 5)
    out: dict[str, str] = {}
    for name, f in futures.items():
        try:
            f.result(timeout_s + 10)
            out[name] = ""
        except KafkaException as e:
            out[name] = e.args[0].name()
    return time.monotonic() - start, out


def test_many_topics_created_deleted_and_created_again(three_brokers: BrokerProcesses) -> None:
    from confluent_kafka.admin import AdminClient

    brokers = three_brokers  # the module's cluster, all three up
    zk = KafkaZkClient(brokers.connect)
    zk.start()
    try:
        admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
        names = [f"many-{i}" for i in range(N)]
        took, errors = _create(admin, names)
        print(f"first create of {N}: {took:.1f} s")
        assert set(errors.values()) == {""}, errors
        assert took < BOUND_S

        start = time.monotonic()
        for f in admin.delete_topics(names, operation_timeout=BOUND_S).values():
            f.result(BOUND_S)
        print(f"delete of {N}: {time.monotonic() - start:.1f} s")

        # at once again: a name still being deleted is TOPIC_ALREADY_EXISTS (Kafka: "marked for deletion"),
        # the others are created; every topic answered within the bound
        took, errors = _create(admin, names)
        print(f"second create of {N}: {took:.1f} s, {sum(1 for e in errors.values() if e)} refused")
        assert set(errors.values()) <= {"", "TOPIC_ALREADY_EXISTS"}, {n: e for n, e in errors.items() if e}
        assert took < BOUND_S
        # the refused ones can be created once their deletion ends
        left = [n for n, e in errors.items() if e]
        deadline = time.monotonic() + 60
        while left and time.monotonic() < deadline:
            time.sleep(1)
            _, errors = _create(admin, left)
            assert set(errors.values()) <= {"", "TOPIC_ALREADY_EXISTS"}, {n: e for n, e in errors.items() if e}
            left = [n for n, e in errors.items() if e]
        assert not left
        wait_until("all topics listed", lambda: set(names) <= set(admin.list_topics(timeout=10).topics), 30)
    finally:
        zk.close()


def test_small_create_answered_while_a_big_one_runs(three_brokers: BrokerProcesses) -> None:
    from confluent_kafka.admin import AdminClient

    brokers = three_brokers  # the module's cluster, all three up
    big_admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
    small_admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
    big: dict[str, object] = {}
    def run_big() -> None:
        big["took"], big["errors"] = _create(big_admin, [f"big-{i}" for i in range(N)])

    thread = threading.Thread(target=run_big)
    thread.start()
    time.sleep(0.3)  # the big request is being served
    took, errors = _create(small_admin, ["small"])
    thread.join(BOUND_S + 20)
    print(f"small create during a big one: {took:.1f} s; big: {big.get('took', -1.0):.1f} s")
    assert errors == {"small": ""}
    assert took < 15.0
    assert set(big["errors"].values()) == {""}  # type: ignore[attr-defined]
