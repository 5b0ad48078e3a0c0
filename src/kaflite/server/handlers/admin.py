"""Topic and cluster administration: CreateTopics 2-7, DeleteTopics 1-6, CreatePartitions 0-3,
DescribeConfigs 1-4, AlterConfigs 0-2, IncrementalAlterConfigs 0-1, DescribeCluster 0-2, DeleteRecords 0-2,
DescribeLogDirs 1-4.

Rules (Kafka's `ControllerApis` / `KafkaApis`):
- a topic name appearing twice in one request is refused for every occurrence (INVALID_REQUEST);
- `num_partitions` / `replication_factor` of -1 take the broker defaults (`num.partitions`,
  `default.replication.factor`); placement (a replication factor above the number of brokers:
  INVALID_REPLICATION_FACTOR; a manual assignment naming unknown brokers: INVALID_REPLICA_ASSIGNMENT) is
  decided by the metadata writer (`broker.topic_admin`, the `TopicAdmin` interface), asked with
  validate_only before anything changes;
- topic configs are validated by key and value (INVALID_CONFIG naming the key) before anything changes;
  `validate_only` checks everything and changes nothing;
- internal topics (`__consumer_offsets`) cannot be created or deleted through the API;
- DescribeConfigs lists every topic (or broker) key with its effective value, defaults included, with
  synonyms and documentation only when asked; a BROKER resource's empty name (the cluster default entity)
  lists only the keys set there; read_only is true for the keys Kafka cannot change dynamically;
- a BROKER alteration (this broker's id or the default entity) is validated and applied by
  `Broker.alter_dynamic_config` (server/dynamic_config.py rules); every refusal is INVALID_REQUEST;
- DeleteRecords moves the log start offset (offset -1 = the high watermark); beyond it is
  OFFSET_OUT_OF_RANGE (`Partition.delete_records_on_leader`, on the leader only, in a worker thread: it
  renames segments and rewrites the checkpoints with fsyncs); each partition is
  answered once its low watermark (the smallest log start offset over the leader and its live replicas,
  which adopt the leader's on their next fetch) reached the offset deleted, with that low watermark, or at
  the request's `timeout` with REQUEST_TIMED_OUT (Kafka's DelayedDeleteRecords);
- CreateTopics, CreatePartitions and DeleteTopics take each topic's partitions created or deleted from the
  client's `controller_mutation_rate` quota (server/quota/manager.py), in request order, after every other
  check of that topic and before changing it (not with validate_only; a topic this broker does not know
  is not counted): a strict quota (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) that is
  exhausted answers that topic THROTTLING_QUOTA_EXCEEDED; the answer carries the quota's throttle
  (Kafka's ZkAdminManager and sendResponseMaybeThrottleWithControllerQuota).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import logging
import uuid
from collections import Counter
from collections.abc import Mapping
from functools import partial
from typing import Any

from kaflite.cluster.admin import TopicSpec
from kaflite.cluster.group_history import RESOURCE_PREFIX as GROUP_HISTORY_PREFIX
from kaflite.cluster.metadata import INTERNAL_TOPICS, TopicImage, validate_topic_name
from kaflite.cluster.share_group_view import RESOURCE_PREFIX as SHARE_GROUP_VIEW_PREFIX
from kaflite.cluster.zk_metadata import ZkMetadata
from kaflite.coordinator.timeline import RebalanceEvent
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import rules
from kaflite.server.authorizer import ResourceType
from kaflite.server.broker import Broker
from kaflite.server.config import ConfigError, UnknownConfigKey
from kaflite.server.config.definitions import TYPE_CODES, ConfigEntry
from kaflite.server.context import RequestContext, build
from kaflite.server.dynamic_config import DEFAULT_ENTITY
from kaflite.server.handlers import ApiTable
from kaflite.server.handlers.groups import group_history
from kaflite.server.handlers.metadata import broker_endpoints
from kaflite.server.handlers.partitions import per_partition
from kaflite.server.handlers.share import alter_group_configs, share_group_history, share_group_view
from kaflite.server.metadata_waiters import topic_has_leaders
from kaflite.server.quota import MutationQuota

log = logging.getLogger(__name__)

_ZERO = datetime.timedelta(0)
_NO_ID = uuid.UUID(int=0)
# A guard against typos such as 100000000 partitions (each is a directory with open files); Kafka has no
# fixed limit but would exhaust the controller's resources the same way.
MAX_PARTITIONS_PER_TOPIC = 10_000
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_GROUP = 2, 4, 8, 32
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _config_error(e: Exception) -> KafkaError:
    if isinstance(e, KafkaError):
        return e
    return KafkaError(ErrorCode.invalid_config, str(e))


def validate_topic_configs(broker: Broker, configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic configs (names and values); returns them as strings. Raises KafkaError(INVALID_CONFIG)."""
    clean = {k: v for k, v in configs.items() if v is not None}
    try:
        from kaflite.server.config import validate_topic_configs as check

        check(clean)
        from kaflite.server.logconfig import log_config_for

        log_config_for(broker.config, clean)
    except Exception as e:
        raise _config_error(e) from e
    return clean


