"""`kaflite share-groups`, Kafka's kafka-share-groups.sh with its flags: one action of --list, --describe,
--delete, --reset-offsets, --delete-offsets.

The requests go over the wire with the kio schemas (confluent-kafka's AdminClient has no share-group APIs),
each to the broker Kafka's Admin client sends it to: ListGroups (type "share") to every live broker (from
Metadata) and the answers merged; FindCoordinator (key type GROUP) names the group's coordinator, which
gets ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets and
DeleteGroups; ListOffsets goes to each partition's leader. Plain connections only (the raw client speaks
neither TLS nor SASL): a --command-config asking for another security.protocol is refused by name.

Output as kafka-share-groups.sh prints it (Kafka 4.1/4.2's ShareGroupCommand):

    --list                      one group id a line; with --state: GROUP  STATE
    --describe [--offsets]      GROUP  TOPIC  PARTITION  START-OFFSET  (--verbose: LEADER-EPOCH before it)
    --describe --members        GROUP  CONSUMER-ID  HOST  CLIENT-ID  #PARTITIONS  ASSIGNMENT (--verbose: MEMBER-EPOCH)
    --describe --state          GROUP  COORDINATOR (ID)  STATE  #MEMBERS (--verbose: GROUP-EPOCH ASSIGNMENT-EPOCH)
    --reset-offsets             GROUP  TOPIC  PARTITION  NEW-OFFSET (after the change with --execute)
    --delete-offsets            TOPIC  STATUS

Rules (tests/cli/test_share_groups_cli.py):
- exactly one action; a flag that action does not take, or a missing one, is a usage error (exit 2) naming
  the flag and what the action takes, as ShareGroupCommandOptions.checkArgs words it; no traceback;
- --reset-offsets needs --group, one of --topic / --all-topics, one of --to-earliest / --to-latest /
  --to-datetime, and one of --dry-run / --execute; it refuses a group with members ("Share group 'g' is
  not empty."); --to-datetime takes Kafka's 'YYYY-MM-DDThh:mm:ss.sss' (an offset in the zone given, else
  the local one), a partition without a record from then on falling back to its log end offset (Kafka's
  "Warn: Partition P from topic T is empty. Falling back to latest known offset.");
- --timeout is in milliseconds, as in Kafka (default 30000);
- a group that does not exist: --describe prints "Error: Share group 'g' does not exist." and exits 1; a
  share group known only from its durable state (a broker restarted before any member joined again) is
  described as Empty.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from kio.schema.types import GroupId, TopicName

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_USAGE,
    Bootstrap,
    error_name,
    fail,
    handle_errors,
)
from kaflite.cli.wire_cluster import WireCluster

__all__ = ["parse_datetime", "register"]

SHARE_STATES = ("Empty", "Stable", "Reconciling", "Dead")  # Kafka's share states; Reconciling is kaflite's
_EARLIEST, _LATEST = -2, -1


def register(app: typer.Typer) -> None:
    app.command("share-groups")(share_groups)


def _code(v: Any) -> int:
    return int(v.value if hasattr(v, "value") else v)


def _error(code: Any, message: str | None) -> str:
    """Kafka's way of saying an error: the broker's message, else the error's name."""
    return message or error_name(code)


class _Cluster(WireCluster):
    """The brokers behind --bootstrap-server, and a group's coordinator."""

    def brokers(self) -> dict[int, tuple[str, int]]:
        return self.broker_addresses(self.metadata(()))

    def coordinator(self, group: str) -> tuple[int, tuple[str, int]]:
        from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
        from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
        from kio.static.primitive import i8

        r = self.send_any(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)), FindCoordinatorResponse)
        (c,) = r.coordinators
        if _code(c.error_code):
            fail(f"finding the coordinator of group {group!r}: {_error(c.error_code, c.error_message)}")
        return int(c.node_id), (str(c.host), int(c.port))


