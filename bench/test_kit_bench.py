"""How long the test kit takes from nothing to usable (issue 31, docs/testing.md).

- single broker: `EmbeddedBroker()` started in this process, then a confluent-kafka Producer's first
  record delivered and a Consumer's first poll returning it (topic auto-created): the time a test waits
  before its first assertion can run;
- 3-broker cluster: `EmbeddedCluster(brokers=3)` (a ZooKeeper and three broker processes) started, a
  topic with replication factor 3 created, and an `acks=all` produce delivered.

Each is measured over a few fresh runs (median and min, wall seconds: the machine is shared, so the load
average of /proc/loadavg is printed beside them), and set beside a published Kafka-in-Docker figure
(cited by URL; no Docker is run here). The time to stop each is printed too (not part of "usable").
One run stays under ~60 s: no new run starts once --budget-s is spent (at least one of each always runs).

    .venv/bin/python bench/test_kit_bench.py [--single-runs 5] [--cluster-runs 3] [--budget-s 40]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable

# Published Kafka startup figures, for comparison (not measured here: no Docker, no Kafka). KIP-974 (the
# apache/kafka-native Docker image) measured the broker's own startup with default configs: JVM broker
# ~1150-1200 ms, GraalVM native broker ~110-140 ms. These count the broker process only: not the container's
# creation, nor a client's first round trip, which the kaflite rows include.
KIP_974 = "https://cwiki.apache.org/confluence/display/KAFKA/KIP-974%3A+Docker+Image+for+GraalVM+based+Native+Kafka+Broker"
PUBLISHED = (("Kafka JVM broker start, default configs (KIP-974)", "1.15-1.2"),
             ("Kafka native (GraalVM) broker start, Docker image (KIP-974)", "0.11-0.14"))


def _first_round_trip(config: dict[str, object]) -> None:
    from confluent_kafka import Consumer, Producer

    topic = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer({**config, "linger.ms": 0})
    producer.produce(topic, b"first")
    if producer.flush(30) != 0:
        raise RuntimeError("the first record was not delivered in 30 s")
    consumer = Consumer({**config, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None and msg.value() == b"first":
                return
        raise RuntimeError("the first record was not consumed in 30 s")
    finally:
        consumer.close()


def single_broker() -> tuple[float, float]:
    """(seconds to the first record consumed, seconds to stop)."""
    from kaflite.server.embedded import EmbeddedBroker

    began = time.perf_counter()
    broker = EmbeddedBroker().start()
    try:
        _first_round_trip(broker.confluent_config())
        ready = time.perf_counter() - began
    finally:
        stopping = time.perf_counter()
        broker.stop()
    return ready, time.perf_counter() - stopping


def three_broker_cluster() -> tuple[float, float]:
    """(seconds to the first acks=all record delivered to an RF 3 topic, seconds to stop)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kaflite.server.embedded_cluster import EmbeddedCluster

    began = time.perf_counter()
    cluster = EmbeddedCluster(brokers=3).start()
    try:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        admin = AdminClient(cluster.confluent_config())  # kept referenced: a collected client fails its futures
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        producer = Producer({**cluster.confluent_config(), "acks": "all", "linger.ms": 0})
        errors: list[object] = []
        producer.produce(topic, b"replicated", on_delivery=lambda err, _msg: errors.append(err) if err else None)
        if producer.flush(30) != 0 or errors:
            raise RuntimeError(f"the acks=all record was not delivered: {errors}")
        ready = time.perf_counter() - began
    finally:
        stopping = time.perf_counter()
        cluster.stop()
    return ready, time.perf_counter() - stopping


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def measure(fn: Callable[[], tuple[float, float]], runs: int, deadline: float) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for i in range(runs):
        if i > 0 and time.monotonic() > deadline:
            break
        out.append(fn())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--single-runs", type=int, default=5)
    parser.add_argument("--cluster-runs", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=40.0, help="no new run starts after this")
    args = parser.parse_args(argv)
    started = time.monotonic()
    load_before = loadavg()
    single = measure(single_broker, args.single_runs, started + args.budget_s / 3)
    from kaflite.cluster.zkserver import missing_reason

    reason = missing_reason()
    cluster = measure(three_broker_cluster, args.cluster_runs, started + args.budget_s) if reason is None else []
    print(f"load average (1/5/15 min): before {load_before}, after {loadavg()}; 2 cores shared")
    print(f"{'from nothing to usable':<60} {'runs':>4} {'median s':>9} {'min s':>7} {'stop s':>7}")
    for label, times in (("EmbeddedBroker: first produce + consume (confluent-kafka)", single),
                         ("EmbeddedCluster(3): RF 3 topic, first acks=all produce", cluster)):
        if times:
            ready = [t[0] for t in times]
            stop = statistics.median(t[1] for t in times)
            print(f"{label:<60} {len(times):>4} {statistics.median(ready):>9.2f} {min(ready):>7.2f} {stop:>7.2f}")
        else:
            print(f"{label:<60} {0:>4} {'-':>9} {'-':>7} {'-':>7}  ({reason})")
    for label, figure in PUBLISHED:
        print(f"{label:<60} {'pub':>4} {figure:>9}")
    print(f"published figures: {KIP_974} (broker process only: no container creation, no client round trip)")
    print(f"total {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
