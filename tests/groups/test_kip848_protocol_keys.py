"""group.consumer.assignors and group.coordinator.rebalance.protocols are real: the first assignor is a
new group's, another one asked for is UNSUPPORTED_ASSIGNOR; without `consumer` in the protocols the
KIP-848 APIs are not advertised and a heartbeat is UNSUPPORTED_VERSION."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest

from kaflite.coordinator import CoordinatorConfig
from kaflite.protocol.errors import ErrorCode
from kaflite.server.embedded import EmbeddedBroker
from server.kwire import WireClient


def _heartbeat(group: str, assignor: str | None = None) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(group_id=group, member_id="", member_epoch=0,
                                         rebalance_timeout=datetime.timedelta(seconds=5),
                                         subscribed_topic_names=("t",), server_assignor=assignor, topic_partitions=())


def test_assignors_list_decides_the_default_and_what_is_allowed() -> None:
    overrides = {"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor"}
    with EmbeddedBroker(overrides=overrides) as b, WireClient(b.bootstrap) as w:
        refused = w.request(_heartbeat("asg-1", "uniform"))
        joined = w.request(_heartbeat("asg-2"))
        [g] = w.request(ConsumerGroupDescribeRequest(group_ids=("asg-2",), include_authorized_operations=False)).groups
    assert refused.error_code == ErrorCode.unsupported_assignor and "range" in (refused.error_message or "")
    assert joined.error_code == ErrorCode.none
    assert g.assignor_name == "range"


def test_without_the_consumer_protocol_kip848_is_not_served() -> None:
    with EmbeddedBroker(overrides={"group.coordinator.rebalance.protocols": "classic"}) as b, \
            WireClient(b.bootstrap) as w:
        keys = {k.api_key for k in w.request(ApiVersionsRequest(client_software_name="t",
                                                                  client_software_version="0")).api_keys}
        hb = w.request(_heartbeat("off"))
    assert 68 not in keys and 69 not in keys and 11 in keys
    assert hb.error_code == ErrorCode.unsupported_version


@pytest.mark.parametrize("props, message", [
    ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors"),
    ({"group.coordinator.rebalance.protocols": "consumer"}, "group.coordinator.rebalance.protocols"),
])
def test_bad_values_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CoordinatorConfig.from_properties(props)