def _check_security(command_config: Path | None) -> None:
    from kaflite.cli.kafka_flags import command_config as command_config_settings

    settings = command_config_settings(command_config)
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    if protocol != "PLAINTEXT":
        fail(f"--command-config: security.protocol={protocol}: kaflite share-groups speaks PLAINTEXT only "
             "(its wire client has no TLS or SASL)", EXIT_USAGE)


def _usage(message: str) -> None:
    fail(message, EXIT_USAGE)


# --- the listings ------------------------------------------------------------------------------------

def _listed(cluster: _Cluster, states: Sequence[str] = ()) -> dict[str, str]:
    """group id -> state of every share group, asked of every live broker (as Kafka's Admin listGroups)."""
    from kio.schema.list_groups.v5.request import ListGroupsRequest
    from kio.schema.list_groups.v5.response import ListGroupsResponse

    out: dict[str, str] = {}
    for address in cluster.brokers().values():
        r = cluster.send(address, ListGroupsRequest(states_filter=tuple(states), types_filter=("share",)),
                         ListGroupsResponse)
        if _code(r.error_code):
            fail(f"listing share groups: {error_name(r.error_code)}")
        out.update({str(g.group_id): str(g.group_state) for g in r.groups})
    return dict(sorted(out.items()))


def _described(cluster: _Cluster, address: tuple[str, int], group: str) -> Any:
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
    from kio.schema.share_group_describe.v1.response import ShareGroupDescribeResponse

    r = cluster.send(address, ShareGroupDescribeRequest(group_ids=(GroupId(group),), include_authorized_operations=False),
                     ShareGroupDescribeResponse)
    (g,) = r.groups
    return g


