"""The answer of an injected error: a well-formed response of the request's api key and version with the
error code in every partition, group or resource the request names, and at the top level (what Kafka's
`AbstractRequest.getErrorResponse` builds for a request that failed as a whole).

Rules (tests/server/test_faults.py):
- the response is kio's response entity of exactly the request's version, built with `build` (a field
  a version lacks is dropped); Produce v0-v2, which kio lacks, get their hand-encoded body;
- every `error_code` field gets the error, the request's names and indexes (topic, topic id, partition,
  group id, resource) are copied into the collections that answer them, in the request's order;
- every other field is Kafka's "unknown" value: -1 for offsets, epochs, ids and generations, "" or None
  for strings, empty for collections, 0 for the throttle time;
- an api whose answer carries per-item results this module does not mirror is refused by
  `check_supported` (ValueError) when the rule is added.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any

from kaflite.protocol.errors import ErrorCode
from kaflite.server.context import build, response_module

__all__ = ["check_supported", "error_response"]

# fields whose "unknown" value is -1 in Kafka (INVALID_OFFSET, NO_PARTITION_LEADER, UNKNOWN_GENERATION_ID, ...)
_MINUS_ONE = frozenset({
    "base_offset", "high_watermark", "last_stable_offset", "log_start_offset", "offset", "committed_offset",
    "leader_id", "leader_epoch", "producer_id", "producer_epoch", "generation_id", "committed_leader_epoch",
    "preferred_read_replica", "end_offset", "timestamp", "node_id", "port", "controller_id",
    "member_epoch", "heartbeat_interval_ms",
})


def _zero(f: dataclasses.Field[Any], code: ErrorCode) -> Any:
    kafka_type = f.metadata.get("kafka_type")
    if kafka_type == "error_code":
        return code
    tp = f.type
    nullable = False
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(tp))
        tp = args[0]
    if typing.get_origin(tp) is tuple:
        return None if nullable else ()
    if nullable:
        return None
    if dataclasses.is_dataclass(tp):
        return _entity(tp, code)  # type: ignore[arg-type]
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type == "bool":
        return False
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "float64":
        return 0.0
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    if kafka_type is not None and kafka_type.startswith(("int", "uint")):
        return typing.cast(Any, tp)(-1 if f.name in _MINUS_ONE else 0)
    raise TypeError(f"no unknown value for {f.name}: {f.type}")


def _entity(cls: type[Any], code: ErrorCode, **given: Any) -> Any:
    """`cls` with `given`, every error code set to `code`, the rest unknown; kio's defaults kept except
    for error codes and -1 fields."""
    values = dict(given)
    for f in dataclasses.fields(cls):
        if f.name in values:
            continue
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if has_default and f.metadata.get("kafka_type") != "error_code" and f.name not in _MINUS_ONE:
            continue
        if has_default and f.name in _MINUS_ONE and f.metadata.get("kafka_type") is None:
            continue
        values[f.name] = _zero(f, code)
    return build(cls, **values)


Builder = Callable[[Any, Any, ErrorCode], Any]


def _produce(req: Any, R: Any, code: ErrorCode) -> Any:
    return _entity(R.ProduceResponse, code, responses=tuple(
        _entity(R.TopicProduceResponse, code, name=getattr(t, "name", ""), **_topic_id(t), partition_responses=tuple(
            _entity(R.PartitionProduceResponse, code, index=p.index) for p in t.partition_data))
        for t in req.topic_data))


def _fetch(req: Any, R: Any, code: ErrorCode) -> Any:
    return _entity(R.FetchResponse, code, session_id=getattr(req, "session_id", 0), responses=tuple(
        _entity(R.FetchableTopicResponse, code, topic=getattr(t, "topic", ""), **_topic_id(t), partitions=tuple(
            _entity(R.PartitionData, code, partition_index=p.partition, records=None) for p in t.partitions))
        for t in req.topics))


def _per_partition(response: str, topic: str, partition: str) -> Builder:
    """An api whose request names topics[].name with partitions[].partition_index and whose response
    answers each in kind (ListOffsets, OffsetCommit, TxnOffsetCommit): the three entity class names."""
    def make(req: Any, R: Any, code: ErrorCode) -> Any:
        return _entity(getattr(R, response), code, topics=tuple(
            _entity(getattr(R, topic), code, name=t.name, partitions=tuple(
                _entity(getattr(R, partition), code, partition_index=p.partition_index)
                for p in t.partitions)) for t in req.topics))
    return make


_list_offsets = _per_partition("ListOffsetsResponse", "ListOffsetsTopicResponse",
                               "ListOffsetsPartitionResponse")
_offset_commit = _per_partition("OffsetCommitResponse", "OffsetCommitResponseTopic",
                                "OffsetCommitResponsePartition")
_txn_offset_commit = _per_partition("TxnOffsetCommitResponse", "TxnOffsetCommitResponseTopic",
                                    "TxnOffsetCommitResponsePartition")


def _metadata(req: Any, R: Any, code: ErrorCode) -> Any:
    return _entity(R.MetadataResponse, code, brokers=(), topics=tuple(
        _entity(R.MetadataResponseTopic, code, name=t.name, **_topic_id(t), partitions=())
        for t in (req.topics or ())))


def _offset_fetch(req: Any, R: Any, code: ErrorCode) -> Any:
    if hasattr(req, "groups"):  # v8+: per group
        return _entity(R.OffsetFetchResponse, code, groups=tuple(
            _entity(R.OffsetFetchResponseGroup, code, group_id=g.group_id, topics=tuple(
                _entity(R.OffsetFetchResponseTopics, code, name=t.name, partitions=tuple(
                    _entity(R.OffsetFetchResponsePartitions, code, partition_index=i, metadata=None)
                    for i in t.partition_indexes)) for t in (g.topics or ()))) for g in req.groups))
    return _entity(R.OffsetFetchResponse, code, topics=tuple(
        _entity(R.OffsetFetchResponseTopic, code, name=t.name, partitions=tuple(
            _entity(R.OffsetFetchResponsePartition, code, partition_index=i, metadata=None)
            for i in t.partition_indexes)) for t in (req.topics or ())))


def _find_coordinator(req: Any, R: Any, code: ErrorCode) -> Any:
    keys = getattr(req, "coordinator_keys", None)
    if keys is None:
        return _entity(R.FindCoordinatorResponse, code, host="")
    return _entity(R.FindCoordinatorResponse, code, coordinators=tuple(
        _entity(R.Coordinator, code, key=k, host="") for k in keys))


def _leave_group(req: Any, R: Any, code: ErrorCode) -> Any:
    members = getattr(req, "members", None)
    if members is None:
        return _entity(R.LeaveGroupResponse, code)
    return _entity(R.LeaveGroupResponse, code, members=tuple(
        _entity(R.MemberResponse, code, member_id=m.member_id, group_instance_id=m.group_instance_id)
        for m in members))


def _describe_groups(req: Any, R: Any, code: ErrorCode) -> Any:
    return _entity(R.DescribeGroupsResponse, code, groups=tuple(
        _entity(R.DescribedGroup, code, group_id=g) for g in req.groups))


def _top_level(name: str) -> Builder:
    """An api answered by one error code (Heartbeat, JoinGroup, InitProducerId, EndTxn, ...)."""
    def make(req: Any, R: Any, code: ErrorCode) -> Any:
        return _entity(getattr(R, name), code)
    return make


BUILDERS: dict[int, Builder] = {
    0: _produce, 1: _fetch, 2: _list_offsets, 3: _metadata, 8: _offset_commit, 9: _offset_fetch,
    10: _find_coordinator, 11: _top_level("JoinGroupResponse"), 12: _top_level("HeartbeatResponse"),
    13: _leave_group, 14: _top_level("SyncGroupResponse"), 15: _describe_groups,
    16: _top_level("ListGroupsResponse"), 22: _top_level("InitProducerIdResponse"),
    25: _top_level("AddOffsetsToTxnResponse"), 26: _top_level("EndTxnResponse"), 28: _txn_offset_commit,
    68: _top_level("ConsumerGroupHeartbeatResponse"),
}


def check_supported(api_key: int) -> None:
    if api_key not in BUILDERS:
        from kaflite.server.metrics import api_name

        supported = ", ".join(api_name(k) for k in sorted(BUILDERS))
        raise ValueError(f"injected errors are not supported for {api_name(api_key)} (api key {api_key}); "
                         f"supported: {supported}")


def _topic_id(t: Any) -> dict[str, Any]:
    topic_id = getattr(t, "topic_id", None)
    return {} if topic_id is None else {"topic_id": topic_id}


def error_response(api_key: int, version: int, request: Any, code: ErrorCode) -> Any:
    """The kio response of (api_key, version) answering `request` with `code` everywhere (Produce v0-v2,
    which kio has no schema for: its hand-encoded body, an `EncodedBody`)."""
    check_supported(api_key)
    if api_key == 0 and version < 3:
        from kaflite.protocol.encoders import encode_produce_response
        from kaflite.server.handlers import EncodedBody

        topics = [(t.name, [(p.index, code.value, -1, -1, -1, None, ()) for p in t.partition_data])
                  for t in request.topic_data]
        return EncodedBody([encode_produce_response(version, 0, topics)])
    return BUILDERS[api_key](request, response_module(api_key, version), code)
