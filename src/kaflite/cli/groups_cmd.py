"""`kaflite groups list | describe | delete | reset-offsets`, the kafka-consumer-groups.sh vocabulary.

Everything goes through confluent-kafka's AdminClient (and a Consumer for log end offsets), so the
commands work against any Kafka cluster. `describe` prints the table kafka-consumer-groups.sh
--describe prints:

    GROUP  TOPIC  PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID

one row per partition that is assigned to a member or has a committed offset ("-" where there is none),
preceded by "Consumer group 'g' has no active members." when the group is empty. `describe --state`
prints kafka-consumer-groups.sh --describe --state's table with the group's type last (TYPE: Classic, or
Consumer for a KIP-848 group, the names of --list --type; Kafka's tool shows the type only there).
`describe --history` prints the group's rebalance timeline, kept by a kaflite coordinator (not Kafka's
tool): one line per event, oldest first, with its time, cause, generation (group epoch of a KIP-848
group), member, and for a completed rebalance its duration and the partitions that moved; it is asked of
the group's coordinator (kaflite.cluster.group_history). `reset-offsets` changes committed offsets of an inactive group; without --execute it only shows the plan
(Kafka's --dry-run default) after Kafka's warning that no action was performed. `list --state` lists every
group with its state; `list --state Stable,Empty` only those states. Groups are GROUP or --group GROUP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    Bootstrap,
    admin_client,
    admin_result,
    client_config,
    describe_exception,
    fail,
    handle_errors,
)

__all__ = ["OffsetRow", "describe_lines", "register"]

groups_app = typer.Typer(
    help="List, describe, delete consumer groups and reset their offsets (like kafka-consumer-groups.sh).",
    no_args_is_help=True,
)

Timeout = Annotated[float, typer.Option("--timeout", help="Seconds to wait for the broker's answer.", min=0.1)]

GroupOption = Annotated[
    str | None, typer.Option("--group", "-g", help="The group (kafka-consumer-groups.sh spelling).")
]
AllGroups = Annotated[
    bool, typer.Option("--all-groups", help="Every consumer group (kafka-consumer-groups.sh --all-groups).")
]
# kafka-consumer-groups.sh --reset-offsets without --execute or --dry-run warns in these words.
DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. "
    "Add --execute to apply the new offsets; add --dry-run to only show them without this warning."
)

STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")


def register(app: typer.Typer) -> None:
    app.add_typer(groups_app, name="groups")


def _one_group(positional: str | None, option: str | None) -> str:
    if positional is not None and option is not None and positional != option:
        fail(f"give the group once, as GROUP or --group (got {positional!r} and {option!r})", EXIT_USAGE)
    group = option if option is not None else positional
    if not group:
        fail("missing the group: give it as GROUP or --group GROUP", EXIT_USAGE)
    return group


def _named_groups(positional: str | None, option: str | None, all_groups: bool) -> list[str]:
    """GROUP / --group checked before connecting; [] with --all-groups (listed by `_every_group`)."""
    if all_groups:
        if positional is not None or option is not None:
            fail("give --all-groups or groups by name, not both", EXIT_USAGE)
        return []
    return [_one_group(positional, option)]


def _every_group(admin: Any, timeout: float) -> list[str]:
    res = admin_result(admin.list_consumer_groups(request_timeout=timeout), timeout, "listing groups")
    return sorted(g.group_id for g in res.valid)


@dataclass(frozen=True)
class OffsetRow:
    group: str
    topic: str
    partition: int
    current: int | None
    log_end: int | None
    consumer_id: str | None = None
    host: str | None = None
    client_id: str | None = None

    @property
    def lag(self) -> int | None:
        if self.current is None or self.log_end is None:
            return None
        return max(self.log_end - self.current, 0)


def describe_lines(group: str, state: str, rows: list[OffsetRow]) -> list[str]:
    """kafka-consumer-groups.sh --describe output, one string per line (no trailing spaces)."""
    out: list[str] = []
    if state.lower() == "dead":
        return [f"Error: Consumer group '{group}' does not exist."]
    if state.lower() == "empty":
        out.append(f"Consumer group '{group}' has no active members.")
    if state.lower() in ("preparingrebalance", "completingrebalance"):
        out.append(f"Warning: Consumer group '{group}' is rebalancing.")
    out.append("")

    def cell(v: object) -> str:
        return "-" if v is None else str(v)

    table = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID")]
    for r in sorted(rows, key=lambda r: (r.topic, r.partition)):
        table.append((r.group, r.topic, str(r.partition), cell(r.current), cell(r.log_end), cell(r.lag),
                      cell(r.consumer_id), cell(r.host), cell(r.client_id)))
    # like Kafka: the variable columns size to their content, the numeric ones have fixed minimums
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for i, minimum in ((2, 10), (3, 15), (4, 15), (5, 15)):
        widths[i] = max(widths[i], minimum)
    for row in table:
        out.append(" ".join(v.ljust(widths[i]) for i, v in enumerate(row[:-1])) + " " + row[-1])
    return out


# --- plumbing -------------------------------------------------------------------------------------

def _type_name(group_type: Any) -> str:
    """confluent-kafka's ConsumerGroupType as Kafka's tool prints it (Classic, Consumer)."""
    name = getattr(group_type, "name", None) or "UNKNOWN"
    return str(name).capitalize()


def _state_name(state: Any) -> str:
    """confluent-kafka's ConsumerGroupState -> Kafka's state name."""
    name = getattr(state, "name", str(state)).upper()
    return {"PREPARING_REBALANCING": "PreparingRebalance", "COMPLETING_REBALANCING": "CompletingRebalance",
            "STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead"}.get(name, "Unknown")


def _watermarks(bootstrap: str, partitions: list[tuple[str, int]], timeout: float) -> dict[tuple[str, int], tuple[int, int]]:
    from confluent_kafka import Consumer, TopicPartition

    if not partitions:
        return {}
    consumer = Consumer(client_config(bootstrap, None, **{"group.id": "kaflite-cli-watermarks", "enable.auto.commit": False}))
    try:
        out = {}
        for topic, p in partitions:
            try:
                out[(topic, p)] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            except Exception:  # noqa: BLE001 - a deleted topic: show "-" rather than fail the whole view
                continue
        return out
    finally:
        consumer.close()


def _describe(admin: Any, group: str, timeout: float) -> Any:
    import concurrent.futures

    from kaflite.cli.coordinator_check import coordinator_problem

    what = f"describing group {group!r}"
    future = admin.describe_consumer_groups([group], request_timeout=timeout)[group]
    try:
        return future.result(timeout=timeout)
    except Exception as err:  # no answer, or an error: say why the coordinator is missing when it is
        why = coordinator_problem(admin, min(timeout, 5.0))
        if why is not None:
            fail(f"{what}: {why}")
        if isinstance(err, concurrent.futures.TimeoutError):
            fail(f"{what}: no answer from the broker within {timeout:g} s")
        fail(f"{what}: {describe_exception(err)}")


def _committed(admin: Any, group: str, timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    res = admin_result(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                    request_timeout=timeout)[group], timeout,
                  f"fetching offsets of group {group!r}")
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or [] if tp.offset >= 0}


# --- commands -------------------------------------------------------------------------------------

@groups_app.command("list")
@handle_errors
def list_groups(
    states_arg: Annotated[
        list[str] | None,
        typer.Argument(metavar="[STATE[,STATE...]]", help="With --state: only groups in these states."),
    ] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    state: Annotated[
        bool,
        typer.Option(
            "--state",
            help=f"Show each group's state (GROUP and STATE columns); followed by states ({', '.join(STATES)}, "
            "comma-separated), only groups in those states — as kafka-consumer-groups.sh --list --state.",
        ),
    ] = False,
    group_type: Annotated[
        bool,
        typer.Option(
            "--type",
            help="Show each group's type (classic or consumer, KIP-848) in a TYPE column — as "
            "kafka-consumer-groups.sh --list --type.",
        ),
    ] = False,
    timeout: Timeout = 15.0,
) -> None:
    """List consumer groups (one per line; with --state / --type, GROUP and STATE / TYPE columns)."""
    from confluent_kafka import ConsumerGroupState

    if states_arg and not state:
        fail(f"unexpected argument(s) {' '.join(states_arg)}; to filter by state give --state STATE[,STATE...]",
             EXIT_USAGE)
    wanted = []
    for s in (x.strip() for arg in states_arg or [] for x in arg.split(",")):
        if not s:
            continue
        match = [x for x in STATES if x.lower() == s.lower()]
        if not match:
            fail(f"--state: unknown group state {s!r}; allowed: {', '.join(STATES)}", EXIT_USAGE)
        wanted.append(match[0])
    admin = admin_client(bootstrap_server)
    kwargs: dict[str, Any] = {"request_timeout": timeout}
    if wanted:
        by_name = {"Empty": ConsumerGroupState.EMPTY, "PreparingRebalance": ConsumerGroupState.PREPARING_REBALANCING,
                   "CompletingRebalance": ConsumerGroupState.COMPLETING_REBALANCING,
                   "Stable": ConsumerGroupState.STABLE, "Dead": ConsumerGroupState.DEAD}
        kwargs["states"] = {by_name[s] for s in wanted}
    res = admin_result(admin.list_consumer_groups(**kwargs), timeout, "listing groups")
    listed = sorted(res.valid, key=lambda g: g.group_id)
    if state or group_type:
        width = max([len("GROUP"), *(len(g.group_id) for g in listed)])
        states = [_state_name(g.state) for g in listed]
        state_width = max([len("STATE"), *(len(x) for x in states)])
        header = ["GROUP".ljust(width)] + (["STATE".ljust(state_width)] if state else []) + (["TYPE"] if group_type else [])
        typer.echo(" ".join(header).rstrip())
        for g, st in zip(listed, states, strict=True):
            cells = [g.group_id.ljust(width)] + ([st.ljust(state_width)] if state else [])
            if group_type:
                cells.append(_type_name(getattr(g, "type", None)))
            typer.echo(" ".join(cells).rstrip())
    else:
        for g in listed:
            typer.echo(g.group_id)


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [" ".join(v.ljust(widths[i]) for i, v in enumerate(r[:-1])) + " " + r[-1] for r in rows]


@groups_app.command("describe")
@handle_errors
def describe(
    group_arg: Annotated[str | None, typer.Argument(metavar="GROUP", help="The consumer group.")] = None,
    group_opt: GroupOption = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    members: Annotated[bool, typer.Option("--members", help="One line per member instead of per partition.")] = False,
    state_only: Annotated[bool, typer.Option("--state", help="The group's coordinator, assignor, state, size and "
                                                            "type (Classic, or Consumer for a KIP-848 group).")] = False,
    history: Annotated[bool, typer.Option("--history", help="The group's rebalance timeline (a kaflite "
                                                         "coordinator's): who joined or left and why, each "
                                                         "rebalance's duration and moved partitions.")] = False,
    all_groups: AllGroups = False,
    timeout: Timeout = 15.0,
) -> None:
    """Offsets, lag and owners of a group's partitions (like kafka-consumer-groups.sh --describe)."""
    groups = _named_groups(group_arg, group_opt, all_groups)
    admin = admin_client(bootstrap_server)
    groups = groups or _every_group(admin, timeout)
    for i, group in enumerate(groups):
        if history:
            _history_one(admin, group, timeout, skip_dead=all_groups)
        else:
            _describe_one(admin, bootstrap_server, group, members, state_only, timeout, skip_dead=all_groups)
        if i < len(groups) - 1:
            typer.echo("")


