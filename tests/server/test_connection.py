"""The connection shell: pipelined requests are answered in order; many clients at once."""

from __future__ import annotations

import datetime
import struct
import threading

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kwire import WireClient, decode_response

from kaflite.protocol.record_batch import build_record_batch


def _produce(topic: str, value: bytes) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=build_record_batch([(None, value, [])])),)),),
    )


def test_pipelined_requests_are_answered_in_order(broker) -> None:
    broker.call(broker.server.broker.create_topic, "pipe", 1, None)
    with WireClient(broker.bootstrap) as c:
        sent = []
        for i in range(60):
            if i % 3 == 0:
                req = _produce("pipe", b"%d" % i)
            elif i % 3 == 1:
                req = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            else:
                req = ApiVersionsRequest(client_software_name="kwire", client_software_version="0")
            sent.append((c.send(req), req))
        offsets = []
        for corr, req in sent:
            frame = c.read_frame()
            assert struct.unpack_from(">i", frame)[0] == corr, "responses must come back in request order"
            resp = decode_response(req.__api_key__, req.__version__, frame, corr)
            if isinstance(req, ProduceRequest):
                offsets.append(resp.responses[0].partition_responses[0].base_offset)
        assert offsets == list(range(20))


def test_many_concurrent_clients(broker) -> None:
    broker.call(broker.server.broker.create_topic, "many", 1, None)
    errors: list[BaseException] = []

    def client(n: int) -> None:
        try:
            with WireClient(broker.bootstrap, timeout=30) as c:
                for j in range(5):
                    r = c.request(_produce("many", b"%d-%d" % (n, j)))
                    assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    with WireClient(broker.bootstrap) as c:
        fetch = FetchRequest(
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            topics=(FetchTopic(topic="many", partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
            forgotten_topics_data=(),
        )
        assert c.request(fetch).responses[0].partitions[0].high_watermark == 500
