"""Broker settings of the connection shell: idle connections, max.connections (per IP too), broker.rack,
fetch.max.bytes (each set through EmbeddedBroker overrides, as a user would in server.properties)."""

from __future__ import annotations

import datetime
from pathlib import Path

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest
from kwire import WireClient

from helpers import wait_until
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.embedded import EmbeddedBroker

_ALL = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_idle_connections_are_closed_and_connection_limit(tmp_path: Path) -> None:
    overrides = {"connections.max.idle.ms": "1500", "max.connections": "2", "broker.rack": "rack-a"}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b:
        with WireClient(b.bootstrap) as first, WireClient(b.bootstrap) as second:
            assert first.request(_ALL).brokers[0].rack == "rack-a"
            second.request(_ALL)
            with WireClient(b.bootstrap) as third:
                assert third.is_closed(wait=5), "a third connection exceeds max.connections=2"
            # recv returns the close as soon as it comes (1.5 s idle), not after a fixed sleep
            assert first.is_closed(wait=8), "an idle connection is closed after connections.max.idle.ms"
        with WireClient(b.bootstrap) as again:  # slots are free again
            assert again.request(_ALL).controller_id == 0


def test_fetch_max_bytes_caps_the_response(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path, overrides={"fetch.max.bytes": "1024"}) as b:
        log = b.call(lambda: b.server.broker.create_topic("cap", 1, None))
        assert log is not None
        for _ in range(5):
            b.call(b.server.broker.append, "cap", 0, build_record_batch([(None, b"x" * 600, [])]))
        fetch = FetchRequest(
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=10 << 20,
            topics=(FetchTopic(topic="cap", partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=10 << 20),)),),
            forgotten_topics_data=(),
        )
        with WireClient(b.bootstrap) as c:
            records = c.request(fetch).responses[0].partitions[0].records
        # one batch (~680 bytes) fits the 1 KiB budget, two do not; the first always comes (min one message)
        assert 600 < len(records) <= 1024


def test_max_connections_per_ip_and_its_overrides(tmp_path: Path) -> None:
    # both listeners' clients come from 127.0.0.1; the override names it, so 2 there instead of 1
    overrides = {"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:2, ::1:0"}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b:
        with WireClient(b.bootstrap) as first, WireClient(b.bootstrap) as second:
            first.request(_ALL)
            second.request(_ALL)
            with WireClient(b.bootstrap) as third:
                assert third.is_closed(wait=5), "a third connection from 127.0.0.1 exceeds its override of 2"
        per_ip = b.server._connections.per_ip  # noqa: SLF001 - the count the broker keeps
        wait_until("the broker to forget the closed connections", lambda: b.call(lambda: not per_ip), timeout=10,
                   context=lambda: per_ip)
        with WireClient(b.bootstrap) as again:  # the address's slots are free again once its connections close
            assert again.request(_ALL).controller_id == 0
    with EmbeddedBroker(data_dir=tmp_path, overrides={"max.connections.per.ip": "1"}) as b:
        with WireClient(b.bootstrap) as first:
            first.request(_ALL)
            with WireClient(b.bootstrap) as second:
                assert second.is_closed(wait=5), "a second connection from 127.0.0.1 exceeds max.connections.per.ip=1"


def test_per_ip_overrides_parse() -> None:
    from kaflite.server.config.keys_network import parse_per_ip_overrides

    assert parse_per_ip_overrides("") == {}
    assert parse_per_ip_overrides("127.0.0.1:5, [::1]:0,0:0:0:0:0:0:0:2:3") == {"127.0.0.1": 5, "::1": 0, "::2": 3}
    from kaflite.server.connection import _normalised_ip

    assert _normalised_ip("::ffff:127.0.0.1") == "127.0.0.1" and _normalised_ip("fe80::1%eth0") == "fe80::1"
    assert parse_per_ip_overrides("::ffff:10.0.0.1:4") == {"10.0.0.1": 4}
    assert parse_per_ip_overrides("localhost:5") is None  # host names are not resolved: refused at start-up
    assert parse_per_ip_overrides("127.0.0.1:-1") is None
    assert parse_per_ip_overrides("127.0.0.1") is None