def _history_one(admin: Any, group: str, timeout: float, skip_dead: bool) -> None:
    from kaflite.cluster.group_history import HEADER, GroupHistoryError, fetch_group_history, history_rows

    desc = _describe(admin, group, timeout)
    # DescribeGroups answers Dead for a share group id (KIP-932's groups are not classic ones): its history,
    # if its coordinator has one, is the share coordinator's
    dead = _state_name(desc.state) == "Dead"
    if dead and skip_dead:
        return
    coord = desc.coordinator
    if coord is None:
        if dead:
            fail(f"Consumer group '{group}' does not exist.")
        fail(f"rebalance history of group {group!r}: its coordinator is unknown")
    try:
        events = fetch_group_history(coord.host, coord.port, group, timeout)
    except GroupHistoryError as err:
        fail(f"rebalance history of group {group!r}: {err}")
    except (OSError, EOFError) as err:
        fail(f"rebalance history of group {group!r}: cannot reach its coordinator {coord.host}:{coord.port}: {err}")
    if dead and not events:
        fail(f"Consumer group '{group}' does not exist.")
    if not events:
        typer.echo(f"Consumer group '{group}' has no rebalance history.")
        return
    for line in ["", *_table([HEADER, *history_rows(events)])]:
        typer.echo(line.rstrip())


