"""Scale: idle connections, many consumer groups, many partitions at start-up (issue 28's scale acceptance).

    .venv/bin/python bench/scale_bench.py                 # 2,000 connections, 200 groups, 500 partitions
    .venv/bin/python bench/scale_bench.py --connections 10000 --groups 1000 --partitions 10000   # the issue's
    .venv/bin/python bench/scale_bench.py --partitions 2000 --skip-connections --skip-groups     # one phase
    .venv/bin/python bench/scale_bench.py --idle 60 --start-dir /tmp/idle10k --partitions 10000 --fill-records 0

The broker is `python -m kaflite serve` in its own process on a free loopback port, stopped by its pid
(SIGTERM). Clients are raw sockets speaking kio-encoded requests from one asyncio loop in this process.
Each figure has its baseline measured in the same run:

1. connections: N connections each answered one ApiVersions, then left idle. Broker RSS per connection
   (VmRSS of the broker from /proc/<pid>/status after minus before, / N), accept rate (N / the time to open
   them all, 100 in flight), the broker's idle CPU, and a probe client's Metadata round trips (p50 / p99 of
   --probes sequential requests on its own connection) with the N open vs none. The broker runs with
   `max.connections` = N + 1 (+ room for the groups phase): after the N idle connections and the probe,
   20 more connections are opened and each either gets its ApiVersions answer or is closed unanswered.
   Before that, `max.connections.per.ip.overrides=127.0.0.2:5`: 8 connections held open from 127.0.0.2
   (another loopback address), of which 5 should be answered.
2. groups: M classic groups of 3 members (JoinGroup v5, SyncGroup v3, Heartbeat v3 every --heartbeat-ms),
   each member a connection of its own. Broker CPU (utime + stime from /proc/<pid>/stat, 10 ms ticks)
   per heartbeat over a window, less the broker's idle CPU over the same time; and one extra group's
   rebalance (its 3 members rejoin at once with new metadata: JoinGroup until the last SyncGroup answer,
   --rebalances times) alone, then with the M groups heartbeating.
3. start-up: a broker with P partitions (topics of 100 partitions) and 10 records x 100 B in each (or
   --fill-records x --fill-size B: 100 x 1000 B in 10,000 partitions is 1 GiB) is
   stopped with SIGTERM and started again on its directory: time from the Popen to the first answered
   Metadata (all topics, the client retries the port every 10 ms) and the broker's CPU by then, beside an
   empty broker's start (its first; then restarts, with --repeat) alternated with it.
   `--start-dir DIR` instead: only starts (--repeat) of an existing, cleanly stopped broker's directory,
   each stopped with SIGTERM, no fill; run it with the PYTHONPATH of one tree, then another, on the same
   directory, to compare trees (the broker inherits this process's PYTHONPATH).
4. idle (`--idle SECONDS --start-dir DIR`): the CPU of a broker doing nothing, started on DIR (created once
   with --partitions partitions and --fill-records records each when empty), sampled over SECONDS after
   --settle s, per start (--repeat); as with --start-dir, the PYTHONPATH picks the tree. `--idle-produce N`:
   N records into each partition after the start, before --settle (unflushed data in every log).

The machine is shared: the load average is printed at the start and the end. bench/scale_sweep.py runs
phases 1-3 at several sizes, repeated, and plots cost against connections, groups and partitions.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import resource
import statistics
import struct
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from _broker_process import BrokerProcess, free_port, rss_mib
from _timing import proc_cpu_seconds as cpu_seconds
from kio.index import load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

PER_IP_2 = (
    5  # the per-address limit given to 127.0.0.2 (connections from 127.0.0.1 have no limit of their own)
)
IDLE_S = 1.0  # an idle broker's CPU is sampled over this long (10 ms ticks)
MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID = 79, 27, 25
# every broker of the bench: groups form after 100 ms (not 3 s), and no topic appears unless created
OVERRIDES = {"group.initial.rebalance.delay.ms": "100", "auto.create.topics.enable": "false"}


# -- the broker process ---------------------------------------------------------------------------------
class Broker(BrokerProcess):
    """`kaflite serve` on `data` with `overrides` (bench/_broker_process.py), its log appended to
    data/../broker-<port>.log; `start()` does not wait for the port (the start-up phase times the start
    from the Popen to the first Metadata answer, `self.started`), and `stop()` returns the seconds the
    clean stop took (RuntimeError after 60 s, the broker killed)."""

    def __init__(self, data: Path, overrides: dict[str, str]) -> None:
        port = free_port()
        super().__init__(
            data, overrides=overrides, port=port, log_path=data.parent / f"broker-{port}.log", log_mode="ab"
        )
        self.data = data  # (bench/scale_sweep.py removes data.parent after each run)

    def start(self, wait: float | None = None) -> Broker:
        super().start(wait)
        return self


# -- the wire ---------------------------------------------------------------------------------------------
def encode(request: Any, corr: int) -> bytes:
    header_cls = HeaderV2 if request.__flexible__ else HeaderV1
    buf = io.BytesIO()
    entity_writer(header_cls)(
        buf,
        header_cls(
            request_api_key=i16(request.__api_key__),
            request_api_version=i16(request.__version__),
            correlation_id=i32(corr),
            client_id="scale-bench",
        ),
    )
    entity_writer(type(request))(buf, request)
    body = buf.getvalue()
    return struct.pack(">i", len(body)) + body


def decode(request: Any, frame: bytes) -> Any:
    schema = load_response_schema(request.__api_key__, request.__version__)
    offset = 5 if schema.__flexible__ and request.__api_key__ != 18 else 4
    return entity_reader(schema)(frame, offset)[0]


class Conn:
    """One connection, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.corr = reader, writer, 0

    @classmethod
    async def open(cls, port: int, source: str | None = None) -> Conn:
        local = (source, 0) if source is not None else None
        return cls(*await asyncio.open_connection("127.0.0.1", port, local_addr=local))

    async def call(self, request: Any) -> Any:
        self.corr += 1
        self.writer.write(encode(request, self.corr))
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        frame = await self.reader.readexactly(size)
        if struct.unpack_from(">i", frame)[0] != self.corr:
            raise RuntimeError("correlation id mismatch")
        return decode(request, frame)

    def close(self) -> None:
        self.writer.close()


