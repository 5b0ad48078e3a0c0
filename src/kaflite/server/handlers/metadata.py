"""Metadata (key 3), v0-13: brokers, controller, cluster id, topics with their partitions.

Rules (Kafka's `KafkaApis.handleTopicMetadataRequest`):
- `topics` null means every topic; an empty list means none (v1+), and every topic in v0 (where the list
  cannot be null);
- a requested topic with a non-zero `topic_id` (v10+) is looked up by id, whatever its name says (the 3.8
  admin client sends `{topic_id, name: ""}`): an unknown id is UNKNOWN_TOPIC_ID with that id;
- a requested topic that does not exist is auto-created with `num.partitions` when the request allows it
  (`allow_auto_topic_creation`, v4+; always allowed below) and `auto.create.topics.enable` is true;
  otherwise it is answered with UNKNOWN_TOPIC_OR_PARTITION; an illegal name gets INVALID_TOPIC_EXCEPTION;
- an auto-created topic's partitions are taken from the client's `controller_mutation_rate` quota
  permissively (never refused, no throttle in the Metadata answer: Kafka's newPermissiveQuotaFor), so they
  count against the client's next CreateTopics;
- internal topics (`__consumer_offsets`) are never auto-created here and are flagged `is_internal`;
- `topic_authorized_operations` stays "not requested" (INT32_MIN) unless the client asks for it; then it
  is the authorizer's bitfield for the principal (every topic operation without an ACL authorizer);
- (acl.rules) a topic the principal may not DESCRIBE is left out of an all-topics answer and answered
  TOPIC_AUTHORIZATION_FAILED when named, before it is looked up (its existence is never disclosed); a
  missing topic that would be auto-created needs CREATE on the cluster or on the topic, else
  TOPIC_AUTHORIZATION_FAILED;
- brokers, the controller id, and per partition the leader, leader epoch, replicas, ISR and offline
  replicas all come from one metadata image (immutable), so an answer is one consistent view; a leader
  that is not a live broker is LEADER_NOT_AVAILABLE with leader -1 (Kafka's MetadataCache);
- v13's top-level `error_code` (KIP-1102: REBOOTSTRAP_REQUIRED tells a client to bootstrap again) is always
  NONE: like Kafka 4.1's broker, kaflite never asks for a rebootstrap;
- encodings are cached (`EncodingCache`): per topic while its `TopicImage` object and the live brokers are
  unchanged, and the whole all-topics list per image version, so an all-topics request over thousands of
  partitions is a join of cached bytes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kaflite.cluster.metadata import (
    INTERNAL_TOPICS,
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    validate_topic_name,
)
from kaflite.protocol.encoders import encode_metadata_response
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.messages import encode_body
from kaflite.server.acl import rules
from kaflite.server.authorizer import AllowAllAuthorizer, ResourceType
from kaflite.server.broker import Broker
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable, EncodedBody
from kaflite.server.quota import MutationQuota
from kaflite.server.services import Slot

API_KEY = 3
_NO_ID = uuid.UUID(int=0)
NOT_REQUESTED = -(2**31)
NO_LEADER = -1
# With no ACLs every topic operation is allowed: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
# DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11 (Kafka's AclOperation codes as bits).
ALL_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def _partition(R: Any, index: int, reg: PartitionRegistration, live: Mapping[int, Any]) -> Any:
    """One partition as the image shows it (Kafka's MetadataCache): a leader that is not a live broker is
    LEADER_NOT_AVAILABLE with leader -1; replicas on brokers that are not live are listed as offline."""
    leader_alive = reg.leader in live
    return build(
        R.MetadataResponsePartition,
        error_code=ErrorCode.none if leader_alive else ErrorCode.leader_not_available,
        partition_index=index,
        leader_id=reg.leader if leader_alive else NO_LEADER,
        leader_epoch=reg.leader_epoch,
        replica_nodes=reg.replicas,
        isr_nodes=reg.isr,
        offline_replicas=reg.offline_replicas(live),
    )


def _topic(R: Any, image: MetadataImage, topic: TopicImage, authorized_ops: int) -> Any:
    return build(
        R.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=tuple(_partition(R, i, reg, image.brokers) for i, reg in enumerate(topic.partitions)),
        topic_authorized_operations=authorized_ops,
    )


def broker_endpoints(ctx: RequestContext, image: MetadataImage) -> list[tuple[BrokerRegistration, Endpoint]]:
    """The live brokers with their endpoint on the listener this request came in on (Kafka leaves out a
    broker without that listener); this broker answers with `ctx.advertised` (its address for the
    request's listener)."""
    listener = ctx.session.listener_name
    out = []
    for b in image.brokers.values():
        if b.id == ctx.broker.node_id:
            adv = ctx.advertised
            out.append((b, Endpoint(adv.name, adv.host, adv.port)))
        elif (e := b.endpoint(listener)) is not None:
            out.append((b, e))
    return out


def leader_hints(ctx: RequestContext, partitions: Iterable[tuple[str, int]]
                 ) -> tuple[dict[tuple[str, int], tuple[int, int]], list[tuple[int, str, int, str | None]]]:
    """KIP-951: for partitions answered NOT_LEADER_OR_FOLLOWER (Fetch v16+ also FENCED_LEADER_EPOCH), the
    current leader and its epoch as the metadata image knows them (-1, -1 when unknown), and the endpoints,
    on this request's listener, of those leaders that are alive (Kafka's KafkaApis.getCurrentLeader)."""
    image = ctx.broker.metadata
    live = {b.id: (b, e) for b, e in broker_endpoints(ctx, image)}
    hints: dict[tuple[str, int], tuple[int, int]] = {}
    endpoints: dict[int, tuple[int, str, int, str | None]] = {}
    for topic, partition in partitions:
        reg = image.partition(topic, partition)
        leader, epoch = (reg.leader, reg.leader_epoch) if reg is not None else (-1, -1)
        hints[(topic, partition)] = (leader, epoch)
        if leader in live:
            b, e = live[leader]
            endpoints[leader] = (leader, e.host, e.port, b.rack)
    return hints, [endpoints[i] for i in sorted(endpoints)]


def _error_topic(R: Any, name: str | None, code: ErrorCode, topic_id: uuid.UUID = _NO_ID) -> Any:
    return build(
        R.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=NOT_REQUESTED,
    )


async def resolve_topic(
    broker: Broker, name: str, allow_auto_create: bool, quota: MutationQuota | None = None
) -> tuple[TopicImage | None, ErrorCode]:
    """Find (or auto-create) a topic by name: the topic, or None and the error code to answer with. An
    auto-created topic's partitions are taken from `quota` (permissive: never refused, as Kafka's
    auto-creation records them, and the Metadata answer carries no throttle of it)."""
    topic = broker.metadata.topics.get(name)
    if topic is not None:
        return topic, ErrorCode.none
    try:
        validate_topic_name(name)
    except KafkaError as e:
        return None, e.code
    if allow_auto_create and name not in INTERNAL_TOPICS and broker.can_auto_create(name):
        try:
            if quota is not None:
                quota.record(int(broker.setting("num.partitions")), broker.now_ms())
            # off the event loop: in a cluster the creation is written to ZooKeeper (`Broker.admin_call`), on
            # a single node the metadata file and the partitions' logs are written in a worker thread
            return await broker.create_topic_async(name), ErrorCode.none
        except KafkaError as e:
            if e.code == ErrorCode.topic_already_exists:
                # Another broker created it a moment ago and this broker's image does not show it yet:
                # Kafka answers LEADER_NOT_AVAILABLE (retriable) here. A topic without error and without
                # partitions made librdkafka drop the partitions it knew and fail its queued records with
                # "Unknown partition" (suite test 0103 on three brokers).
                existing = broker.metadata.topics.get(name)
                return (existing, ErrorCode.none) if existing is not None else (None, ErrorCode.leader_not_available)
            return None, e.code
    return None, ErrorCode.unknown_topic_or_partition


_CACHE_LIMIT = 50_000


class EncodingCache:
    """Encoded topics of the Metadata response. A topic's bytes depend on its `TopicImage` (immutable: the
    same object while the topic is unchanged) and on which brokers are live (the image's `brokers`); the
    whole all-topics list depends only on the image, so it is kept per image version."""

    __slots__ = ("brokers", "topics", "all_topics")

    def __init__(self) -> None:
        self.brokers: Any = None
        self.topics: dict[tuple[str, int, int], tuple[TopicImage, bytes]] = {}
        self.all_topics: dict[tuple[int, int], tuple[int, list[bytes]]] = {}

    def topic(self, R: Any, image: MetadataImage, topic: TopicImage, version: int, ops: int) -> bytes:
        if self.brokers is not image.brokers:  # liveness changed: leaders and offline replicas may differ
            self.brokers = image.brokers
            self.topics.clear()
            self.all_topics.clear()
        key = (topic.name, version, ops)
        hit = self.topics.get(key)
        if hit is not None and hit[0] is topic:
            return hit[1]
        if len(self.topics) >= _CACHE_LIMIT:
            self.topics.clear()
        blob = encode_body(_topic(R, image, topic, ops))
        self.topics[key] = (topic, blob)
        return blob

    def every_topic(self, R: Any, image: MetadataImage, version: int, ops: int) -> list[bytes]:
        hit = self.all_topics.get((version, ops))
        if hit is not None and hit[0] == image.version and self.brokers is image.brokers:
            return hit[1]
        blobs = [self.topic(R, image, t, version, ops) for t in image.topics.values()]
        self.all_topics[(version, ops)] = (image.version, blobs)
        return blobs


# the encoded topics of this broker's Metadata answers, made at the first Metadata request
ENCODINGS: Slot[EncodingCache] = Slot("metadata.encodings")


def _cache(broker: Broker) -> EncodingCache:
    return broker.services.get_or_make(ENCODINGS, EncodingCache)


async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    R = ctx.response
    version = ctx.api_version
    want_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    allow_all = isinstance(broker.authorizer, AllowAllAuthorizer)
    ops = ALL_TOPIC_OPERATIONS if want_ops else NOT_REQUESTED

    def topic_ops(name: str) -> int:
        return ctx.authorized_operations(ResourceType.TOPIC, name) if want_ops and not allow_all else ops

    allow_auto = bool(getattr(request, "allow_auto_topic_creation", True)) if version >= 4 else True
    cache = _cache(broker)
    topics: list[bytes] = []
    mutations: MutationQuota | None = None  # the controller mutation quota, once a topic is resolved
    if request.topics is None or (version == 0 and not request.topics):
        image = broker.metadata
        if allow_all:
            topics = cache.every_topic(R, image, version, ops)
        else:  # Kafka: an all-topics answer leaves out the topics the principal may not DESCRIBE
            topics = [cache.topic(R, image, t, version, topic_ops(t.name)) for t in image.topics.values()
                      if ctx.allowed(rules.METADATA_TOPIC, t.name)]
    else:
        for req in request.topics:
            name = req.name
            topic_id = getattr(req, "topic_id", None) or _NO_ID
            if name is None or topic_id != _NO_ID:  # by id (Kafka: any non-zero id wins over the name)
                image = broker.metadata
                found = image.topic_by_id(topic_id) if topic_id != _NO_ID else None
                if found is None:
                    # the name is nullable only from v12 on
                    name_out = None if version >= 12 else ""
                    err = _error_topic(R, name_out, ErrorCode.unknown_topic_id, topic_id)
                    topics.append(encode_body(err))
                elif not ctx.allowed(rules.METADATA_TOPIC, found.name):
                    # Kafka: a topic id is not secret, the name is (answered null / empty)
                    name_out = None if version >= 12 else ""
                    topics.append(encode_body(_error_topic(R, name_out, rules.METADATA_TOPIC.error, topic_id)))
                else:
                    topics.append(cache.topic(R, image, found, version, topic_ops(found.name)))
                continue
            if not ctx.allowed(rules.METADATA_TOPIC, name):
                # refused before looking the topic up: the answer never tells whether it exists
                topics.append(encode_body(_error_topic(R, name, rules.METADATA_TOPIC.error)))
                continue
            if allow_auto and name not in broker.metadata.topics and broker.can_auto_create(name) \
                    and not ctx.allowed(rules.METADATA_CREATE_CLUSTER) \
                    and not ctx.allowed(rules.METADATA_CREATE_TOPIC, name):
                topics.append(encode_body(_error_topic(R, name, rules.METADATA_CREATE_TOPIC.error)))
                continue
            if mutations is None:
                mutations = broker.quotas.mutation_quota(ctx.session.principal, ctx.client_id, strict=False)
            topic, code = await resolve_topic(broker, name, allow_auto, mutations)
            if topic is None:
                topics.append(encode_body(_error_topic(R, name, code)))
            else:
                topics.append(cache.topic(R, broker.metadata, topic, version, topic_ops(topic.name)))
        image = broker.metadata  # after any auto-creation
    brokers = [
        encode_body(build(R.MetadataResponseBroker, node_id=b.id, host=e.host, port=e.port, rack=b.rack))
        for b, e in broker_endpoints(ctx, image)
    ]
    cluster_ops = NOT_REQUESTED
    if 8 <= version <= 10 and getattr(request, "include_cluster_authorized_operations", False):
        cluster_ops = ctx.authorized_operations(ResourceType.CLUSTER) \
            if ctx.allowed(rules.METADATA_CLUSTER_OPS) else 0
    ctx.record_request_time()  # now, so the answer encoded here carries a request quota's throttle
    return EncodedBody(
        list(encode_metadata_response(version, ctx.throttle_time_ms, brokers, image.cluster_id,
                                      image.controller_id, topics, cluster_ops))
    )


APIS: ApiTable = {API_KEY: (0, 13, handle_metadata)}
