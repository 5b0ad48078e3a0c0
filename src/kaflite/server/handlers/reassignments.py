"""AlterPartitionReassignments (key 45, v0-1) and ListPartitionReassignments (key 46, v0), Kafka 4.1's
versions: move a partition's replicas to other brokers (kafka-reassign-partitions.sh, KIP-455).

Rules:
- in a cluster both are decided by the active controller (`cluster.controller`, Kafka's
  alterPartitionReassignments / listPartitionReassignments): clients send them to the controller that
  Metadata names; another broker answers NOT_CONTROLLER at the top level and the client retries there;
- AlterPartitionReassignments per partition: null replicas cancel the partition's move
  (NO_REASSIGNMENT_IN_PROGRESS when none runs); a replica list must be non-empty, distinct, of ids >= 0,
  its added replicas on live brokers (INVALID_REPLICA_ASSIGNMENT with Kafka's message); an unknown
  partition, or one whose topic is being deleted, is UNKNOWN_TOPIC_OR_PARTITION. The answer comes once
  the move is recorded (the assignment znode written), not when the data is copied;
- AlterPartitionReassignments v1 (KIP-860): with `allow_replication_factor_change` false a valid target
  whose size differs from the partition's replica set (the one it is moving to, during a move) is
  INVALID_REPLICATION_FACTOR, decided by the controller with the other checks; the answer echoes the flag;
- ListPartitionReassignments lists the partitions being moved (null topics: all of them) with their
  replica set (target + original), adding and removing replicas; partitions not moving are left out;
- a controller that does not answer within the request's timeout: REQUEST_TIMED_OUT;
- a single node has one broker: nothing can move. A list naming only that broker is accepted (nothing to
  do; it has the size of every replica set, so v1's flag refuses nothing), any other is
  INVALID_REPLICA_ASSIGNMENT, a cancel NO_REASSIGNMENT_IN_PROGRESS, and the list of ongoing moves is empty.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any, TypeVar

from kaflite.cluster.controller.events import (
    ListReassignments,
    OngoingReassignments,
    PartitionReassignment,
    ReassignmentResults,
)
from kaflite.cluster.zk_metadata import ZkMetadata
from kaflite.protocol.errors import ErrorCode
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable

ALTER_KEY, LIST_KEY = 45, 46
_ZERO = datetime.timedelta(0)
_MESSAGES = {  # Kafka's default message of each code (Errors.java)
    ErrorCode.not_controller: "This is not the correct controller for this cluster.",
    ErrorCode.no_reassignment_in_progress: "No partition reassignment is in progress.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.invalid_replica_assignment: "Replica assignment is invalid.",
    ErrorCode.request_timed_out: "The controller did not answer in time.",
}
TopicPartition = tuple[str, int]
A = TypeVar("A")  # the kind of answer asked of the controller
Moves = dict[TopicPartition, tuple[int, ...] | None]


def _timeout_s(request: Any) -> float:
    t = getattr(request, "timeout", None)
    seconds = t.total_seconds() if isinstance(t, datetime.timedelta) else 60.0
    return min(max(seconds, 1.0), 300.0)


async def _ask_controller(
    writer: ZkMetadata, event: Any, answer: type[A], timeout_s: float
) -> tuple[ErrorCode | None, A | None]:
    """The controller's `answer` to `event`, or the top-level error instead: NOT_CONTROLLER on a broker
    that is not the active controller, REQUEST_TIMED_OUT when it does not answer within `timeout_s`,
    UNKNOWN_SERVER_ERROR when its decisions hold no `answer` (Alter and List share this path)."""
    if not writer.controller.is_active:
        return ErrorCode.not_controller, None
    try:
        decisions = await asyncio.wait_for(asyncio.wrap_future(writer.controller.submit(event)), timeout_s)
    except TimeoutError:
        return ErrorCode.request_timed_out, None
    found = next((d for d in decisions if isinstance(d, answer)), None)
    return (ErrorCode.unknown_server_error, None) if found is None else (None, found)


def _single_node(ctx: RequestContext, moves: Moves) -> dict[TopicPartition, tuple[ErrorCode | None, str | None]]:
    image = ctx.broker.metadata
    node = ctx.broker.node_id
    out: dict[TopicPartition, tuple[ErrorCode | None, str | None]] = {}
    for tp, target in moves.items():
        bad = ErrorCode.invalid_replica_assignment
        if target is None:
            out[tp] = (ErrorCode.no_reassignment_in_progress, None)
        elif not target:
            out[tp] = (bad, "Empty replica list specified in partition reassignment.")
        elif len(set(target)) != len(target):
            out[tp] = (bad, f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
        elif any(r < 0 for r in target):
            out[tp] = (bad, f"Invalid broker id in replica list: {list(target)}")
        elif target != (node,):
            adding = [r for r in target if r != node]
            out[tp] = (bad, f"Replica assignment has brokers that are not alive. Replica list: {adding}, "
                            f"live broker list: [{node}]")
        elif not image.has_partition(*tp):
            out[tp] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
        else:
            out[tp] = (None, None)
    return out


async def handle_alter_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    moves: Moves = {}
    for t in request.topics:
        for p in t.partitions:
            replicas = None if p.replicas is None else tuple(int(r) for r in p.replicas)
            moves[(str(t.name), int(p.partition_index))] = replicas
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))
    writer = ctx.broker.metadata_writer
    top: ErrorCode | None = None
    results: dict[TopicPartition, tuple[ErrorCode | None, str | None]] = {}
    if not ctx.allowed(rules.ALTER_REASSIGNMENTS):
        top = rules.ALTER_REASSIGNMENTS.error
    elif isinstance(writer, ZkMetadata):
        move = PartitionReassignment(moves, from_api=True, allow_replication_factor_change=allow_rf_change)
        top, found = await _ask_controller(writer, move, ReassignmentResults, _timeout_s(request))
        if found is not None:
            top, results = found.error, dict(found.results)
    else:
        results = _single_node(ctx, moves)
    if top is not None:
        return build(R.AlterPartitionReassignmentsResponse, throttle_time=_ZERO, error_code=top,
                     error_message=_MESSAGES.get(top), allow_replication_factor_change=allow_rf_change,
                     responses=())
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), (code, message) in sorted(results.items()):
        err = code or ErrorCode.none
        by_topic.setdefault(topic, []).append(build(
            R.ReassignablePartitionResponse, partition_index=p, error_code=err,
            error_message=None if err is ErrorCode.none else (message or _MESSAGES.get(err)),
        ))
    return build(
        R.AlterPartitionReassignmentsResponse, throttle_time=_ZERO, error_code=ErrorCode.none, error_message=None,
        allow_replication_factor_change=allow_rf_change,
        responses=tuple(build(R.ReassignableTopicResponse, name=t, partitions=tuple(ps))
                        for t, ps in by_topic.items()),
    )


async def handle_list_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    partitions = None if request.topics is None else frozenset(
        (str(t.name), int(p)) for t in request.topics for p in t.partition_indexes)
    writer = ctx.broker.metadata_writer
    top: ErrorCode | None = None
    ongoing: dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
    if not ctx.allowed(rules.LIST_REASSIGNMENTS):
        top = rules.LIST_REASSIGNMENTS.error
    elif isinstance(writer, ZkMetadata):
        listed = ListReassignments(partitions)
        top, found = await _ask_controller(writer, listed, OngoingReassignments, _timeout_s(request))
        if found is not None:
            top, ongoing = found.error, dict(found.reassignments)
    if top is not None:
        return build(R.ListPartitionReassignmentsResponse, throttle_time=_ZERO, error_code=top,
                     error_message=_MESSAGES.get(top), topics=())
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append(build(
            R.OngoingPartitionReassignment, partition_index=p, replicas=replicas, adding_replicas=adding,
            removing_replicas=removing,
        ))
    return build(
        R.ListPartitionReassignmentsResponse, throttle_time=_ZERO, error_code=ErrorCode.none, error_message=None,
        topics=tuple(build(R.OngoingTopicReassignment, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
    )


APIS: ApiTable = {
    ALTER_KEY: (0, 1, handle_alter_partition_reassignments),
    LIST_KEY: (0, 0, handle_list_partition_reassignments),
}