def _start_offsets(cluster: _Cluster, address: tuple[str, int], group: str,
                   topics: dict[str, list[int]] | None = None) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, leader epoch) of the group's share partitions
    (DescribeShareGroupOffsets; topics None: every one with state)."""
    from kio.schema.describe_share_group_offsets.v0 import request as req
    from kio.schema.describe_share_group_offsets.v0.response import DescribeShareGroupOffsetsResponse
    from kio.static.primitive import i32

    wanted = None if topics is None else tuple(
        req.DescribeShareGroupOffsetsRequestTopic(topic_name=TopicName(t), partitions=tuple(i32(p) for p in ps))
        for t, ps in topics.items())
    r = cluster.send(address, req.DescribeShareGroupOffsetsRequest(groups=(
        req.DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(group), topics=wanted),)), DescribeShareGroupOffsetsResponse)
    (g,) = r.groups
    if _code(g.error_code):
        fail(f"describing the offsets of share group {group!r}: {_error(g.error_code, g.error_message)}")
    out = {}
    for t in g.topics:
        for p in t.partitions:
            if _code(p.error_code):
                fail(f"{t.topic_name}-{p.partition_index}: {_error(p.error_code, p.error_message)}")
            out[(str(t.topic_name), int(p.partition_index))] = (int(p.start_offset), int(p.leader_epoch))
    return out


def _rows(rows: Sequence[tuple[str, ...]], widths: Sequence[int]) -> list[str]:
    """Kafka's printf("%-Ns ...") layout: each column padded to its width (never narrower than its
    content), the last one as it is."""
    return [" ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=False)) + " " + r[-1] for r in rows]


# --- the actions ----------------------------------------------------------------------------------

def _list(cluster: _Cluster, state: bool, state_values: list[str]) -> None:
    wanted = []
    for s in (x.strip() for v in state_values for x in v.split(",")):
        if not s:
            continue
        match = [x for x in SHARE_STATES if x.lower() == s.lower()]
        if not match:
            _usage(f"--state: invalid state {s!r}; valid states are: {', '.join(SHARE_STATES)}")
        wanted.append(match[0])
    groups = _listed(cluster, wanted)
    if not state:
        for g in groups:
            typer.echo(g)
        return
    width = max([15, *(len(g) for g in groups)])
    for line in _rows([("GROUP", "STATE"), *groups.items()], [width]):
        typer.echo(line)


def _describe(cluster: _Cluster, groups: list[str], members: bool, state: bool, verbose: bool) -> int:
    failed = 0
    for i, group in enumerate(groups):
        if i:
            typer.echo("")
        node, address = cluster.coordinator(group)
        g = _described(cluster, address, group)
        code = _code(g.error_code)
        group_state = str(g.group_state)
        offsets: dict[tuple[str, int], tuple[int, int]] | None = None
        if code == 69:  # GROUP_ID_NOT_FOUND: known only from its durable state (after a restart), or Dead
            offsets = _start_offsets(cluster, address, group)
            group_state = "Empty" if offsets else "Dead"
        elif code:
            fail(f"describing share group {group!r}: {_error(g.error_code, g.error_message)}")
        if group_state == "Dead":
            typer.echo(f"Error: Share group '{group}' does not exist.")
            failed += 1
            continue
        if group_state == "Empty" and not state:
            typer.echo(f"Share group '{group}' has no active members.", err=True)
        gw = max(15, len(group))
        if state:
            coord = f"{address[0]}:{address[1]}  ({node})"
            cw = max(25, len(coord))
            epochs = (str(g.group_epoch), str(g.assignment_epoch)) if code == 0 else ("-", "-")
            head = ("GROUP", "COORDINATOR (ID)", "STATE") + (("GROUP-EPOCH", "ASSIGNMENT-EPOCH") if verbose else ())
            row = (group, coord, group_state) + (epochs if verbose else ())
            widths = [gw, cw, 15] + ([12, 17] if verbose else [])
            for line in _rows([(*head, "#MEMBERS"), (*row, str(len(g.members)))], widths):
                typer.echo(line)
        elif members:
            ms = sorted(g.members, key=lambda m: str(m.member_id))
            if not ms:
                continue
            rows: list[tuple[str, ...]] = [("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
                                           + (("MEMBER-EPOCH",) if verbose else ()) + ("ASSIGNMENT",)]
            for m in ms:
                parts = [(str(tp.topic_name), int(p)) for tp in m.assignment.topic_partitions for p in tp.partitions]
                by_topic: dict[str, list[int]] = {}
                for t, p in parts:
                    by_topic.setdefault(t, []).append(p)
                text = ";".join(sorted(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in by_topic.items()))
                rows.append((group, str(m.member_id), str(m.client_host), str(m.client_id), str(len(parts)))
                            + ((str(m.member_epoch),) if verbose else ()) + (text,))
            widths = [gw] + [max(15, *(len(r[i]) for r in rows[1:])) for i in (1, 2, 3)] + [12] + ([13] if verbose
                                                                                                    else [])
            for line in _rows(rows, widths):
                typer.echo(line)
        else:
            if offsets is None:
                offsets = _start_offsets(cluster, address, group)
            tw = max([15, *(len(t) for t, _p in offsets)])
            rows = [("GROUP", "TOPIC", "PARTITION") + (("LEADER-EPOCH",) if verbose else ()) + ("START-OFFSET",)]
            for (t, p), (start, epoch) in sorted(offsets.items()):
                shown = "-" if start < 0 else str(start)
                rows.append((group, t, str(p)) + ((str(epoch) if start >= 0 else "-",) if verbose else ()) + (shown,))
            for line in _rows(rows, [gw, tw, 10] + ([13] if verbose else [])):
                typer.echo(line)
    return failed


def _delete(cluster: _Cluster, groups: list[str], all_groups: bool) -> int:
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
    from kio.schema.delete_groups.v2.response import DeleteGroupsResponse

    listed = _listed(cluster)
    wanted = list(listed) if all_groups else list(dict.fromkeys(groups))
    failed: dict[str, str] = {}
    for group in wanted:
        state = listed.get(group)
        if state is None:
            failed[group] = f"Group '{group}' is not a share group."
        elif state == "Dead":
            failed[group] = f"Share group '{group}' group state is DEAD."
        elif state != "Empty":
            failed[group] = f"Share group '{group}' is not EMPTY."
    done = []
    for group in (g for g in wanted if g not in failed):
        _node, address = cluster.coordinator(group)
        r = cluster.send(address, DeleteGroupsRequest(groups_names=(GroupId(group),)), DeleteGroupsResponse)
        (result,) = r.results
        if _code(result.error_code):
            failed[group] = error_name(result.error_code)
        else:
            done.append(group)
    if not failed:
        typer.echo(f"Deletion of requested share groups ({', '.join(repr(g) for g in done)}) was successful.")
        return 0
    typer.echo("Error: Deletion of some share groups failed:")
    for group, why in failed.items():
        typer.echo(f"* Group '{group}' could not be deleted due to: {why}")
    if done:
        typer.echo("")
        typer.echo(f"These share groups were deleted successfully: {', '.join(repr(g) for g in done)}")
    return len(failed)


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime 'YYYY-MM-DDThh:mm:ss.sss' (milliseconds and a zone optional; without a zone the
    local one, as Kafka's Utils.getDateTime) as epoch milliseconds; ValueError when malformed."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    parsed = datetime.datetime.fromisoformat(value)
    if "T" not in text:
        raise ValueError("expected a 'T' between the date and the time")
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # the local zone
    return int(parsed.timestamp() * 1000)


def _partitions(cluster: _Cluster, address: tuple[str, int], group: str, topics: list[str], all_topics: bool
                ) -> tuple[list[tuple[str, int]], dict[tuple[str, int], int]]:
    """The partitions to reset (Kafka's parseTopicPartitionsToReset; --all-topics: those of the group with
    a share-partition state), checked to exist and have a leader; and each one's leader."""
    if all_topics:
        wanted = sorted(_start_offsets(cluster, address, group))
    else:
        wanted = []
        for arg in topics:
            name, sep, parts = arg.partition(":")
            if not sep:
                continue
            if not name or not parts or ":" in parts:
                _usage(f"--topic: invalid topic arg {arg!r}, expected topic name and partitions (topic:0,1,2)")
            for p in parts.split(","):
                if not p.strip().lstrip("-").isdigit():
                    _usage(f"--topic: invalid partition {p!r} specified in topic arg {arg!r}")
                wanted.append((name, int(p)))
    names = sorted({t.partition(":")[0] for t in topics} | {t for t, _p in wanted})
    md = cluster.metadata(names) if names else None
    known: dict[tuple[str, int], int] = {}
    counts: dict[str, int] = {}
    for t in md.topics if md is not None else ():
        if _code(t.error_code) == 0:
            counts[str(t.name)] = len(t.partitions)
            for p in t.partitions:
                known[(str(t.name), int(p.partition_index))] = int(p.leader_id)
    if not all_topics:
        for arg in topics:
            if ":" not in arg:
                wanted += [(arg, p) for p in range(counts.get(arg, 0))]
                if arg not in counts:
                    wanted.append((arg, 0))  # reported below as not existing
    wanted = list(dict.fromkeys(wanted))
    missing = [f"{t}-{p}" for t, p in wanted if (t, p) not in known]
    if missing:
        fail(f'The partitions "{",".join(missing)}" do not exist')
    leaderless = [f"{t}-{p}" for t, p in wanted if known[(t, p)] < 0]
    if leaderless:
        fail(f'The partitions "{",".join(leaderless)}" have no leader')
    return wanted, {tp: known[tp] for tp in wanted}