def _assignment(assignments: Any) -> list[list[int]] | None:
    """A request's manual assignment as replica lists in partition order (None when it has none)."""
    if not assignments:
        return None
    return [list(a.broker_ids or ()) for a in sorted(assignments, key=lambda a: a.partition_index)]


def _check_partition_limit(count: int) -> None:
    if count > MAX_PARTITIONS_PER_TOPIC:
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"{count} partitions exceed kaflite's limit of {MAX_PARTITIONS_PER_TOPIC} per topic",
        )


# -- CreateTopics ------------------------------------------------------------------------------------
async def handle_create_topics(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    R = ctx.response
    counts = Counter(t.name for t in request.topics)
    results: list[Any] = []
    created: list[tuple[int, str, int]] = []  # (index in results, topic, partitions) to wait for
    # Kafka: CREATE on the cluster creates any topic, else CREATE on each topic
    may_create_any = ctx.allowed(rules.CREATE_TOPICS_CLUSTER)
    # first every topic's checks that need no ZooKeeper, then (in a cluster) one admin call for all of them
    checked: list[TopicSpec | KafkaError] = []
    for t in request.topics:
        try:
            if counts[t.name] > 1:
                raise KafkaError(ErrorCode.invalid_request, f"Duplicate topic name {t.name} in the request.")
            if not may_create_any and not ctx.allowed(rules.CREATE_TOPICS_TOPIC, t.name):
                raise KafkaError(rules.CREATE_TOPICS_TOPIC.error, "Authorization failed.")
            validate_topic_name(t.name)
            if t.name in INTERNAL_TOPICS:
                raise KafkaError(ErrorCode.invalid_request, f"Creation of internal topic {t.name} is prohibited.")
            if t.name in broker.metadata.topics:
                raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.")
            if t.assignments:
                if t.num_partitions != -1 or t.replication_factor != -1:
                    raise KafkaError(
                        ErrorCode.invalid_request,
                        "Both numPartitions or replicationFactor and replicasAssignments were set. "
                        "Both cannot be used at the same time.",
                    )
                indexes = sorted(a.partition_index for a in t.assignments)
                if indexes != list(range(len(indexes))):
                    raise KafkaError(ErrorCode.invalid_replica_assignment, "Partitions should be 0..n-1")
                num_partitions = len(indexes)
            else:
                num_partitions = (
                    t.num_partitions if t.num_partitions != -1 else int(broker.setting("num.partitions"))
                )
                if num_partitions < 1:
                    raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
            _check_partition_limit(num_partitions)
            rf = t.replication_factor if t.replication_factor != -1 else int(broker.setting("default.replication.factor"))
            configs: dict[str, str] = {}
            refusal = None
            try:
                configs = validate_topic_configs(broker, {c.name: c.value for c in t.configs})
            except KafkaError as e:  # answered after the placement's own errors, as before
                refusal = e
            checked.append(TopicSpec(t.name, num_partitions, rf, configs, _assignment(t.assignments), refusal))
        except KafkaError as e:
            checked.append(e)
    specs = [c for c in checked if isinstance(c, TopicSpec)]
    quota = ctx.mutation_quota(strict_since_version=6)
    outcomes = iter(await _create_topics(ctx, specs, request.validate_only, quota))
    for t, c in zip(request.topics, checked, strict=True):
        code, message = ErrorCode.none, None
        topic = None
        num_partitions, rf = -1, -1
        got = c if isinstance(c, KafkaError) else next(outcomes)
        if isinstance(got, KafkaError):
            code, message = got.code, got.message or None
        else:
            num_partitions, rf = got.num_partitions, len(got.partitions[0].replicas)
            if not request.validate_only:
                topic = got
                created.append((len(results), t.name, num_partitions))
        topic_configs = None
        if code == ErrorCode.none and ctx.api_version >= 5:
            topic_configs = tuple(
                build(
                    R.CreatableTopicConfigs,
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=e.source_code,
                    is_sensitive=e.is_sensitive,
                )
                for e in _describe_topic_entries(broker, {c.name: c.value for c in t.configs if c.value is not None})
            )
        results.append(
            build(
                R.CreatableTopicResult,
                name=t.name,
                topic_id=topic.topic_id if topic is not None else None,
                error_code=code,
                error_message=message,
                num_partitions=num_partitions,
                replication_factor=rf,
                configs=topic_configs,
            )
        )
    for index in await _not_ready_in_time(broker, request.timeout, created):
        late = results[index]
        message = f"Topic '{late.name}' was created, but its partitions had no leader on this broker in time."
        results[index] = dataclasses.replace(late, error_code=ErrorCode.request_timed_out,
                                             **({"error_message": message} if hasattr(late, "error_message")
                                                else {}))
    ctx.throttle_mutations(quota)
    return build(R.CreateTopicsResponse, throttle_time=_ZERO, topics=tuple(results))


async def _create_topics(ctx: RequestContext, specs: list[TopicSpec], validate_only: bool,
                         quota: MutationQuota) -> list[TopicImage | KafkaError]:
    """Plan (and unless `validate_only`, create) the checked topics of one request, an outcome per spec.
    In a cluster that is one admin call for the whole request (about one round of ZooKeeper work,
    `ZkAdmin.create_topics`), so a big request neither takes seconds nor keeps the requests queued behind
    it in the admin thread waiting; on a single node each topic is created in turn, its file work in a
    worker thread (`Broker.create_topic_async`). Each topic planned without error takes its partitions
    from `quota` before it is created."""
    if not specs:
        return []
    broker = ctx.broker
    writer = broker.metadata_writer
    if isinstance(writer, ZkMetadata):
        if quota.bounded and not validate_only:
            return await _create_topics_quota(ctx, writer, specs, quota)
        outcomes = await broker.admin_call(partial(writer.create_topics, specs, validate_only=validate_only))
        for got in outcomes:
            if not validate_only and not isinstance(got, KafkaError):
                log.info("created topic %s with %d partition(s)", got.name, got.num_partitions)
        return outcomes
    out: list[TopicImage | KafkaError] = []
    for spec in specs:
        try:
            # placement first (the writer knows the brokers), then the configs, then the change
            planned = broker.topic_admin.create_topic(spec.name, spec.num_partitions, spec.replication_factor, {},
                                                      spec.assignment, validate_only=True)
            if spec.refusal is not None:
                raise spec.refusal
            if validate_only:
                out.append(planned)
                continue
            ctx.take_mutations(quota, planned.num_partitions)
            # the file work (metadata file, each partition's log) in a worker thread, not on the loop
            out.append(await broker.create_topic_async(
                spec.name, spec.num_partitions, dict(spec.configs),
                replication_factor=len(planned.partitions[0].replicas),
                assignment=[list(r) for r in spec.assignment] if spec.assignment else None))
        except KafkaError as e:
            out.append(e)
    return out


async def _create_topics_quota(ctx: RequestContext, writer: ZkMetadata, specs: list[TopicSpec],
                               quota: MutationQuota) -> list[TopicImage | KafkaError]:
    """A cluster's CreateTopics under a controller mutation quota: the topics are planned first (one admin
    call, validate_only), so only topics that would be created take from the quota, in request order, as
    Kafka's ZkAdminManager records each topic after its checks; then the admitted ones are created in one
    more call. A topic created meanwhile by another request fails the second call (TOPIC_ALREADY_EXISTS)
    with its partitions taken, as Kafka's write after the record does."""
    broker = ctx.broker
    planned = await broker.admin_call(partial(writer.create_topics, specs, validate_only=True))
    out: list[TopicImage | KafkaError] = []
    admitted: list[int] = []
    for i, got in enumerate(planned):
        if not isinstance(got, KafkaError):
            try:
                ctx.take_mutations(quota, got.num_partitions)
                admitted.append(i)
            except KafkaError as e:
                got = e
        out.append(got)
    if admitted:
        created = await broker.admin_call(partial(writer.create_topics, [specs[i] for i in admitted]))
        for i, got in zip(admitted, created, strict=True):
            out[i] = got
            if not isinstance(got, KafkaError):
                log.info("created topic %s with %d partition(s)", got.name, got.num_partitions)
    return out


async def _not_ready_in_time(broker: Broker, timeout: datetime.timedelta,
                             changed: list[tuple[int, str, int]]) -> list[int]:
    """Kafka's DelayedCreatePartitions: in a cluster, CreateTopics and CreatePartitions answer once this
    broker's metadata shows every new partition with a leader (so the client's next request to this broker,
    a produce or a config change, finds it), or the request's timeout passed: the indexes still not ready
    then, answered REQUEST_TIMED_OUT (the change stays made). A timeout <= 0 answers at once, as Kafka."""
    if not changed or not broker.in_cluster or timeout.total_seconds() <= 0:
        return []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout.total_seconds()
    late = []
    for index, name, partitions in changed:
        if not await broker.metadata_waiters.wait(topic_has_leaders(name, partitions), deadline - loop.time()):
            late.append(index)
    return late


# -- DeleteTopics ------------------------------------------------------------------------------------
async def handle_delete_topics(ctx: RequestContext, request: Any) -> Any:
    """DeleteTopics v1-6. v6 names each topic by name or by id (KIP-516, Kafka's `handleDeleteTopicsRequest`):
    both at once is INVALID_REQUEST for the whole request (Kafka throws), an id no topic has is
    UNKNOWN_TOPIC_ID; the answer echoes the id and the resolved name."""
    broker = ctx.broker
    R = ctx.response
    if ctx.api_version >= 6:
        wanted: list[tuple[str | None, uuid.UUID]] = []
        for t in request.topics:
            topic_id = t.topic_id or _NO_ID
            if t.name is not None and topic_id != _NO_ID:
                refusals = tuple(build(R.DeletableTopicResult, name=x.name, topic_id=x.topic_id or _NO_ID,
                                       error_code=ErrorCode.invalid_request,
                                       error_message="Topic name and topic ID can not both be specified.")
                                 for x in request.topics)
                return build(R.DeleteTopicsResponse, throttle_time=_ZERO, responses=refusals)
            if topic_id == _NO_ID:
                wanted.append((t.name, _NO_ID))
            else:
                found = broker.metadata.topic_by_id(topic_id)
                wanted.append((found.name if found is not None else None, topic_id))
    else:
        wanted = [(name, _NO_ID) for name in request.topic_names]
    counts = Counter(name for name, _id in wanted if name is not None)
    quota = ctx.mutation_quota(strict_since_version=5)
    results = []
    for name, topic_id in wanted:
        code, message = ErrorCode.none, None
        try:
            if name is None:
                raise KafkaError(ErrorCode.unknown_topic_id, f"Topic id {topic_id} does not exist.")
            if counts[name] > 1:
                raise KafkaError(ErrorCode.invalid_request, f"Duplicate topic name {name} in the request.")
            ctx.check(rules.DELETE_TOPICS, name)
            if name in INTERNAL_TOPICS:
                raise KafkaError(ErrorCode.invalid_request, f"Deletion of internal topic {name} is prohibited.")
            if not broker.setting("delete.topic.enable"):
                raise KafkaError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
            existing = broker.metadata.topics.get(name)
            if ctx.api_version >= 6 and topic_id == _NO_ID:
                topic_id = existing.topic_id if existing is not None else _NO_ID
            if existing is not None:  # Kafka answers a topic it does not know before its quota
                ctx.take_mutations(quota, existing.num_partitions)
            await broker.delete_topic_async(name)
        except KafkaError as e:
            code, message = e.code, e.message or None
        results.append(build(R.DeletableTopicResult, name=name, topic_id=topic_id, error_code=code,
                             error_message=message))
    ctx.throttle_mutations(quota)
    return build(R.DeleteTopicsResponse, throttle_time=_ZERO, responses=tuple(results))


# -- CreatePartitions --------------------------------------------------------------------------------
async def handle_create_partitions(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    R = ctx.response
    counts = Counter(t.name for t in request.topics)
    results: list[Any] = []
    created: list[tuple[int, str, int]] = []  # (index in results, topic, partitions) to wait for
    quota = ctx.mutation_quota(strict_since_version=3)
    for t in request.topics:
        code, message = ErrorCode.none, None
        try:
            if counts[t.name] > 1:
                raise KafkaError(ErrorCode.invalid_request, f"Duplicate topic name {t.name} in the request.")
            ctx.check(rules.CREATE_PARTITIONS, t.name)
            topic = await broker.topic_for_admin(t.name)
            if topic is None:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{t.name}' does not exist.")
            if t.count <= topic.num_partitions:
                raise KafkaError(
                    ErrorCode.invalid_partitions,
                    f"Topic currently has {topic.num_partitions} partitions, which is higher than or equal "
                    f"to the requested {t.count}.",
                )
            _check_partition_limit(t.count)
            if t.assignments is not None:
                if len(t.assignments) != t.count - topic.num_partitions:
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment,
                        f"Increasing the number of partitions by {t.count - topic.num_partitions} but "
                        f"{len(t.assignments)} assignments provided.",
                    )
            assignment = [list(a.broker_ids or ()) for a in t.assignments] if t.assignments is not None else None
            await broker.admin_call(partial(broker.topic_admin.create_partitions, t.name, t.count, assignment,
                                            validate_only=True))
            if not request.validate_only:
                ctx.take_mutations(quota, t.count - topic.num_partitions)
                await broker.admin_call(partial(broker.create_partitions, t.name, t.count, assignment))
                created.append((len(results), t.name, t.count))
        except KafkaError as e:
            code, message = e.code, e.message or None
        results.append(build(R.CreatePartitionsTopicResult, name=t.name, error_code=code, error_message=message))
    for index in await _not_ready_in_time(broker, request.timeout, created):
        results[index] = build(R.CreatePartitionsTopicResult, name=results[index].name,
                               error_code=ErrorCode.request_timed_out,
                               error_message=f"Partitions of '{results[index].name}' were created, but had no "
                                             f"leader on this broker in time.")
    ctx.throttle_mutations(quota)
    return build(R.CreatePartitionsResponse, throttle_time=_ZERO, results=tuple(results))


# -- DescribeConfigs ---------------------------------------------------------------------------------
def _describe_topic_entries(broker: Broker, overrides: Mapping[str, Any], keys: Any = None) -> list[Any]:
    config = broker.config
    return _known_only(lambda ks: config.describe_topic(overrides, ks), keys)


def _known_only(describe: Any, keys: Any) -> list[Any]:
    if not keys:
        return list(describe(None))
    out = []
    for k in keys:  # Kafka silently leaves out keys it does not know
        try:
            out.extend(describe([k]))
        except UnknownConfigKey:
            continue
    return out


def _history_entry(event: RebalanceEvent) -> ConfigEntry:
    return ConfigEntry(str(event.seq), json.dumps(event.to_json(), separators=(",", ":")), "default", 0,
                       TYPE_CODES["string"], "", read_only=True)


async def handle_describe_configs(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    R = ctx.response
    synonyms_wanted = bool(getattr(request, "include_synonyms", False))
    docs_wanted = bool(getattr(request, "include_documentation", False))
    results = []
    for res in request.resources:
        code, message, entries = ErrorCode.none, None, []
        keys = res.configuration_keys
        try:
            if res.resource_type == RESOURCE_TOPIC:
                ctx.check(rules.DESCRIBE_CONFIGS_TOPIC, res.resource_name)
                topic = await broker.topic_for_admin(res.resource_name)
                if topic is None:
                    try:
                        validate_topic_name(res.resource_name)
                    except KafkaError as e:
                        raise KafkaError(ErrorCode.invalid_topic_exception, e.message) from e
                    raise KafkaError(
                        ErrorCode.unknown_topic_or_partition, f"Topic '{res.resource_name}' does not exist."
                    )
                entries = _describe_topic_entries(broker, topic.configs, keys)
            elif res.resource_type == RESOURCE_BROKER and res.resource_name.startswith(GROUP_HISTORY_PREFIX):
                # kaflite's rebalance timeline of a group (kaflite.clients.group_history asks for it)
                group_id = res.resource_name[len(GROUP_HISTORY_PREFIX):]
                ctx.check(rules.DESCRIBE_CONFIGS_GROUP_HISTORY, group_id)
                # a share group's timeline is the share coordinator's (in memory, as its membership)
                events = share_group_history(broker, group_id)
                if events is None:
                    events = await group_history(ctx, group_id)
                entries = [_history_entry(e) for e in events]
            elif res.resource_type == RESOURCE_BROKER and res.resource_name.startswith(SHARE_GROUP_VIEW_PREFIX):
                # kaflite's view of a share group's members and records in flight (the console's page)
                group_id = res.resource_name[len(SHARE_GROUP_VIEW_PREFIX):]
                ctx.check(rules.DESCRIBE_CONFIGS_GROUP_HISTORY, group_id)
                entries = [ConfigEntry(name, json.dumps(value, separators=(",", ":")), "default", 0,
                                       TYPE_CODES["string"], "", read_only=True)
                           for name, value in share_group_view(broker, group_id)]
            elif res.resource_type == RESOURCE_BROKER:
                ctx.check(rules.DESCRIBE_CONFIGS_CLUSTER)
                if res.resource_name not in ("", str(broker.node_id)):
                    raise KafkaError(ErrorCode.invalid_request, f"Unexpected broker id {res.resource_name}")
                # Kafka's empty name is the cluster default entity: only what is set there
                describe = broker.config.describe if res.resource_name else broker.config.describe_default_entity
                entries = _known_only(describe, keys)
            elif res.resource_type == RESOURCE_BROKER_LOGGER:
                ctx.check(rules.DESCRIBE_CONFIGS_CLUSTER)
                entries = []
            else:
                raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type} "
                                 "(allowed: 2 TOPIC, 4 BROKER, 8 BROKER_LOGGER)")
        except KafkaError as e:
            code, message, entries = e.code, e.message or None, []
        configs = tuple(
            build(
                R.DescribeConfigsResourceResult,
                name=e.name,
                value=None if e.is_sensitive else e.value,
                read_only=e.read_only,
                config_source=e.source_code,
                is_sensitive=e.is_sensitive,
                synonyms=tuple(
                    build(R.DescribeConfigsSynonym, name=n, value=v, source=s) for n, v, s in e.synonyms
                )
                if synonyms_wanted
                else (),
                config_type=e.config_type,
                documentation=e.documentation if docs_wanted else None,
            )
            for e in entries
        )
        results.append(
            build(
                R.DescribeConfigsResult,
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=configs,
            )
        )
    return build(R.DescribeConfigsResponse, throttle_time=_ZERO, results=tuple(results))


