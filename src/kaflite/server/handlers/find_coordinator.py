"""FindCoordinator (API 10): which broker coordinates a group (key type 0), a transactional id (key
type 1) or a share partition's state (key type 2, SHARE: `<group>:<topic id>:<partition>`, the share
coordinator of kaflite.server.coordinators.share_state; CLUSTER_ACTION, as Kafka; a key that is not one
is INVALID_REQUEST).

Rules:
- the coordinator of a key is the leader of the key's partition of the coordinator's internal topic
  (`__consumer_offsets` for groups, `__transaction_state` for transactional ids), as Kafka answers;
- the internal topic is created on the first FindCoordinator that needs it (Kafka's auto-creation; on a
  single node in a worker thread while the request waits, so the answer names the coordinator); while
  it is not in the metadata image (a cluster: being created - in the broker's admin thread, as it writes
  ZooKeeper, so the answer does not wait for it -, placed, or refused because fewer brokers are alive than
  offsets.topic.replication.factor / transaction.state.log.replication.factor) the answer is
  COORDINATOR_NOT_AVAILABLE and a refused creation is asked again on the next request, as Kafka does;
- its endpoint is the one on the listener the request came in on; no leader yet, or none reachable on that
  listener, is COORDINATOR_NOT_AVAILABLE (clients retry);
- v4+ answers a batch of keys, older versions one key.

It has its own module because it asks both coordinators (groups and transactions), which must not import
each other.
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.coordinator.share.state_records import SHARE_GROUP_STATE_TOPIC, parse_coordinator_key
from kaflite.coordinator.transaction.txn_log import TRANSACTION_STATE_TOPIC
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.coordinators.groups import GroupService
from kaflite.server.coordinators.share_state import ShareStateService
from kaflite.server.coordinators.transactions import TransactionService
from kaflite.server.handlers import ApiTable

_ZERO = datetime.timedelta(0)


async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    # make sure __consumer_offsets exists and is loaded before anyone joins; on a single node the internal
    # topics are created in a worker thread while this request waits, not on the event loop
    svc = await GroupService.of_async(broker)
    node = (broker.node_id, ctx.advertised.host, ctx.advertised.port)

    async def answer(key: str, key_type: int) -> tuple[ErrorCode, str | None, tuple[int, str, int]]:
        coordinator: GroupService | TransactionService
        # Kafka: DESCRIBE on the group / transactional id, checked before the key type is acted on
        if key_type == 0 and not ctx.allowed(rules.FIND_COORDINATOR_GROUP, key):
            return rules.FIND_COORDINATOR_GROUP.error, None, (-1, "", -1)
        if key_type == 1 and not ctx.allowed(rules.FIND_COORDINATOR_TXN, key):
            return rules.FIND_COORDINATOR_TXN.error, None, (-1, "", -1)
        if key_type == 2 and not ctx.allowed(rules.FIND_COORDINATOR_SHARE):
            return rules.FIND_COORDINATOR_SHARE.error, None, (-1, "", -1)
        partition: int | None = None
        if key_type == 2:  # SHARE: the leader of the key's __share_group_state partition
            try:
                share_key = parse_coordinator_key(key)
            except ValueError as e:
                return ErrorCode.invalid_request, str(e), (-1, "", -1)
            if not broker.setting("group.share.enable"):
                return ErrorCode.unsupported_version, "Share groups are not enabled.", (-1, "", -1)
            await ShareStateService.prepare(broker)  # single node: its topic created off the loop
            share = ShareStateService.of(broker)
            topic, partition = SHARE_GROUP_STATE_TOPIC, share.partition_for(share_key)
            if topic not in broker.metadata.topics and share.ensure_topic() is None:
                return ErrorCode.coordinator_not_available, "The coordinator is not available.", (-1, "", -1)
        elif key_type == 1:  # TRANSACTION: the leader of the id's __transaction_state partition
            try:
                coordinator = await TransactionService.of_async(broker)
            except KafkaError as e:
                return ErrorCode.coordinator_not_available, str(e), (-1, "", -1)
            topic = TRANSACTION_STATE_TOPIC
        elif key_type != 0:
            return ErrorCode.invalid_request, f"unknown coordinator key type {key_type}", (-1, "", -1)
        else:
            # the coordinator is the leader of the group's __consumer_offsets partition (single node: this one)
            coordinator, topic = svc, OFFSETS_TOPIC
        if topic not in broker.metadata.topics and coordinator.ensure_topic() is None:
            # a cluster whose internal topic is not placed yet (just asked for, or refused while fewer brokers
            # are alive than its replication factor): not available, asked again next time (clients retry)
            return ErrorCode.coordinator_not_available, "The coordinator is not available.", (-1, "", -1)
        image = broker.metadata
        reg = image.partition(topic, coordinator.partition_for(key) if partition is None else partition)
        if reg is not None and reg.leader == broker.node_id:
            return ErrorCode.none, None, node
        if reg is None:
            return ErrorCode.coordinator_not_available, "The coordinator is not available.", (-1, "", -1)
        leader = image.brokers.get(reg.leader)
        endpoint = leader.endpoint(ctx.session.listener_name) if leader is not None else None
        if endpoint is None:  # no leader yet (being elected) or not reachable on this listener
            return ErrorCode.coordinator_not_available, "The coordinator is not available.", (-1, "", -1)
        return ErrorCode.none, None, (reg.leader, endpoint.host, endpoint.port)

    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            code, message, (node_id, host, port) = await answer(key, request.key_type)
            coordinators.append(build(R.Coordinator, key=key, node_id=node_id, host=host, port=port,
                                      error_code=code, error_message=message))
        return build(R.FindCoordinatorResponse, throttle_time=_ZERO, coordinators=tuple(coordinators))
    code, message, (node_id, host, port) = await answer(request.key, getattr(request, "key_type", 0))
    return build(R.FindCoordinatorResponse, throttle_time=_ZERO, error_code=code, error_message=message,
                 node_id=node_id, host=host, port=port)


APIS: ApiTable = {
    10: (0, 6, handle_find_coordinator),
}
