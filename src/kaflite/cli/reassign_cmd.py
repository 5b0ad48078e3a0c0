"""`kaflite reassign-partitions`: kafka-reassign-partitions.sh through AlterPartitionReassignments (API 45)
and ListPartitionReassignments (API 46), with Kafka's JSON files, actions and printed lines.

Rules (Kafka's ReassignPartitionsCommand):
- exactly one action: `--generate` (needs `--topics-to-move-json-file` and `--broker-list`), `--execute`,
  `--verify`, `--cancel` (each needs `--reassignment-json-file`) or `--list`; an option the action does not
  take is refused in one line naming it;
- the reassignment file is `{"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": [..],
  "log_dirs": [..]}]}` (`log_dirs` optional, as long as `replicas`, only "any": moves between log
  directories are not built); the topics file `{"version": 1, "topics": [{"topic": t}]}`; a bad file is
  one line naming the file, the entry and the key;
- `--execute` refuses while another reassignment runs unless `--additional`, checks every broker id
  exists (`Unknown broker id N`) and every partition exists, prints the current assignment (the rollback
  file), then starts the moves; per-partition refusals are printed (`t-0: message`) and exit 1;
- `--verify` prints each partition's state (completed, still in progress, or a replica set other than the
  target with no move running); `--wait S` (kaflite's) repeats the check until no listed move runs, at
  most S seconds, and exits 1 if one still does;
- `--cancel` cancels the listed partitions' moves that are running (Kafka's condition: nothing being
  added, or something being removed... as ListPartitionReassignments reports them);
- `--list` prints every move under way: `t-0: replicas: 2,3,1. adding: 3. removing: 1.`;
- `--generate` places the topics' partitions over the broker list with Kafka's assignReplicasToBrokers
  (rack-aware when the brokers have racks, unless `--disable-rack-aware`), each topic keeping its
  partition count and the replication factor of its first partition; it changes nothing.
The requests go to the controller Metadata names (kio over a socket: confluent-kafka's AdminClient has no
reassignment API), again to the new one after NOT_CONTROLLER; replication throttles are not built
(`--throttle` is refused with one line).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    Bootstrap,
    admin_client,
    admin_result,
    error_name,
    fail,
    handle_errors,
)

__all__ = [
    "calculate_assignment",
    "ongoing_reassignments",
    "format_reassignment_json",
    "parse_broker_list",
    "parse_reassignment_json",
    "parse_topics_json",
    "register",
]

TopicPartition = tuple[str, int]
Ongoing = dict[TopicPartition, tuple[list[int], list[int], list[int]]]  # replicas, adding, removing

CANNOT_EXECUTE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this "
    "and create a new partition assignment in addition to the existing one. The --additional flag can also "
    "be used to change the throttle by resubmitting the current reassignment."
)
ACTIONS = ("generate", "execute", "verify", "cancel", "list")


def register(app: typer.Typer) -> None:
    app.command("reassign-partitions")(reassign_partitions)


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


# --- the files (pure) -----------------------------------------------------------------------------------
def _load(text: str, option: str, source: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        fail(f"{option} {source}: not JSON ({err.msg} at line {err.lineno} column {err.colno})", EXIT_USAGE)
    if not isinstance(doc, dict):
        fail(f"{option} {source}: expected a JSON object", EXIT_USAGE)
    version = doc.get("version", 1)
    if version != 1:
        fail(f"{option} {source}: \"version\": not supported version field value {json.dumps(version)} "
             "(allowed: 1)", EXIT_USAGE)
    return doc


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_reassignment_json(
    text: str, source: str, for_execute: bool = False
) -> list[tuple[TopicPartition, list[int]]]:
    """The partitions of kafka-reassign-partitions.sh's reassignment file, in order. `for_execute` adds
    --execute's checks (Kafka's parseExecuteAssignmentArgs): not empty, no empty replica list, no partition
    twice, no broker twice in a list."""
    opt = "--reassignment-json-file"
    doc = _load(text, opt, source)
    entries = doc.get("partitions", [])
    if not isinstance(entries, list):
        fail(f'{opt} {source}: "partitions" must be a list of {{"topic", "partition", "replicas"}} objects',
             EXIT_USAGE)
    out: list[tuple[TopicPartition, list[int]]] = []
    for i, e in enumerate(entries):
        where = f"{opt} {source}: partitions[{i}]"
        if not isinstance(e, dict):
            fail(f"{where}: expected an object, got {json.dumps(e)}", EXIT_USAGE)
        topic, partition, replicas = e.get("topic"), e.get("partition"), e.get("replicas")
        if not isinstance(topic, str) or not topic:
            fail(f'{where}: "topic" must be a topic name (string), got {json.dumps(topic)}', EXIT_USAGE)
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            fail(f'{where}: "partition" must be an integer >= 0, got {json.dumps(partition)}', EXIT_USAGE)
        if not isinstance(replicas, list) or not all(_int(r) for r in replicas):
            fail(f'{where}: "replicas" must be a list of broker ids (integers), got {json.dumps(replicas)}',
                 EXIT_USAGE)
        log_dirs = e.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                fail(f"{where}: Size of replicas list {replicas} is different from size of log dirs list "
                     f"{json.dumps(log_dirs)} for partition {topic}-{partition}", EXIT_USAGE)
            if any(d != "any" for d in log_dirs):
                fail(f'{where}: "log_dirs": only "any" is supported (moving replicas between log '
                     "directories is not built)", EXIT_USAGE)
        out.append(((topic, partition), list(replicas)))
    if for_execute:
        if not out:
            fail(f"{opt} {source}: Partition reassignment list cannot be empty", EXIT_USAGE)
        if any(not r for _, r in out):
            fail(f"{opt} {source}: Partition replica list cannot be empty", EXIT_USAGE)
        seen: set[TopicPartition] = set()
        dup = sorted({tp for tp, _ in out if tp in seen or seen.add(tp)})  # type: ignore[func-returns-value]
        if dup:
            fail(f"{opt} {source}: Partition reassignment contains duplicate topic partitions: "
                 f"{','.join(map(_tp, dup))}", EXIT_USAGE)
        twice = [(tp, sorted({b for b in r if r.count(b) > 1})) for tp, r in out if len(set(r)) != len(r)]
        if twice:
            detail = ". ".join(f"{_tp(tp)} contains multiple entries for {_ids(bs)}" for tp, bs in twice)
            fail(f"{opt} {source}: Partition replica lists may not contain duplicate entries: {detail}",
                 EXIT_USAGE)
    return out


def parse_topics_json(text: str, source: str) -> list[str]:
    opt = "--topics-to-move-json-file"
    doc = _load(text, opt, source)
    entries = doc.get("topics", [])
    if not isinstance(entries, list):
        fail(f'{opt} {source}: "topics" must be a list of {{"topic": name}} objects', EXIT_USAGE)
    out: list[str] = []
    for i, e in enumerate(entries):
        topic = e.get("topic") if isinstance(e, dict) else None
        if not isinstance(topic, str) or not topic:
            fail(f'{opt} {source}: topics[{i}]: "topic" must be a topic name (string), got {json.dumps(e)}',
                 EXIT_USAGE)
        out.append(topic)
    dup = sorted({t for t in out if out.count(t) > 1})
    if dup:
        fail(f"{opt} {source}: List of topics to reassign contains duplicate entries: {', '.join(dup)}",
             EXIT_USAGE)
    if not out:
        fail(f"{opt} {source}: the topic list is empty", EXIT_USAGE)
    return out


def parse_broker_list(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",")]
    except ValueError:
        fail(f"--broker-list: expected broker ids like 0,1,2, got {text!r}", EXIT_USAGE)
    if any(i < 0 for i in ids):
        fail(f"--broker-list: broker ids are >= 0, got {text!r}", EXIT_USAGE)
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        fail(f"--broker-list: Broker list contains duplicate entries: {_ids(dup)}", EXIT_USAGE)
    return ids


def format_reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted, every log dir "any"."""
    parts = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def calculate_assignment(
    current: Mapping[TopicPartition, Sequence[int]],
    brokers: Mapping[int, str | None],
    rng: random.Random | None = None,
) -> dict[TopicPartition, list[int]]:
    """--generate's proposal (Kafka's calculateAssignment): each topic placed again over `brokers` with
    its partition count and the replication factor of its first partition."""
    from kaflite.cluster.placement import assign_replicas_to_brokers
    from kaflite.protocol.errors import KafkaError

    by_topic: dict[str, dict[int, Sequence[int]]] = {}
    for (t, p), r in current.items():
        by_topic.setdefault(t, {})[p] = r
    out: dict[TopicPartition, list[int]] = {}
    for topic, parts in sorted(by_topic.items()):
        rf = len(parts[min(parts)])
        try:
            placed = assign_replicas_to_brokers(len(parts), rf, brokers, rng=rng)
        except KafkaError as err:
            fail(f"cannot place {topic}: {err.message}")
        out.update({(topic, p): list(r) for p, r in placed.items()})
    return out