# -- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------------------
async def _alter(
    ctx: RequestContext, request: Any, new_configs: Any, topic_check: rules.Check, cluster_check: rules.Check,
    group_check: rules.Check | None = None,
) -> list[tuple[ErrorCode, str | None, int, str]]:
    broker = ctx.broker
    out: list[tuple[ErrorCode, str | None, int, str]] = []
    for res in request.resources:
        code, message = ErrorCode.none, None
        try:
            if res.resource_type == RESOURCE_BROKER:
                await _alter_broker(ctx, res, new_configs, request.validate_only, cluster_check)
                out.append((code, message, res.resource_type, res.resource_name))
                continue
            if res.resource_type == RESOURCE_GROUP and group_check is not None:  # share groups' keys
                ctx.check(group_check, res.resource_name)
                await alter_group_configs(ctx.broker, res.resource_name, partial(new_configs, configs=res.configs),
                                          request.validate_only)
                out.append((code, message, res.resource_type, res.resource_name))
                continue
            if res.resource_type != RESOURCE_TOPIC:
                if res.resource_type == RESOURCE_BROKER_LOGGER:
                    ctx.check(cluster_check)
                raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type} "
                                 "(allowed: 2 TOPIC, 4 BROKER; 8 BROKER_LOGGER is described, not altered)")
            ctx.check(topic_check, res.resource_name)
            topic = await broker.topic_for_admin(res.resource_name)
            if topic is None:
                raise KafkaError(
                    ErrorCode.unknown_topic_or_partition, f"Topic '{res.resource_name}' does not exist."
                )
            configs = validate_topic_configs(broker, new_configs(topic.configs, res.configs))
            if not request.validate_only:
                await broker.admin_call(partial(broker.alter_topic_configs, topic.name, configs))
        except KafkaError as e:
            code, message = e.code, e.message or None
        out.append((code, message, res.resource_type, res.resource_name))
    return out


