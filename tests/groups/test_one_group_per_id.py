"""One group per id across both protocols (Kafka's groups map): a KIP-848 group that commits offsets is
listed and described once, as a consumer group, by ListGroups / DescribeGroups / ConsumerGroupDescribe;
DeleteGroups removes an empty consumer group (and refuses a live one); ConsumerGroupDescribe reports each
member's rack."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from typer.testing import CliRunner

from kaflite.cli.main import app
from kaflite.protocol.errors import ErrorCode
from server.kwire import WireClient


def _consume_and_commit(c: ck.Consumer, wanted: int) -> None:
    got = 0
    deadline = time.monotonic() + 30
    while got < wanted and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got >= wanted
    c.commit(asynchronous=False)


def test_consumer_group_is_one_group_listed_described_deleted(broker, topic_factory) -> None:
    topic = topic_factory(2, records=20)
    group = f"one-per-id-{topic}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.rack": "rack-a"})
    try:
        c.subscribe([topic])
        _consume_and_commit(c, 20)
        with WireClient(broker.bootstrap) as w:
            listed = [g for g in w.request(ListGroupsRequest(states_filter=(), types_filter=())).groups
                      if g.group_id == group]
            described = w.request(DescribeGroupsRequest(groups=(group,), include_authorized_operations=False))
            cgd = w.request(ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False))
        assert [(g.group_type, g.protocol_type) for g in listed] == [("consumer", "consumer")]
        assert [(g.error_code, g.protocol_type) for g in described.groups] == [(ErrorCode.none, "consumer")]
        [dg] = cgd.groups
        assert dg.error_code == ErrorCode.none and [mb.rack_id for mb in dg.members] == ["rack-a"]
        # kaflite groups list --type shows it once, with its type (kafka-consumer-groups --list --type)
        res = CliRunner().invoke(app, ["groups", "list", "--state", "--type", "-b", broker.bootstrap])
        assert res.exit_code == 0, res.output
        mine = [line.split() for line in res.output.splitlines() if line.split()[:1] == [group]]
        assert mine == [[group, "Stable", "Consumer"]]
        assert res.output.splitlines()[0].split() == ["GROUP", "STATE", "TYPE"]
        # a live group is not deleted
        refused = admin.delete_consumer_groups([group])[group]
        try:
            refused.result(10)
            raise AssertionError("a group with a member was deleted")
        except ck.KafkaException as e:
            assert e.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
    finally:
        c.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # the leave heartbeat empties the group
        d = admin.describe_consumer_groups([group])[group].result(10)
        if not d.members:
            break
        time.sleep(0.2)
    assert d.type == ConsumerGroupType.CONSUMER and not d.members
    admin.delete_consumer_groups([group])[group].result(10)
    with WireClient(broker.bootstrap) as w:
        listed = [g.group_id for g in w.request(ListGroupsRequest(states_filter=(), types_filter=())).groups]
        cgd = w.request(ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False))
    assert group not in listed
    assert cgd.groups[0].error_code == ErrorCode.group_id_not_found
