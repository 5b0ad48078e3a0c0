"""The nemesis's clients, each in its own thread, and what they saw (`History`).

- two idempotent acks=all producers; producer i writes keys `p<i>-k<j>` to both data topics (min.insync 1
  and 2), each value `<key>:<seq>` with `seq` counting per (topic, key) from 0, partitioned by the key
  (murmur2, Kafka's partitioner) so a key's records share one partition and its order is checkable;
- one transactional producer: transaction n writes 2-5 records `t<n>:<i>/<size>` to the transactions
  topic (keys spread over its partitions), then commits or aborts (seeded choice); its outcome is
  `committed` / `aborted` only when that call returned, `unknown` otherwise;
- one consumer group member (read_committed) on the min.insync 2 topic and the transactions topic,
  committing its positions every second; every commit that returned without error is recorded.
Every loop runs until `stop` is set and every blocking call has a timeout, so the threads end in bounded
time; the harness joins them with a bound too.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

DATA_TOPICS = {"nm-isr1": 1, "nm-isr2": 2}  # name -> min.insync.replicas
TXN_TOPIC = "nm-txn"
PARTITIONS = 3
GROUP = "nm-group"
KEYS_PER_PRODUCER = 6


@dataclass
class History:
    # (topic, key) -> sequence numbers acknowledged, in acknowledgement order
    acked: dict[tuple[str, str], list[int]] = field(default_factory=lambda: defaultdict(list))
    ack_times: dict[tuple[str, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    sent: int = 0
    failed: int = 0
    fatal: list[str] = field(default_factory=list)  # a producer's fatal error: the broker broke idempotence
    txns: dict[int, tuple[str, int]] = field(default_factory=dict)  # n -> (outcome, size)
    txn_errors: list[str] = field(default_factory=list)
    commits: list[tuple[float, str, int, int]] = field(default_factory=list)  # (t, topic, partition, offset)
    commit_failures: int = 0
    offset_regressions: list[str] = field(default_factory=list)  # read back behind a successful commit
    consumed: int = 0


class Clients:
    def __init__(self, bootstrap: str, history: History, seed: int, rate: float = 80.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock  # the timeline's clock, for the errors' times
        self.bootstrap = bootstrap
        self.history = history
        self.seed = seed
        self.rate = rate  # records per second per idempotent producer
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._producer, args=(0,), name="nm-producer-0", daemon=True),
            threading.Thread(target=self._producer, args=(1,), name="nm-producer-1", daemon=True),
            threading.Thread(target=self._transactions, name="nm-transactions", daemon=True),
            threading.Thread(target=self._group, name="nm-group", daemon=True),
        ]
        self.unflushed = 0
        self.fatal_txn_producers = 0
        self.pause_commits = threading.Event()  # set by a fault that must read the offsets before any new commit
        self.best: dict[tuple[str, int], int] = {}  # the highest offset a successful commit stored, per partition

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self, timeout_s: float = 100.0) -> list[str]:
        """Stop every client and wait (bounded); the names of threads still running after it."""
        self.stop.set()
        deadline = time.monotonic() + timeout_s
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))
        return [t.name for t in self.threads if t.is_alive()]

    # --- idempotent producers --------------------------------------------------------------------------
    def _producer(self, i: int) -> None:
        h = self.history

        def new_producer() -> Producer:
            return Producer({
                "bootstrap.servers": self.bootstrap, "log_level": 4, "client.id": f"nm-p{i}", "acks": "all",
                "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 100000,
                "retry.backoff.ms": 100, "partitioner": "murmur2_random", "topic.metadata.refresh.interval.ms": 2000,
                "error_cb": lambda e: h.fatal.append(f"producer {i}: {e}") if e.fatal() else None,
            })  # fmt: skip

        p = new_producer()
        replaced = 0
        topics = sorted(DATA_TOPICS)
        seqs: dict[tuple[str, str], int] = defaultdict(int)

        def delivered(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                h.failed += 1
                return
            key, seq = msg.value().decode().rsplit(":", 1)  # type: ignore[attr-defined]
            topic = msg.topic()  # type: ignore[attr-defined]
            h.acked[(topic, key)].append(int(seq))
            h.ack_times[(topic, msg.partition())].append(time.monotonic())  # type: ignore[attr-defined]

        n = 0
        t0 = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            try:
                while n < due and not self.stop.is_set():
                    key = f"p{i}-k{n % KEYS_PER_PRODUCER}"
                    topic = topics[(n // KEYS_PER_PRODUCER) % len(topics)]
                    seq = seqs[(topic, key)]
                    try:
                        p.produce(topic, key=key.encode(), value=f"{key}:{seq}".encode(), on_delivery=delivered)
                    except BufferError:
                        break
                    seqs[(topic, key)] = seq + 1
                    n += 1
                    h.sent += 1
                p.poll(0.02)
            except KafkaException as e:
                # fatal (the idempotent producer's state broke): nothing more is sent by this instance; what it
                # still holds fails; a new instance (a new producer id) carries on with the next sequence numbers
                h.fatal.append(f"producer {i}: {e.args[0]}")
                self.unflushed += p.flush(5)
                replaced += 1
                if replaced > 5:
                    return
                p = new_producer()
        self.unflushed += p.flush(90)

    # --- the transactional producer ----------------------------------------------------------------------
    def _new_txn_producer(self) -> Producer | None:
        p = Producer({"bootstrap.servers": self.bootstrap, "log_level": 4, "client.id": "nm-tx", "transactional.id": "nm-tx",
                      "linger.ms": 5, "transaction.timeout.ms": 20000, "message.timeout.ms": 20000,
                      "topic.metadata.refresh.interval.ms": 2000})
        for _ in range(60):  # bounded: a minute or more of failures ends the transactions of this run
            if self.stop.is_set():
                return None
            try:
                p.init_transactions(20)
                return p
            except KafkaException as e:
                self._txn_error(f"init_transactions: {e.args[0]}")
                if e.args[0].fatal():
                    return self._new_txn_producer_after_fatal()
                time.sleep(1)
        return None

    def _new_txn_producer_after_fatal(self) -> Producer | None:
        self.fatal_txn_producers += 1
        return None if self.fatal_txn_producers > 10 else self._new_txn_producer()

    def _txn_error(self, text: str) -> None:
        self.history.txn_errors.append(f"{self.clock():.2f}s {text}")

    def _end(self, p: Producer, commit: bool) -> str:
        """Commit or abort the open transaction; its outcome (`unknown` when no call returned)."""
        for _ in range(4):
            try:
                if commit:
                    p.commit_transaction(20)
                    return "committed"
                p.abort_transaction(20)
                return "aborted"
            except KafkaException as e:
                err = e.args[0]
                self._txn_error(f"{'commit' if commit else 'abort'}: {err}")
                if err.txn_requires_abort():
                    commit = False
                    continue
                if err.retriable():
                    continue
                return "unknown"  # fatal (e.g. fenced): the caller starts a new producer
        return "unknown"

    def _transactions(self) -> None:
        h = self.history
        rng = random.Random(self.seed * 7 + 1)
        p = self._new_txn_producer()
        n = 0
        while p is not None and not self.stop.is_set():
            n += 1
            size, commit = rng.randint(2, 5), rng.random() < 0.7
            outcome = "unknown"
            try:
                p.begin_transaction()
                for i in range(size):
                    p.produce(TXN_TOPIC, key=f"t{n}-{i}".encode(), value=f"t{n}:{i}/{size}".encode())
                outcome = self._end(p, commit)
            except KafkaException as e:
                self._txn_error(f"transaction {n}: {e.args[0]}")
                outcome = "unknown" if e.args[0].fatal() else self._end(p, False)
            h.txns[n] = (outcome, size)
            if outcome == "unknown":
                with contextlib.suppress(KafkaException):
                    p.flush(5)
                p = self._new_txn_producer()  # fences whatever the old instance left open
            time.sleep(0.2)
        if p is not None:
            with contextlib.suppress(KafkaException):
                p.flush(10)

    # --- the consumer group ------------------------------------------------------------------------------
    def _group(self) -> None:
        h = self.history
        c = Consumer({"bootstrap.servers": self.bootstrap, "log_level": 4, "group.id": GROUP, "client.id": "nm-c",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "session.timeout.ms": 10000,
                      "topic.metadata.refresh.interval.ms": 2000})
        c.subscribe(["nm-isr2", TXN_TOPIC])
        last_commit = time.monotonic()
        best = self.best
        try:
            while not self.stop.is_set():
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    h.consumed += 1
                if time.monotonic() - last_commit >= 1.0 and not self.pause_commits.is_set():
                    last_commit = time.monotonic()
                    try:
                        done = c.commit(asynchronous=False)
                    except KafkaException as e:
                        if e.args[0].code() != KafkaError._NO_OFFSET:  # nothing consumed yet is no failure
                            h.commit_failures += 1
                        continue
                    t = time.monotonic()
                    for tp in done or []:
                        if tp.error is None and tp.offset >= 0:
                            h.commits.append((t, tp.topic, tp.partition, tp.offset))
                            best[(tp.topic, tp.partition)] = max(best.get((tp.topic, tp.partition), -1), tp.offset)
                    self._probe_offsets(c, best)
        finally:
            c.close()

    def _probe_offsets(self, c: Consumer, best: dict[tuple[str, int], int]) -> None:
        """Read the group's committed offsets back (OffsetFetch to its coordinator, right after a commit
        returned): one behind a commit that succeeded is a violation seen as it happens, before a later
        commit can paper over it."""
        try:
            tps = [TopicPartition(t, p) for (t, p) in sorted(best)]
            got = c.committed(tps, 5)
        except KafkaException:
            return  # the coordinator is moving: no answer is no evidence
        for tp in got:
            want = best.get((tp.topic, tp.partition), -1)
            if tp.error is None and tp.offset < want:
                self.history.offset_regressions.append(
                    f"{self.clock():.2f}s {tp.topic}-{tp.partition}: committed offset read back as {tp.offset} "
                    f"after a commit of {want} succeeded")


def read_offsets_behind(bootstrap: str, best: dict[tuple[str, int], int], clock: Callable[[], float]) -> list[str]:
    """The group's committed offsets read now by a consumer outside the group, compared with the highest
    offset each partition's successful commits stored (`best`, a copy taken while no commit is in flight)."""
    c = Consumer({"bootstrap.servers": bootstrap, "log_level": 4, "group.id": GROUP, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(t, p) for (t, p) in sorted(best)], 15)
    except KafkaException as e:
        return [f"{clock():.2f}s the group's committed offsets could not be read: {e.args[0]}"]
    finally:
        c.close()
    return [f"{clock():.2f}s {tp.topic}-{tp.partition}: committed offset read back as {tp.offset} after a commit "
            f"of {best[(tp.topic, tp.partition)]} succeeded" for tp in got
            if tp.error is None and tp.offset < best[(tp.topic, tp.partition)]]


def committed_offsets(bootstrap: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets now (asked of its coordinator by a consumer that does not join)."""
    c = Consumer({"bootstrap.servers": bootstrap, "log_level": 4, "group.id": GROUP, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(t, p) for t in ("nm-isr2", TXN_TOPIC) for p in range(PARTITIONS)]
        return {(tp.topic, tp.partition): tp.offset for tp in c.committed(tps, 30)}
    finally:
        c.close()