API_VERSIONS = ApiVersionsRequest(client_software_name="scale-bench", client_software_version="1")
METADATA_ALL = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


async def wait_metadata(port: int, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            c = await Conn.open(port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.01)
            continue
        try:
            return await c.call(METADATA_ALL)
        finally:
            c.close()


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))] if s else float("nan")


async def probe(port: int, n: int) -> list[float]:
    c = await Conn.open(port)
    lat = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            await c.call(METADATA_ALL)
            lat.append((time.perf_counter() - t0) * 1000)
    finally:
        c.close()
    return lat


# -- 1. idle connections ----------------------------------------------------------------------------------
async def open_idle(port: int, n: int, in_flight: int = 100) -> tuple[list[Conn], float]:
    sem = asyncio.Semaphore(in_flight)

    async def one() -> Conn:
        async with sem:
            c = await Conn.open(port)
            await c.call(API_VERSIONS)
            return c

    t0 = time.perf_counter()
    conns = await asyncio.gather(*(one() for _ in range(n)))
    return list(conns), time.perf_counter() - t0


async def try_extra(port: int, n: int, source: str | None = None, keep: bool = False) -> tuple[int, int]:
    """(answered, closed unanswered) of n connections each sending one ApiVersions (all held open until
    the last is tried when `keep`)."""
    answered = refused = 0
    held = []
    for _ in range(n):
        try:
            c = await Conn.open(port, source)
        except OSError:
            refused += 1
            continue
        try:
            await asyncio.wait_for(c.call(API_VERSIONS), 5)
            answered += 1
        except (OSError, asyncio.IncompleteReadError):
            refused += 1
        held.append(c)
        if not keep:
            c.close()
    for c in held:
        c.close()
    return answered, refused