async def _alter_broker(ctx: RequestContext, res: Any, new_configs: Any, validate_only: bool,
                        cluster_check: rules.Check) -> None:
    """A BROKER resource: this broker's id or Kafka's empty name (the cluster default entity), as Kafka's
    ZooKeeper-mode AdminManager: a refused config answers INVALID_REQUEST naming it."""
    broker = ctx.broker
    ctx.check(cluster_check)
    name = res.resource_name
    if name not in ("", str(broker.node_id)):
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
        )
    if broker.dynamic_store is None:  # before start-up completed: nowhere to store it yet
        raise KafkaError(ErrorCode.invalid_request, "the broker is starting: dynamic configs cannot be stored yet")
    entity = name or DEFAULT_ENTITY
    try:
        await broker.alter_dynamic_config(entity, lambda current: new_configs(current, res.configs), validate_only)
    except ConfigError as e:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {e.message}",
        ) from None
    except (KafkaError, asyncio.CancelledError):
        raise
    except Exception as e:  # the store failed (a full disk, ZooKeeper out of reach): this resource's error
        log.warning("storing dynamic broker configs of %r failed: %s", entity, e)
        raise KafkaError(ErrorCode.unknown_server_error, f"storing the dynamic configs failed: {e}") from None


def _full_replace(_current: dict[str, str], configs: Any) -> dict[str, str | None]:
    return {c.name: c.value for c in configs}


