"""The Spark connector's task bodies on a compressed topic, without Spark: CPU per million rows (issue 29).

    PYTHONPATH=src .venv/bin/python bench/spark_codec_bench.py [--rows 1000000] [--codec zstd] [--repeat 3]
        [--base /tmp/other-checkout/src]

A kaflite broker in a process of its own (`kaflite serve`); a topic of 3 partitions loaded once by
confluent-kafka with `compression.codec` (bench/spark_bench.py's rows: keys `key-%06d` of i % 1000,
100 B values, linger.ms 5). Then, in a fresh Python process per run (this tree's src/, and with --base the
other tree's, alternating, base first):
- source: `kaflite.spark.client.read_range` over the three partitions, as the source's tasks read them;
- sink: `kaflite.spark.writer.produce_arrow` of the same rows (Arrow batches of 10,000 rows) into another
  topic with `compression.type` = the codec, as the sink's tasks write them.
Per run: the process's CPU (time.process_time) per million rows and its minor page faults (getrusage)
over the read or the write alone, and the broker process's CPU per million rows and minor faults over the
same read or write (/proc; the broker runs this tree's code in both columns of a --base comparison); a warm-up read or write comes first in each process. Spark's own cost
is not in it: bench/spark_bench.py --compression CODEC measures that.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from shutil import rmtree

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def child(args: argparse.Namespace) -> None:
    """One run in this process: the source's read and the sink's write, each after a warm-up."""
    from kaflite.spark.client import read_range
    from kaflite.spark.offsets import OffsetRange
    from kaflite.spark.options import parse_writer_options
    from kaflite.spark.produce import ArrowProducer
    from kaflite.spark.writer import produce_arrow

    sys.path.insert(0, str(HERE))
    from spark_bench import SyntheticReader

    conf = {"bootstrap.servers": args.bootstrap}
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "spark-codec-bench"})
    ends = [probe.get_watermark_offsets(TopicPartition("src", p), timeout=30)[1] for p in range(3)]
    probe.close()

    def source() -> int:
        n = 0
        for p in range(3):  # each partition's range ends at its end: as planned by the source's driver
            for batch in read_range(conf, OffsetRange("src", p, 0, ends[p]), False, False, 30_000):
                n += batch.num_rows
        return n

    def broker() -> tuple[float, int]:
        """The broker process's CPU seconds and minor page faults so far."""
        fields = Path(f"/proc/{args.broker_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[7])

    reader = SyntheticReader(args.rows, 1, 100)
    rows = [b.select(["key", "value"]) for b in reader.read(reader.partitions()[0])]
    options = parse_writer_options({"kafka.bootstrap.servers": args.bootstrap, "topic": "dst",
                                    "kafka.compression.type": args.codec})

    def sink() -> int:
        with ArrowProducer(conf | {"compression.type": args.codec}).start() as producer:
            return produce_arrow(producer, options, iter(rows), None)

    out = {}
    for name, fn in (("source", source), ("sink", sink)):
        fn()  # warm-up: imports, connections, the allocator's first growth
        faults, cpu, (broker_cpu, broker_faults) = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time(), broker()
        n = fn()
        assert n == args.rows, f"{name}: {n} rows"
        after_cpu, after_faults = broker()
        out[name] = ((time.process_time() - cpu) / n * 1e6, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
                     (after_cpu - broker_cpu) / n * 1e6, after_faults - broker_faults)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--codec", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="zstd")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", type=Path, default=None, help="another tree's src/, run alternately with this one")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--broker-pid", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    from confluent_kafka.admin import AdminClient, NewTopic

    sys.path.insert(0, str(HERE))
    from spark_bench import BrokerProcess, produce_raw

    data_dir = Path(tempfile.mkdtemp(prefix="kaflite-scb-"))
    broker = BrokerProcess(data_dir)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(t, 3, 1) for t in ("src", "dst")]).values():
            f.result(30)
        produce_raw(broker.bootstrap, "src", args.rows, 100, args.codec)
        trees = [("base", args.base), ("this", SRC)] if args.base else [("this", SRC)]
        print(f"{args.rows} rows, codec {args.codec}; load average (1 min) {os.getloadavg()[0]:.1f}")
        for i in range(args.repeat):
            for name, src in trees:
                got = subprocess.run(
                    [sys.executable, __file__, "--child", "--bootstrap", broker.bootstrap, "--rows", str(args.rows),
                     "--broker-pid", str(broker.proc.pid),
                     "--codec", args.codec], env=dict(os.environ, PYTHONPATH=str(src)), capture_output=True,
                    text=True, timeout=600, check=True)
                res = json.loads(got.stdout.strip().splitlines()[-1])
                src_, dst_ = res["source"], res["sink"]
                print(f"run {i + 1} {name}: source {src_[0]:.3f} CPU-s/M ({src_[1]} minor faults; broker {src_[2]:.3f}, "
                      f"{src_[3]} faults), sink {dst_[0]:.3f} CPU-s/M ({dst_[1]} minor faults; broker {dst_[2]:.3f}, "
                      f"{dst_[3]} faults); load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        broker.stop()
        rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
