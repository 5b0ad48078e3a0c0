"""`kaflite assign` and `kaflite partition`: Kafka's assignors and partitioners, offline.

assign: a group from flags or a JSON (or YAML, with PyYAML) file; prints each strategy's assignment as a
table, balance figures, and — with `--then-leave` / `--then-join` — the rebalance that follows and what
moves. The seeds' examples are one-liners, e.g.

    kaflite assign --topic t0:1 --topic t1:2 --topic t2:3 --member C0:t0 --member C1:t0,t1 \\
        --member C2:t0,t1,t2 --strategy sticky --strategy roundrobin --then-leave C0

partition: where key K lands for n partitions with each client's default partitioner, or how many of
many keys land differently for two clients (`--diff java librdkafka --keys 10000`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kaflite.assign.partitioners import CLIENT_PARTITIONERS, client_partition
from kaflite.assign.simulate import ALL_STRATEGIES, Group, Member, Rebalance, balance, moves, rebalance
from kaflite.assign.types import TopicPartition
from kaflite.cli.common import EXIT_USAGE, fail, handle_errors

__all__ = ["register", "parse_group"]

DEFAULT_STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky")


def _console() -> Console:
    return Console(highlight=False, soft_wrap=True)


# -- parsing -------------------------------------------------------------------------------------

def _parse_topic(spec: str) -> tuple[str, int]:
    name, sep, count = spec.rpartition(":")
    if not sep or not name or not count.isdigit() or int(count) < 1:
        fail(f"--topic: expected NAME:PARTITIONS (PARTITIONS >= 1), got {spec!r}", EXIT_USAGE)
    return name, int(count)


def _parse_member(spec: str, option: str = "--member") -> tuple[str, Member]:
    """NAME:topic1,topic2[@rack]"""
    name, sep, rest = spec.partition(":")
    rack = None
    if "@" in rest:
        rest, rack = rest.rsplit("@", 1)
    topics = [t for t in rest.split(",") if t]
    if not sep or not name or not topics:
        fail(f"{option}: expected NAME:TOPIC[,TOPIC...][@RACK], got {spec!r}", EXIT_USAGE)
    return name, Member(topics, rack or None)


def parse_group(data: dict[str, Any]) -> Group:
    """A group from a JSON/YAML document:
    {"topics": {"t0": 3}, "members": {"C0": {"topics": ["t0"], "rack": "a", "instance_id": null}},
     "partition_racks": {"t0-0": ["a", "b"]}}  (members may also be given as plain topic lists)."""
    if not isinstance(data, dict) or not isinstance(data.get("topics"), dict) or not isinstance(data.get("members"), dict):
        fail("group file: expected an object with 'topics' {name: partitions} and 'members' {name: ...}", EXIT_USAGE)
    topics: dict[str, int] = {}
    for t, n in data["topics"].items():
        if not isinstance(n, int) or n < 1:
            fail(f"group file: topic {t!r} needs a partition count >= 1, got {n!r}", EXIT_USAGE)
        topics[str(t)] = n
    members: dict[str, Member] = {}
    for m, spec in data["members"].items():
        if isinstance(spec, list):
            spec = {"topics": spec}
        if not isinstance(spec, dict) or not isinstance(spec.get("topics"), list):
            fail(f"group file: member {m!r} needs a 'topics' list", EXIT_USAGE)
        members[str(m)] = Member([str(t) for t in spec["topics"]], spec.get("rack"), spec.get("instance_id"))
    racks: dict[TopicPartition, list[str | None]] = {}
    for key, rs in (data.get("partition_racks") or {}).items():
        try:
            racks[TopicPartition.parse(key)] = list(rs)
        except ValueError as err:
            fail(f"group file: partition_racks: {err}", EXIT_USAGE)
    return Group(topics, members, racks)


def _load_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as err:
        fail(f"--file: cannot read {path}: {err.strerror or err}", EXIT_USAGE)
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            fail("--file: YAML needs PyYAML (pip install pyyaml); JSON works without it", EXIT_USAGE)
        try:
            return dict(yaml.safe_load(text))
        except Exception as err:
            fail(f"--file: {path} is not valid YAML: {err}", EXIT_USAGE)
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as err:
        fail(f"--file: {path} is not valid JSON: {err}", EXIT_USAGE)
    return dict(loaded) if isinstance(loaded, dict) else {}


def _replica_racks(specs: list[str], topics: dict[str, int]) -> dict[TopicPartition, list[str | None]]:
    """--replica-racks t0=a,b,c : partition i of t0 has its replica on rack list[i % len(list)]."""
    out: dict[TopicPartition, list[str | None]] = {}
    for spec in specs:
        topic, sep, racks = spec.partition("=")
        rs = [r for r in racks.split(",") if r]
        if not sep or topic not in topics or not rs:
            fail(f"--replica-racks: expected TOPIC=RACK[,RACK...] for a --topic, got {spec!r}", EXIT_USAGE)
        for i in range(topics[topic]):
            out[TopicPartition(topic, i)] = [rs[i % len(rs)]]
    return out


# -- printing ------------------------------------------------------------------------------------

def _fmt(tps: list[TopicPartition], seed: bool) -> str:
    return ", ".join(f"{tp.topic}p{tp.partition}" if seed else str(tp) for tp in tps) or "-"


def _print_assignment(console: Console, title: str, group: Group, assignment: dict[str, list[TopicPartition]],
                      seed: bool, rnd: Any = None) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("member")
    table.add_column("subscribed")
    table.add_column("partitions")
    table.add_column("#", justify="right")
    if rnd is not None:
        table.add_column("revoked (this round)")
    for m, spec in group.members.items():
        row = [m + (f" @{spec.rack}" if spec.rack else ""), ",".join(spec.topics),
               _fmt(assignment.get(m, []), seed), str(len(assignment.get(m, [])))]
        if rnd is not None:
            row.append(_fmt(rnd.revoked.get(m, []), seed))
        table.add_row(*row)
    console.print(table)
    b = balance(group, assignment)
    pending = "not yet handed over (revoked this round)" if rnd is not None else "[bold red]unassigned[/]"
    console.print(f"  balance: min {b.min}, max {b.max}, spread {b.spread}"
                  + (f", {b.unassigned} subscribed partition(s) {pending}" if b.unassigned else ""))


def _print_rebalance(console: Console, label: str, group: Group, reb: Rebalance, seed: bool) -> None:
    if len(reb.rounds) == 1:
        _print_assignment(console, f"{reb.strategy}: {label}", group, reb.final, seed)
        return
    for i, rnd in enumerate(reb.rounds, 1):
        what = "revoke first" if i == 1 else ("follow-up rebalance" if i == len(reb.rounds) else "follow-up")
        _print_assignment(console, f"{reb.strategy}: {label}, round {i} ({what})", group, rnd.assignment, seed, rnd)


def _print_moves(console: Console, before: dict[str, list[TopicPartition]], after: dict[str, list[TopicPartition]],
                 seed: bool) -> None:
    moved = moves(before, after)
    kept = sum(1 for m, tps in before.items() for tp in tps if tp in set(after.get(m, [])))
    console.print(f"  moves: {len(moved)} partition(s) change owner, {kept} stay put")
    for tp, old, new in moved:
        name = f"{tp.topic}p{tp.partition}" if seed else str(tp)
        console.print(f"    {name}: {old or '(unowned)'} -> {new or '(unassigned)'}")


# -- commands ------------------------------------------------------------------------------------

@handle_errors
def assign_command(
    topic: Annotated[list[str] | None, typer.Option("--topic", "-t", help="NAME:PARTITIONS (repeatable).")] = None,
    member: Annotated[list[str] | None, typer.Option("--member", "-m",
        help="NAME:TOPIC,TOPIC... with optional @RACK at the end, in join order (repeatable).")] = None,
    strategy: Annotated[list[str] | None, typer.Option("--strategy", "-s",
        help=f"Strategy (repeatable): {', '.join(ALL_STRATEGIES)}. Default: {', '.join(DEFAULT_STRATEGIES)}.")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Group as JSON (or YAML) instead of flags.")] = None,
    then_leave: Annotated[list[str] | None, typer.Option("--then-leave", help="Member(s) leaving next.")] = None,
    then_join: Annotated[list[str] | None, typer.Option("--then-join",
        help="NAME:TOPIC,TOPIC... (optional @RACK) joining next.")] = None,
    then_grow: Annotated[list[str] | None, typer.Option("--then-grow",
        help="NAME:PARTITIONS: a topic growing to this many partitions next.")] = None,
    replica_racks: Annotated[list[str] | None, typer.Option("--replica-racks",
        help="TOPIC=RACK,RACK...: partition i's replica on rack number i mod n (rack-aware assignment).")] = None,
    seed_notation: Annotated[bool, typer.Option("--seed-notation", help="Print t0p1 instead of t0-1.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    html: Annotated[Path | None, typer.Option("--html", help="Also write the assignment lab's report (every "
        "strategy side by side, drawn as SVG, one self-contained file) to this path.")] = None,
) -> None:
    """Show how Kafka's assignors split partitions among a group's members, and what moves when
    members join or leave."""
    if html is not None:
        _html_renderer()  # before any output: a missing extra is said first, not after the tables
    if file is not None:
        group = parse_group(_load_file(file))
    else:
        if not topic or not member:
            fail("give the group with --topic NAME:N and --member NAME:TOPICS (or --file group.json)", EXIT_USAGE)
        topics = dict(_parse_topic(t) for t in topic)
        members = dict(_parse_member(m) for m in member)
        group = Group(topics, members)
    if replica_racks:
        group.partition_racks.update(_replica_racks(replica_racks, group.topics))
    for name, m in group.members.items():
        unknown = [t for t in m.topics if t not in group.topics]
        if unknown:
            fail(f"member {name} subscribes to unknown topic(s) {', '.join(unknown)}; "
                 f"topics: {', '.join(group.topics)}", EXIT_USAGE)
    strategies = list(strategy or DEFAULT_STRATEGIES)
    bad = [s for s in strategies if s not in ALL_STRATEGIES]
    if bad:
        fail(f"--strategy: unknown {', '.join(bad)}; allowed: {', '.join(ALL_STRATEGIES)}", EXIT_USAGE)
    after = group
    try:
        if then_leave:
            after = after.without(*then_leave)
        if then_join:
            after = after.with_members(dict(_parse_member(j, "--then-join") for j in then_join))
    except ValueError as err:
        fail(str(err), EXIT_USAGE)
    grow = dict(_parse_topic(g) for g in then_grow or [])
    for t, n in grow.items():
        if t not in group.topics or n < group.topics[t]:
            fail(f"--then-grow: {t}:{n} must name a --topic and not shrink it "
                 f"(topics: {', '.join(f'{k}:{v}' for k, v in group.topics.items())})", EXIT_USAGE)
    if grow:
        after = Group({**after.topics, **grow}, after.members, after.partition_racks)
    changed = bool(then_leave or then_join or grow)

    results: list[dict[str, Any]] = []
    console = _console()
    for s in strategies:
        first = rebalance(s, group)
        entry: dict[str, Any] = {"strategy": s, "assignment": _json(first.final)}
        if not as_json:
            _print_rebalance(console, "initial assignment", group, first, seed_notation)
        if changed:
            second = rebalance(s, after, first.final)
            entry["after"] = {"rounds": [_json(r.assignment) for r in second.rounds],
                              "moves": [[str(tp), o, n] for tp, o, n in moves(first.final, second.final)]}
            if not as_json:
                what = ", ".join([f"{m} leaves" for m in then_leave or []] +
                                 [f"{j.split(':')[0]} joins" for j in then_join or []] +
                                 [f"{t} grows to {n} partitions" for t, n in grow.items()])
                _print_rebalance(console, f"after {what}", after, second, seed_notation)
                _print_moves(console, first.final, second.final, seed_notation)
        if not as_json:
            console.print()
        results.append(entry)
    if as_json:
        typer.echo(json.dumps(results, indent=2))
    if html is not None:
        _write_html(html, group, then_leave or [], [_parse_member(j, "--then-join") for j in then_join or []],
                    grow, strategy, as_json)


def _html_renderer() -> Any:
    """kaflite.console.report.lab_report_html, or a one-line usage failure naming the missing extra."""
    try:
        import jinja2  # noqa: F401 - imported by kaflite.console.render only when a page is rendered

        from kaflite.console.report import lab_report_html
    except ImportError as err:
        fail(f"--html needs the console extra ({err.name or 'jinja2'} is missing): pip install 'kaflite[console]'",
             EXIT_USAGE)
    return lab_report_html


def _write_html(path: Path, group: Group, leave: list[str], join: list[tuple[str, Member]], grow: dict[str, int],
                strategy: list[str] | None, quiet: bool) -> None:
    """The console's lab report (kaflite.console.report); all six strategies unless --strategy is given."""
    from kaflite.console.lab import LAB_STRATEGIES, Change

    page = _html_renderer()(group, Change(list(leave), dict(join), dict(grow)), strategy or LAB_STRATEGIES)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as err:
        fail(f"--html: cannot write {path}: {err.strerror or err}")
    typer.echo(f"wrote {path} ({len(page):,} bytes)", err=quiet)  # stdout stays pure JSON with --json


