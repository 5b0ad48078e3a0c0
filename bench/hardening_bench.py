"""Hardening benchmark: broker RSS and a healthy client's latency under each attack, kaflite beside Tansu
(Rust, memory storage; started with ../shared/peers/tansu.sh) where it can take the same input.

    .venv/bin/python bench/hardening_bench.py                       # 1,000,000 fuzz inputs on kaflite
    .venv/bin/python bench/hardening_bench.py --fuzz-inputs 100000 --tansu-fuzz-inputs 20000 --no-tansu

Attacks (the same bytes for both brokers):
- version-32767: 200 connections, each one 20-byte request header naming api version 32767 of api key i % 90;
- non-readers: 20 connections that each Fetch a 60 MiB partition and never read, plus 3 readers at 0.5 MB/s;
- fuzz: mutated frames captured from real clients (tests/hardening/fuzz.py), each waiting for its answer or
  its close.
For each: RSS before / peak / after (VmRSS of the broker process, sampled every 0.2 s) and the healthy
client's latency (one Metadata request on its own connection every 50 ms: p50, p99, max, failures).
The machine is shared with other work: the numbers are for comparing the two brokers in the same run.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "hardening"))

from attacks import SlowReader, fill_topic, non_readers  # noqa: E402
from brokerproc import BrokerProcess, rss_mib  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from fuzz import MetadataProbe, run  # noqa: E402

MIB = 1024 * 1024


def tansu_script() -> Path | None:
    for base in (REPO.parent, REPO.parent.parent, Path("/work")):
        p = base / "shared" / "peers" / "tansu.sh"
        if p.exists():
            return p
    return None


class Target:
    def __init__(self, name: str, port: int, pid: int, stop: Callable[[], None]) -> None:
        self.name, self.port, self.pid, self.stop = name, port, pid, stop

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return Path(f"/proc/{self.pid}").exists()


class Watch:
    """Samples RSS every 0.2 s and probes the broker every 50 ms while an attack runs."""

    def __init__(self, t: Target) -> None:
        self.t = t
        self.rss: list[float] = []
        self.lat: list[float] = []
        self.failures = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._rss, daemon=True), threading.Thread(target=self._probe, daemon=True)]

    def _rss(self) -> None:
        while not self.stop.is_set():
            try:
                self.rss.append(rss_mib(self.t.pid))
            except (OSError, RuntimeError):
                return
            time.sleep(0.2)

    def _probe(self) -> None:
        probe = MetadataProbe(self.t.port, "healthy")
        while not self.stop.is_set():
            try:
                self.lat.append(probe())
            except Exception:  # noqa: BLE001 - counted
                self.failures += 1
            time.sleep(0.05)
        probe.close()

    def __enter__(self) -> Watch:
        for th in self.threads:
            th.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for th in self.threads:
            th.join(10)


def attack_v32767(t: Target) -> str:
    for i in range(200):
        body = struct.pack(">hhih", i % 90, 32767, i, 4) + b"evil" + b"\0\0"
        try:
            with socket.create_connection(("127.0.0.1", t.port), 5) as s:
                s.settimeout(10)
                s.sendall(struct.pack(">i", len(body)) + body)
                try:
                    s.recv(1 << 16)
                except OSError:
                    pass
        except OSError:
            pass
    return "200 frames"


def attack_non_readers(t: Target) -> str:
    socks = non_readers(t.port, "big", 20)
    slow = [SlowReader(t.port, "big") for _ in range(3)]
    for r in slow:
        r.start()
    time.sleep(15)
    for r in slow:
        r.stop.set()
    for s in socks:
        s.close()
    return f"slow readers got {sum(r.received for r in slow) / MIB:.1f} MiB in 15 s"


def attack_fuzz(t: Target, inputs: int, seed: int) -> str:
    from kaflite.server.handlers import load_registry

    stats = run(t.port, inputs, seed, load_registry().ranges())
    return (f"{stats.inputs:,} inputs in {stats.seconds:.0f} s ({stats.answered:,} answered, {stats.closed:,} "
            f"closed, {stats.silent:,} silent)")


def measure(t: Target, name: str, attack: Callable[[], str]) -> dict[str, object]:
    time.sleep(1)
    before = rss_mib(t.pid)
    with Watch(t) as w:
        note = attack()
        time.sleep(1)
    after = rss_mib(t.pid) if t.alive() else float("nan")
    lat = sorted(w.lat)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan")
    return {"broker": t.name, "attack": name, "rss_before": before, "rss_peak": max(w.rss, default=before),
            "rss_after": after, "p50_ms": statistics.median(lat) if lat else float("nan"), "p99_ms": p99,
            "max_ms": lat[-1] if lat else float("nan"), "probe_failures": w.failures, "alive": t.alive(), "note": note}


def prepare(t: Target) -> None:
    admin = AdminClient({"bootstrap.servers": t.bootstrap})
    fs = admin.create_topics([NewTopic(n, p, 1) for n, p in (("big", 1), ("healthy", 1), ("cap-a", 4),
                                                               ("cap-b", 1), ("cap-k", 2))])
    for f in fs.values():
        f.result(timeout=30)
    fill_topic(t.bootstrap, "big", 60 * MIB)


def start_kaflite(tmp: Path) -> tuple[Target, BrokerProcess]:
    b = BrokerProcess(tmp / "data", {"auto.create.topics.enable": "false",
                                     "log.flush.interval.messages": "9223372036854775807"})
    b.start()
    return Target("kaflite", b.port, b.pid, lambda: b.stop()), b


def start_tansu(script: Path) -> Target:
    out = subprocess.run([str(script), "start"], capture_output=True, text=True, timeout=300, check=True).stdout
    info = dict(kv.split("=", 1) for kv in out.split())
    pid = int(info["PID"])
    return Target("tansu", int(info["BOOTSTRAP"].rsplit(":", 1)[1]), pid,
                  lambda: subprocess.run([str(script), "stop", str(pid)], timeout=30) and None)


def bench(t: Target, fuzz_inputs: int, seed: int) -> list[dict[str, object]]:
    prepare(t)
    rows = [measure(t, "version-32767", lambda: attack_v32767(t))]
    if t.alive():
        rows.append(measure(t, "non-readers", lambda: attack_non_readers(t)))
    if t.alive():
        rows.append(measure(t, f"fuzz x{fuzz_inputs:,}", lambda: attack_fuzz(t, fuzz_inputs, seed)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fuzz-inputs", type=int, default=1_000_000)
    ap.add_argument("--tansu-fuzz-inputs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--no-tansu", action="store_true")
    args = ap.parse_args()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as d:
        t, proc = start_kaflite(Path(d))
        try:
            rows += bench(t, args.fuzz_inputs, args.seed)
            log = proc.log()
            rows[-1]["note"] = f"{rows[-1]['note']}; tracebacks in the broker log: {log.count('Traceback')}, " \
                               f"ERROR lines: {sum(1 for line in log.splitlines() if ' ERROR ' in line)}"
        finally:
            proc.stop()
    script = tansu_script()
    if not args.no_tansu and script is not None:
        t = start_tansu(script)
        try:
            rows += bench(t, args.tansu_fuzz_inputs, args.seed)
        finally:
            t.stop()
    print(f"{'broker':8} {'attack':18} {'RSS before':>10} {'peak':>8} {'after':>8} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'max ms':>8} {'fails':>6} alive  note")
    for r in rows:
        print(f"{r['broker']:8} {r['attack']:18} {r['rss_before']:10.1f} {r['rss_peak']:8.1f} {r['rss_after']:8.1f} "
              f"{r['p50_ms']:8.2f} {r['p99_ms']:8.2f} {r['max_ms']:8.1f} {r['probe_failures']:6} "
              f"{'yes' if r['alive'] else 'NO':5}  {r['note']}")
    print("(RSS in MiB; the machine was shared with other work while this ran)")


if __name__ == "__main__":
    main()
