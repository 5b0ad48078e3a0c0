"""`kaflite topics create | list | describe | delete | alter`, the kafka-topics.sh vocabulary.

Everything goes through confluent-kafka's AdminClient, so the commands work against any Kafka cluster.
`describe` prints exactly the lines kafka-topics.sh --describe prints (tab separated):

    Topic: abc<TAB>TopicId: ...<TAB>PartitionCount: 2<TAB>ReplicationFactor: 1<TAB>Configs: k=v,...
    <TAB>Topic: abc<TAB>Partition: 0<TAB>Leader: 0<TAB>Replicas: 0<TAB>Isr: 0

(with `<TAB>Adding Replicas: ..<TAB>Removing Replicas: ..` on a partition being reassigned, from
ListPartitionReassignments), where Configs lists the entries that are not at their default (Kafka's `!ConfigEntry.isDefault()`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from kaflite.cli import quotas_cmd
from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    Bootstrap,
    CliFailure,
    admin_client,
    admin_result,
    describe_exception,
    fail,
    handle_errors,
    one_topic,
    parse_key_values,
    topics_given,
)

__all__ = ["PartitionFilter", "PartitionInfo", "TopicInfo", "describe_lines", "register"]

topics_app = typer.Typer(
    help="Create, list, describe, alter and delete topics (like kafka-topics.sh).", no_args_is_help=True
)

Timeout = Annotated[
    float, typer.Option("--timeout", help="Seconds to wait for the broker's answer.", min=0.1)
]


TopicOption = Annotated[str | None, typer.Option("--topic", "-t", help="The topic (kafka-topics.sh spelling).")]
TopicsOption = Annotated[
    list[str] | None, typer.Option("--topic", "-t", help="A topic (repeatable; kafka-topics.sh spelling).")
]
# the entity flags of `configs describe` and `configs alter` (kafka-configs.sh)
EntityTypes = Annotated[list[str] | None, typer.Option(
    "--entity-type", help="topics, brokers, or client quotas' users / clients (both: one user's client); "
                          "kafka-configs.sh spelling.")]
EntityNames = Annotated[list[str] | None, typer.Option(
    "--entity-name", help="The topic name, broker id, user or client id ('' or --entity-default: the "
                          "default user / client), one per --entity-type.")]


def register(app: typer.Typer) -> None:
    app.add_typer(topics_app, name="topics")
    app.add_typer(configs_app, name="configs")


def _is_error(err: Exception, *names: str) -> bool:
    inner = err.args[0] if getattr(err, "args", None) else None
    return bool(inner is not None and hasattr(inner, "name") and inner.name() in names)


def _all_topics(admin: Any, timeout: float) -> dict[str, Any]:
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception as err:
        fail(f"listing topics: {describe_exception(err)}")
    return dict(metadata.topics)


# --------------------------------------------------------------------------------------------------
# create

# librdkafka's NewTopic accepts 1..100000 partitions; a replication factor is an INT16 on the wire.
MAX_PARTITIONS = 100_000
MAX_REPLICATION_FACTOR = 32_767


def _count_or_default(value: int | None, option: str, maximum: int, broker_key: str) -> int | None:
    if value is None or value == -1:
        return None
    if not 1 <= value <= maximum:
        fail(
            f"{option}: expected 1..{maximum}, or -1 (or leave it out) for the broker's {broker_key}; "
            f"got {value}",
            EXIT_USAGE,
        )
    return value


@topics_app.command("create")
@handle_errors
def create(
    topic_arg: Annotated[str | None, typer.Argument(metavar="TOPIC", help="Topic name.")] = None,
    topic_opt: TopicOption = None,
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions",
            "-p",
            help=f"Partition count, 1..{MAX_PARTITIONS} (default, or -1: the broker's num.partitions).",
        ),
    ] = None,
    replication_factor: Annotated[
        int | None,
        typer.Option(
            "--replication-factor",
            "-r",
            help=f"Replication factor, 1..{MAX_REPLICATION_FACTOR} (default, or -1: the broker's "
            "default.replication.factor).",
        ),
    ] = None,
    config: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            "-c",
            metavar="KEY=VALUE",
            help="A topic configuration (repeatable), e.g. cleanup.policy=compact.",
        ),
    ] = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="Succeed if the topic already exists.")
    ] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Create a topic (TOPIC or --topic TOPIC)."""
    from confluent_kafka.admin import NewTopic

    topic = one_topic(topic_arg, topic_opt)
    # -1 is what CreateTopics (and NewTopic) take for "the broker's default"; the same as leaving it out
    partitions = _count_or_default(partitions, "--partitions", MAX_PARTITIONS, "num.partitions")
    replication_factor = _count_or_default(
        replication_factor, "--replication-factor", MAX_REPLICATION_FACTOR, "default.replication.factor"
    )
    configs = parse_key_values(config, "--config")
    admin = admin_client(bootstrap_server)
    new = NewTopic(
        topic,
        num_partitions=partitions if partitions is not None else -1,
        replication_factor=replication_factor if replication_factor is not None else -1,
        config=configs,
    )
    future = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[topic]
    try:
        future.result(timeout=timeout + 1)
    except Exception as err:
        if if_not_exists and _is_error(err, "TOPIC_ALREADY_EXISTS"):
            return
        admin_result(future, timeout, f"creating topic {topic!r}")
    typer.echo(f"Created topic {topic}.")