def _incremental(current: dict[str, str], configs: Any) -> dict[str, str | None]:
    new: dict[str, str | None] = dict(current)
    for c in configs:
        if c.config_operation == OP_SET:
            new[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            new.pop(c.name, None)
        elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
            items = [x for x in (new.get(c.name) or "").split(",") if x]
            for v in (c.value or "").split(","):
                if not v:
                    continue
                if c.config_operation == OP_APPEND and v not in items:
                    items.append(v)
                elif c.config_operation == OP_SUBTRACT and v in items:
                    items.remove(v)
            new[c.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"Unknown config operation {c.config_operation}")
    return new


async def handle_alter_configs(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    results = tuple(
        build(R.AlterConfigsResourceResponse, error_code=c, error_message=m, resource_type=t, resource_name=n)
        for c, m, t, n in await _alter(ctx, request, _full_replace, rules.ALTER_CONFIGS_TOPIC,
                                       rules.ALTER_CONFIGS_CLUSTER)
    )
    return build(R.AlterConfigsResponse, throttle_time=_ZERO, responses=results)


async def handle_incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    results = tuple(
        build(R.AlterConfigsResourceResponse, error_code=c, error_message=m, resource_type=t, resource_name=n)
        for c, m, t, n in await _alter(ctx, request, _incremental, rules.INCREMENTAL_ALTER_CONFIGS_TOPIC,
                                       rules.INCREMENTAL_ALTER_CONFIGS_CLUSTER, rules.INCREMENTAL_ALTER_CONFIGS_GROUP)
    )
    return build(R.IncrementalAlterConfigsResponse, throttle_time=_ZERO, responses=results)


# -- DescribeCluster ---------------------------------------------------------------------------------
async def handle_describe_cluster(ctx: RequestContext, request: Any) -> Any:
    """DescribeCluster (60): the live brokers (their endpoint on the request's listener), the controller,
    the cluster id. v1's endpoint type 2 (controllers, KIP-919) is UNSUPPORTED_ENDPOINT_TYPE: kaflite has no
    separate controller endpoints. v2 (KIP-1073) lists fenced brokers too when asked, each with `is_fenced`:
    a KRaft broker registered with the controller but not yet (or no longer) unfenced. A kaflite broker is
    in the metadata image only while its ZooKeeper registration lives, so every listed broker is unfenced
    and include_fenced_brokers lists the same brokers."""
    broker = ctx.broker
    R = ctx.response
    endpoint_type = getattr(request, "endpoint_type", 1)
    image = broker.metadata
    if endpoint_type != 1:
        return build(
            R.DescribeClusterResponse,
            throttle_time=_ZERO,
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message="kaflite has no separate controller endpoints",
            endpoint_type=endpoint_type,
            cluster_id=broker.metadata.cluster_id,
            controller_id=-1,
            brokers=(),
        )
    # Kafka (AuthHelper.computeDescribeClusterResponse): the bitfield when asked and DESCRIBE is allowed
    want_ops = bool(getattr(request, "include_cluster_authorized_operations", False)) and \
        ctx.allowed(rules.DESCRIBE_CLUSTER_OPS)
    ops = ctx.authorized_operations(ResourceType.CLUSTER) if want_ops else -(2**31)
    return build(
        R.DescribeClusterResponse,
        throttle_time=_ZERO,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        brokers=tuple(
            build(R.DescribeClusterBroker, broker_id=b.id, host=e.host, port=e.port, rack=b.rack, is_fenced=False)
            for b, e in broker_endpoints(ctx, image)
        ),
        cluster_authorized_operations=ops,
    )


# -- DeleteRecords -----------------------------------------------------------------------------------
async def handle_delete_records(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.broker.replica_manager
    R = ctx.response
    deadline = replicas.now_ms() + request.timeout.total_seconds() * 1000.0

    def answer(topic: str, p: Any) -> list[Any]:
        ctx.check(rules.DELETE_RECORDS, topic)
        part = replicas.get_partition(topic, p.partition_index)
        offset = int(p.offset)
        required = part.high_watermark if offset == -1 else offset
        # [partition, low watermark, error, the partition to wait on, the offset to wait for, asked offset]
        return [p.partition_index, -1, ErrorCode.none, part, required, offset]

    def refused(_topic: str, p: Any, code: ErrorCode, _message: str | None) -> list[Any]:
        return [p.partition_index, -1, code, None, -1, -1]

    results = per_partition(request.topics, answer, refused)
    loop = asyncio.get_running_loop()
    for name, parts in results:
        for r in parts:
            part = r[3]
            if part is None:
                continue
            # the segments are renamed and the checkpoints rewritten (with fsyncs) in a worker thread, not
            # on the event loop
            try:
                await loop.run_in_executor(None, part.delete_records_on_leader, r[5])
            except KafkaError as e:
                r[2], r[3] = e.code, None
                continue
            except OSError as e:
                log.error("DeleteRecords: I/O error on %s: %s", name, e)
                r[2], r[3] = ErrorCode.kafka_storage_error, None
                continue
            r[1] = replicas.low_watermark(part)
    for _name, parts in results:
        for r in parts:
            part, required = r[3], r[4]
            if part is not None and r[1] < required:  # a replica has not moved its log start offset yet
                r[2], low = await replicas.wait_low_watermark(part, required, deadline)
                r[1] = low if r[2] is not ErrorCode.not_leader_or_follower else -1
    topics = tuple(build(R.DeleteRecordsTopicResult, name=name, partitions=tuple(
        build(R.DeleteRecordsPartitionResult, partition_index=r[0], low_watermark=r[1], error_code=r[2])
        for r in parts)) for name, parts in results)
    return build(R.DeleteRecordsResponse, throttle_time=_ZERO, topics=topics)


# -- DescribeLogDirs ---------------------------------------------------------------------------------
async def handle_describe_log_dirs(ctx: RequestContext, request: Any) -> Any:
    """Per data directory, each local replica's size and offset lag (`topics` null = every partition)."""
    import shutil

    broker = ctx.broker
    R = ctx.response
    if not ctx.allowed(rules.DESCRIBE_LOG_DIRS):  # Kafka: no directories, the request's error
        return build(R.DescribeLogDirsResponse, throttle_time=_ZERO, error_code=rules.DESCRIBE_LOG_DIRS.error,
                     results=())
    manager = broker.log_manager
    wanted: dict[str, set[int] | None] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    by_dir: dict[str, dict[str, list[Any]]] = {str(d.resolve()): {} for d in broker.log_dirs}
    for (topic, partition), lg in sorted(manager.logs().items()) if manager is not None else []:
        if wanted is not None and (topic not in wanted or partition not in (wanted[topic] or ())):
            continue
        d = str(lg.dir.parent.resolve())
        part = broker.replica_manager.partition_or_none(topic, partition)
        by_dir.setdefault(d, {}).setdefault(topic, []).append(
            build(
                R.DescribeLogDirsPartition,
                partition_index=partition,
                partition_size=lg.size,
                # a follower: how far its log end is behind its leader's high watermark; a leader 0
                offset_lag=part.offset_lag() if part is not None else -1,
                is_future_key=False,  # no intra-broker moves (one data directory)
            )
        )
    results = []
    for d, topics in by_dir.items():
        try:
            usage = shutil.disk_usage(d)
            total, usable = usage.total, usage.free
        except OSError:
            total, usable = -1, -1
        results.append(
            build(
                R.DescribeLogDirsResult,
                error_code=ErrorCode.none,
                log_dir=d,
                topics=tuple(build(R.DescribeLogDirsTopic, name=n, partitions=tuple(ps)) for n, ps in topics.items()),
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return build(R.DescribeLogDirsResponse, throttle_time=_ZERO, error_code=ErrorCode.none, results=tuple(results))


APIS: ApiTable = {
    19: (2, 7, handle_create_topics),
    20: (1, 6, handle_delete_topics),
    21: (0, 2, handle_delete_records),
    32: (1, 4, handle_describe_configs),
    33: (0, 2, handle_alter_configs),
    35: (1, 4, handle_describe_log_dirs),
    37: (0, 3, handle_create_partitions),
    44: (0, 1, handle_incremental_alter_configs),
    60: (0, 2, handle_describe_cluster),
}