def _log_offsets(cluster: _Cluster, leaders: dict[tuple[str, int], int], timestamp: int) -> dict[tuple[str, int], int]:
    """ListOffsets v9 of each partition at `timestamp` (-2 earliest, -1 latest), to its leader."""
    from kio.schema.list_offsets.v9 import request as req
    from kio.schema.list_offsets.v9.response import ListOffsetsResponse
    from kio.schema.types import BrokerId, TopicName
    from kio.static.primitive import i8, i32, i64

    brokers = cluster.brokers()
    by_leader: dict[int, dict[str, list[int]]] = {}
    for (t, p), leader in leaders.items():
        by_leader.setdefault(leader, {}).setdefault(t, []).append(p)
    out: dict[tuple[str, int], int] = {}
    for leader, topics in by_leader.items():
        address = brokers.get(leader)
        if address is None:
            fail(f"broker {leader}, the leader of {', '.join(sorted(topics))}, is not alive")
        r = cluster.send(address, req.ListOffsetsRequest(
            replica_id=BrokerId(-1), isolation_level=i8(0), topics=tuple(
                req.ListOffsetsTopic(name=TopicName(t), partitions=tuple(
                    req.ListOffsetsPartition(partition_index=i32(p), timestamp=i64(timestamp)) for p in ps))
                for t, ps in topics.items())), ListOffsetsResponse)
        for t in r.topics:
            for p in t.partitions:
                if _code(p.error_code):
                    fail(f"listing the offsets of {t.name}-{p.partition_index}: {error_name(p.error_code)}")
                out[(str(t.name), int(p.partition_index))] = int(p.offset)
    return out