async def connections_phase(b: Broker, n: int, probes: int, limit: int) -> dict[str, Any]:
    await probe(b.port, 50)  # warm-up: the Metadata path's code loaded
    await asyncio.sleep(0.5)
    base_lat = await probe(b.port, probes)
    # max.connections.per.ip: 127.0.0.2 (loopback too) is given PER_IP_2 by the overrides; 127.0.0.1 is not
    ip2 = await try_extra(b.port, PER_IP_2 + 3, source="127.0.0.2", keep=True)
    await asyncio.sleep(0.5)  # (the broker forgets them on its next turns)
    cpu0 = cpu_seconds(b.pid)
    await asyncio.sleep(IDLE_S)
    idle_cpu_none = (cpu_seconds(b.pid) - cpu0) / IDLE_S
    rss0 = rss_mib(b.pid)
    cpu0 = cpu_seconds(b.pid)
    conns, secs = await open_idle(b.port, n)
    accept_cpu = cpu_seconds(b.pid) - cpu0
    await asyncio.sleep(0.5)
    rss1 = rss_mib(b.pid)
    cpu0 = cpu_seconds(b.pid)
    await asyncio.sleep(IDLE_S)
    idle_cpu_n = (cpu_seconds(b.pid) - cpu0) / IDLE_S
    loaded_lat = await probe(b.port, probes)
    # the probe's connection is closed (the broker forgets it on its next turn): hold one open instead, so
    # N + 1 are counted while the extra ones knock
    await asyncio.sleep(0.5)
    holder = await Conn.open(b.port)
    await holder.call(API_VERSIONS)
    extra = 20
    answered, refused = await try_extra(b.port, extra)
    for c in conns:
        c.close()
    holder.close()
    await asyncio.sleep(1)
    after_answered, _ = await try_extra(b.port, 1)
    return {
        "n": n,
        "accept_per_s": n / secs,
        "open_s": secs,
        "accept_cpu_ms": accept_cpu / n * 1000,
        "rss0": rss0,
        "rss1": rss1,
        "kib_per_conn": (rss1 - rss0) * 1024 / n,
        "base_p50": pct(base_lat, 0.5),
        "base_p99": pct(base_lat, 0.99),
        "p50": pct(loaded_lat, 0.5),
        "p99": pct(loaded_lat, 0.99),
        "idle_cpu_none": idle_cpu_none,
        "idle_cpu_n": idle_cpu_n,
        "limit": limit,
        "extra": extra,
        "extra_answered": answered,
        "extra_refused": refused,
        "expected_answered": max(0, min(extra, limit - n - 1)),
        "after_close_answered": after_answered,
        "ip2_answered": ip2[0],
        "ip2_refused": ip2[1],
    }


# -- 2. groups --------------------------------------------------------------------------------------------
@dataclass
class GroupStats:
    heartbeats: int = 0
    synced: int = 0
    errors: Counter[int] = field(default_factory=Counter)


def join_request(group: str, member_id: str, metadata: bytes) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout=timedelta(seconds=30),
        rebalance_timeout=timedelta(seconds=30),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=metadata),),
    )


