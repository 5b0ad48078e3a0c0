"""Failover's two calls on a real broker: on_resignation (unload) answers what the group's shard held
NOT_COORDINATOR and refuses its requests; on_election (load) replays the partition, after which the
group is what its log says and its members carry on."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.static.primitive import i32

from coordinator.coord_harness import encode_assignment
from groups.coord_wire import (
    answer_of,
    commit,
    fetch,
    group_state_name,
    join_request,
    live_and_log,
    sync,
)
from groups.group_members import wait_for
from kaflite.coordinator import partition_for
from kaflite.protocol.errors import ErrorCode
from kaflite.server.coordinators.groups import GROUP_SERVICE
from server.kwire import WireClient


def _service(broker: Any) -> Any:
    return broker.server.broker.services.get(GROUP_SERVICE)


def test_unload_answers_parked_requests_and_load_replays_the_log(broker, topic_factory) -> None:  # noqa: ANN001
    topic = topic_factory(1)
    group = f"move-{uuid.uuid4().hex[:8]}"
    partition = partition_for(group)
    with WireClient(broker.bootstrap) as a, WireClient(broker.bootstrap) as b:
        first = a.request(join_request(group, "", topic))
        ja = a.request(join_request(group, first.member_id, topic))
        a_id = ja.member_id
        assert a.request(sync(a, group, a_id, 1, {a_id: encode_assignment({topic: [0]})})).error_code == 0
        assert commit(a, group, topic, a_id, 1, 5) == ErrorCode.none
        pending = b.request(join_request(group, "", topic))
        b_join = join_request(group, pending.member_id, topic)
        b_corr = b.send(b_join)  # parks until A rejoins
        wait_for(lambda: group_state_name(broker, group) == "PreparingRebalance", 10, "B parked in the rebalance")

        broker.call(lambda: _service(broker).on_resignation(partition, 0))
        assert answer_of(b, b_join, b_corr).error_code == ErrorCode.not_coordinator
        assert fetch(a, group, topic)[0] == ErrorCode.not_coordinator
        heartbeat = HeartbeatRequest(group_id=group, generation_id=i32(1), member_id=a_id, group_instance_id=None)
        assert a.request(heartbeat).error_code == ErrorCode.not_coordinator
        described = a.request(DescribeGroupsRequest(groups=(group,), include_authorized_operations=False))
        assert described.groups[0].error_code == ErrorCode.not_coordinator

        broker.call(lambda: _service(broker).on_election(partition, 1))
        assert a.request(heartbeat).error_code == ErrorCode.none  # replayed: A is the generation-1 member
        assert fetch(a, group, topic) == (ErrorCode.none, 5)
        live, logged = live_and_log(broker, group)
        assert live == logged and logged["groups"][group][1] == 1
        assert commit(a, group, topic, a_id, 1, 6) == ErrorCode.none
        assert fetch(a, group, topic) == (ErrorCode.none, 6)