def _reset(cluster: _Cluster, group: str, topics: list[str], all_topics: bool, earliest: bool, latest: bool,
           to_datetime: str | None, execute: bool) -> None:
    from kio.schema.alter_share_group_offsets.v0 import request as req
    from kio.schema.alter_share_group_offsets.v0.response import AlterShareGroupOffsetsResponse
    from kio.static.primitive import i32, i64

    timestamp = _EARLIEST if earliest else _LATEST
    if to_datetime is not None:
        try:
            timestamp = parse_datetime(to_datetime)
        except ValueError as err:
            _usage(f"--to-datetime: {to_datetime!r} is not a date and time like 2024-01-31T12:00:00.000 ({err})")
    _node, address = cluster.coordinator(group)
    g = _described(cluster, address, group)
    if _code(g.error_code) not in (0, 69) or (_code(g.error_code) == 0 and g.group_state not in ("Empty", "Dead")):
        if _code(g.error_code) == 0:
            fail(f"Share group '{group}' is not empty. It has {len(g.members)} member(s): stop its consumers (one "
                 "that was killed leaves after share.session.timeout.ms) and run this again.")
        fail(f"describing share group {group!r}: {_error(g.error_code, g.error_message)}")
    partitions, leaders = _partitions(cluster, address, group, topics, all_topics)
    new = _log_offsets(cluster, leaders, timestamp)
    if timestamp >= 0:
        empty = {tp: leader for tp, leader in leaders.items() if new.get(tp, -1) < 0}
        for t, p in sorted(empty):
            typer.echo(f"\nWarn: Partition {p} from topic {t} is empty. Falling back to latest known offset.")
        new.update(_log_offsets(cluster, empty, _LATEST) if empty else {})
    if execute and partitions:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        r = cluster.send(address, req.AlterShareGroupOffsetsRequest(group_id=GroupId(group), topics=tuple(
            req.AlterShareGroupOffsetsRequestTopic(topic_name=TopicName(t), partitions=tuple(
                req.AlterShareGroupOffsetsRequestPartition(partition_index=i32(p), start_offset=i64(new[(t, p)]))
                for p in ps)) for t, ps in by_topic.items())), AlterShareGroupOffsetsResponse)
        if _code(r.error_code):
            fail(_error(r.error_code, r.error_message))
        errors = [f"{t.topic_name}-{p.partition_index}: {_error(p.error_code, p.error_message)}"
                  for t in r.responses for p in t.partitions if _code(p.error_code)]
        if errors:
            fail("; ".join(errors))
    if partitions:
        tw = max([15, *(len(t) for t, _p in partitions)])
        rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
        rows += [(group, t, str(p), str(new[(t, p)])) for t, p in partitions]
        typer.echo("")
        for line in _rows(rows, [max(15, len(group)), tw, 10]):
            typer.echo(line)


