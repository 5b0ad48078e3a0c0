"""InitProducerId (key 22), v0-5: producer ids for idempotent producers (v5, KIP-890, changes nothing here).

Rules: a non-transactional producer gets a fresh producer id with epoch 0 (also when it asks to bump its
epoch, v3+, which Kafka allows to answer with a new id); a transactional id goes to the transaction
coordinator (handlers/transactions.py: a stable producer id per transactional id, epoch bumps, fencing).
A cluster broker that has handed out its block of ids and not claimed the next one yet (ZooKeeper
unreachable) answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry (cluster/producer_ids.py).
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import rules
from kaflite.server.context import AclOperation, RequestContext, ResourceType, build
from kaflite.server.handlers import ApiTable

API_KEY = 22
_ZERO = datetime.timedelta(0)


async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    if request.transactional_id is not None:
        from kaflite.server.handlers.transactions import init_transactional_producer_id

        # (it checks WRITE on the transactional id first)
        return await init_transactional_producer_id(ctx, request)
    # KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    if not ctx.allowed(rules.INIT_PRODUCER_ID_IDEMPOTENT) and not ctx.broker.authorizer.authorize_by_resource_type(
            ctx.session, AclOperation.WRITE, ResourceType.TOPIC):
        return build(R.InitProducerIdResponse, throttle_time=_ZERO,
                     error_code=rules.INIT_PRODUCER_ID_IDEMPOTENT.error, producer_id=-1, producer_epoch=-1)
    try:
        producer_id = ctx.broker.producer_ids.next_id()
    except KafkaError as e:  # a cluster broker whose block is used up, the next one not claimed yet
        return build(R.InitProducerIdResponse, throttle_time=_ZERO, error_code=e.code, producer_id=-1,
                     producer_epoch=-1)
    return build(
        R.InitProducerIdResponse,
        throttle_time=_ZERO,
        error_code=ErrorCode.none,
        producer_id=producer_id,
        producer_epoch=0,
    )


APIS: ApiTable = {API_KEY: (0, 5, handle_init_producer_id)}
