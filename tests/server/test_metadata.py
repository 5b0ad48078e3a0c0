from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v1.request import MetadataRequest as M1
from kio.schema.metadata.v1.request import MetadataRequestTopic as T1
from kio.schema.metadata.v12.request import MetadataRequest as M12
from kio.schema.metadata.v12.request import MetadataRequestTopic as T12
from kwire import WireClient


def test_confluent_sees_one_broker_as_controller(broker) -> None:
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert list(md.brokers) == [0]
    assert md.controller_id == 0
    assert f"{md.brokers[0].host}:{md.brokers[0].port}" == broker.bootstrap


def test_auto_create_and_refusals(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        r = c.request(
            M12(
                topics=(T12(topic_id=None, name="md-auto"),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        assert r.topics[0].error_code == ErrorCode.none
        assert [p.partition_index for p in r.topics[0].partitions] == [0]
        assert r.topics[0].partitions[0].leader_id == 0
        assert r.topics[0].topic_authorized_operations == -(2**31)  # "not requested"
        r = c.request(
            M12(
                topics=(T12(topic_id=None, name="md-none"), T12(topic_id=None, name="bad/name")),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert [t.error_code for t in r.topics] == [
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.invalid_topic_exception,
        ]
        # v1 null = all topics, empty = none
        every = c.request(M1(topics=None))
        assert "md-auto" in {t.name for t in every.topics}
        assert c.request(M1(topics=())).topics == ()
        assert c.request(M1(topics=(T1(name="md-auto"),))).topics[0].error_code == ErrorCode.none