def _delete_offsets(cluster: _Cluster, group: str, topics: list[str]) -> int:
    from kio.schema.delete_share_group_offsets.v0 import request as req
    from kio.schema.delete_share_group_offsets.v0.response import DeleteShareGroupOffsetsResponse

    _node, address = cluster.coordinator(group)
    r = cluster.send(address, req.DeleteShareGroupOffsetsRequest(group_id=GroupId(group), topics=tuple(
        req.DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName(t)) for t in dict.fromkeys(topics))),
        DeleteShareGroupOffsetsResponse)
    if _code(r.error_code):
        typer.echo(f"Error: {_error(r.error_code, r.error_message)}")
        return 1
    results = {str(t.topic_name): (None if _code(t.error_code) == 0 else _error(t.error_code, t.error_message))
               for t in r.responses}
    width = max([15, *(len(t) for t in results)])
    rows = [("TOPIC", "STATUS")] + [(t, "Successful" if e is None else f"Error: {e}") for t, e in sorted(results.items())]
    typer.echo("")
    for line in _rows(rows, [width]):
        typer.echo(line)
    return sum(e is not None for e in results.values())


# --- the command ----------------------------------------------------------------------------------

def _given(flags: Iterable[tuple[str, bool]]) -> list[str]:
    return [name for name, on in flags if on]


