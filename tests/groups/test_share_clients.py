"""confluent-kafka's ShareConsumer (librdkafka 2.15+, KIP-932 preview) against kaflite: two members
sharing one partition receive every record exactly once; in explicit mode a RELEASE comes back and a
REJECT never does; acknowledgements sent at close are applied (and receipted) even when the leaving
heartbeat is handled first."""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from helpers import acknowledge_by_value, wait_share_partition_open
from kaflite.server.embedded import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    # faults: the close race below; heartbeats every 0.5 s: a new group's partitions are assigned at the
    # heartbeat after their share state is initialized (the join only starts that)
    with EmbeddedBroker(overrides={"kaflite.faults.enable": "true", "group.share.heartbeat.interval.ms": "500"}) as b:
        yield b


def _topic(b: EmbeddedBroker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)


def _produce(b: EmbeddedBroker, topic: str, values: list[bytes]) -> None:
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, v)
    assert p.flush(10) == 0


def _started(b: EmbeddedBroker, topic: str, group: str, n: int, **extra: str) -> list[ck.ShareConsumer]:
    """n share consumers subscribed and polled once (the share partition starts at the log end, as
    share.auto.offset.reset=latest does), so records produced afterwards are theirs."""
    consumers = [ck.ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group, **extra})
                 for _ in range(n)]
    for c in consumers:
        c.subscribe([topic])
    wait_share_partition_open(b, consumers, group, topic)
    return consumers


def test_two_share_consumers_get_every_record_once(broker: EmbeddedBroker) -> None:
    _topic(broker, "sc-two")
    consumers = _started(broker, "sc-two", "scg-two", 2)
    values = [b"v%d" % i for i in range(40)]
    _produce(broker, "sc-two", values)
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(got) < len(values):
        for c in consumers:
            got += [m.value() for m in c.poll(0.3) if m.error() is None]
    assert sorted(got) == sorted(values)  # each once: none twice, none lost
    for c in consumers:
        assert list(c.poll(0.5)) == []  # implicitly accepted at the poll: nothing comes back
        c.close()


def test_explicit_release_is_redelivered_and_reject_is_not(broker: EmbeddedBroker) -> None:
    _topic(broker, "sc-explicit")
    (c,) = _started(broker, "sc-explicit", "scg-explicit", 1, **{"share.acknowledgement.mode": "explicit"})
    _produce(broker, "sc-explicit", [b"reject", b"release", b"accept"])
    seen = acknowledge_by_value(c, 4)
    assert sorted(seen) == [b"accept", b"reject", b"release", b"release"]
    c.commit_sync()
    assert list(c.poll(1.0)) == []
    c.close()


def test_acknowledgements_at_close_apply_when_the_leave_comes_first(broker: EmbeddedBroker) -> None:
    """librdkafka's close sends the closing ShareAcknowledge (epoch -1, the pending acknowledgements) and the
    leaving heartbeat at once, on two connections; the ShareAcknowledge is delayed here so that the leave
    is handled first, as happened in librdkafka's 0178 (`do_test_close_with_acknowledge`). The session
    must still take them: every acknowledged offset is receipted without error, and what was delivered and
    not acknowledged is released at the close (at once, not when its lock ends), and accepted ones never
    come back."""
    _topic(broker, "sc-close")
    (c,) = _started(broker, "sc-close", "scg-close", 1, **{"share.acknowledgement.mode": "explicit"})
    _produce(broker, "sc-close", [b"r%d" % i for i in range(20)])
    receipts: list[tuple[dict[ck.TopicPartition, set[int]], object]] = []
    c.set_acknowledgement_commit_callback(lambda offsets, err: receipts.append((offsets, err)))
    acked: list[int] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(acked) < 10:
        for m in c.poll(0.3):
            if m.error() is None and len(acked) < 10:
                c.acknowledge(m)
                acked.append(m.offset())
    assert len(acked) == 10
    broker.faults.delay(api="ShareAcknowledge", ms=700, times=1)
    try:
        c.close()
    finally:
        broker.faults.clear()
    assert receipts and all(err is None for _, err in receipts), receipts
    assert sorted(o for offsets, _ in receipts for offs in offsets.values() for o in offs) == sorted(acked)
    (c2,) = [ck.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "scg-close"})]
    c2.subscribe(["sc-close"])
    got: list[int] = []
    deadline = time.monotonic() + 15  # well within the 30 s lock: the rest was released at the close
    while time.monotonic() < deadline and len(got) < 10:
        got += [m.offset() for m in c2.poll(0.3) if m.error() is None]
    assert sorted(got) == sorted(set(range(20)) - set(acked))
    assert [m.offset() for m in c2.poll(1.0) if m.error() is None] == []
    c2.close()