# --------------------------------------------------------------------------------------------------
# list


@topics_app.command("list")
@handle_errors
def list_topics(
    exclude_internal: Annotated[
        bool, typer.Option("--exclude-internal", help="Leave out internal topics (names starting with __).")
    ] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """List topic names, one a line, sorted."""
    topics = _all_topics(admin_client(bootstrap_server), timeout)
    for name in sorted(topics):
        if exclude_internal and name.startswith("__"):
            continue
        typer.echo(name)


# --------------------------------------------------------------------------------------------------
# describe


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]
    # a reassignment under way (ListPartitionReassignments): the replicas being added and removed
    adding: list[int] | None = None
    removing: list[int] | None = None

    @property
    def replication_factor(self) -> int:
        """Kafka's getReplicationFactor: while a move runs, the replica set less the replicas being added."""
        changing = (self.adding or []) + (self.removing or [])
        if self.adding is not None and any(r in changing for r in self.replicas):
            return len(self.replicas) - len(self.adding)
        return len(self.replicas)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str | None
    partitions: list[PartitionInfo]
    configs: dict[str, str]  # the entries not at their default
    min_isr: int = 1  # the topic's effective min.insync.replicas

    @property
    def replication_factor(self) -> int:
        return self.partitions[0].replication_factor if self.partitions else 0


@dataclass(frozen=True)
class PartitionFilter:
    """kafka-topics.sh --describe's partition reports; none set = describe everything (with the topic
    lines); several set = the partitions matching any of them, without the topic lines (as Kafka)."""

    under_replicated: bool = False  # ISR smaller than the replica list
    unavailable: bool = False  # no leader, or a leader that is not a live broker
    under_min_isr: bool = False  # no leader, or ISR smaller than min.insync.replicas
    at_min_isr: bool = False  # ISR exactly min.insync.replicas
    live_brokers: frozenset[int] = frozenset()

    @property
    def active(self) -> bool:
        return self.under_replicated or self.unavailable or self.under_min_isr or self.at_min_isr

    def matches(self, p: PartitionInfo, min_isr: int) -> bool:
        if not self.active:
            return True
        has_leader = p.leader is not None and p.leader >= 0
        return (
            (self.under_replicated and len(p.isr) < p.replication_factor)
            or (self.unavailable and (not has_leader or p.leader not in self.live_brokers))
            or (self.under_min_isr and (not has_leader or len(p.isr) < min_isr))
            or (self.at_min_isr and len(p.isr) == min_isr)
        )


