"""What a follower spends to append what it fetched (issue 28), and RF 3 against RF 1 with real brokers.

    PYTHONPATH=src .venv/bin/python bench/follower_append_bench.py                 # in-process part only
    PYTHONPATH=src .venv/bin/python bench/follower_append_bench.py --cluster [--base /tmp/before/src]

In-process (no socket): a leader's partition of --mb MB is built as the follower receives it -- fetched
sets of about --set-kb KB, each of whole batches of --batch-records records of --record-size B from one
idempotent producer (consecutive sequences, leader epoch 1), every --txn-every-th batch transactional and
followed by a COMMIT marker -- and appended with Log.append(assign_offsets=False) to a fresh Log, once by the
replica hot path (Log.replica_fast_path, the default) and once by the general path (RecordBatchView per
batch), alternating --repeat times so that both see the same machine load. Printed: the median CPU
(time.process_time, user + system) per MB replicated of each, per batch, and the ratio.

--cluster: a ZooKeeper and three `python -m kaflite.server --dev` brokers on loopback (the harness of
bench/cluster_bench.py), one idempotent confluent-kafka producer with acks=all writing --records records of
--record-size B to a topic of 3 partitions with RF 1, then to one with RF 3 (min.insync.replicas=2):
MB/s of each, RF 3 / RF 1, and the CPU of the three broker processes per MB produced. With --base, the
same first with brokers running the source tree at that path (a checkout of the commit before), each on
a cluster of its own, so that before and after are measured in one run.

--base with the in-process part (--segment-kb, default 1024 there: the --dev profile's 1 MiB segments, so
every fetched set of ~1 MiB rolls a segment, as on a follower): the replica hot path of the tree at --base
and of this tree, each pass in a child process of its own, alternating --repeat times; printed: the median
CPU per MB of each and their ratio (issue 28: the roll's cost, which grew with the log's segment count).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _timing import proc_cpu_seconds

ROOT = Path(__file__).resolve().parents[1]


def build_sets(
    mb: int, set_kb: int, batch_records: int, record_size: int, txn_every: int, first_offset: int = 0
) -> list[bytes]:
    from kaflite.protocol.control_record import build_marker_batch
    from kaflite.protocol.record_batch import build_record_batch

    sets: list[bytes] = []
    current: list[bytes] = []
    size = 0
    offset = first_offset
    seq = 0
    total = 0
    ts = 1_700_000_000_000
    n = 0
    while total < mb * 1_000_000:
        txn = txn_every > 0 and n % txn_every == txn_every - 1
        values = [(None, bytes([65 + (offset + i) % 26]) * record_size, []) for i in range(batch_records)]
        batch = build_record_batch(
            values,
            base_offset=offset,
            timestamp_ms=ts + n,
            producer_id=1,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=txn,
            partition_leader_epoch=1,
        )
        pieces = [batch]
        offset += batch_records
        seq += batch_records
        if txn:
            pieces.append(
                build_marker_batch(1, 0, True, 0, ts + n, base_offset=offset, partition_leader_epoch=1)
            )
            offset += 1
        for p in pieces:
            current.append(p)
            size += len(p)
            total += len(p)
        n += 1
        if size >= set_kb * 1024:
            sets.append(b"".join(current))
            current, size = [], 0
    if current:
        sets.append(b"".join(current))
    return sets


def _config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from kaflite.storage import LogConfig

    return LogConfig(segment_bytes=args.segment_kb * 1024) if args.segment_kb else LogConfig()


def _prefill(path: Path, n: int) -> None:
    """A log holding n one-record segments, as a long-lived partition's directory holds ~3 files per segment
    (written once by `trees`, then reused by every child: its appends are truncated away after each pass)."""
    from kaflite.protocol.record_batch import build_record_batch
    from kaflite.storage import Log, LogConfig

    log = Log(path, LogConfig(segment_bytes=100))
    one = build_record_batch([(None, b"x", [])], timestamp_ms=1_700_000_000_000)
    for _ in range(n):
        log.append(one, leader_epoch=1)
    log.close()


def one_pass(args: argparse.Namespace) -> None:
    """--one-pass (a child of `trees`): one hot-path pass on a fresh log, or on the log at --log-dir (which
    holds --prefill-segments segments; truncated back to them after the pass); prints its CPU seconds."""
    from kaflite.storage import Log

    n = args.prefill_segments
    sets = build_sets(
        args.mb, args.set_kb, args.batch_records, args.record_size, args.txn_every, first_offset=n
    )
    with tempfile.TemporaryDirectory(dir=Path(args.dir) if args.dir else None) as tmp:
        path = Path(args.log_dir) if args.log_dir else Path(tmp) / "t-0"
        log = Log(path, _config(args), recovery_point=n, had_clean_shutdown=bool(args.log_dir))
        assert log.log_end_offset == n, (log.log_end_offset, n)
        append = log.append
        t = time.process_time()
        for s in sets:
            append(s, assign_offsets=False)
        cpu = time.process_time() - t
        print(cpu, len(log.segments), sum(len(s) for s in sets))
        if args.log_dir:
            log.truncate_to(n)
        log.close()


def trees(args: argparse.Namespace) -> None:
    """The hot path of --base's tree and of this one, alternating child processes (same machine load)."""
    import subprocess

    seg_kb = args.segment_kb or 1024
    cmd = [
        sys.executable,
        __file__,
        "--one-pass",
        "--mb",
        str(args.mb),
        "--set-kb",
        str(args.set_kb),
        "--batch-records",
        str(args.batch_records),
        "--record-size",
        str(args.record_size),
        "--txn-every",
        str(args.txn_every),
        "--segment-kb",
        str(seg_kb),
        "--prefill-segments",
        str(args.prefill_segments),
    ] + (["--dir", args.dir] if args.dir else [])
    cpu: dict[str, list[float]] = {"before": [], "after": []}
    segments = total = 0
    with tempfile.TemporaryDirectory(dir=Path(args.dir) if args.dir else None) as tmp:
        if args.prefill_segments:
            _prefill(Path(tmp) / "t-0", args.prefill_segments)
            cmd += ["--log-dir", str(Path(tmp) / "t-0")]
        for _ in range(args.repeat):
            for name, src in (("before", args.base), ("after", str(ROOT / "src"))):
                out = subprocess.run(
                    cmd, env={**os.environ, "PYTHONPATH": src}, check=True, capture_output=True, text=True
                ).stdout.split()
                cpu[name].append(float(out[0]))
                segments, total = int(out[1]), int(out[2])
    b = statistics.median(cpu["before"])
    a = statistics.median(cpu["after"])
    mb = total / 1e6
    print(
        f"\nreplica hot path with {seg_kb} KB segments on a log of {args.prefill_segments} segments "
        f"({segments} at the end), {mb:.0f} MB, "
        f"median of {args.repeat} passes each, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"  before ({args.base}): {b / mb * 1000:7.2f} ms CPU per MB")
    print(f"  after  (this tree)  : {a / mb * 1000:7.2f} ms CPU per MB   after / before {a / b:.2f}x")


def in_process(args: argparse.Namespace) -> None:
    from kaflite.storage import Log
    from kaflite.storage.log_validator import scan_replica_batches

    sets = build_sets(args.mb, args.set_kb, args.batch_records, args.record_size, args.txn_every)
    total = sum(len(s) for s in sets)
    batches = sum(len(scan_replica_batches(memoryview(s), -1) or []) for s in sets)
    cpu: dict[str, list[float]] = {"general": [], "fast": []}
    base = Path(args.dir) if args.dir else None
    for _ in range(args.repeat):
        for mode in ("general", "fast"):
            with tempfile.TemporaryDirectory(dir=base) as tmp:
                log = Log(Path(tmp) / "t-0", _config(args))
                log.replica_fast_path = mode == "fast"
                append = log.append
                t = time.process_time()
                for s in sets:
                    append(s, assign_offsets=False)
                cpu[mode].append(time.process_time() - t)
                log.close()
    g = statistics.median(cpu["general"])
    f = statistics.median(cpu["fast"])
    mb = total / 1e6
    print(
        f"follower append in-process: {mb:.0f} MB in {len(sets):,} fetched sets of ~{args.set_kb} KB, "
        f"{batches:,} batches of {args.batch_records} x {args.record_size} B (idempotent; every "
        f"{args.txn_every}th transactional + COMMIT), median of {args.repeat}"
    )
    print(
        f"  general path (before): {g / mb * 1000:7.2f} ms CPU per MB  {g / batches * 1e6:6.2f} us per batch"
    )
    print(
        f"  replica hot path     : {f / mb * 1000:7.2f} ms CPU per MB  {f / batches * 1e6:6.2f} us per batch"
    )
    print(f"  hot path / general   : {f / g:.2f}x the CPU ({g / f:.2f}x as many MB per CPU second)")


def _cpu_seconds(pids: list[int]) -> float:
    """utime + stime of the processes `pids`, summed."""
    return sum(proc_cpu_seconds(pid) for pid in pids)


def cluster(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "tests"))
    import cluster_bench  # sets PYTHONPATH for the brokers at import (reset below per source tree)

    from kaflite.cluster.zkserver import ZooKeeperServer, missing_reason

    reason = missing_reason()
    if reason:
        print(f"cluster part cannot run: {reason}", file=sys.stderr)
        return
    trees = ([("before", args.base)] if args.base else []) + [("after", str(ROOT / "src"))]
    mb = args.records * args.record_size / 1e6
    rows = []
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zks:
        for name, src in trees:
            os.environ["PYTHONPATH"] = src
            work = Path(tmp) / name
            work.mkdir()
            with cluster_bench.Cluster(zks.connect, work) as c:
                pids = [p.pid for p in c.brokers.procs.values()]
                c.create("rf1", 3, 1)
                c.create("rf3", 3, 3, configs={"min.insync.replicas": "2"})
                got = {}
                for topic in ("rf1", "rf3"):
                    cpu0 = _cpu_seconds(pids)
                    got[topic] = (
                        cluster_bench.throughput(c.bootstrap, topic, args.records, args.record_size),
                        (_cpu_seconds(pids) - cpu0) / mb,
                    )
                rows.append((name, got))
    print(
        f"\nRF 3 vs RF 1 on 3 brokers (--dev, loopback), acks=all idempotent producer, {args.records:,} x "
        f"{args.record_size} B ({mb:.0f} MB) per topic, load average {load0:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    for name, got in rows:
        (r1, c1), (r3, c3) = got["rf1"], got["rf3"]
        print(
            f"  {name:6}: RF 1 {r1:6.1f} MB/s ({c1 * 1000:5.1f} ms broker CPU/MB)   RF 3 {r3:6.1f} MB/s "
            f"({c3 * 1000:5.1f} ms broker CPU/MB)   RF 3 = {r3 / r1:.2f}x RF 1"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--set-kb", type=int, default=1024, help="bytes per fetched set (a follower fetch)")
    ap.add_argument("--batch-records", type=int, default=16)
    ap.add_argument("--record-size", type=int, default=1000)
    ap.add_argument("--txn-every", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default="", help="where the in-process logs are written (default: the temp dir)")
    ap.add_argument("--cluster", action="store_true", help="also RF 3 vs RF 1 with three brokers")
    ap.add_argument("--records", type=int, default=50_000, help="--cluster: records per topic")
    ap.add_argument(
        "--base", default="", help="a source tree to measure too (before): in-process and --cluster"
    )
    ap.add_argument(
        "--segment-kb",
        type=int,
        default=0,
        help="in-process segment.bytes in KB (default: LogConfig's; 1024 for --base's comparison)",
    )
    ap.add_argument(
        "--prefill-segments",
        type=int,
        default=0,
        help="--base: the log holds this many (one-record) segments before the timed appends",
    )
    ap.add_argument("--log-dir", default="", help=argparse.SUPPRESS)
    ap.add_argument("--one-pass", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--skip-paths", action="store_true", help="no hot path vs general path comparison")
    args = ap.parse_args()
    if args.one_pass:
        one_pass(args)
        return 0
    if not args.skip_paths:
        in_process(args)
    if args.base:
        trees(args)
    if args.cluster:
        cluster(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
