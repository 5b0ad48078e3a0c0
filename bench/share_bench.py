"""Records/s through a share group (KIP-932) vs a classic consumer group on the same 6-partition topic.

    .venv/bin/python bench/share_bench.py                     # 1, 4, 16 members; no delay and 1 ms a record
    .venv/bin/python bench/share_bench.py --members 4 --records 50000 --delay-ms 2

One kaflite broker as a process (default profile, or `--dev`; group.initial.rebalance.delay.ms=0), real librdkafka
clients: confluent-kafka's ShareConsumer (implicit acknowledgement: each poll accepts the previous
poll's records) and Consumer (the baseline, measured in the same run on the same broker and topic). For
every member count, each group first forms (a classic group, reading its new topic from the earliest offset: its
assignment covers the 6 partitions once; a share group: the coordinator says Stable with every member at the group epoch and all 6 share
partitions opened, asked with kaflite.cluster.share_group_view), then `--records` records of 100 B are
produced and the time until the group has received all of them is measured (producing included: the
"produce s" column shows it alone is not the bottleneck). A share group's records are acknowledged (and
the acknowledgements written to __share_group_state) as they are consumed; a classic group commits
nothing (enable.auto.commit=false), so the baseline is the plain fetch path.

With a per-record processing delay (`--delay-ms`, slept per record in each member's thread), a classic
group cannot go faster than its 6 partitions' members allow; a share group's members share partitions,
so every member works, provided one fetch does not lock a partition's whole backlog for one member:
librdkafka's ShareConsumer asks for max.poll.records (500) records a fetch, so with a delay the share
consumers run with `--max-poll-records` (20). The speed-up column is share / classic for the same member
count. The last column is the broker process's CPU time over the run's wall time (1.0 = one core).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import confluent_kafka as ck  # noqa: E402
from broker_bench import BrokerProc, cpu_seconds, start_kaflite  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

PARTITIONS = 6
VALUE = b"x" * 100


class Run:
    """One group's members in threads: they poll until stopped, counting the records they receive."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        kind: str,
        members: int,
        delay_s: float,
        max_poll_records: int | None = None,
    ) -> None:
        self.bootstrap, self.topic, self.kind, self.members, self.delay_s = (
            bootstrap,
            topic,
            kind,
            members,
            delay_s,
        )
        self.max_poll_records = max_poll_records
        self.group = f"bench-{kind}-{uuid.uuid4().hex[:8]}"
        self.counts = [0] * members
        self.owned: list[frozenset[int]] = [frozenset()] * members
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._member, args=(i,), daemon=True) for i in range(members)]

    def start(self) -> None:
        if (
            self.kind == "share"
        ):  # members heartbeat every 300 ms, so the group settles in well under a second
            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            res = ConfigResource(
                ResourceType.GROUP,
                self.group,
                incremental_configs=[
                    ConfigEntry(
                        "share.heartbeat.interval.ms", "300", incremental_operation=AlterConfigOpType.SET
                    )
                ],
            )
            admin.incremental_alter_configs([res])[res].result(10)
        for t in self.threads:
            t.start()

    def _member(self, i: int) -> None:
        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "log_level": 0}
        if self.kind == "share":
            if self.max_poll_records:
                # ShareFetch MaxRecords: records one fetch locks
                conf["max.poll.records"] = self.max_poll_records
            c = ck.ShareConsumer(conf)
            c.subscribe([self.topic])
            while not self.stop.is_set():
                for m in c.poll(0.1):
                    if m.error() is None:
                        if self.delay_s:
                            time.sleep(self.delay_s)
                        self.counts[i] += 1
            c.close()
        else:
            classic = ck.Consumer(
                {
                    **conf,
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "heartbeat.interval.ms": 300,
                    "partition.assignment.strategy": "range",
                }
            )
            classic.subscribe([self.topic])
            while not self.stop.is_set():
                for m in classic.consume(500, 0.1):
                    if m.error() is None:
                        if self.delay_s:
                            time.sleep(self.delay_s)
                        self.counts[i] += 1
                self.owned[i] = frozenset(tp.partition for tp in classic.assignment())
            classic.close()

    def formed(self) -> bool:
        if self.kind == "classic":
            flat = [p for o in self.owned for p in o]
            return sorted(flat) == list(range(PARTITIONS))
        from kaflite.cluster.share_group_view import ShareGroupViewError, fetch_share_group

        host, port = self.bootstrap.rsplit(":", 1)
        try:
            view = fetch_share_group(host, int(port), self.group)
        except ShareGroupViewError:
            return False
        g = view["group"]
        return (
            g["state"] == "Stable"
            and len(g["members"]) == self.members
            and len(view["partitions"]) == PARTITIONS
        )

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def start_broker(data_dir: Path, dev: bool) -> BrokerProc:
    return start_kaflite(
        data_dir, extra=("group.initial.rebalance.delay.ms=0",), flags=("--dev",) if dev else ()
    )