async def join_and_sync(
    c: Conn, group: str, member_id: str, metadata: bytes, stats: GroupStats
) -> tuple[str, int]:
    """Until this member is in a generation and has its assignment: (member id, generation)."""
    while True:
        r = await c.call(join_request(group, member_id, metadata))
        if r.error_code == MEMBER_ID_REQUIRED:
            member_id = r.member_id
            continue
        if r.error_code != 0:
            stats.errors[r.error_code] += 1
            if r.error_code == UNKNOWN_MEMBER_ID:
                member_id = ""
            await asyncio.sleep(0.1)
            continue
        member_id = r.member_id
        assignments = (
            tuple(SyncGroupRequestAssignment(member_id=m.member_id, assignment=b"") for m in r.members)
            if r.leader == member_id
            else ()
        )
        s = await c.call(
            SyncGroupRequest(
                group_id=group,
                generation_id=r.generation_id,
                member_id=member_id,
                group_instance_id=None,
                assignments=assignments,
            )
        )
        if s.error_code == 0:
            return member_id, r.generation_id
        stats.errors[s.error_code] += 1


async def heartbeating_member(
    c: Conn, group: str, hb_s: float, stats: GroupStats, stop: asyncio.Event
) -> None:
    member_id = ""
    try:
        while not stop.is_set():
            member_id, gen = await join_and_sync(c, group, member_id, b"m", stats)
            stats.synced += 1
            while not stop.is_set():
                await asyncio.sleep(hb_s)  # (not wait_for(stop.wait()): a task per beat slows 3,000 members)
                if stop.is_set():
                    break
                h = await c.call(
                    HeartbeatRequest(
                        group_id=group, generation_id=gen, member_id=member_id, group_instance_id=None
                    )
                )
                if h.error_code != 0:
                    stats.errors[h.error_code] += 1
                    break  # rejoin
                stats.heartbeats += 1
    finally:
        c.close()


async def rebalances(port: int, group: str, rounds: int) -> list[float]:
    """A 3-member group formed once, then `rounds` times all 3 rejoin with new metadata (so each join counts,
    leader's or not): ms from the first JoinGroup sent until the last SyncGroup answered."""
    conns = [await Conn.open(port) for _ in range(3)]
    stats = GroupStats()
    try:
        ids = list(await asyncio.gather(*(join_and_sync(c, group, "", b"r0", stats) for c in conns)))
        times = []
        for i in range(1, rounds + 1):
            t0 = time.perf_counter()
            ids = list(
                await asyncio.gather(
                    *(
                        join_and_sync(c, group, mid, b"r%d" % i, stats)
                        for c, (mid, _) in zip(conns, ids, strict=True)
                    )
                )
            )
            times.append((time.perf_counter() - t0) * 1000)
            if len({g for _, g in ids}) != 1:
                raise RuntimeError(f"members of {group} ended in different generations: {ids}")
        return times
    finally:
        for c in conns:
            c.close()


async def groups_phase(b: Broker, m: int, hb_ms: int, window: float, rounds: int) -> dict[str, Any]:
    await rebalances(b.port, "warm-up", 5)  # the group code loaded and __consumer_offsets written once
    alone = await rebalances(b.port, "measured-alone", rounds)
    cpu0 = cpu_seconds(b.pid)
    await asyncio.sleep(IDLE_S)
    idle_cpu = (cpu_seconds(b.pid) - cpu0) / IDLE_S
    stats, stop = GroupStats(), asyncio.Event()
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(100)  # as many connects in flight as the idle-connection phase's

    async def opened() -> Conn:
        async with sem:
            return await Conn.open(b.port)

    conns = await asyncio.gather(*(opened() for _ in range(3 * m)))
    tasks = [
        asyncio.ensure_future(heartbeating_member(c, f"g{i // 3}", hb_ms / 1000, stats, stop))
        for i, c in enumerate(conns)
    ]
    while stats.synced < 3 * m:
        if any(t.done() for t in tasks):
            for t in tasks:
                if t.done():
                    t.result()
        await asyncio.sleep(0.05)
    formed = time.perf_counter() - t0
    await asyncio.sleep(hb_ms / 1000 * 1.5)  # every member into its heartbeat rhythm
    hb0, cpu0, w0 = stats.heartbeats, cpu_seconds(b.pid), time.perf_counter()
    await asyncio.sleep(window)
    hb, cpu, secs = stats.heartbeats - hb0, cpu_seconds(b.pid) - cpu0, time.perf_counter() - w0
    errors_before = sum(stats.errors.values())
    loaded = await rebalances(b.port, "measured-loaded", rounds)
    stop.set()
    await asyncio.gather(*tasks)
    return {
        "m": m,
        "formed_s": formed,
        "hb": hb,
        "hb_per_s": hb / secs,
        "window_s": secs,
        "cpu": cpu,
        "idle_cpu": idle_cpu * secs,
        "us_per_hb": (cpu - idle_cpu * secs) / hb * 1e6 if hb else float("nan"),
        "cpu_share": cpu / secs,
        "alone_p50": statistics.median(alone),
        "alone_max": max(alone),
        "loaded_p50": statistics.median(loaded),
        "loaded_max": max(loaded),
        "errors": dict(stats.errors),
        "errors_in_window": errors_before,
    }