# --- talking to the cluster ------------------------------------------------------------------------------
class _Cluster:
    """Metadata through confluent-kafka's AdminClient; the reassignment requests to the controller (kio)."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        self.admin = admin_client(bootstrap)
        self.timeout = timeout
        self.metadata: Any = None

    def refresh(self) -> Any:
        try:
            self.metadata = self.admin.list_topics(timeout=self.timeout)
        except Exception as err:  # noqa: BLE001 - one line, never a traceback
            from kaflite.cli.common import describe_exception

            fail(f"reading the cluster's metadata: {describe_exception(err)}")
        return self.metadata

    def brokers(self) -> dict[int, str | None]:
        """Broker id -> rack (describe_cluster: Metadata as confluent-kafka exposes it has no racks)."""
        desc = admin_result(self.admin.describe_cluster(request_timeout=self.timeout), self.timeout,
                            "describing the cluster")
        return {int(n.id): (n.rack or None) for n in desc.nodes}

    def replicas(self, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
        md = self.metadata or self.refresh()
        out: dict[TopicPartition, list[int]] = {}
        for t in set(topics):
            tm = md.topics.get(t)
            if tm is None or tm.error is not None:
                md = self.refresh()
                tm = md.topics.get(t)
            if tm is None or (tm.error is not None and not tm.partitions):
                continue
            out.update({(t, p): list(pm.replicas) for p, pm in tm.partitions.items()})
        return out

    def _to_controller(self, req: Any, response_schema: Any) -> Any:
        from kaflite.console.wire import request
        from kaflite.protocol.errors import ErrorCode

        deadline = time.monotonic() + self.timeout
        md = self.metadata or self.refresh()
        while True:
            controller = md.brokers.get(md.controller_id)
            if controller is None:
                resp = None
            else:
                try:
                    resp = request(controller.host, controller.port, req, response_schema, self.timeout)
                except OSError as err:
                    fail(f"cannot reach the controller {controller.host}:{controller.port}: "
                         f"{err.strerror or err}")
                if int(resp.error_code) != ErrorCode.not_controller.value:
                    return resp
            if time.monotonic() > deadline:
                fail("no controller answered: the cluster has no active controller")
            time.sleep(0.2)
            md = self.refresh()

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None) -> Ongoing:
        from kio.schema.list_partition_reassignments.v0.response import ListPartitionReassignmentsResponse

        resp = self._to_controller(_list_request(partitions), ListPartitionReassignmentsResponse)
        _top_level(resp, "listing the partition reassignments")
        return _ongoing(resp)

    def alter(self, moves: Mapping[TopicPartition, Sequence[int] | None]) -> dict[TopicPartition, str]:
        """Start (or cancel, None) the moves; the refused partitions with Kafka's message."""
        from kio.schema.alter_partition_reassignments.v0.request import (
            AlterPartitionReassignmentsRequest,
            ReassignablePartition,
            ReassignableTopic,
        )
        from kio.schema.alter_partition_reassignments.v0.response import AlterPartitionReassignmentsResponse
        from kio.schema.types import BrokerId, TopicName
        from kio.static.primitive import i32

        by_topic: dict[str, list[Any]] = {}
        for (t, p), r in sorted(moves.items()):
            by_topic.setdefault(t, []).append(ReassignablePartition(
                partition_index=i32(p), replicas=None if r is None else tuple(BrokerId(x) for x in r)))
        req = AlterPartitionReassignmentsRequest(
            topics=tuple(ReassignableTopic(name=TopicName(t), partitions=tuple(ps)) for t, ps in by_topic.items()))
        resp = self._to_controller(req, AlterPartitionReassignmentsResponse)
        _top_level(resp, "reassigning partitions")
        errors = {}
        for t in resp.responses:
            for p in t.partitions:
                if int(p.error_code) != 0:
                    errors[(str(t.name), int(p.partition_index))] = p.error_message or error_name(p.error_code)
        return errors