def _describe_one(admin: Any, bootstrap_server: str, group: str, members: bool, state_only: bool, timeout: float,
                  skip_dead: bool) -> None:
    desc = _describe(admin, group, timeout)
    state = _state_name(desc.state)
    if state == "Dead":
        if skip_dead:  # listed a moment ago, deleted since
            return
        fail(f"Consumer group '{group}' does not exist.")
    if state_only:
        coord = desc.coordinator
        where = f"{coord.host}:{coord.port} ({coord.id})" if coord is not None else "-"
        for line in ["", *_table([("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS", "TYPE"),
                                  (group, where, desc.partition_assignor or "", state, str(len(desc.members or [])),
                                   _type_name(getattr(desc, "type", None)))])]:
            typer.echo(line)
        return
    if members:
        table = [("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")]
        for mb in desc.members or []:
            parts = getattr(mb.assignment, "topic_partitions", None) or []
            table.append((group, mb.member_id, mb.host, mb.client_id, str(len(parts))))
        lines = [f"Consumer group '{group}' has no active members."] if len(table) == 1 else []
        for line in [*lines, "", *_table(table)]:
            typer.echo(line)
        return
    committed = _committed(admin, group, timeout)
    owners: dict[tuple[str, int], Any] = {}
    for member in desc.members or []:
        for tp in getattr(member.assignment, "topic_partitions", None) or []:
            owners[(tp.topic, tp.partition)] = member
    partitions = sorted(set(committed) | set(owners))
    marks = _watermarks(bootstrap_server, partitions, timeout)
    rows = []
    for key in partitions:
        member = owners.get(key)
        rows.append(OffsetRow(group, key[0], key[1], committed.get(key), marks[key][1] if key in marks else None,
                              member.member_id if member else None, member.host if member else None,
                              member.client_id if member else None))
    for line in describe_lines(group, state, rows):
        typer.echo(line)