def describe_lines(info: TopicInfo, only: PartitionFilter | None = None) -> list[str]:
    """kafka-topics.sh --describe's lines for one topic (with a report filter: its partitions only)."""
    lines = []
    if only is None or not only.active:
        head = f"Topic: {info.name}"
        if info.topic_id and info.topic_id != "AAAAAAAAAAAAAAAAAAAAAA":  # Kafka omits the zero Uuid
            head += f"\tTopicId: {info.topic_id}"
        head += f"\tPartitionCount: {len(info.partitions)}\tReplicationFactor: {info.replication_factor}"
        head += "\tConfigs: " + ",".join(f"{k}={v}" for k, v in info.configs.items())
        lines.append(head)
    for p in sorted(info.partitions, key=lambda p: p.partition):
        if only is not None and not only.matches(p, info.min_isr):
            continue
        leader = "none" if p.leader is None or p.leader < 0 else str(p.leader)
        line = (
            f"\tTopic: {info.name}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
        )
        if p.adding is not None:  # a move under way, as kafka-topics.sh prints it
            line += f"\tAdding Replicas: {','.join(map(str, p.adding))}"
            line += f"\tRemoving Replicas: {','.join(map(str, p.removing or []))}"
        lines.append(line)
    return lines


def _describe_topics(admin: Any, names: list[str], timeout: float) -> list[TopicInfo]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    cluster = admin.list_topics(timeout=timeout)
    metadata = cluster.topics
    topic_ids = _topic_ids(admin, names, timeout)
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    config_futures = admin.describe_configs(resources, request_timeout=timeout) if resources else {}
    configs_by_topic: dict[str, dict[str, str]] = {}
    min_isr: dict[str, int] = {}
    for resource, future in config_futures.items():
        try:
            entries = future.result(timeout=timeout)
        except Exception:  # a broker without DescribeConfigs: describe the partitions anyway
            entries = {}
        entry = entries.get("min.insync.replicas")
        if entry is not None and entry.value is not None and str(entry.value).isdigit():
            min_isr[resource.name] = int(entry.value)
        configs_by_topic[resource.name] = {
            name: entry.value
            for name, entry in sorted(entries.items())
            if not entry.is_default and entry.value is not None and not entry.is_sensitive
        }
    moving: dict[tuple[str, int], tuple[list[int], list[int], list[int]]] = {}
    try:  # the moves under way (kafka-topics.sh asks ListPartitionReassignments too); none if it cannot say
        from kaflite.cli.reassign_cmd import ongoing_reassignments

        wanted = [(n, p) for n in names if (m := metadata.get(n)) is not None for p in m.partitions]
        moving = ongoing_reassignments(cluster, wanted, timeout) if wanted else {}
    except Exception:  # noqa: BLE001 - an older broker, no controller: describe without them
        moving = {}
    out = []
    for name in names:
        md = metadata.get(name)
        if md is None or md.error is not None and md.error.name() == "UNKNOWN_TOPIC_OR_PART":
            fail(f"Topic '{name}' does not exist as expected")
        partitions = []
        for p in md.partitions.values():
            move = moving.get((name, p.id))
            partitions.append(PartitionInfo(p.id, p.leader, list(p.replicas), list(p.isrs),
                                            None if move is None else move[1], None if move is None else move[2]))
        out.append(TopicInfo(name, topic_ids.get(name), partitions, configs_by_topic.get(name, {}),
                             min_isr.get(name, 1)))
    return out


def _topic_ids(admin: Any, names: list[str], timeout: float) -> dict[str, str]:
    """Topic ids by name when the client and broker support DescribeTopics-by-id; {} otherwise."""
    try:
        from confluent_kafka import TopicCollection

        futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout)
        out = {}
        for name, future in futures.items():
            desc = future.result(timeout=timeout)
            if desc.topic_id is not None:
                # librdkafka prints standard base64; Kafka's Uuid.toString is URL-safe base64, unpadded
                out[name] = str(desc.topic_id).rstrip("=").replace("+", "-").replace("/", "_")
        return out
    except Exception:
        return {}