def _list_request(partitions: Iterable[TopicPartition] | None) -> Any:
    from kio.schema.list_partition_reassignments.v0.request import (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsTopics,
    )
    from kio.schema.types import TopicName
    from kio.static.primitive import i32

    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = tuple(ListPartitionReassignmentsTopics(name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps))
                       for t, ps in sorted(by_topic.items()))
    return ListPartitionReassignmentsRequest(topics=topics)


def _ongoing(resp: Any) -> Ongoing:
    return {(str(t.name), int(p.partition_index)): ([int(r) for r in p.replicas],
                                                    [int(r) for r in p.adding_replicas],
                                                    [int(r) for r in p.removing_replicas])
            for t in resp.topics for p in t.partitions}


def ongoing_reassignments(metadata: Any, partitions: Iterable[TopicPartition], timeout: float) -> Ongoing:
    """The moves under way among `partitions`, asked of the controller `metadata` (confluent-kafka's
    ClusterMetadata) names, once (for `topics describe`); raises OSError / RuntimeError when it cannot say."""
    from kio.schema.list_partition_reassignments.v0.response import ListPartitionReassignmentsResponse

    from kaflite.console.wire import request

    controller = metadata.brokers.get(metadata.controller_id)
    if controller is None:
        raise RuntimeError("no controller")
    resp = request(controller.host, controller.port, _list_request(partitions), ListPartitionReassignmentsResponse,
                   timeout)
    if int(resp.error_code) != 0:
        raise RuntimeError(error_name(resp.error_code))
    return _ongoing(resp)