def _json(a: dict[str, list[TopicPartition]]) -> dict[str, list[str]]:
    return {m: [str(tp) for tp in v] for m, v in a.items()}


@handle_errors
def partition_command(
    key: Annotated[str | None, typer.Argument(help="The record key (UTF-8 text, or hex with --hex).")] = None,
    num_partitions: Annotated[int, typer.Option("--partitions", "-n", min=1, help="Number of partitions.")] = 1,
    client: Annotated[list[str] | None, typer.Option("--client", "-c",
        help=f"Client(s) to show: {', '.join(CLIENT_PARTITIONERS)}. Default: all.")] = None,
    hex_key: Annotated[bool, typer.Option("--hex", help="KEY is hex-encoded bytes.")] = False,
    diff: Annotated[tuple[str, str] | None, typer.Option("--diff", help="Compare two clients over many keys.")] = None,
    keys: Annotated[int, typer.Option("--keys", min=1, help="With --diff: how many generated keys (key-0, key-1, ...).")] = 10000,
    keys_file: Annotated[Path | None, typer.Option("--keys-file", help="With --diff: one key per line.")] = None,
    show: Annotated[int, typer.Option("--show", min=0, help="With --diff: how many differing keys to list.")] = 10,
) -> None:
    """Where a key lands for each client's default partitioner (Java murmur2, librdkafka CRC32 /
    murmur2 / FNV-1a, Sarama FNV-1a, the seeds' String.hashCode), or which keys land differently."""
    console = _console()
    clients = list(client or CLIENT_PARTITIONERS)
    bad = [c for c in clients + list(diff or ()) if c not in CLIENT_PARTITIONERS]
    if bad:
        fail(f"unknown client {', '.join(bad)}; allowed: {', '.join(CLIENT_PARTITIONERS)}", EXIT_USAGE)
    if diff is not None:
        a, b = diff
        if keys_file is not None:
            try:
                key_list = [line.rstrip("\n").encode() for line in keys_file.read_text().splitlines()]
            except OSError as err:
                fail(f"--keys-file: cannot read {keys_file}: {err.strerror or err}", EXIT_USAGE)
        else:
            key_list = [f"key-{i}".encode() for i in range(keys)]
        differing = [(k, client_partition(a, k, num_partitions), client_partition(b, k, num_partitions))
                     for k in key_list]
        differing = [d for d in differing if d[1] != d[2]]
        pct = 100.0 * len(differing) / max(1, len(key_list))
        console.print(f"{len(differing)} of {len(key_list)} keys ({pct:.1f}%) land on a different partition "
                      f"with {a} than with {b} ({num_partitions} partitions)")
        if differing and show:
            table = Table()
            table.add_column("key")
            table.add_column(a, justify="right")
            table.add_column(b, justify="right")
            for k, pa, pb in differing[:show]:
                table.add_row(k.decode("utf-8", "replace"), _p(pa), _p(pb))
            console.print(table)
        return
    if key is None:
        fail("give a KEY (or --diff CLIENT_A CLIENT_B)", EXIT_USAGE)
    try:
        data = bytes.fromhex(key) if hex_key else key.encode("utf-8")
    except ValueError:
        fail(f"--hex: {key!r} is not hex", EXIT_USAGE)
    table = Table(title=f"key {key!r} with {num_partitions} partition(s)", title_justify="left")
    table.add_column("client")
    table.add_column("partition", justify="right")
    table.add_column("how")
    for c in clients:
        table.add_row(c, _p(client_partition(c, data, num_partitions)), CLIENT_PARTITIONERS[c].description)
    console.print(table)


def _p(p: int | None) -> str:
    return "random" if p is None else str(p)


def register(app: typer.Typer) -> None:
    app.command("assign")(assign_command)
    app.command("partition")(partition_command)