@handle_errors
def share_groups(
    state_values: Annotated[
        list[str] | None,
        typer.Argument(metavar="[STATE[,STATE...]]", help="With --list --state: only groups in these states."),
    ] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    list_: Annotated[bool, typer.Option("--list", help="List all share groups.")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Describe share groups: offsets (default), "
                                                             "--members or --state.")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="Delete share groups (they must be empty).")] = False,
    reset_offsets: Annotated[bool, typer.Option("--reset-offsets", help="Reset the start offsets of an empty "
                                                                       "share group.")] = False,
    delete_offsets: Annotated[bool, typer.Option("--delete-offsets", help="Delete an empty share group's "
                                                                         "offsets of whole topics.")] = False,
    group: Annotated[list[str] | None, typer.Option("--group", help="The share group (repeatable with "
                                                                    "--describe and --delete).")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Every share group (--describe, "
                                                                 "--delete).")] = False,
    topic: Annotated[list[str] | None, typer.Option("--topic", help="A topic, or topic:0,1,2 (--reset-offsets); "
                                                                    "repeatable.")] = None,
    all_topics: Annotated[bool, typer.Option("--all-topics", help="Every topic of the group "
                                                                 "(--reset-offsets).")] = False,
    members: Annotated[bool, typer.Option("--members", help="With --describe: the members.")] = False,
    offsets: Annotated[bool, typer.Option("--offsets", help="With --describe: the start offsets "
                                                           "(the default).")] = False,
    state: Annotated[bool, typer.Option("--state", help="With --describe: the group's state; with --list: "
                                                       "each group's state (followed by states to filter: "
                                                       "Empty, Stable, Reconciling, Dead).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="With --describe: more columns.")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Reset to the log start offset.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset to the log end offset.")] = False,
    to_datetime: Annotated[str | None, typer.Option("--to-datetime", help="Reset to the first offset from "
                                                                         "YYYY-MM-DDThh:mm:ss.sss.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the new offsets.")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Apply the new offsets.")] = False,
    command_config: Annotated[
        Path | None, typer.Option("--command-config", dir_okay=False, help="Client properties "
                                                                           "(PLAINTEXT only here).")
    ] = None,
    timeout: Annotated[int, typer.Option("--timeout", min=1, help="Milliseconds to wait for each answer "
                                                                  "(Kafka's unit).")] = 30000,
) -> None:
    """List, describe, delete share groups and reset or delete their offsets (kafka-share-groups.sh)."""
    actions = _given([("--list", list_), ("--describe", describe), ("--delete", delete),
                      ("--reset-offsets", reset_offsets), ("--delete-offsets", delete_offsets)])
    if len(actions) != 1:
        _usage("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
               "--delete-offsets" + (f" (got {', '.join(actions)})" if actions else ""))
    action = actions[0]
    groups, topics = list(group or ()), list(topic or ())
    if state_values and not (list_ and state):
        _usage(f"unexpected argument(s) {' '.join(state_values)}; states are given after --list --state")
    # the flags each action takes (ShareGroupCommandOptions.checkArgs)
    takes = {
        "--list": {"--state"},
        "--describe": {"--group", "--all-groups", "--members", "--offsets", "--state", "--verbose"},
        "--delete": {"--group", "--all-groups"},
        "--reset-offsets": {"--group", "--topic", "--all-topics", "--to-earliest", "--to-latest", "--to-datetime",
                            "--dry-run", "--execute"},
        "--delete-offsets": {"--group", "--topic"},
    }[action]
    given = _given([("--group", bool(groups)), ("--all-groups", all_groups), ("--topic", bool(topics)),
                    ("--all-topics", all_topics), ("--members", members), ("--offsets", offsets), ("--state", state),
                    ("--verbose", verbose), ("--to-earliest", to_earliest), ("--to-latest", to_latest),
                    ("--to-datetime", to_datetime is not None), ("--dry-run", dry_run), ("--execute", execute)])
    extra = [f for f in given if f not in takes]
    if extra:
        _usage(f"Option {action} does not take {', '.join(extra)} (it takes: {', '.join(sorted(takes))})")
    if action == "--describe":
        if not groups and not all_groups:
            _usage("Option --describe takes one of these options: --all-groups, --group")
        if sum([members, offsets, state]) > 1:
            _usage("Option --describe takes at most one of these options: --members, --offsets, --state")
    if action in ("--describe", "--delete") and groups and all_groups:
        _usage(f"Option {action} takes either --group or --all-groups, not both.")
    if action == "--delete" and not groups and not all_groups:
        _usage("Option --delete takes the options --group or --all-groups")
    if action == "--delete-offsets" and (len(groups) != 1 or not topics):
        _usage("Option --delete-offsets takes the following options: --group (one), --topic")
    if action == "--reset-offsets":
        if dry_run and execute:
            _usage("Option --reset-offsets only accepts one of --execute and --dry-run")
        if not dry_run and not execute:
            _usage("Option --reset-offsets takes the option: --execute or --dry-run")
        if len(groups) != 1:
            _usage("Option --reset-offsets takes the option: --group (one group)")
        if bool(topics) == all_topics:
            _usage("Option --reset-offsets takes one of these options: --all-topics, --topic")
        if sum([to_earliest, to_latest, to_datetime is not None]) != 1:
            _usage("Option --reset-offsets takes one of these options: --to-datetime, --to-earliest, --to-latest")
    _check_security(command_config)
    cluster = _Cluster(bootstrap_server, timeout / 1000.0)
    failures = 0
    if action == "--list":
        _list(cluster, state, list(state_values or ()))
    elif action == "--describe":
        failures = _describe(cluster, list(_listed(cluster)) if all_groups else groups, members, state, verbose)
    elif action == "--delete":
        failures = _delete(cluster, groups, all_groups)
    elif action == "--reset-offsets":
        _reset(cluster, groups[0], topics, all_topics, to_earliest, to_latest, to_datetime, execute)
    else:
        failures = _delete_offsets(cluster, groups[0], topics)
    if failures:
        raise typer.Exit(EXIT_FAILURE)
