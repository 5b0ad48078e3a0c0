"""The cluster, timed end to end: a real ZooKeeper and three `python -m kaflite.server --dev` brokers on
loopback, real confluent-kafka clients, every phase in one run (issues 19 "Cluster" and 13 "Replication").

    .venv/bin/python bench/cluster_bench.py                            # everything, defaults per the issues
    .venv/bin/python bench/cluster_bench.py --quick                     # smaller sizes (a few minutes)
    .venv/bin/python bench/cluster_bench.py --only failover,metadata    # some phases

Phases (the brokers use the dev profile: zookeeper.session.timeout.ms=6000; other settings are defaults):
- failover: a topic of 1 partition, RF 3, min.insync.replicas=2, led by a broker that is not the
  controller; an idempotent producer (acks=all, 1,000 records/s of 100 B) writes all the time. The leader
  is killed (kill -9, or SIGTERM = controlled shutdown). Measured: from the kill until the producer's next
  acknowledged record among those sent after the kill ("next ack"), the longest any record waited for
  its acknowledgement around the kill ("stall"), failed records. Also kill -9 of the controller until
  ZooKeeper names another with the epoch bumped. Targets: SIGTERM <= 1 s and 0 failed; kill -9 <= 8 s.
- metadata: 3 brokers x 10,000 partitions (10 topics x 1,000 partitions, RF 1, placed by the brokers):
  the time to create them (CreateTopics until every partition has a leader in Metadata), then Metadata
  latency (a full Metadata, all topics; a Metadata of one topic) as a client sees it (AdminClient
  list_topics). Baseline: Tansu (one node, memory storage) with the same topics when available.
- throughput: acks=all, 1 KB records, one producer: RF 3 (min.insync.replicas=2) vs RF 1 on the same
  cluster (target RF 3 >= 0.5x RF 1); Tansu RF 1 as a reference.
- latency: end to end (producer send -> consumer receive, both here) at 5,000 records/s of 200 B on RF 3,
  p50 / p99 / max after a 2 s warm-up (target p99 <= 50 ms); RF 1 and Tansu at the same rate as a baseline.
- rejoin: a follower killed -9, --rejoin-mb written while it is down (acks=all), restarted: the time from
  its restart until it is in the ISR of every partition again (the controller's record in ZooKeeper).

The machine is shared with other work (2 cores): the load average is printed with the table, and the
figures compare rows measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
os.environ["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")

from _cluster_common import SESSION_MS, Cluster, produce_acks_all, wait  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kaflite.cluster.zkserver import ZooKeeperServer, missing_reason  # noqa: E402

ROWS: list[tuple[str, str, str, str]] = []  # (what, kaflite, baseline, target)


def row(what: str, value: str, baseline: str = "", target: str = "") -> None:
    ROWS.append((what, value, baseline, target))
    print(f"  {what}: {value}" + (f"  [baseline {baseline}]" if baseline else ""), flush=True)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def tansu_script() -> Path | None:
    for base in (ROOT.parent, ROOT.parent.parent, Path("/work")):
        p = base / "shared" / "peers" / "tansu.sh"
        if p.exists():
            return p
    return None


class Tansu:
    def __init__(self, script: Path) -> None:
        out = subprocess.run(
            [str(script), "start"], capture_output=True, text=True, timeout=300, check=True
        ).stdout
        info = dict(kv.split("=", 1) for kv in out.split())
        self.script, self.pid, self.bootstrap = script, int(info["PID"]), info["BOOTSTRAP"]

    def stop(self) -> None:
        subprocess.run([str(self.script), "stop", str(self.pid)], timeout=30, check=False)


# -- failover -------------------------------------------------------------------------------------------------------
@dataclass
class AckProbe:
    """An idempotent acks=all producer writing `rate` records/s from its own thread, recording every ack."""

    bootstrap: str
    topic: str
    rate: float = 1000.0
    sent_at: dict[int, float] = field(default_factory=dict)
    acks: list[tuple[float, float]] = field(default_factory=list)  # (sent, acked), monotonic
    failed: int = 0

    def __post_init__(self) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 1,
                "message.timeout.ms": 60000,
                "retry.backoff.ms": 20,
                "retry.backoff.max.ms": 200,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
                "topic.metadata.refresh.fast.interval.ms": 50,
                "log_level": 2,
            }
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        now = time.monotonic()
        sent = self.sent_at.pop(int(msg.value()[:12]), now)
        if err is not None:
            self.failed += 1
        else:
            self.acks.append((sent, now))

    def _run(self) -> None:
        t0, n = time.monotonic(), 0
        pad = b"x" * 88
        while not self.stop.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            while n < due:
                self.sent_at[n] = time.monotonic()
                try:
                    self.producer.produce(
                        self.topic, value=b"%012d" % n + pad, partition=0, on_delivery=self._delivered
                    )
                except BufferError:
                    break
                n += 1
            self.producer.poll(0.001)
        self.producer.flush(60)

    def __enter__(self) -> AckProbe:
        self.thread.start()
        wait(lambda: len(self.acks) > 200, timeout=60, what="producer warmed up")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(90)

    def after(self, t0: float, window: float) -> tuple[float, float]:
        """(next ack of a record sent after t0, longest wait of a record sent in [t0 - 1, t0 + window]), in s."""
        nxt = min((a for s, a in self.acks if s >= t0), default=float("nan")) - t0
        stall = max((a - s for s, a in self.acks if t0 - 1 <= s <= t0 + window), default=float("nan"))
        return nxt, stall


def one_failover(c: Cluster, mode: str, run: int) -> tuple[float, float, int, float]:
    ctl = c.zk.get_controller_id()
    victim = next(b for b in (1, 2, 3) if b != ctl)
    others = [b for b in (1, 2, 3) if b != victim]
    topic = f"fo-{mode.replace(' ', '').replace('-', '')}-{run}"
    c.create(topic, 1, 3, assignment=[[victim, *others]], configs={"min.insync.replicas": "2"})
    wait(lambda: c.isr_full(topic, 1, victim) and len(c.states(topic, 1)[0].isr) == 3, what="full ISR")
    with AckProbe(c.bootstrap, topic) as probe:
        time.sleep(1.0)
        failed0 = probe.failed
        proc = c.brokers.procs[victim]
        t0 = time.monotonic()
        if mode == "kill -9":
            c.brokers.kill(victim)
            exited = 0.0
        else:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            exited = time.monotonic() - t0
            c.brokers.procs.pop(victim)
        wait(lambda: c.states(topic, 1)[0].leader not in (victim, -1), timeout=60, what="new leader")
        wait(lambda: any(s >= t0 for s, _ in probe.acks), timeout=60, what="ack after the kill")
        time.sleep(max(0.0, t0 + 12 - time.monotonic()))
        nxt, stall = probe.after(t0, 10.0)
        failed = probe.failed - failed0
    if mode == "kill -9":
        c.restart_after_kill(victim)
    else:
        c.brokers.start(victim)
    wait(lambda: c.isr_full(topic, 1, victim), timeout=120, what="victim back in the ISR")
    return nxt, stall, failed, exited


def controller_failover(c: Cluster) -> float:
    ctl = c.zk.get_controller_id()
    assert ctl is not None
    epoch = c.zk.get_controller_epoch()
    assert epoch is not None
    t0 = time.monotonic()
    c.brokers.kill(ctl)
    wait(lambda: (x := c.zk.get_controller_id()) not in (None, ctl) and x, timeout=60, what="new controller")
    took = time.monotonic() - t0
    after = c.zk.get_controller_epoch()
    assert after is not None and after.epoch > epoch.epoch, (epoch, after)
    c.restart_after_kill(ctl)
    return took


def phase_failover(zk: str, work: Path, runs: int) -> None:
    print("failover ...", flush=True)
    with Cluster(zk, work / "failover") as c:
        for mode in ("SIGTERM", "kill -9"):
            results = [one_failover(c, mode, i) for i in range(runs)]
            for i, r in enumerate(results):
                print(
                    f"    {mode} run {i}: next ack {r[0]:.2f}s stall {r[1]:.2f}s failed {r[2]} exit {r[3]:.2f}s",
                    flush=True,
                )
            nxt = [r[0] for r in results]
            stall = [r[1] for r in results]
            failed = sum(r[2] for r in results)
            target = "<= 1 s, 0 failed" if mode == "SIGTERM" else f"<= {SESSION_MS / 1000 + 2:.0f} s"
            row(
                f"leader failover, {mode}: kill -> next ack (median / max of {runs})",
                f"{statistics.median(nxt):.2f} / {max(nxt):.2f} s",
                target=target,
            )
            row(
                f"leader failover, {mode}: longest wait of a record (median / max)",
                f"{statistics.median(stall):.2f} / {max(stall):.2f} s",
                target=target,
            )
            row(f"leader failover, {mode}: failed records (total)", str(failed), target="0")
            if mode == "SIGTERM":
                ex = [r[3] for r in results]
                row(
                    "controlled shutdown: SIGTERM -> process exited (median / max)",
                    f"{statistics.median(ex):.2f} / {max(ex):.2f} s",
                )
        took = [controller_failover(c) for _ in range(runs)]
        row(
            f"controller failover, kill -9 -> another elected, epoch + 1 (median / max of {runs})",
            f"{statistics.median(took):.2f} / {max(took):.2f} s",
            target=f"<= {SESSION_MS / 1000 + 2:.0f} s",
        )


# -- metadata with many partitions ------------------------------------------------------------------------------------
def metadata_latency(
    bootstrap: str, topics: int, per_topic: int, label: str, create: bool = True
) -> dict[str, float]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"m{i}" for i in range(topics)]
    out: dict[str, float] = {}
    if create:
        t0 = time.monotonic()
        for f in admin.create_topics(
            [NewTopic(n, per_topic, 1) for n in names], request_timeout=600
        ).values():
            f.result(timeout=600)
        out["acked"] = time.monotonic() - t0

        def all_led() -> bool:
            md = admin.list_topics(timeout=60)
            return all(
                n in md.topics
                and len(md.topics[n].partitions) == per_topic
                and all(p.leader >= 0 for p in md.topics[n].partitions.values())
                for n in names
            )

        wait(all_led, timeout=900, what=f"{label}: every partition led")
        out["created"] = time.monotonic() - t0
    full, one = [], []
    for _ in range(20):
        t = time.perf_counter()
        md = admin.list_topics(timeout=60)
        full.append(time.perf_counter() - t)
        assert sum(len(md.topics[n].partitions) for n in names) == topics * per_topic
    for i in range(50):
        t = time.perf_counter()
        admin.list_topics(topic=names[i % topics], timeout=60)
        one.append(time.perf_counter() - t)
    out.update(
        full_p50=statistics.median(full),
        full_p99=max(full),
        one_p50=statistics.median(one),
        one_p99=pct(one, 0.99),
    )
    return out


def phase_metadata(zk: str, work: Path, topics: int, per_topic: int, tansu: Path | None) -> None:
    print(f"metadata with {topics} x {per_topic} partitions ...", flush=True)
    base: dict[str, float] = {}
    if tansu is not None:
        t = Tansu(tansu)
        try:
            base = metadata_latency(t.bootstrap, topics, per_topic, "tansu")
        except Exception as e:  # noqa: BLE001 - the baseline is optional
            print(f"  tansu: {e}")
        finally:
            t.stop()
    with Cluster(zk, work / "metadata") as c:
        got = metadata_latency(c.bootstrap, topics, per_topic, "kaflite")
        n = topics * per_topic
        tb = lambda k: f"{base[k]:.2f} s (tansu)" if k in base else ""  # noqa: E731
        tm = lambda k: f"{base[k] * 1000:.1f} ms (tansu)" if k in base else ""  # noqa: E731
        row(
            f"create {topics} topics x {per_topic} partitions RF 1: CreateTopics answered",
            f"{got['acked']:.2f} s",
            tb("acked"),
        )
        row(
            f"create {n:,} partitions: until every one has a leader in Metadata",
            f"{got['created']:.2f} s",
            tb("created"),
        )
        row(
            f"Metadata, all {n:,} partitions, p50 / max of 20",
            f"{got['full_p50'] * 1000:.0f} / {got['full_p99'] * 1000:.0f} ms",
            f"{base['full_p50'] * 1000:.0f} / {base['full_p99'] * 1000:.0f} ms (tansu)" if base else "",
        )
        row(
            f"Metadata, one topic of {per_topic} partitions, p50 / p99 of 50",
            f"{got['one_p50'] * 1000:.1f} / {got['one_p99'] * 1000:.1f} ms",
            f"{base['one_p50'] * 1000:.1f} / {base['one_p99'] * 1000:.1f} ms (tansu)" if base else "",
        )
        del tm


# -- throughput, latency, rejoin -------------------------------------------------------------------------------------
def throughput(bootstrap: str, topic: str, records: int, size: int) -> float:
    """MB/s of one acks=all producer writing `records` records of `size` bytes (until all are acked)."""
    return records * size / produce_acks_all(bootstrap, topic, records, size) / 1e6


def _latency_consumer(bootstrap: str, topic: str, warm: float, ready: Any, stop: Any, out: Any) -> None:
    """The consuming side of e2e_latency, in its own process (no GIL shared with the paced producer)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
            "socket.nagle.disable": True,  # TCP_NODELAY, as Kafka's Java clients always set it
        }
    )
    consumer.assign([TopicPartition(topic, p, -1) for p in range(3)])  # -1: the end
    for _ in range(20):  # assignment settled (positions resolved) before the clock starts
        consumer.poll(0.1)
    ready.set()
    lat: list[float] = []
    while not stop.is_set():
        m = consumer.poll(0.05)  # returns at the first record (consume(n, t) would wait for n or t)
        if m is not None and m.error() is None:
            now = time.time()
            sent = int(m.value()[:19]) / 1e9
            if sent >= warm:
                lat.append(now - sent)
    consumer.close()
    out.put((pct(lat, 0.5) * 1000, pct(lat, 0.99) * 1000, max(lat, default=float("nan")) * 1000, len(lat)))