@topics_app.command("describe")
@handle_errors
def describe(
    topics_arg: Annotated[
        list[str] | None, typer.Argument(metavar="[TOPIC]...", help="Topics to describe (default: every topic).")
    ] = None,
    topics_opt: TopicsOption = None,
    exclude_internal: Annotated[
        bool, typer.Option("--exclude-internal", help="Leave out internal topics.")
    ] = False,
    output_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per topic instead of text.")
    ] = False,
    offsets: Annotated[
        bool,
        typer.Option(
            "--offsets",
            help="Per partition: earliest (log start), latest (last stable) offset and high watermark, as "
            "kafka-get-offsets.sh / rpk topic describe -p.",
        ),
    ] = False,
    under_replicated: Annotated[
        bool, typer.Option("--under-replicated-partitions",
                           help="Only partitions whose ISR is smaller than their replica list.")
    ] = False,
    unavailable: Annotated[
        bool, typer.Option("--unavailable-partitions",
                           help="Only partitions without a leader, or whose leader is not a live broker.")
    ] = False,
    under_min_isr: Annotated[
        bool, typer.Option("--under-min-isr-partitions",
                           help="Only partitions whose ISR is smaller than the topic's min.insync.replicas.")
    ] = False,
    at_min_isr: Annotated[
        bool, typer.Option("--at-min-isr-partitions",
                           help="Only partitions whose ISR is exactly the topic's min.insync.replicas.")
    ] = False,
    with_overrides: Annotated[
        bool, typer.Option("--topics-with-overrides",
                           help="Only topics with a config not at its default, their topic line only.")
    ] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Describe topics: partitions, leaders, replicas, ISR and non-default configs (--offsets: offsets;
    --under-replicated-partitions and the other reports: only the partitions in that state, as
    kafka-topics.sh)."""
    topics = topics_given(topics_arg, topics_opt)
    only = PartitionFilter(under_replicated, unavailable, under_min_isr, at_min_isr)
    if only.active and offsets:
        fail("--offsets cannot be combined with the partition reports (--under-replicated-partitions ...)",
             EXIT_USAGE)
    admin = admin_client(bootstrap_server)
    if topics:
        names = list(dict.fromkeys(topics))
    else:
        names = sorted(
            n for n in _all_topics(admin, timeout) if not (exclude_internal and n.startswith("__"))
        )
    try:
        infos = _describe_topics(admin, names, timeout)
    except CliFailure:
        raise
    except Exception as err:
        fail(f"describing topics: {describe_exception(err)}")
    if only.unavailable:
        try:
            live = frozenset(admin.list_topics(timeout=timeout).brokers)
        except Exception as err:
            fail(f"listing the live brokers: {describe_exception(err)}")
        only = dataclasses.replace(only, live_brokers=live)
    if offsets:
        rows = partition_offsets(admin, [(i.name, p.partition) for i in infos for p in i.partitions], timeout)
        if output_json:
            for row in rows:
                typer.echo(json.dumps(dict(zip(("topic", "partition", "earliest", "latest", "high_watermark"),
                                               row, strict=True))))
        else:
            for line in offsets_lines(rows):
                typer.echo(line)
        return
    for info in infos:
        shown = [p for p in info.partitions if only.matches(p, info.min_isr)]
        if only.active and not shown:
            continue
        if with_overrides and not info.configs:  # kafka-topics.sh: a topic without overrides is left out
            continue
        if with_overrides and not output_json:  # ... and the others are shown without their partitions
            typer.echo(describe_lines(info)[0])
            continue
        if output_json:
            typer.echo(
                json.dumps(
                    {
                        "topic": info.name,
                        "topic_id": info.topic_id,
                        "partition_count": len(info.partitions),
                        "replication_factor": info.replication_factor,
                        "configs": info.configs,
                        "partitions": [
                            {
                                "partition": p.partition,
                                "leader": p.leader,
                                "replicas": p.replicas,
                                "isr": p.isr,
                            }
                            for p in sorted(shown, key=lambda p: p.partition)
                        ],
                    }
                )
            )
        else:
            for line in describe_lines(info, only):
                typer.echo(line)


def offsets_lines(rows: list[tuple[str, int, int, int, int]]) -> list[str]:
    """TOPIC PARTITION EARLIEST LATEST HIGH-WATERMARK, columns aligned under their headers."""
    table = [("TOPIC", "PARTITION", "EARLIEST", "LATEST", "HIGH-WATERMARK")]
    table += [(t, str(p), str(e), str(la), str(hw)) for t, p, e, la, hw in sorted(rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return [" ".join(v.ljust(widths[i]) for i, v in enumerate(r[:-1])) + " " + r[-1] for r in table]


def partition_offsets(
    admin: Any, partitions: list[tuple[str, int]], timeout: float
) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, earliest, latest, high watermark) from ListOffsets: earliest = the log start,
    latest = the newest offset a read_committed consumer may read (the last stable offset), high watermark =
    the same for read_uncommitted (they differ while a transaction is open)."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    def ask(spec: Any, isolation: Any) -> dict[tuple[str, int], int]:
        if not partitions:
            return {}
        futures = admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in partitions}, isolation_level=isolation, request_timeout=timeout
        )
        out = {}
        for tp, future in futures.items():
            res = admin_result(future, timeout + 1, f"listing offsets of {tp.topic}-{tp.partition}")
            out[(tp.topic, tp.partition)] = res.offset
        return out

    earliest = ask(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
    latest = ask(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
    high = ask(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
    return [(t, p, earliest[(t, p)], latest[(t, p)], high[(t, p)]) for t, p in partitions]


# --------------------------------------------------------------------------------------------------
# delete


@topics_app.command("delete")
@handle_errors
def delete(
    topics_arg: Annotated[list[str] | None, typer.Argument(metavar="TOPIC...", help="Topics to delete.")] = None,
    topics_opt: TopicsOption = None,
    if_exists: Annotated[
        bool, typer.Option("--if-exists", help="Succeed if a topic does not exist.")
    ] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Delete topics (TOPIC... and/or --topic TOPIC, repeatable)."""
    topics = topics_given(topics_arg, topics_opt)
    if not topics:
        fail("missing the topic: give TOPIC... or --topic TOPIC", EXIT_USAGE)
    admin = admin_client(bootstrap_server)
    futures = admin.delete_topics(
        list(dict.fromkeys(topics)), operation_timeout=timeout, request_timeout=timeout
    )
    for name, future in futures.items():
        try:
            future.result(timeout=timeout + 1)
        except Exception as err:
            if if_exists and _is_error(err, "UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID"):
                continue
            if _is_error(err, "UNKNOWN_TOPIC_OR_PART"):
                fail(f"Topic '{name}' does not exist as expected")
            admin_result(future, timeout, f"deleting topic {name!r}")
        typer.echo(f"Deleted topic {name}.")