@groups_app.command("delete")
@handle_errors
def delete(
    groups_arg: Annotated[
        list[str] | None, typer.Argument(metavar="GROUP...", help="The groups to delete (they must be empty).")
    ] = None,
    groups_opt: Annotated[list[str] | None, typer.Option("--group", "-g", help="A group (repeatable).")] = None,
    all_groups: AllGroups = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Delete empty consumer groups and their committed offsets."""
    groups = list(dict.fromkeys([*(groups_arg or []), *(groups_opt or [])]))
    if all_groups and groups:
        fail("give --all-groups or groups by name, not both", EXIT_USAGE)
    if not groups and not all_groups:
        fail("missing the group: give GROUP..., --group GROUP or --all-groups", EXIT_USAGE)
    admin = admin_client(bootstrap_server)
    if all_groups:
        groups = _every_group(admin, timeout)
        if not groups:
            typer.echo("There are no consumer groups to delete.")
            return
    futures = admin.delete_consumer_groups(list(groups), request_timeout=timeout)
    failed = []
    for g in groups:
        try:
            futures[g].result(timeout=timeout)
        except Exception as err:  # noqa: BLE001 - reported per group, like Kafka's tool
            failed.append(f"{g}: {describe_exception(err)}")
    ok = [g for g in groups if not any(f.startswith(f"{g}:") for f in failed)]
    if ok:
        typer.echo("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in ok) + ") was successful.")
    if failed:
        fail("Deletion of some consumer groups failed: " + "; ".join(failed))


@groups_app.command("reset-offsets")
@handle_errors
def reset_offsets(
    group_arg: Annotated[
        str | None, typer.Argument(metavar="GROUP", help="The consumer group (it must be inactive).")
    ] = None,
    group_opt: GroupOption = None,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", "-t", help="TOPIC or TOPIC:P,P,... (repeatable).")
    ] = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every topic the group has committed offsets for.")
    ] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Reset to the log start offset.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset to the log end offset.")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset", help="Reset to this offset.")] = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by", help="Move the committed offset by N.")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Apply the plan (default: only show it).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the plan (the default), quietly.")] = False,
    all_groups: AllGroups = False,
    timeout: Timeout = 15.0,
) -> None:
    """Reset committed offsets of an inactive group; prints GROUP TOPIC PARTITION NEW-OFFSET.

    Without --execute nothing changes: the plan is printed after Kafka's warning that no action was
    performed (--dry-run says so explicitly and drops the warning)."""
    if execute and dry_run:
        fail("--execute and --dry-run contradict each other; give one", EXIT_USAGE)

    chosen = [n for n, v in (("--to-earliest", to_earliest), ("--to-latest", to_latest),
                             ("--to-offset", to_offset is not None), ("--shift-by", shift_by is not None)) if v]
    if len(chosen) != 1:
        fail("reset-offsets: give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by"
             + (f" (got {', '.join(chosen)})" if chosen else ""), EXIT_USAGE)
    if bool(topic) == all_topics:
        fail("reset-offsets: give the scope, --topic TOPIC[:P,P...] (repeatable) or --all-topics", EXIT_USAGE)
    groups = _named_groups(group_arg, group_opt, all_groups)
    admin = admin_client(bootstrap_server)
    groups = groups or _every_group(admin, timeout)
    if not execute and not dry_run:
        typer.echo(DRY_RUN_WARNING, err=True)
    for group in groups:
        _reset_one(admin, bootstrap_server, group, topic or [], all_topics, to_earliest, to_latest, to_offset,
                   shift_by, execute, timeout)


def _reset_one(admin: Any, bootstrap_server: str, group: str, topic: list[str], all_topics: bool, to_earliest: bool,
               to_latest: bool, to_offset: int | None, shift_by: int | None, execute: bool, timeout: float) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    desc = _describe(admin, group, timeout)
    state = _state_name(desc.state)
    if state not in ("Empty", "Dead"):
        fail(f"Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.")
    meta = admin.list_topics(timeout=timeout)
    targets: list[tuple[str, int]] = sorted(_committed(admin, group, timeout)) if all_topics else []
    for spec in topic or []:
        name, _, parts = spec.partition(":")
        if name not in meta.topics or meta.topics[name].error is not None:
            fail(f"--topic: topic {name!r} does not exist")
        known = sorted(meta.topics[name].partitions)
        if parts:
            try:
                wanted = [int(p) for p in parts.split(",") if p.strip()]
            except ValueError:
                fail(f"--topic: expected TOPIC or TOPIC:P,P,..., got {spec!r}", EXIT_USAGE)
            missing = [p for p in wanted if p not in known]
            if missing:
                fail(f"--topic: {name} has no partition(s) {missing}; it has 0..{len(known) - 1}")
            targets += [(name, p) for p in wanted]
        else:
            targets += [(name, p) for p in known]
    marks = _watermarks(bootstrap_server, targets, timeout)
    committed = _committed(admin, group, timeout) if shift_by is not None else {}
    plan = []
    for key in targets:
        low, high = marks.get(key, (0, 0))
        if to_earliest:
            new = low
        elif to_latest:
            new = high
        elif to_offset is not None:
            new = to_offset
        else:
            new = committed.get(key, low) + (shift_by or 0)
        plan.append((key, min(max(new, low), high)))  # Kafka clamps into [log start, log end]
    width_g = max(len("GROUP"), len(group))
    width_t = max([len("TOPIC"), *(len(t) for (t, _), _ in plan)])
    typer.echo(f"{'GROUP'.ljust(width_g)} {'TOPIC'.ljust(width_t)} {'PARTITION'.ljust(10)} NEW-OFFSET")
    for (t, p), new in plan:
        typer.echo(f"{group.ljust(width_g)} {t.ljust(width_t)} {str(p).ljust(10)} {new}")
    if execute:
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, new) for (t, p), new in plan])
        res = admin_result(admin.alter_consumer_group_offsets([request], request_timeout=timeout)[group], timeout,
                      f"resetting offsets of group {group!r}")
        errors = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in res.topic_partitions or [] if tp.error]
        if errors:
            fail("some offsets were not reset: " + "; ".join(errors))