def _top_level(resp: Any, what: str) -> None:
    if int(resp.error_code) != 0:
        fail(f"{what}: {resp.error_message or error_name(resp.error_code)} ({error_name(resp.error_code)})")


def _read(path: Path, option: str) -> str:
    try:
        return path.read_text()
    except OSError as err:
        fail(f"{option}: cannot read {path}: {err.strerror or err}", EXIT_USAGE)


# --- the actions -------------------------------------------------------------------------------------------
def _generate(cluster: _Cluster, topics: list[str], broker_list: list[int], rack_aware: bool) -> None:
    current = cluster.replicas(topics)
    missing = [t for t in topics if not any(tp[0] == t for tp in current)]
    if missing:
        fail(f"Topic {missing[0]} not found.")
    known = cluster.brokers()
    brokers = {b: (known[b] if rack_aware else None) for b in broker_list if b in known}
    racks = {r for r in brokers.values()}
    if rack_aware and None in racks and len(racks) > 1:
        fail("Not all brokers have rack information. Add --disable-rack-aware in command line to make "
             "replica assignment without rack information.")
    proposed = calculate_assignment(current, brokers)
    typer.echo(f"Current partition replica assignment\n{format_reassignment_json(current)}\n")
    typer.echo(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")


def _execute(cluster: _Cluster, moves: list[tuple[TopicPartition, list[int]]], additional: bool) -> None:
    proposed = dict(moves)
    if not additional and cluster.list_reassignments():
        fail(CANNOT_EXECUTE)
    known = set(cluster.brokers())
    unknown = next((b for _, r in moves for b in r if b not in known), None)
    if unknown is not None:
        fail(f"Unknown broker id {unknown}")
    current = {tp: r for tp, r in cluster.replicas(t for t, _ in proposed).items() if tp in proposed}
    missing = sorted(set(proposed) - set(current))
    if missing:
        fail(f"Unable to find partition: {', '.join(map(_tp, missing))}")
    typer.echo("Current partition replica assignment\n\n" + format_reassignment_json(current) +
               "\n\nSave this to use as the --reassignment-json-file option during rollback")
    errors = cluster.alter(proposed)
    if errors:
        lines = "\n".join(f"{_tp(tp)}: {msg}" for tp, msg in sorted(errors.items()))
        fail(f"Error reassigning partition(s):\n{lines}")
    typer.echo(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for "
               f"{','.join(map(_tp, sorted(proposed)))}")


def _verify_once(cluster: _Cluster, targets: list[tuple[TopicPartition, list[int]]]) -> tuple[list[str], bool]:
    ongoing = cluster.list_reassignments()
    cluster.refresh()
    current = cluster.replicas(t for (t, _), _ in targets)
    lines = ["Status of partition reassignment:"]
    for tp, target in sorted(targets):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {_tp(tp)} is still in progress.")
        elif current.get(tp, []) == target:
            lines.append(f"Reassignment of partition {_tp(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {_tp(tp)}, but replica set is "
                         f"{_ids(current.get(tp, []))} rather than {_ids(target)}.")
    return lines, any(tp in ongoing for tp, _ in targets)


def _verify(cluster: _Cluster, targets: list[tuple[TopicPartition, list[int]]], wait_s: float | None) -> None:
    deadline = time.monotonic() + (wait_s or 0)
    lines, running = _verify_once(cluster, targets)
    while running and wait_s is not None and time.monotonic() < deadline:
        time.sleep(0.2)
        lines, running = _verify_once(cluster, targets)
    typer.echo("\n".join(lines))
    if running and wait_s is not None:
        fail(f"still in progress after {wait_s:g} s")


def _cancel(cluster: _Cluster, targets: list[tuple[TopicPartition, list[int]]]) -> None:
    running = sorted(tp for tp, (_, adding, removing) in
                     cluster.list_reassignments(tp for tp, _ in targets).items() if not adding or removing)
    if running:
        errors = cluster.alter(dict.fromkeys(running))
        if errors:
            lines = "\n".join(f"{_tp(tp)}: {msg}" for tp, msg in sorted(errors.items()))
            fail(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n{lines}")
        typer.echo(f"Successfully cancelled partition reassignment{'' if len(running) == 1 else 's'} for: "
                   f"{','.join(map(_tp, running))}")
    else:
        typer.echo("None of the specified partition reassignments are active.")
    typer.echo("None of the specified partition moves are active.")


def _list(cluster: _Cluster) -> None:
    ongoing = cluster.list_reassignments()
    if not ongoing:
        typer.echo("No partition reassignments found.")
        return
    typer.echo("Current partition reassignments:")
    for tp, (replicas, adding, removing) in sorted(ongoing.items()):
        typer.echo(f"{_tp(tp)}: replicas: {_ids(replicas)}." + (f" adding: {_ids(adding)}." if adding else "")
                   + (f" removing: {_ids(removing)}." if removing else ""))


@handle_errors
def reassign_partitions(
    generate: Annotated[bool, typer.Option("--generate", help="Propose an assignment (changes nothing).")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Start the reassignment of the JSON file.")] = False,
    verify: Annotated[bool, typer.Option("--verify", help="Check whether the file's reassignment is done.")] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="Cancel the file's running reassignments.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List every reassignment under way.")] = False,
    reassignment_json_file: Annotated[Path | None, typer.Option(
        "--reassignment-json-file", dir_okay=False,
        help='{"version":1,"partitions":[{"topic":t,"partition":p,"replicas":[..]}]}')] = None,
    topics_to_move_json_file: Annotated[Path | None, typer.Option(
        "--topics-to-move-json-file", dir_okay=False, help='{"version":1,"topics":[{"topic":t}]}')] = None,
    broker_list: Annotated[str | None, typer.Option("--broker-list", help="Brokers to place on, e.g. 0,1,2.")] = None,
    disable_rack_aware: Annotated[bool, typer.Option("--disable-rack-aware", help="Ignore racks.")] = False,
    additional: Annotated[bool, typer.Option(
        "--additional", help="Execute although other reassignments are under way.")] = False,
    throttle: Annotated[int, typer.Option("--throttle", help="Not supported (no replication throttles).")] = -1,
    wait: Annotated[float | None, typer.Option(
        "--wait", min=0, help="With --verify: check again until done, at most this many seconds.")] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds to wait for each answer.")] = 30.0,
) -> None:
    """Move partition replicas between brokers (kafka-reassign-partitions.sh)."""
    chosen = [name for name, on in zip(ACTIONS, (generate, execute, verify, cancel, list_), strict=True) if on]
    if len(chosen) != 1:
        fail("Command must include exactly one action: --generate, --execute, --verify, --cancel, --list",
             EXIT_USAGE)
    action = chosen[0]
    given = {
        "reassignment-json-file": reassignment_json_file is not None,
        "topics-to-move-json-file": topics_to_move_json_file is not None,
        "broker-list": broker_list is not None,
        "disable-rack-aware": disable_rack_aware,
        "additional": additional,
        "throttle": throttle != -1,
        "wait": wait is not None,
    }
    required = {"generate": ("topics-to-move-json-file", "broker-list"), "execute": ("reassignment-json-file",),
                "verify": ("reassignment-json-file",), "cancel": ("reassignment-json-file",), "list": ()}[action]
    allowed = set(required) | {"generate": {"disable-rack-aware"}, "execute": {"additional", "throttle"},
                               "verify": {"wait"}, "cancel": set(), "list": set()}[action]
    for name in required:
        if not given[name]:
            fail(f'Missing required argument "[{name}]" for --{action}', EXIT_USAGE)
    for name, on in given.items():
        if on and name not in allowed:
            fail(f'Option "[{name}]" can\'t be used with action "[{action}]"', EXIT_USAGE)
    if throttle != -1:
        fail("--throttle: replication throttles are not supported by kaflite (the move runs unthrottled)",
             EXIT_USAGE)
    # parse the files before connecting: a bad file is a usage error, whatever the cluster
    moves: list[tuple[TopicPartition, list[int]]] = []
    if reassignment_json_file is not None:
        moves = parse_reassignment_json(_read(reassignment_json_file, "--reassignment-json-file"),
                                        str(reassignment_json_file), for_execute=action == "execute")
    topics: list[str] = []
    brokers: list[int] = []
    if action == "generate":
        assert topics_to_move_json_file is not None and broker_list is not None
        brokers = parse_broker_list(broker_list)
        topics = parse_topics_json(_read(topics_to_move_json_file, "--topics-to-move-json-file"),
                                   str(topics_to_move_json_file))
    cluster = _Cluster(bootstrap_server, timeout)
    if action == "generate":
        _generate(cluster, topics, brokers, not disable_rack_aware)
    elif action == "execute":
        _execute(cluster, moves, additional)
    elif action == "verify":
        _verify(cluster, moves, wait)
    elif action == "cancel":
        _cancel(cluster, moves)
    else:
        _list(cluster)