# --------------------------------------------------------------------------------------------------
# alter


@topics_app.command("alter")
@handle_errors
def alter(
    topic_arg: Annotated[str | None, typer.Argument(metavar="TOPIC", help="Topic name.")] = None,
    topic_opt: TopicOption = None,
    partitions: Annotated[
        int | None, typer.Option("--partitions", "-p", min=1, help="New (larger) total partition count.")
    ] = None,
    config: Annotated[
        list[str] | None,
        typer.Option("--config", "-c", metavar="KEY=VALUE", help="Set a topic configuration (repeatable)."),
    ] = None,
    delete_config: Annotated[
        list[str] | None,
        typer.Option(
            "--delete-config", metavar="KEY", help="Remove a topic configuration override (repeatable)."
        ),
    ] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Add partitions and/or change topic configurations."""
    topic = one_topic(topic_arg, topic_opt)
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        ResourceType,
    )

    sets = parse_key_values(config, "--config")
    deletes = list(delete_config or [])
    if partitions is None and not sets and not deletes:
        fail(
            "alter: nothing to change; give --partitions, --config KEY=VALUE or --delete-config KEY",
            EXIT_USAGE,
        )
    admin = admin_client(bootstrap_server)
    md = _all_topics(admin, timeout).get(topic)
    if md is None:
        fail(f"Topic '{topic}' does not exist as expected")
    if partitions is not None:
        current = len(md.partitions)
        if partitions < current:
            fail(
                f"--partitions: the number of partitions can only grow; {topic} has {current}, "
                f"got {partitions}",
                EXIT_USAGE,
            )
        if partitions > current:
            future = admin.create_partitions(
                [NewPartitions(topic, partitions)], operation_timeout=timeout, request_timeout=timeout
            )[topic]
            admin_result(future, timeout + 1, f"adding partitions to {topic!r}")
            typer.echo(f"Topic {topic} now has {partitions} partitions.")
    if sets or deletes:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deletes]
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
        future = admin.incremental_alter_configs([resource], request_timeout=timeout)[resource]
        admin_result(future, timeout + 1, f"altering the configuration of {topic!r}")
        typer.echo(
            f"Updated the configuration of topic {topic}: "
            + ", ".join([f"{k}={v}" for k, v in sets.items()] + [f"-{k}" for k in deletes])
        )


# --------------------------------------------------------------------------------------------------
# configs describe (kafka-configs.sh --describe)

configs_app = typer.Typer(
    help="Show and change topic and broker configurations (like kafka-configs.sh --describe / --alter).",
    no_args_is_help=True,
)

ENTITY_TYPES = ("topics", "brokers")


def split_config_list(text: str, option: str) -> dict[str, str]:
    """kafka-configs.sh's `k1=v1,k2=[a,b],k3=v3`: commas split entries except inside square brackets (a
    list value, written without its brackets)."""
    entries: list[str] = []
    depth, current = 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            entries.append(current)
            current = ""
        else:
            current += ch
    entries.append(current)
    out: dict[str, str] = {}
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            fail(f"{option}: expected KEY=VALUE[,KEY=VALUE...], got {entry!r}", EXIT_USAGE)
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _config_resource_of(
    entity_type: str | None, entity_name: str | None, topic: str | None, broker: int | None
) -> tuple[str, str]:
    """('topic', name) or ('broker', id) from --entity-type/--entity-name or the --topic/--broker shortcuts."""
    given = [x for x in (entity_name is not None or entity_type is not None, topic is not None, broker is not None) if x]
    if len(given) != 1:
        fail("give exactly one of --entity-type topics|brokers --entity-name NAME, --topic NAME, --broker ID",
             EXIT_USAGE)
    if topic is not None:
        return "topic", topic
    if broker is not None:
        return "broker", str(broker)
    if entity_type not in ENTITY_TYPES:
        fail(f"--entity-type: expected {' or '.join(ENTITY_TYPES)} (or users / clients for client quotas), "
             f"got {entity_type!r}", EXIT_USAGE)
    if entity_type == "brokers" and entity_name == "":
        fail("--entity-default: broker-wide defaults are static in kaflite (server.properties); kaflite configs "
             "changes one topic or one broker", EXIT_USAGE)
    if not entity_name:
        fail(f"--entity-name: the {entity_type[:-1]} to change is missing", EXIT_USAGE)
    if entity_type == "brokers" and not entity_name.isdigit():
        fail(f"--entity-name: a broker is named by its id (an integer), got {entity_name!r}", EXIT_USAGE)
    return entity_type[:-1], entity_name

# Kafka's DescribeConfigs config_source names, by code.
CONFIG_SOURCE_NAMES = {
    0: "UNKNOWN_CONFIG",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
_DYNAMIC = {1, 2, 3, 6}


def _source_code(source: Any) -> int:
    return int(getattr(source, "value", source))


def config_line(
    name: str, value: str | None, sensitive: bool, synonyms: list[tuple[int, str, str | None]]
) -> str:
    """One kafka-configs.sh --describe entry: `  name=value sensitive=false synonyms={SOURCE:name=value, ...}`."""
    shown = "null" if sensitive else ("null" if value is None else value)
    syns = ", ".join(
        f"{CONFIG_SOURCE_NAMES.get(code, str(code))}:{n}={'null' if v is None else v}"
        for code, n, v in synonyms
    )
    return f"  {name}={shown} sensitive={'true' if sensitive else 'false'} synonyms={{{syns}}}"


@configs_app.command("describe")
@handle_errors
def configs_describe(
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Describe this topic's configs.")] = None,
    broker: Annotated[int | None, typer.Option("--broker", help="Describe this broker's configs.")] = None,
    entity_type: EntityTypes = None,
    entity_name: EntityNames = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Every config, not only the dynamic (per-topic) ones.")
    ] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Print a topic's or broker's configuration entries with their sources and synonyms, or the client
    quotas of users / client ids (and users' SCRAM credentials)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    if entity_type and set(entity_type) & set(quotas_cmd.QUOTA_TYPES):
        _describe_quotas(bootstrap_server, entity_type, entity_name or [], timeout)
        return
    kind, name = _config_resource_of(_one(entity_type, "--entity-type"), _one(entity_name, "--entity-name"),
                                     topic, broker)
    admin = admin_client(bootstrap_server)
    if kind == "topic":
        if name not in _all_topics(admin, timeout):
            fail(f"Topic '{name}' does not exist as expected")
        resource = ConfigResource(ResourceType.TOPIC, name)
    else:
        resource = ConfigResource(ResourceType.BROKER, name)
    label = f"{kind} {name}"
    future = admin.describe_configs([resource], request_timeout=timeout)[resource]
    entries = admin_result(future, timeout + 1, f"describing the configuration of {label}")
    typer.echo(f"{'All' if show_all else 'Dynamic'} configs for {label} are:")
    for name in sorted(entries):
        entry = entries[name]
        if not show_all and _source_code(entry.source) not in _DYNAMIC:
            continue
        synonyms = [(_source_code(s.source), s.name, s.value) for s in entry.synonyms.values()]
        # confluent-kafka keys synonyms by name, so of a broker key's layers under one name (STATIC_BROKER_CONFIG
        # and DEFAULT_CONFIG log.segment.bytes) only the last survives; the entry itself is the first layer
        own = _source_code(entry.source)
        if entry.synonyms and all(code != own for code, _n, _v in synonyms):
            synonyms.insert(0, (own, name, entry.value))
        typer.echo(config_line(name, entry.value, bool(entry.is_sensitive), synonyms))


@configs_app.command("alter")
@handle_errors
def configs_alter(
    entity_type: EntityTypes = None,
    entity_name: EntityNames = None,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Shortcut: --entity-type topics --entity-name.")] = None,
    broker: Annotated[int | None, typer.Option("--broker", help="Shortcut: --entity-type brokers --entity-name.")] = None,
    add_config: Annotated[
        list[str] | None,
        typer.Option("--add-config", metavar="K=V[,K=V...]", help="Set configs (values with commas in [a,b]; repeatable)."),
    ] = None,
    delete_config: Annotated[
        list[str] | None,
        typer.Option("--delete-config", metavar="K[,K...]", help="Remove configs, back to their default (repeatable)."),
    ] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Set or remove topic / broker configs with IncrementalAlterConfigs, as kafka-configs.sh --alter; or
    client quotas of users / client ids (AlterClientQuotas) and users' SCRAM credentials."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    quota = bool(entity_type and set(entity_type) & set(quotas_cmd.QUOTA_TYPES))
    if not quota:
        kind, name = _config_resource_of(_one(entity_type, "--entity-type"), _one(entity_name, "--entity-name"),
                                         topic, broker)
    sets: dict[str, str] = {}
    for text in add_config or []:
        sets.update(split_config_list(text, "--add-config"))
    deletes = list(dict.fromkeys(k.strip() for text in delete_config or [] for k in text.split(",") if k.strip()))
    if not sets and not deletes:
        fail("configs alter: nothing to change; give --add-config K=V[,K=V...] and/or --delete-config K", EXIT_USAGE)
    both = sorted(set(sets) & set(deletes))
    if both:
        fail(f"{', '.join(both)}: both added and deleted; give each config once", EXIT_USAGE)
    if quota:
        assert entity_type is not None
        _alter_quotas(bootstrap_server, entity_type, entity_name or [], sets, deletes, timeout)
        return
    admin = admin_client(bootstrap_server)
    if kind == "topic" and name not in _all_topics(admin, timeout):
        fail(f"Topic '{name}' does not exist as expected")
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deletes]
    resource = ConfigResource(ResourceType.TOPIC if kind == "topic" else ResourceType.BROKER, name,
                              incremental_configs=entries)
    future = admin.incremental_alter_configs([resource], request_timeout=timeout)[resource]
    admin_result(future, timeout + 1, f"altering the configuration of {kind} {name}")
    typer.echo(f"Completed updating config for {kind} {name}.")


def _one(values: list[str] | None, option: str) -> str | None:
    """The single value of a repeatable option of a topic / broker config command."""
    if not values:
        return None
    if len(values) > 1:
        fail(f"{option}: give it once for topics and brokers (twice only for a user's client quotas)", EXIT_USAGE)
    return values[0]


def _describe_quotas(bootstrap: str, types: list[str], names: list[str], timeout: float) -> None:
    entity = quotas_cmd.quota_entity(types, names, describing=True)
    for line in quotas_cmd.describe(bootstrap, entity, timeout):
        typer.echo(line)
    # kafka-configs.sh adds the users' SCRAM credentials when describing users alone, not the default user
    if types == ["users"] and "" not in names:
        from kaflite.cli import users_cmd

        admin = admin_client(bootstrap)
        asked: list[str | None] = list(names) or [None]  # None: every user with a credential
        for user in asked:
            users_cmd.describe_credentials(admin, user, timeout)


def _alter_quotas(bootstrap: str, types: list[str], names: list[str], sets: dict[str, str], deletes: list[str],
                  timeout: float) -> None:
    """Quota keys through AlterClientQuotas; a user's SCRAM keys through `kaflite users`' code."""
    from kaflite.cli import users_cmd

    entity = quotas_cmd.quota_entity(types, names, describing=False)
    scram_sets = {k: v for k, v in sets.items() if k in users_cmd.MECHANISMS}
    scram_deletes = [k for k in deletes if k in users_cmd.MECHANISMS]
    if scram_sets or scram_deletes:
        if types != ["users"] or not names[0]:
            fail("SCRAM credentials belong to one named user (--entity-type users --entity-name USER)", EXIT_USAGE)
        try:
            upserts = users_cmd.parse_add_config(",".join(f"{k}=[{v}]" for k, v in scram_sets.items()))  \
                if scram_sets else {}
        except ValueError as e:
            fail(f"--add-config: {e}", EXIT_USAGE)
    quota_sets = {k: v for k, v in sets.items() if k not in scram_sets}
    quota_deletes = [k for k in deletes if k not in scram_deletes]
    if quota_sets or quota_deletes:
        quotas_cmd.alter(bootstrap, entity, quota_sets, quota_deletes, timeout)
    if scram_sets or scram_deletes:
        users_cmd.alter_credentials(admin_client(bootstrap), names[0], upserts, scram_deletes, timeout)
    typer.echo(quotas_cmd.alter_line(types, names))
