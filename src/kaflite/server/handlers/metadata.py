"""Metadata (key 3), v1-12: brokers, controller, cluster id, topics with their partitions.

Rules (Kafka's `KafkaApis.handleTopicMetadataRequest`):
- `topics` null means every topic; an empty list means none (v1+);
- a requested topic that does not exist is auto-created with `num.partitions` when the request allows it
  (`allow_auto_topic_creation`, v4+; always allowed below) and `auto.create.topics.enable` is true;
  otherwise it is answered with UNKNOWN_TOPIC_OR_PARTITION; an illegal name gets INVALID_TOPIC_EXCEPTION;
- internal topics (`__consumer_offsets`) are never auto-created here and are flagged `is_internal`;
- `topic_authorized_operations` stays "not requested" (INT32_MIN) unless the client asks for it;
- each topic's encoding is cached (keyed by name, id, partition count, version, operations), so an
  all-topics request over thousands of partitions is a join of cached bytes.
"""

from __future__ import annotations

import uuid
from typing import Any

from kaflite.cluster.metadata import INTERNAL_TOPICS, TopicImage, validate_topic_name
from kaflite.protocol.encoders import encode_metadata_response
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.messages import encode_body
from kaflite.server.broker import Broker
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable, EncodedBody

API_KEY = 3
_NO_ID = uuid.UUID(int=0)
NOT_REQUESTED = -(2**31)
# With no ACLs every topic operation is allowed: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
# DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11 (Kafka's AclOperation codes as bits).
ALL_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def _partitions(R: Any, broker: Broker, topic: TopicImage) -> tuple[Any, ...]:
    node = broker.node_id
    return tuple(
        build(
            R.MetadataResponsePartition,
            error_code=ErrorCode.none,
            partition_index=p,
            leader_id=node,
            leader_epoch=0,
            replica_nodes=(node,),
            isr_nodes=(node,),
            offline_replicas=(),
        )
        for p in range(topic.num_partitions)
    )


def _topic(R: Any, broker: Broker, topic: TopicImage, authorized_ops: int) -> Any:
    return build(
        R.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=_partitions(R, broker, topic),
        topic_authorized_operations=authorized_ops,
    )


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


def resolve_topic(
    broker: Broker, name: str, allow_auto_create: bool
) -> tuple[TopicImage | None, ErrorCode]:
    """Find (or auto-create) a topic by name: the topic, or None and the error code to answer with."""
    topic = broker.metadata.topics.get(name)
    if topic is not None:
        return topic, ErrorCode.none
    try:
        validate_topic_name(name)
    except KafkaError as e:
        return None, e.code
    if allow_auto_create and name not in INTERNAL_TOPICS and broker.can_auto_create(name):
        try:
            return broker.create_topic(name), ErrorCode.none
        except KafkaError as e:
            if e.code == ErrorCode.topic_already_exists:
                return broker.metadata.topics.get(name), ErrorCode.none
            return None, e.code
    return None, ErrorCode.unknown_topic_or_partition


_CACHE_KEY = "metadata.topic_encodings"
_CACHE_LIMIT = 50_000


def _topic_bytes(R: Any, broker: Broker, topic: TopicImage, version: int, ops: int) -> bytes:
    """One topic's encoding, cached until the topic changes (partitions, id) or the version differs."""
    cache: dict[tuple[Any, ...], bytes] = broker.extensions.setdefault(_CACHE_KEY, {})
    key = (topic.name, topic.topic_id, topic.num_partitions, version, ops, broker.node_id)
    blob = cache.get(key)
    if blob is None:
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        blob = cache[key] = encode_body(_topic(R, broker, topic, ops))
    return blob


async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    R = ctx.response
    version = ctx.api_version
    want_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    ops = ALL_TOPIC_OPERATIONS if want_ops else NOT_REQUESTED
    allow_auto = bool(getattr(request, "allow_auto_topic_creation", True)) if version >= 4 else True
    topics: list[bytes] = []
    if request.topics is None:
        topics = [_topic_bytes(R, broker, t, version, ops) for t in list(broker.metadata.topics.values())]
    else:
        for req in request.topics:
            name = req.name
            if name is None:
                topic_id = getattr(req, "topic_id", None)
                found = broker.metadata.topic_by_id(topic_id) if topic_id is not None else None
                if found is None:
                    # the name is nullable only from v12 on
                    name_out = None if version >= 12 else ""
                    err = _error_topic(R, name_out, ErrorCode.unknown_topic_id, topic_id or _NO_ID)
                    topics.append(encode_body(err))
                else:
                    topics.append(_topic_bytes(R, broker, found, version, ops))
                continue
            topic, code = resolve_topic(broker, name, allow_auto)
            if topic is None:
                topics.append(encode_body(_error_topic(R, name, code)))
            else:
                topics.append(_topic_bytes(R, broker, topic, version, ops))
    adv = ctx.advertised
    brokers = [
        encode_body(
            build(R.MetadataResponseBroker, node_id=broker.node_id, host=adv.host, port=adv.port, rack=broker.rack)
        )
    ]
    return EncodedBody(
        list(
            encode_metadata_response(
                version, 0, brokers, broker.metadata.cluster_id, broker.node_id, topics, NOT_REQUESTED
            )
        )
    )


APIS: ApiTable = {API_KEY: (1, 12, handle_metadata)}
