"""ElectLeaders (key 43), v0-2: preferred or unclean leader election on request (kafka-leader-election.sh,
AdminClient.elect_leaders).

Rules:
- in a cluster the request is decided by the controller (`cluster.controller`, Kafka's electLeaders):
  clients send it to the controller; another broker answers NOT_CONTROLLER for every partition (top-level
  too when the request names none) and the client retries against the controller;
- preferred: the first assigned replica leads if it is alive and in sync (PREFERRED_LEADER_NOT_AVAILABLE
  otherwise, ELECTION_NOT_NEEDED when it already leads); unclean: only for a partition without a live
  leader, the first live assigned replica (ELIGIBLE_LEADERS_NOT_AVAILABLE when none; ELECTION_NOT_NEEDED
  when it has a leader); unknown partitions are UNKNOWN_TOPIC_OR_PARTITION;
- a request for every partition (null) answers only the partitions that changed (Kafka's);
- a single node is its own controller and every partition is led by its only replica: nothing to elect.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kaflite.cluster.controller.events import ElectionResults, ElectionType, ElectLeaders
from kaflite.cluster.zk_metadata import ZkMetadata
from kaflite.protocol.errors import ErrorCode
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable

API_KEY = 43
_ZERO = datetime.timedelta(0)
_TIMEOUT_S = 30.0
_MESSAGES = {
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.election_not_needed: "Leader election not needed for topic partition.",
    ErrorCode.preferred_leader_not_available: "Failed to elect leader: the preferred replica is not alive "
    "or not in the ISR.",
    ErrorCode.eligible_leaders_not_available: "Failed to elect leader: no live replica.",
    ErrorCode.not_controller: "This is not the correct controller for this cluster.",
    ErrorCode.request_timed_out: "The controller did not answer in time.",
}


async def handle_elect_leaders(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    partitions = (
        None
        if request.topic_partitions is None
        else frozenset((t.topic, int(p)) for t in request.topic_partitions for p in t.partitions)
    )
    top = ErrorCode.none
    writer = broker.metadata_writer
    results: dict[tuple[str, int], ErrorCode | None]
    try:
        election = ElectionType(int(getattr(request, "election_type", 0)))
    except ValueError:  # neither 0 (preferred) nor 1 (unclean): client input, answered, never a traceback
        election = None
    if not ctx.allowed(rules.ELECT_LEADERS):  # Kafka: the request and every partition refused
        top = rules.ELECT_LEADERS.error
        results = {tp: top for tp in partitions or ()}
    elif election is None:
        top = ErrorCode.invalid_request
        results = {tp: ErrorCode.invalid_request for tp in partitions or ()}
    elif isinstance(writer, ZkMetadata):
        if not writer.controller.is_active:
            results = {tp: ErrorCode.not_controller for tp in partitions or ()}
            if partitions is None:
                top = ErrorCode.not_controller
        else:
            try:
                fut = writer.controller.submit(ElectLeaders(partitions, election))
                decisions = await asyncio.wait_for(asyncio.wrap_future(fut), _TIMEOUT_S)
                found = next((d for d in decisions if isinstance(d, ElectionResults)), None)
                results = dict(found.results) if found is not None else {}
            except TimeoutError:
                results = {tp: ErrorCode.request_timed_out for tp in partitions or ()}
    else:  # one node: each partition's only replica leads it already
        image = broker.metadata
        results = {
            tp: ErrorCode.election_not_needed
            if image.has_partition(*tp)
            else ErrorCode.unknown_topic_or_partition
            for tp in partitions or ()
        }
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), code in sorted(results.items()):
        err = code or ErrorCode.none
        by_topic.setdefault(topic, []).append(
            build(
                R.PartitionResult,
                partition_id=p,
                error_code=err,
                error_message=None if err is ErrorCode.none else _MESSAGES.get(err),
            )  # fmt: skip
        )
    return build(
        R.ElectLeadersResponse,
        throttle_time=_ZERO,
        error_code=top,
        replica_election_results=tuple(
            build(R.ReplicaElectionResult, topic=t, partition_result=tuple(rs)) for t, rs in by_topic.items()
        ),
    )


APIS: ApiTable = {API_KEY: (0, 2, handle_elect_leaders)}
