"""What the cluster benches share (bench/cluster_bench.py, bench/rf3_bench.py, and bench/follower_append_bench.py
through cluster_bench): three `python -m kaflite.server --dev` brokers on one ZooKeeper chroot with an
observer ZooKeeper session, a bounded wait for a condition, and the acks=all producer whose time they measure.

The brokers run from whatever PYTHONPATH names when they start (tests/cluster's BrokerProcesses inherits the
environment): the bench sets it, so that one run can time two source trees.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT / "tests"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cluster.conftest import BrokerProcesses  # noqa: E402
from kaflite.cluster.zk import KafkaZkClient  # noqa: E402

T = TypeVar("T")
SESSION_MS = 6000  # the dev profile's zookeeper.session.timeout.ms
BROKERS = (1, 2, 3)


def wait(fn: Callable[[], T | None], timeout: float = 60.0, what: str = "condition") -> T:
    """`fn()`'s first true answer, asked every 20 ms; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.02)
    raise TimeoutError(f"{what}: not met in {timeout:.0f} s")


class Cluster:
    """Three brokers on one ZooKeeper chroot, plus an observer ZooKeeper session for the bench.
    `overrides`: broker settings (key=value) every broker starts with."""

    def __init__(
        self, zk_connect: str, workdir: Path, overrides: tuple[str, ...] = (), name: str = "bench"
    ) -> None:
        chroot = f"{zk_connect}/{name}-{uuid.uuid4().hex[:8]}"
        self.overrides = overrides
        self.brokers = BrokerProcesses(chroot, workdir, session_timeout_ms=SESSION_MS)
        self.zk = KafkaZkClient(chroot, session_timeout_ms=30000)

    def __enter__(self) -> Cluster:
        self.zk.start()
        try:
            for b in BROKERS:
                self.brokers.start(b, *self.overrides)
            wait(
                lambda: self.zk.get_broker_ids() == list(BROKERS) and self.zk.get_controller_id(),
                what="3 brokers",
            )
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.zk.close()
        self.brokers.stop_all()

    @property
    def bootstrap(self) -> str:
        return self.brokers.bootstrap()

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create(
        self,
        topic: str,
        partitions: int,
        rf: int,
        assignment: list[list[int]] | None = None,
        configs: dict[str, str] | None = None,
    ) -> None:
        """Create `topic` and wait until every partition has a leader (in ZooKeeper)."""
        nt = (
            NewTopic(topic, len(assignment), replica_assignment=assignment, config=configs or {})
            if assignment
            else NewTopic(topic, partitions, rf, config=configs or {})
        )
        admin = self.admin()  # kept alive until the answer (a destroyed handle fails its futures)
        for f in admin.create_topics([nt], request_timeout=120).values():
            f.result(timeout=120)
        n = len(assignment) if assignment else partitions
        wait(lambda: self.led(topic, n), timeout=120, what=f"leaders of {topic}")

    def states(self, topic: str, n: int) -> dict[int, Any]:
        got = self.zk.get_partition_states([(topic, p) for p in range(n)])
        return {p: s for (_, p), s in got.items() if s is not None}

    def led(self, topic: str, n: int) -> bool:
        s = self.states(topic, n)
        return len(s) == n and all(x.leader > 0 for x in s.values())

    def isr_full(self, topic: str, n: int, broker: int) -> bool:
        s = self.states(topic, n)
        return len(s) == n and all(broker in x.isr and x.leader > 0 for x in s.values())

    def restart_after_kill(self, broker_id: int) -> None:
        """A killed broker comes back once ZooKeeper dropped its registration (its session expired)."""
        wait(lambda: broker_id not in self.zk.get_broker_ids(), timeout=30, what=f"broker {broker_id} gone")
        self.brokers.start(broker_id, *self.overrides)
        wait(lambda: broker_id in self.zk.get_broker_ids(), timeout=30, what=f"broker {broker_id} back")


def produce_acks_all(
    bootstrap: str,
    topic: str,
    records: int,
    size: int,
    partitions: int = 3,
    warm_up: bool = False,
    config: dict[str, Any] | None = None,
) -> float:
    """Seconds one idempotent acks=all producer (linger.ms=5, batch.size 1 MB) takes to write `records`
    records of `size` bytes round robin over `partitions` partitions, until all are acknowledged.
    `warm_up`: a record per partition first, off the clock (the producer id and the connections exist
    before it starts). `config`: producer settings that replace or add to those."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 65536,
            "message.timeout.ms": 300000,
        }
        | (config or {})
    )
    failed = [0]

    def cb(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failed[0] += 1

    value = b"v" * size
    if warm_up:
        for i in range(partitions):
            p.produce(topic, value=value, partition=i, on_delivery=cb)
        p.flush(60)
    t0 = time.monotonic()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(600)
    took = time.monotonic() - t0
    assert left == 0 and failed[0] == 0, (left, failed[0])
    return took