def measure(
    b: BrokerProc, kind: str, members: int, records: int, delay_s: float, max_poll_records: int | None = None
) -> tuple[float, float, float]:
    """(records/s, seconds the producing alone took, the broker's CPU use in that time as a share of one
    core) for one group of `members`."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    run = Run(b.bootstrap, topic, kind, members, delay_s, max_poll_records)
    run.start()
    try:
        deadline = time.monotonic() + 30
        stable_since = None
        while time.monotonic() < deadline:  # formed, and still formed 0.3 s later (no rebalance pending)
            if run.formed():
                stable_since = stable_since or time.monotonic()
                if time.monotonic() - stable_since >= 0.3:
                    break
            else:
                stable_since = None
            time.sleep(0.05)
        else:
            raise RuntimeError(f"{kind} group of {members} did not form")
        producer = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "log_level": 0})
        t0, cpu0 = time.perf_counter(), cpu_seconds(b.pid)
        for i in range(records):
            while True:
                try:
                    producer.produce(topic, VALUE, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(60)
        produced = time.perf_counter() - t0
        deadline = time.monotonic() + 60
        while sum(run.counts) < records and time.monotonic() < deadline:
            time.sleep(0.002)
        elapsed = time.perf_counter() - t0
        cpu = (cpu_seconds(b.pid) - cpu0) / elapsed
        got = sum(run.counts)
        if got < records:
            raise RuntimeError(f"{kind} group of {members}: {got} of {records} records in 60 s")
        return records / elapsed, produced, cpu
    finally:
        run.close()
        admin.delete_topics([topic])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", default="1,4,16", help="comma-separated group sizes (default 1,4,16)")
    ap.add_argument(
        "--records", type=int, default=12000, help="records per run without delay (default 12000)"
    )
    ap.add_argument(
        "--delay-records",
        type=int,
        default=3000,
        help="records per run with the processing delay (default 3000)",
    )
    ap.add_argument("--delay-ms", type=float, default=1.0, help="processing delay per record (default 1 ms)")
    ap.add_argument(
        "--max-poll-records",
        type=int,
        default=20,
        help="the share consumers' max.poll.records in the runs with a delay (default 20; "
        "librdkafka's 500 lets one member lock a whole partition's backlog)",
    )
    ap.add_argument("--dev", action="store_true", help="the broker's development profile (not durable)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.members.split(",") if s.strip()]
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="share-bench-") as tmp:
        b = start_broker(Path(tmp), args.dev)
        try:
            for delay_ms, records in ((0.0, args.records), (args.delay_ms, args.delay_records)):
                for n in sizes:
                    classic, classic_p, classic_cpu = measure(b, "classic", n, records, delay_ms / 1000)
                    share, share_p, share_cpu = measure(
                        b, "share", n, records, delay_ms / 1000, args.max_poll_records if delay_ms else None
                    )
                    rows.append(
                        (
                            delay_ms,
                            n,
                            records,
                            classic,
                            share,
                            max(classic_p, share_p),
                            classic_cpu,
                            share_cpu,
                        )
                    )
        finally:
            b.stop()  # type: ignore[operator]
    print(
        f"records/s through a group on {PARTITIONS} partitions, 100 B records, one kaflite broker "
        f"({'--dev' if args.dev else 'default'} profile), librdkafka {ck.libversion()[0]}; {time.monotonic() - started:.0f} s in all"
    )
    print(
        f"{'delay/record':>12} {'members':>7} {'records':>7} {'classic rec/s':>13} {'share rec/s':>11} "
        f"{'share/classic':>13} {'produce s':>9} {'broker CPU classic/share':>24}"
    )
    for delay_ms, n, records, classic, share, produced, classic_cpu, share_cpu in rows:
        print(
            f"{delay_ms:10.1f}ms {n:7d} {records:7d} {classic:13,.0f} {share:11,.0f} {share / classic:13.2f} "
            f"{produced:9.2f} {classic_cpu:11.0%} / {share_cpu:4.0%}"
        )


if __name__ == "__main__":
    main()