# -- 3. start-up ------------------------------------------------------------------------------------------
def fill(port: int, partitions: int, records: int = 10, size: int = 100, create: bool = True) -> int:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = f"127.0.0.1:{port}"
    per_topic = min(100, partitions)
    topics = {
        f"t{i:04d}": min(per_topic, partitions - i * per_topic) for i in range(-(-partitions // per_topic))
    }
    if create:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics(
            [NewTopic(t, p, 1) for t, p in topics.items()], operation_timeout=120
        ).values():
            f.result(timeout=300)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "acks": "all",
            "log_level": 0,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = b"x" * size
    for t, p in topics.items():
        for part in range(p):
            for _ in range(records):
                while True:
                    try:
                        producer.produce(t, payload, partition=part)
                        break
                    except BufferError:  # the client's queue is full: let it send
                        producer.poll(0.01)
        producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("records left undelivered")
    return len(topics)


async def timed_start(data: Path, overrides: dict[str, str], last: bool) -> tuple[float, float, int, float]:
    """Start on `data`: (s until Metadata answered, broker CPU s by then, partitions in the answer, stop s).
    The last start on a directory ends with SIGKILL (stop s: nan): nothing was written since the clean stop
    before it, and its own clean stop (as long as the first one, below) would only lengthen the run."""
    b = Broker(data, overrides).start()
    try:
        md = await wait_metadata(b.port)
        secs = time.perf_counter() - b.started
        cpu = cpu_seconds(b.pid)
    finally:
        if last:
            b.kill()
            stop_s = float("nan")
        else:
            stop_s = b.stop()
    parts = sum(len(t.partitions) for t in md.topics if not t.is_internal)
    return secs, cpu, parts, stop_s


async def startup_phase(
    tmp: Path, partitions: int, repeat: int, overrides: dict[str, str], records: int = 10, size: int = 100
) -> dict[str, Any]:
    big, empty = tmp / "big", tmp / "empty"
    big.mkdir()
    empty.mkdir()
    b = Broker(big, overrides).start()
    try:
        await wait_metadata(b.port)
        t0 = time.perf_counter()
        topics = fill(b.port, partitions, records, size)
        fill_s = time.perf_counter() - t0
    finally:
        first_stop = b.stop()
    rows: dict[str, list[tuple[float, float, int, float]]] = {"big": [], "empty": []}
    for i in range(repeat):  # the empty broker's first start is its first row (a start of one more broker
        # per run would pass the minute a default run may take when the machine is busy)
        rows["empty"].append(await timed_start(empty, overrides, i == repeat - 1))
        rows["big"].append(await timed_start(big, overrides, i == repeat - 1))
    return {"p": partitions, "topics": topics, "fill_s": fill_s, "first_stop_s": first_stop, **rows}


async def restarts(data: Path, repeat: int) -> None:
    """--start-dir: each start's figures, one line each (the directory is left cleanly stopped)."""
    for _ in range(repeat):
        load = os.getloadavg()[0]
        secs, cpu, parts, stop_s = await timed_start(data, OVERRIDES, False)
        print(
            f"start to Metadata answered {secs:.2f} s, broker CPU {cpu:.2f} s by then, {parts:,} partitions; "
            f"clean stop {stop_s:.2f} s; load average {load:.1f}",
            flush=True,
        )


async def populate(data: Path, partitions: int, records: int, size: int) -> float:
    """An empty or missing directory `data` given `partitions` partitions (topics of 100, none when 0) with
    `records` records of `size` B each (0: created only) by a broker started on it, then stopped cleanly
    (SIGTERM): the seconds the creation and fill took. A directory that holds anything is left as it is
    (0.0)."""
    data.mkdir(parents=True, exist_ok=True)
    if any(data.iterdir()):
        return 0.0
    b = Broker(data, OVERRIDES).start()
    try:
        await wait_metadata(b.port)
        t0 = time.perf_counter()
        if partitions > 0 and records > 0:
            fill(b.port, partitions, records, size)
        elif partitions > 0:
            create_topics(b.port, partitions)
        took = time.perf_counter() - t0
        print(f"created {partitions:,} partitions ({records} x {size} B each) in {took:.1f} s", flush=True)
    finally:
        b.stop()
    return took


async def idle(data: Path, partitions: int, seconds: float, settle: float, repeat: int, records: int,
               size: int, produce: int = 0) -> None:
    """--idle: a broker's CPU while nothing happens, one line per start of `data` (--start-dir). An empty or
    missing directory is first given --partitions partitions (topics of 100), with --fill-records records
    each (0: created only), and stopped. Each start waits for its Metadata answer, then `settle` s (the
    first housekeeping passes after a start visit every log), then reads utime + stime of the broker from
    /proc/<pid>/stat over `seconds` s (10 ms ticks), and stops with SIGTERM. `produce` > 0: first, after the
    start, that many records into each of the --partitions partitions (unflushed data in every log under
    the default flush settings, high watermarks moved), then the settle time."""
    await populate(data, partitions, records, size)
    for _ in range(repeat):
        b = Broker(data, OVERRIDES).start()
        try:
            md = await wait_metadata(b.port)
            parts = sum(len(t.partitions) for t in md.topics if not t.is_internal)
            if produce > 0:
                await asyncio.to_thread(fill, b.port, partitions, produce, size, False)
            await asyncio.sleep(settle)
            load0 = os.getloadavg()[0]
            cpu0, t0 = cpu_seconds(b.pid), time.perf_counter()
            await asyncio.sleep(seconds)
            cpu, secs = cpu_seconds(b.pid) - cpu0, time.perf_counter() - t0
            load1 = os.getloadavg()[0]
        finally:
            b.stop()
        what = f" ({produce} record(s) each produced after the start)" if produce else ""
        print(f"idle broker of {parts:,} partitions{what}: {cpu:.2f} s CPU in {secs:.1f} s = "
              f"{cpu / secs * 100:.2f} % of a core; load average {load0:.1f} -> {load1:.1f}", flush=True)


def create_topics(port: int, partitions: int) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    per_topic = min(100, partitions)
    topics = {f"t{i:04d}": min(per_topic, partitions - i * per_topic) for i in range(-(-partitions // per_topic))}
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    for f in admin.create_topics([NewTopic(t, p, 1) for t, p in topics.items()], operation_timeout=120).values():
        f.result(timeout=300)
    return len(topics)


# -- the run ------------------------------------------------------------------------------------------------
def raise_nofile(want: int) -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return f"RLIMIT_NOFILE {soft} (hard {hard}){' - CAPPED below the ' + str(want) + ' wanted' if soft < want else ''}"


def live_broker(data: Path, connections: int, groups: int) -> tuple[Broker, int]:
    """The broker of the connections and groups phases, started on a new directory `data`, and its
    `max.connections`: the connections phase holds N + 1 open, the groups phase 3 M + 3 (and 6 more may
    still be closing): room for them all."""
    limit = max(connections + 1, 3 * groups + 20)
    data.mkdir()
    limits = {"max.connections": str(limit), "max.connections.per.ip.overrides": f"127.0.0.2:{PER_IP_2}"}
    return Broker(data, OVERRIDES | limits).start(), limit


async def run(args: argparse.Namespace, tmp: Path) -> None:
    print(
        f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"{raise_nofile(max(args.connections, 3 * args.groups) + 200)} (the broker inherits it)",
        flush=True,
    )
    out: dict[str, Any] = {}
    t0 = time.perf_counter()

    def done(what: str) -> None:
        print(f"{what} done at {time.perf_counter() - t0:.0f} s", flush=True)

    if not args.skip_connections or not args.skip_groups:
        b, limit = live_broker(tmp / "live", args.connections, args.groups)
        try:
            await wait_metadata(b.port)
            if not args.skip_connections:
                out["conn"] = await connections_phase(b, args.connections, args.probes, limit)
                done("connections phase")
            if not args.skip_groups:
                out["groups"] = await groups_phase(
                    b, args.groups, args.heartbeat_ms, args.window, args.rebalances
                )
                done("groups phase")
        finally:
            b.stop()
    if not args.skip_startup:
        out["start"] = await startup_phase(
            tmp, args.partitions, args.repeat, OVERRIDES, args.fill_records, args.fill_size
        )
        done("start-up phase")
    report(out, args)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def report(out: dict[str, Any], args: argparse.Namespace) -> None:
    print()
    print(f"{'figure':62} {'baseline':>14} {'at scale':>14}")

    def row(name: str, base: str, scale: str) -> None:
        print(f"{name:62} {base:>14} {scale:>14}")

    if "conn" in out:
        c = out["conn"]
        n = f"{c['n']:,}"
        row("idle connections open", "0", n)
        row("broker RSS MiB", f"{c['rss0']:.1f}", f"{c['rss1']:.1f}")
        row("broker RSS KiB per idle connection", "", f"{c['kib_per_conn']:.1f}")
        row("accept rate conn/s (connect + ApiVersions, 100 in flight)", "", f"{c['accept_per_s']:,.0f}")
        row("  broker CPU ms per accepted connection (its ApiVersions too)", "", f"{c['accept_cpu_ms']:.2f}")
        row(
            "broker CPU while idle, % of a core",
            f"{c['idle_cpu_none'] * 100:.1f}",
            f"{c['idle_cpu_n'] * 100:.1f}",
        )
        row(f"probe Metadata p50 ms ({args.probes} round trips)", f"{c['base_p50']:.2f}", f"{c['p50']:.2f}")
        row("probe Metadata p99 ms", f"{c['base_p99']:.2f}", f"{c['p99']:.2f}")
        row(
            f"max.connections={c['limit']:,}: of {c['extra']} more, answered / closed",
            "",
            f"{c['extra_answered']} / {c['extra_refused']}",
        )
        row("  (expected answered)", "", f"{c['expected_answered']}")
        row("  a new connection after the idle ones closed: answered", "", f"{c['after_close_answered']}")
        row(
            f"max.connections.per.ip.overrides=127.0.0.2:{PER_IP_2}: of {PER_IP_2 + 3} from it, answered / closed",
            "",
            f"{c['ip2_answered']} / {c['ip2_refused']}",
        )
    if "groups" in out:
        g = out["groups"]
        row(f"classic groups x 3 members heartbeating every {args.heartbeat_ms} ms", "0", f"{g['m']:,}")
        row("  time for all of them to form (s)", "", f"{g['formed_s']:.1f}")
        row(
            f"  heartbeats answered in {args.window:.0f} s (per s)", "", f"{g['hb']:,} ({g['hb_per_s']:,.0f})"
        )
        row(
            "  broker CPU s in the window (idle broker's CPU for as long)",
            f"{g['idle_cpu']:.2f}",
            f"{g['cpu']:.2f}",
        )
        row("  broker CPU us per heartbeat (idle CPU taken off)", "", f"{g['us_per_hb']:.0f}")
        row("  broker CPU, % of a core", "", f"{g['cpu_share'] * 100:.0f}")
        row(
            f"one group's rebalance ms, median of {args.rebalances}",
            f"{g['alone_p50']:.1f}",
            f"{g['loaded_p50']:.1f}",
        )
        row("one group's rebalance ms, max", f"{g['alone_max']:.1f}", f"{g['loaded_max']:.1f}")
        if g["errors"]:
            codes = ", ".join(f"{int(k)} x{v}" for k, v in sorted(g["errors"].items()))
            row(f"  error codes the members saw (while forming): {codes}", "", "")
    if "start" in out:
        s = out["start"]
        row(
            f"start-up: partitions (topics of 100), {args.fill_records} x {args.fill_size} B each",
            "0",
            f"{s['p']:,}",
        )
        row(
            "  create + fill s; first clean stop (SIGTERM) s",
            "",
            f"{s['fill_s']:.1f}; {s['first_stop_s']:.1f}",
        )
        for i, (e, bg) in enumerate(zip(s["empty"], s["big"], strict=True), 1):
            what = "start (empty: its first)" if i == 1 else "start"
            row(f"  {what} {i}: s until Metadata answered", f"{e[0]:.2f}", f"{bg[0]:.2f}")
            row(f"  start {i}: broker CPU s by then", f"{e[1]:.2f}", f"{bg[1]:.2f}")
            row(
                f"  start {i}: partitions in the answer; clean stop s",
                f"{e[2]}; {e[3]:.1f}",
                f"{bg[2]:,}; {bg[3]:.1f}",
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--probes", type=int, default=500, help="Metadata round trips of the probe, each time")
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument(
        "--window", type=float, default=4.0, help="seconds of heartbeats the CPU is measured over"
    )
    ap.add_argument("--rebalances", type=int, default=20)
    # 500 by default: the clean stop of filled partitions takes 2.5-13 ms each (about 5 fsyncs; 27 s for 2,000
    # once at load 4), and a default run at 1,000 passed 60 s at load 5.6 on the shared 2-core machine
    ap.add_argument("--partitions", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=1, help="restarts of each broker, alternated")
    ap.add_argument(
        "--fill-records", type=int, default=10, help="start-up: records written into each partition"
    )
    ap.add_argument("--fill-size", type=int, default=100, help="start-up: bytes of each record's value")
    ap.add_argument("--skip-connections", action="store_true")
    ap.add_argument("--skip-groups", action="store_true")
    ap.add_argument("--skip-startup", action="store_true")
    ap.add_argument("--start-dir", type=Path, help="only time starts of this stopped broker's directory")
    ap.add_argument("--idle", type=float, metavar="SECONDS",
                    help="with --start-dir: the idle broker's CPU over SECONDS, each start (--repeat); an empty "
                         "directory first gets --partitions partitions with --fill-records records each")
    ap.add_argument("--settle", type=float, default=10.0, help="--idle: seconds after the start before sampling")
    ap.add_argument("--idle-produce", type=int, default=0, metavar="N",
                    help="--idle: N records into each partition after the start, before --settle")
    args = ap.parse_args()
    if args.idle is not None:
        if args.start_dir is None:
            ap.error("--idle needs --start-dir (the directory to create once and start again)")
        asyncio.run(idle(args.start_dir, args.partitions, args.idle, args.settle, args.repeat, args.fill_records,
                         args.fill_size, args.idle_produce))
        return
    if args.start_dir is not None:
        asyncio.run(restarts(args.start_dir, args.repeat))
        return
    with tempfile.TemporaryDirectory(prefix="kaflite-scale-") as d:
        asyncio.run(run(args, Path(d)))


if __name__ == "__main__":
    main()
