"""AlterPartition (key 56), v2-3: a partition leader asks the controller to change its ISR (KIP-497),
the one broker-to-controller request of a kaflite cluster (decisions travel by the state znodes).

Rules:
- only the active controller answers (NOT_CONTROLLER at the top otherwise, so the leader retries
  against the new one); a request whose broker epoch is not the broker's current registration is
  STALE_BROKER_EPOCH at the top (Kafka's ZooKeeper-mode controller);
- each partition is decided by the controller (`cluster.controller`): FENCED_LEADER_EPOCH when the
  sender is not the leader of that epoch, INVALID_UPDATE_VERSION when the partition epoch moved,
  INELIGIBLE_REPLICA for a member that is not assigned, alive and not shutting down, INVALID_REQUEST
  for an ISR without the leader; a topic id the image does not know is UNKNOWN_TOPIC_ID;
- an accepted change is written (compare-and-set on the state znode) before the answer, which carries
  the new ISR and partition epoch, the leader epoch unchanged;
- v3's per-member broker epochs (KIP-903) are not checked yet: the member ids are used.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kaflite.cluster.controller.events import AlterPartition, AlterPartitionResult
from kaflite.cluster.zk_metadata import ZkMetadata
from kaflite.protocol.errors import ErrorCode
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable

API_KEY = 56
_ZERO = datetime.timedelta(0)
_TIMEOUT_S = 30.0


async def handle_alter_partition(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    writer = broker.metadata_writer
    if not ctx.allowed(rules.ALTER_PARTITION):
        return build(R.AlterPartitionResponse, throttle_time=_ZERO, error_code=rules.ALTER_PARTITION.error, topics=())
    if not isinstance(writer, ZkMetadata) or not writer.controller.is_active:
        # a single node has no controller to ask: it never sends this request to itself
        return build(
            R.AlterPartitionResponse, throttle_time=_ZERO, error_code=ErrorCode.not_controller, topics=()
        )
    image = broker.metadata
    pending: list[tuple[Any, Any, Any]] = []  # (topic data, partition data, future or error)
    for t in request.topics:
        topic = image.topic_by_id(t.topic_id) if t.topic_id is not None else None
        for p in t.partitions:
            if topic is None:
                pending.append((t, p, ErrorCode.unknown_topic_id))
                continue
            if ctx.api_version >= 3:
                isr = tuple(int(m.broker_id) for m in p.new_isr_with_epochs)
            else:
                isr = tuple(int(b) for b in p.new_isr)
            event = AlterPartition(
                int(request.broker_id), int(request.broker_epoch), (topic.name, int(p.partition_index)),
                int(p.leader_epoch), isr, int(p.partition_epoch),
            )  # fmt: skip
            pending.append((t, p, asyncio.wrap_future(writer.controller.submit(event))))
    answers: list[tuple[Any, Any, ErrorCode, Any]] = []
    for t, p, fut in pending:
        if isinstance(fut, ErrorCode):
            answers.append((t, p, fut, None))
            continue
        try:
            decisions = await asyncio.wait_for(fut, _TIMEOUT_S)
        except TimeoutError:
            answers.append((t, p, ErrorCode.request_timed_out, None))
            continue
        res = next((d for d in decisions if isinstance(d, AlterPartitionResult)), None)
        if res is None:
            answers.append((t, p, ErrorCode.unknown_server_error, None))
        else:
            answers.append((t, p, res.error or ErrorCode.none, res.state))
    if answers and all(code is ErrorCode.stale_broker_epoch for _, _, code, _ in answers):
        return build(
            R.AlterPartitionResponse, throttle_time=_ZERO, error_code=ErrorCode.stale_broker_epoch, topics=()
        )
    by_topic: dict[Any, list[Any]] = {}
    for t, p, code, state in answers:
        ok = code is ErrorCode.none and state is not None
        by_topic.setdefault(t.topic_id, []).append(
            build(
                R.PartitionData,
                partition_index=p.partition_index,
                error_code=code,
                leader_id=state.leader if ok else -1,
                leader_epoch=state.leader_epoch if ok else -1,
                isr=tuple(state.isr) if ok else (),
                leader_recovery_state=0,
                partition_epoch=state.zk_version if ok else -1,
            )
        )
    return build(
        R.AlterPartitionResponse,
        throttle_time=_ZERO,
        error_code=ErrorCode.none,
        topics=tuple(build(R.TopicData, topic_id=tid, partitions=tuple(ps)) for tid, ps in by_topic.items()),
    )


APIS: ApiTable = {API_KEY: (2, 3, handle_alter_partition)}
