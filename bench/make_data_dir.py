"""Make a stopped single-node broker's data directory of many partitions and many bytes, fast (issue 28's
start-up acceptance: 10,000 partitions and 10 GiB), written by kaflite's own broker code.

    .venv/bin/python bench/make_data_dir.py /tmp/w33big/big --partitions 10000 --bytes 10GiB --check 4
    .venv/bin/python bench/make_data_dir.py /tmp/w33big/small --partitions 10000 --bytes 10MB \
        --batch-bytes 1000 --value-bytes 100                      # 10 records x 100 B a partition
    .venv/bin/python bench/make_data_dir.py DIR --partitions 10000 --bytes 10GiB --segment-bytes 16MiB \
        --hot-partitions 100 --hot-share 0.5                      # 100 partitions of 51 MiB: 4 segments each
    .venv/bin/python bench/make_data_dir.py DIR --partitions 10000 --bytes 10GiB --check-only 4

Filling such a directory through a broker's sockets takes well over 10 minutes on the shared 2-core machine;
here the clients' wire is left out and nothing else is:

1. an in-process `Broker` (kaflite.server.broker, the class `kaflite serve` runs, default configuration plus
   `log.dirs`) starts on the empty DIR and creates the topics (`--per-topic` partitions each, named `t0000`,
   `t0001`, ...) with `create_topic_async`, the CreateTopics path: the metadata file (`kaflite-metadata.json`),
   `meta.properties`, each partition's log and its leader epoch 0;
2. `--threads` threads append record batches as the partition's leader (`Partition.append_records_to_leader`,
   what the Produce handler calls, acks=1) while the broker's event loop runs its housekeeping: batches of
   about --batch-bytes, records of --value-bytes with no key; every --idempotent-every-th partition of a topic
   gets its batches from an idempotent producer (a producer id of the broker's own `producer_ids`, one per
   topic, epoch 0, sequences from 0), so its producer snapshot holds that producer;
3. the broker stops (`Broker.stop`, what SIGTERM runs): every log flushed and closed, producer snapshots, the
   offset checkpoints and the clean-shutdown marker written.

The bytes are spread evenly over the partitions, except that --hot-partitions partitions (spread over the
topics) share --hot-share of them. `--segment-bytes` is given to every topic as its `segment.bytes` (kept in
the metadata file, so every later start has it too); default: the broker's log.segment.bytes (1 GiB).

`--check N` (and `--check-only N`, on a directory made before with the same arguments): start `python -m
kaflite serve` on DIR in its own process on a free loopback port, require its load line to say "clean
shutdown" with every segment opened lazily (no recovery), read N partitions (the first, the last, an
idempotent one, a hot one, ...) from offset 0 to their end with kafka-python (group_id None: no group, so no
`__consumer_offsets` is created in DIR; confluent-kafka's consumer always asks for a group coordinator) and
compare every record with what step 2 wrote, then stop the broker with SIGTERM (a clean stop again).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from _broker_process import BrokerProcess

from kaflite.protocol.record_batch import BATCH_HEADER_SIZE, build_record_batch, crc32c

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
# a batch's header: base offset, length, leader epoch, magic, crc | attributes, last offset delta, first and
# max timestamp, producer id, producer epoch, base sequence, record count (the CRC covers from attributes on)
_HEAD = struct.Struct(">qiibI")
_TAIL = struct.Struct(">hiqqqhii")
VALUE_STEM = b"kaflite make_data_dir "


def parse_size(text: str) -> int:
    """'10GiB', '16MiB', '1000', '10MB' -> bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (e.g. 10GiB, 16MiB, 64KiB, 1000)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def value_of(size: int) -> bytes:
    """The value of every record: VALUE_STEM repeated to `size` bytes (the check compares each record with it)."""
    return (VALUE_STEM * (size // len(VALUE_STEM) + 1))[:size]


@dataclass(frozen=True)
class Plan:
    """What goes where; the same arguments give the same plan (the check recomputes it)."""

    partitions: int
    total_bytes: int
    per_topic: int = 100
    batch_bytes: int = 256 * 1024
    value_bytes: int = 16 * 1024
    idempotent_every: int = 4  # 0: no idempotent producer
    hot_partitions: int = 0
    hot_share: float = 0.0
    segment_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.partitions < 1 or self.per_topic < 1 or self.value_bytes < 1 or self.total_bytes < 0:
            raise ValueError("partitions, per_topic and value_bytes must be >= 1, total_bytes >= 0")
        if not 0 <= self.hot_partitions <= self.partitions or not 0.0 <= self.hot_share <= 1.0:
            raise ValueError("hot_partitions must be within [0, partitions] and hot_share within [0, 1]")
        if self.hot_partitions and self.hot_partitions == self.partitions and self.hot_share < 1.0:
            raise ValueError("every partition is hot: hot_share must be 1")

    @property
    def topics(self) -> dict[str, int]:
        per, n = self.per_topic, self.partitions
        return {f"t{i:04d}": min(per, n - i * per) for i in range(-(-n // per))}

    def keys(self) -> list[tuple[str, int]]:
        return [(t, p) for t, count in self.topics.items() for p in range(count)]

    @property
    def records_per_batch(self) -> int:
        return max(1, self.batch_bytes // self.value_bytes)

    def hot(self, index: int) -> bool:
        """Partition number `index` (in `keys()` order) is one of the hot ones, spread evenly."""
        h = self.hot_partitions
        return h > 0 and (index * h) % self.partitions < h

    def records(self, index: int) -> int:
        """Records written into partition number `index`: its share of the bytes in --value-bytes records."""
        h, n = self.hot_partitions, self.partitions
        share = self.hot_share / h if self.hot(index) else (1.0 - self.hot_share if h else 1.0) / (n - h)
        return round(self.total_bytes * share / self.value_bytes)

    def idempotent(self, partition: int) -> bool:
        return self.idempotent_every > 0 and partition % self.idempotent_every == 0

    def batch_sizes(self, records: int) -> list[int]:
        """The record counts of a partition's batches."""
        rpb = self.records_per_batch
        return [rpb] * (records // rpb) + ([records % rpb] if records % rpb else [])


def idempotent_batch(template: bytes, producer_id: int, sequence: int) -> bytes:
    """`template` (a batch without producer) from `producer_id`, epoch 0, base sequence `sequence`: the
    header's producer fields replaced and the CRC computed again (the records are the template's)."""
    attrs, lod, first_ts, max_ts, _pid, _epoch, _seq, count = _TAIL.unpack_from(template, _HEAD.size)
    base, length, ple, magic, _crc = _HEAD.unpack_from(template, 0)
    tail = _TAIL.pack(attrs, lod, first_ts, max_ts, producer_id, 0, sequence, count)
    body = memoryview(template)[BATCH_HEADER_SIZE:]
    crc = crc32c(body, crc32c(tail))
    return _HEAD.pack(base, length, ple, magic, crc) + tail + body


@dataclass
class Made:
    partitions: int
    records: int
    bytes_appended: int
    idempotent_partitions: int
    create_s: float
    fill_s: float
    stop_s: float


async def _make(directory: Path, plan: Plan, threads: int, progress: Callable[[str], None]) -> Made:
    from kaflite.server.broker import Broker
    from kaflite.server.config import BrokerConfig

    config = BrokerConfig.load(None, {"log.dirs": str(directory), "listeners": "PLAINTEXT://127.0.0.1:0"})
    broker = Broker(config)
    await broker.start()
    stopped = False
    try:
        t0 = time.perf_counter()
        configs = {"segment.bytes": str(plan.segment_bytes)} if plan.segment_bytes else {}
        producers: dict[str, int] = {}
        for name, count in plan.topics.items():
            await broker.create_topic_async(name, count, configs)
            # the broker's own producer id, as InitProducerId hands it out
            producers[name] = broker.producer_ids.next_id()
        create_s = time.perf_counter() - t0
        progress(f"created {len(plan.topics):,} topics, {plan.partitions:,} partitions in {create_s:.1f} s")

        now_ms = broker.now_ms()
        value = value_of(plan.value_bytes)
        counts = {n for i in range(plan.partitions) for n in plan.batch_sizes(plan.records(i))}
        templates = {n: build_record_batch([(None, value, [])] * n, timestamp_ms=now_ms) for n in counts}
        keys = plan.keys()
        parts = [broker.replica_manager.partitions[k] for k in keys]
        done = [0, 0]  # partitions, bytes
        lock = threading.Lock()
        t1 = time.perf_counter()

        def fill_one(index: int) -> None:
            (topic, partition), part = keys[index], parts[index]
            pid = producers[topic] if plan.idempotent(partition) else -1
            sequence = written = 0
            for n in plan.batch_sizes(plan.records(index)):
                batch = templates[n] if pid < 0 else idempotent_batch(templates[n], pid, sequence)
                part.append_records_to_leader(batch, 1, now_ms)  # the Produce handler's call (acks=1)
                sequence += n
                written += len(batch)
            with lock:
                done[0] += 1
                done[1] += written
                if done[0] % max(1, plan.partitions // 10) == 0:
                    progress(
                        f"  {done[0]:,} partitions, {done[1] / 2**30:.2f} GiB "
                        f"({time.perf_counter() - t1:.0f} s)"
                    )

        def fill_all() -> None:
            with ThreadPoolExecutor(threads, thread_name_prefix="make-data-dir") as pool:
                for _ in pool.map(fill_one, range(len(keys)), chunksize=16):
                    pass

        await asyncio.to_thread(fill_all)  # the loop meanwhile runs the broker's housekeeping passes
        fill_s = time.perf_counter() - t1
        progress(
            f"appended {done[1] / 2**30:.2f} GiB in {fill_s:.1f} s ({done[1] / 2**20 / max(fill_s, 1e-9):.0f} "
            f"MiB/s, {threads} threads)"
        )
        t2 = time.perf_counter()
        stopped = True
        await broker.stop()
        stop_s = time.perf_counter() - t2
    finally:
        if not stopped:
            await broker.stop()
    return Made(
        plan.partitions,
        sum(plan.records(i) for i in range(plan.partitions)),
        done[1],
        sum(1 for _t, p in keys if plan.idempotent(p)),
        create_s,
        fill_s,
        stop_s,
    )


def make_data_dir(
    directory: Path, plan: Plan, threads: int = 4, progress: Callable[[str], None] = lambda _line: None
) -> Made:
    """Fill the empty (or missing) `directory` as `plan` says and leave it cleanly stopped."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise ValueError(f"{directory} is not empty")
    return asyncio.run(_make(directory, plan, threads, progress))


# -- the check: a real broker process and a real client -----------------------------------------------------
def sample(plan: Plan, n: int) -> list[int]:
    """Partition numbers to read back: the first, the last, an idempotent one past the first, a hot one, then
    spread evenly."""
    last = plan.partitions - 1
    picks = [0, last]
    picks += [i for i in range(1, plan.partitions) if plan.idempotent(plan.keys()[i][1])][:1]
    picks += [i for i in range(plan.partitions) if plan.hot(i)][:1]
    picks += [last * k // max(1, n) for k in range(1, n)]
    out: list[int] = []
    for i in picks:
        if i not in out:
            out.append(i)
    return out[: max(n, 0)]


def check(directory: Path, plan: Plan, n: int, timeout_s: float = 300) -> list[str]:
    """Start `kaflite serve` on `directory`, require a clean load, read `n` partitions back; the findings,
    one line each. Raises on any difference."""
    from kafka import KafkaConsumer, TopicPartition  # kafka-python

    with tempfile.NamedTemporaryFile(prefix="make-data-dir-broker-", suffix=".log", delete=False) as f:
        log_path = Path(f.name)
    out: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:  # the port answers once the logs are loaded and the listener is bound
        broker = BrokerProcess(directory, log_path=log_path).start(wait=timeout_s)
    except BaseException:
        log_path.unlink(missing_ok=True)  # (its tail is in the error)
        raise
    try:
        loaded: list[str] = []
        while not loaded and time.monotonic() < deadline:  # (written before the port is bound, as a rule)
            loaded = [
                ln for ln in log_path.read_text().splitlines() if " loaded " in ln and " logs from " in ln
            ]
            time.sleep(0.05 if not loaded else 0)
        if len(loaded) != 1:
            raise RuntimeError(f"expected one load line in {log_path}, found {loaded}")
        m = re.search(
            r"loaded (\d+) logs .*; (clean shutdown|.*?); (\d+) of (\d+) segments opened lazily", loaded[0]
        )
        if (
            m is None
            or m.group(2) != "clean shutdown"
            or int(m.group(1)) != plan.partitions
            or m.group(3) != m.group(4)
        ):
            raise RuntimeError(f"not a clean load of {plan.partitions} logs: {loaded[0]}")
        out.append(loaded[0].split(": ", 1)[1])
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=4 * 2**20,
            fetch_max_bytes=16 * 2**20,
            request_timeout_ms=60_000,
        )
        value = value_of(plan.value_bytes)
        try:
            keys = plan.keys()
            for index in sample(plan, n):
                topic, partition = keys[index]
                tp = TopicPartition(topic, partition)
                consumer.assign([tp])
                consumer.seek_to_beginning(tp)
                end = consumer.end_offsets([tp])[tp]
                want = plan.records(index)
                if end != want:
                    raise RuntimeError(f"{topic}-{partition}: end offset {end}, {want} records were written")
                seen = 0
                t0 = time.monotonic()
                while seen < want:
                    if time.monotonic() - t0 > 120:
                        raise RuntimeError(f"{topic}-{partition}: {seen} of {want} records read in 120 s")
                    for records in consumer.poll(timeout_ms=1000, max_records=10_000).values():
                        for r in records:
                            if r.offset != seen or r.key is not None or r.value != value:
                                raise RuntimeError(
                                    f"{topic}-{partition}: record at {r.offset} (expected {seen}) "
                                    f"differs from what was written"
                                )
                            seen += 1
                kind = "idempotent" if plan.idempotent(partition) else "plain"
                out.append(
                    f"{topic}-{partition} ({kind}{', hot' if plan.hot(index) else ''}): "
                    f"{seen:,} records read back, offsets 0..{seen - 1}, values as written"
                )
        finally:
            consumer.close()
    finally:
        try:
            broker.stop(grace=120)  # (a clean stop again; RuntimeError if it takes longer)
        finally:
            stopped = log_path.read_text(errors="replace")
            log_path.unlink(missing_ok=True)
    assert broker.proc is not None
    if broker.proc.returncode != 0:
        raise RuntimeError(f"the broker exited with {broker.proc.returncode}: {stopped[-2000:]}")
    if "__consumer_offsets" in {p.name.rpartition("-")[0] for p in directory.iterdir()}:
        raise RuntimeError("the check created __consumer_offsets in the directory")
    return out


def du_bytes(directory: Path) -> tuple[int, int, int]:
    """(files, bytes of their lengths, bytes allocated on disk)."""
    files = length = allocated = 0
    for root, _dirs, names in os.walk(directory):
        for name in names:
            st = os.stat(os.path.join(root, name))
            files += 1
            length += st.st_size
            allocated += st.st_blocks * 512
    return files, length, allocated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path, help="the data directory to make (empty or missing)")
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=100, help="partitions of each topic")
    ap.add_argument("--bytes", default="10GiB", help="record values in all partitions together, e.g. 10GiB")
    ap.add_argument("--batch-bytes", default="256KiB", help="about this much record value per batch")
    ap.add_argument("--value-bytes", default="16KiB", help="bytes of each record's value")
    ap.add_argument(
        "--idempotent-every",
        type=int,
        default=4,
        help="every N-th partition of a topic is written by an idempotent producer (0: none)",
    )
    ap.add_argument("--hot-partitions", type=int, default=0)
    ap.add_argument("--hot-share", type=float, default=0.0, help="share of --bytes the hot partitions hold")
    ap.add_argument("--segment-bytes", help="segment.bytes of every topic (default: the broker's, 1 GiB)")
    ap.add_argument("--threads", type=int, default=4, help="appending threads")
    ap.add_argument(
        "--check", type=int, default=0, metavar="N", help="then read N partitions back (see above)"
    )
    ap.add_argument("--check-only", type=int, default=0, metavar="N", help="only the check, on a made DIR")
    args = ap.parse_args()
    plan = Plan(
        args.partitions,
        parse_size(args.bytes),
        args.per_topic,
        parse_size(args.batch_bytes),
        parse_size(args.value_bytes),
        args.idempotent_every,
        args.hot_partitions,
        args.hot_share,
        parse_size(args.segment_bytes) if args.segment_bytes else None,
    )
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if not args.check_only:
        t0 = time.perf_counter()
        made = make_data_dir(args.dir, plan, args.threads, lambda line: print(line, flush=True))
        files, length, allocated = du_bytes(args.dir)
        print(
            f"made {args.dir}: {made.partitions:,} partitions ({made.idempotent_partitions:,} idempotent), "
            f"{made.records:,} records, {made.bytes_appended / 2**30:.2f} GiB of batches; {files:,} files, "
            f"{length / 2**30:.2f} GiB ({allocated / 2**30:.2f} GiB on disk); create {made.create_s:.1f} s, "
            f"append {made.fill_s:.1f} s, clean stop {made.stop_s:.1f} s, all {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
    n = args.check_only or args.check
    if n:
        for line in check(args.dir, plan, n):
            print(f"check: {line}", flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
