"""What security costs (issues 26 and 27): produce and consume throughput over SSL, SASL_PLAINTEXT and
SASL_SSL beside PLAINTEXT, connection set-up time per mechanism, and the cost of the ACL authorizer with
1,000 ACLs, each measured in the same run as its PLAINTEXT / no-authorizer baseline (cases in turn, `--repeat`
rounds, the median of each figure reported).

    .venv/bin/python bench/security_bench.py                       # 200k x 100 B per case
    .venv/bin/python bench/security_bench.py --records 50000 --connects 10     # a quick run

Each case starts one broker process (`python -m kaflite.server`, one listener of the case's protocol, the
certificates and users of server/security/testkit.py), creates a 6-partition topic, and measures with
confluent-kafka:
- produce: `--records` records of `--size` bytes, acks=all, linger.ms=5, time to the last delivery;
- consume: the same records read back by `assign` from the beginning;
- connect: the median, over `--connects` fresh clients, of the time from creating an AdminClient to its
  first Metadata answer (TCP, TLS handshake, SASL exchange, Metadata);
- the ACL cases: PLAINTEXT with `authorizer.class.name=kafka.security.authorizer.AclAuthorizer` and
  `--acls` ACLs (literal topic ACLs for other principals, prefixed ones, and the ALLOWs the bench's
  principal needs on its topic and group), beside the same broker without an authorizer.
Targets: SSL and SASL_SSL throughput >= 0.6x PLAINTEXT (issue 26); the authorizer with 1,000 ACLs costs
<= 10 % of produce and consume throughput (issue 27).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_bench import cpu_seconds, free_port, stop_process, wait_port  # noqa: E402

from kaflite.server.security.testkit import SecurityKit  # noqa: E402

TOPIC, PARTITIONS = "sec-bench", 6
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@dataclass
class Case:
    name: str
    security: str | None  # None: PLAINTEXT; else a SecurityKit protocol
    mechanism: str = "PLAIN"
    acls: int = 0  # > 0: the ACL authorizer with this many ACLs
    runs: list[dict[str, float]] = field(default_factory=list)

    @property
    def results(self) -> dict[str, float]:
        """The median of each figure over the runs."""
        return {k: statistics.median(r[k] for r in self.runs) for k in self.runs[0]}


def _start(case: Case, data_dir: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any], SecurityKit | None]:
    port = free_port()
    kit = SecurityKit(case.security, sasl_mechanism=case.mechanism) if case.security else None
    protocol = kit.protocol if kit else "PLAINTEXT"
    overrides = {"listeners": f"{protocol}://127.0.0.1:{port}", "log.dirs": str(data_dir)}
    if kit is not None:
        overrides.update(kit.prepare(data_dir))
    if case.acls:
        # nothing applies to the cluster at first, so the bench's principal may create the ACLs
        overrides.update({"authorizer.class.name": ACL_AUTHORIZER, "allow.everyone.if.no.acl.found": "true"})
    cmd = [sys.executable, "-m", "kaflite.server"]
    for k, v in overrides.items():
        cmd += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(data_dir / "broker.log", "wb"))
    wait_port(port, timeout=60)
    conf = kit.confluent(f"127.0.0.1:{port}") if kit else {"bootstrap.servers": f"127.0.0.1:{port}"}
    return proc, conf, kit


def _add_acls(conf: dict[str, Any], count: int) -> None:
    """`count` ACLs: the bench's own ALLOWs (User:ANONYMOUS on its topic and group, then the cluster, which
    ends allow.everyone for the cluster), the rest literal and prefixed topic ACLs of other principals."""
    admin = AdminClient(conf)
    me, anyhost = "User:ANONYMOUS", "*"
    own = [
        AclBinding(
            ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, me, anyhost, op, AclPermissionType.ALLOW
        )
        for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE, AclOperation.CREATE)
    ]
    own.append(
        AclBinding(
            ResourceType.GROUP,
            "sec-bench-",
            ResourcePatternType.PREFIXED,
            me,
            anyhost,
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
    )
    others = []
    for i in range(count - len(own) - 1):
        pattern = ResourcePatternType.PREFIXED if i % 4 == 0 else ResourcePatternType.LITERAL
        others.append(
            AclBinding(
                ResourceType.TOPIC,
                f"team-{i % 50}.orders-{i}",
                pattern,
                f"User:svc-{i % 97}",
                anyhost,
                AclOperation.WRITE if i % 2 else AclOperation.READ,
                AclPermissionType.ALLOW,
            )
        )
    cluster = [
        AclBinding(
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            me,
            anyhost,
            AclOperation.IDEMPOTENT_WRITE,
            AclPermissionType.ALLOW,
        )
    ]
    for batch_start in range(0, len(own) + len(others), 200):
        batch = (own + others)[batch_start : batch_start + 200]
        for fut in admin.create_acls(batch).values():
            fut.result(30)
    for fut in admin.create_acls(cluster).values():  # last: from here the cluster is no longer open
        fut.result(30)


def _produce(conf: dict[str, Any], n: int, size: int) -> float:
    p = Producer({**conf, "acks": "all", "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    failed = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, value, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - start
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed, first: {failed[0]}")
    return n / elapsed


def _consume(conf: dict[str, Any], n: int) -> float:
    c = Consumer({**conf, "group.id": "sec-bench-c", "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got, start, deadline = 0, time.perf_counter(), time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    c.close()
    if got < n:
        raise RuntimeError(f"consumed {got} of {n}")
    return n / elapsed


def _connect(conf: dict[str, Any], times: int) -> float:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        admin = AdminClient(conf)
        admin.list_topics(timeout=30)
        samples.append((time.perf_counter() - start) * 1000)
        del admin
    return statistics.median(samples)


def run_case(case: Case, args: argparse.Namespace) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="kaflite-secbench-"))
    proc, conf, kit = _start(case, data_dir)
    results: dict[str, float] = {}
    case.runs.append(results)
    try:
        if case.acls:
            _add_acls(conf, case.acls)
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        cpu0 = cpu_seconds(proc.pid)
        results["produce"] = _produce(conf, args.records, args.size)
        results["cpu_per_m"] = (cpu_seconds(proc.pid) - cpu0) / args.records * 1e6
        results["consume"] = _consume(conf, args.records)
        results["connect_ms"] = _connect(conf, args.connects)
    finally:
        stop_process(proc)
        if kit is not None:
            kit.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--connects", type=int, default=20)
    ap.add_argument("--acls", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="rounds over every case, in turn; medians reported")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        help="run only the cases whose name contains this (repeatable); PLAINTEXT always runs",
    )
    args = ap.parse_args()
    cases = [
        Case("PLAINTEXT", None),
        Case("SSL", "ssl"),
        Case("SASL_PLAINTEXT PLAIN", "sasl_plaintext", "PLAIN"),
        Case("SASL_PLAINTEXT SCRAM-SHA-256", "sasl_plaintext", "SCRAM-SHA-256"),
        Case("SASL_SSL SCRAM-SHA-512", "sasl_ssl", "SCRAM-SHA-512"),
        Case(f"PLAINTEXT + AclAuthorizer, {args.acls} ACLs", None, acls=args.acls),
    ]
    if args.only:
        cases = [cases[0]] + [c for c in cases[1:] if any(o in c.name for o in args.only)]
    load = os.getloadavg()[0]
    for round_ in range(args.repeat):  # rounds in turn: a load change on the machine touches every case alike
        for case in cases:
            print(f"... round {round_ + 1}: {case.name}", file=sys.stderr, flush=True)
            run_case(case, args)
    base = cases[0].results
    print(
        f"\n{args.records:,} records x {args.size} B, {PARTITIONS} partitions, acks=all; "
        f"connect: median of {args.connects}; medians of {args.repeat} rounds; load average at start "
        f"{load:.1f}, at end {os.getloadavg()[0]:.1f}\n"
    )
    print(
        "| case | produce msg/s | x PLAINTEXT | consume msg/s | x PLAINTEXT | broker CPU s / M produced "
        "| connect ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        r = case.results
        if args.repeat > 1:
            rounds = ", ".join(f"{x['produce']:,.0f}" for x in case.runs)
            print(f"<!-- {case.name} produce per round: {rounds} -->")
        print(
            f"| {case.name} | {r['produce']:,.0f} | {r['produce'] / base['produce']:.2f} | "
            f"{r['consume']:,.0f} | {r['consume'] / base['consume']:.2f} | {r['cpu_per_m']:.2f} | "
            f"{r['connect_ms']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