def e2e_latency(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[float, float, float, int]:
    """Records stamped with the wall clock when produced, paced at `rate`/s (a burst every millisecond),
    read by a consumer in another process on the same machine: receive time - stamp, after a 2 s warm-up."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    warm = time.time() + 2.0 + 10.0  # the consumer process starts first (up to 10 s on a busy machine)
    child = ctx.Process(
        target=_latency_consumer, args=(bootstrap, topic, warm, ready, stop, out), daemon=True
    )
    child.start()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,  # librdkafka's default
            "socket.nagle.disable": True,
        }
    )
    assert ready.wait(60), "latency consumer did not start"
    time.sleep(max(0.0, warm - 2.0 - time.time()))
    pad = b"p" * 181
    t0, n = time.monotonic(), 0
    total = int(rate * seconds)
    while n < total:
        due = min(total, int((time.monotonic() - t0) * rate) + 1)
        while n < due:
            try:
                producer.produce(topic, value=b"%019d" % time.time_ns() + pad, partition=n % 3)
            except BufferError:
                producer.poll(0.005)
                continue
            n += 1
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(60)
    time.sleep(1.0)
    stop.set()
    got: tuple[float, float, float, int] = out.get(timeout=60)
    child.join(10)
    return got


def phase_replication(
    zk: str,
    work: Path,
    records: int,
    size: int,
    rate: int,
    seconds: float,
    rejoin_mb: int,
    tansu: Path | None,
    only: set[str],
) -> None:
    print("replication ...", flush=True)
    base_tp = base_lat = None
    if tansu is not None:
        t = Tansu(tansu)
        try:
            admin = AdminClient({"bootstrap.servers": t.bootstrap})
            for f in admin.create_topics([NewTopic("tp", 3, 1), NewTopic("lat", 3, 1)]).values():
                f.result(60)
            time.sleep(1)
            if "throughput" in only:
                base_tp = throughput(t.bootstrap, "tp", records, size)
            if "latency" in only:
                base_lat = e2e_latency(t.bootstrap, "lat", rate, seconds)
        except Exception as e:  # noqa: BLE001 - the baseline is optional
            print(f"  tansu: {e}")
        finally:
            t.stop()
    with Cluster(zk, work / "replication") as c:
        if "throughput" in only:
            c.create("rf1", 3, 1)
            c.create("rf3", 3, 3, configs={"min.insync.replicas": "2"})
            rf1 = throughput(c.bootstrap, "rf1", records, size)
            rf3 = throughput(c.bootstrap, "rf3", records, size)
            mb = records * size / 1e6
            row(
                f"produce acks=all, {records:,} x {size} B ({mb:.0f} MB), RF 1",
                f"{rf1:.1f} MB/s",
                f"{base_tp:.1f} MB/s (tansu)" if base_tp else "",
            )
            row(
                "produce acks=all, same, RF 3 (min.insync.replicas=2)",
                f"{rf3:.1f} MB/s = {rf3 / rf1:.2f}x RF 1",
                target=">= 0.5x RF 1",
            )
        if "latency" in only:
            c.create("lat3", 3, 3, configs={"min.insync.replicas": "2"})
            c.create("lat1", 3, 1)
            l1 = e2e_latency(c.bootstrap, "lat1", rate, seconds)
            l3 = e2e_latency(c.bootstrap, "lat3", rate, seconds)
            row(
                f"end-to-end latency at {rate:,}/s x {seconds:.0f} s, RF 3, p50 / p99 / max (n)",
                f"{l3[0]:.1f} / {l3[1]:.1f} / {l3[2]:.0f} ms ({l3[3]:,})",
                f"RF 1 {l1[0]:.1f} / {l1[1]:.1f} / {l1[2]:.0f} ms"
                + (
                    f"; tansu {base_lat[0]:.1f} / {base_lat[1]:.1f} / {base_lat[2]:.0f} ms"
                    if base_lat
                    else ""
                ),
                target="p99 <= 50 ms",
            )
        if "rejoin" in only:
            ctl = c.zk.get_controller_id()
            victim = next(b for b in (3, 2, 1) if b != ctl)
            others = [b for b in (1, 2, 3) if b != victim]
            c.create(
                "rejoin", 3, 3, assignment=[[others[i % 2], others[(i + 1) % 2], victim] for i in range(3)]
            )
            wait(lambda: c.isr_full("rejoin", 3, victim), what="full ISR")
            c.brokers.kill(victim)
            wait(
                lambda: all(victim not in s.isr for s in c.states("rejoin", 3).values()),
                timeout=60,
                what="victim out of the ISR",
            )
            n = rejoin_mb * 1_000_000 // 1000
            t = time.monotonic()
            rate_mb = throughput(c.bootstrap, "rejoin", n, 1000)
            wrote = time.monotonic() - t
            wait(lambda: victim not in c.zk.get_broker_ids(), timeout=30, what="registration gone")
            t0 = time.monotonic()
            c.brokers.start(victim)
            wait(lambda: c.isr_full("rejoin", 3, victim), timeout=1800, what="victim back in every ISR")
            took = time.monotonic() - t0
            row(
                f"rejoin: a follower missed {rejoin_mb:,} MB (written in {wrote:.0f} s at {rate_mb:.1f} MB/s, RF 3 "
                "with 2 alive): restart -> in every ISR",
                f"{took:.1f} s ({rejoin_mb / took:.0f} MB/s catch-up)",
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="failover,metadata,throughput,latency,rejoin")
    ap.add_argument(
        "--quick", action="store_true", help="smaller sizes: 1 failover run, 2,000 partitions, 100 MB"
    )
    ap.add_argument("--runs", type=int, default=3, help="failover runs per kind")
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--partitions-per-topic", type=int, default=1000)
    ap.add_argument("--records", type=int, default=100_000, help="throughput: records of --record-size")
    ap.add_argument("--record-size", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rejoin-mb", type=int, default=1000)
    ap.add_argument("--no-tansu", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.partitions_per_topic, args.rejoin_mb, args.records = 1, 200, 100, 30_000
    only = set(args.only.split(","))
    reason = missing_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    tansu = None if args.no_tansu else tansu_script()
    load0 = os.getloadavg()
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zks:
        work = Path(tmp)
        for d in ("failover", "metadata", "replication"):
            (work / d).mkdir()
        if "failover" in only:
            phase_failover(zks.connect, work, args.runs)
        if "metadata" in only:
            phase_metadata(zks.connect, work, args.topics, args.partitions_per_topic, tansu)
        if only & {"throughput", "latency", "rejoin"}:
            phase_replication(
                zks.connect,
                work,
                args.records,
                args.record_size,
                args.rate,
                args.seconds,
                args.rejoin_mb,
                tansu,
                only,
            )
    load1 = os.getloadavg()
    w = max(len(r[0]) for r in ROWS) if ROWS else 10
    print()
    print(f"{'measure':{w}}  {'kaflite':32}  {'baseline (same run)':40}  target")
    for what, value, base, target in ROWS:
        print(f"{what:{w}}  {value:32}  {base:40}  {target}")
    print(
        f"(3 brokers + ZooKeeper + clients on one shared 2-core machine; load average {load0[0]:.1f} at the start, "
        f"{load1[0]:.1f} at the end; {time.monotonic() - t_start:.0f} s in all)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
