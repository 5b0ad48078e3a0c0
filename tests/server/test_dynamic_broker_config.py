"""Dynamic broker configuration (KIP-226) on the single-node broker, through confluent-kafka and
kafka-python: Kafka's sources and synonyms in DescribeConfigs, Kafka's refusals, and each key family taking
effect without a restart (server/dynamic_config.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kio.schema.describe_configs.v4 import request as dreq
from kio.schema.incremental_alter_configs.v1 import request as ireq
from kio.static.primitive import i8
from kwire import WireClient

from helpers import wait_until
from kaflite.server.embedded import EmbeddedBroker

BROKER = ConfigResource.Type.BROKER
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5  # Kafka's config_source codes
SET, DELETE = 0, 1


# confluent-kafka and kafka-python both refuse the default entity's empty name client-side (Kafka's
# kafka-configs.sh --entity-default sends it): the wire client sends it as Kafka's tools do.
def _wire_alter(b: EmbeddedBroker, name: str, ops: list[tuple[str, int, str | None]],
                validate_only: bool = False) -> tuple[int, str | None]:
    configs = tuple(ireq.AlterableConfig(name=k, config_operation=i8(op), value=v) for k, op, v in ops)
    with WireClient(b.bootstrap) as c:
        r = c.request(ireq.IncrementalAlterConfigsRequest(
            resources=(ireq.AlterConfigsResource(resource_type=i8(4), resource_name=name, configs=configs),),
            validate_only=validate_only))
    return int(r.responses[0].error_code.value), r.responses[0].error_message


def _wire_describe(b: EmbeddedBroker, name: str, keys: tuple[str, ...] | None = None) -> dict[str, object]:
    with WireClient(b.bootstrap) as c:
        r = c.request(dreq.DescribeConfigsRequest(
            resources=(dreq.DescribeConfigsResource(resource_type=i8(4), resource_name=name,
                                                    configuration_keys=keys),),
            include_synonyms=True))
    result = r.results[0]
    assert int(result.error_code.value) == 0, result.error_message
    return {e.name: e for e in result.configs}


@pytest.fixture(scope="module")
def dyn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    # retention passes every 200 ms so a lowered retention shows within a second
    overrides = {"log.retention.check.interval.ms": "200", "log.retention.hours": "168"}
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("dyn"), overrides=overrides) as b:
        yield b


def _admin(b: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def _incremental(admin: AdminClient, name: str, ops: list[ConfigEntry], validate_only: bool = False) -> None:
    res = ConfigResource(BROKER, name, incremental_configs=ops)
    admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(timeout=10)


def _set(key: str, value: str) -> ConfigEntry:
    return ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)


def _delete(key: str) -> ConfigEntry:
    return ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)


def _describe(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(BROKER, name)
    return admin.describe_configs([res])[res].result(timeout=10)


def _refusal(admin: AdminClient, name: str, ops: list[ConfigEntry]) -> str:
    with pytest.raises(KafkaException) as info:
        _incremental(admin, name, ops)
    err = info.value.args[0]
    assert err.name() == "INVALID_REQUEST", err
    return str(err.str())


def test_sources_synonyms_and_precedence(dyn_broker: EmbeddedBroker) -> None:
    admin = _admin(dyn_broker)
    before = _describe(admin, "0")
    assert before["log.retention.ms"].is_read_only is False
    assert before["broker.id"].is_read_only is True
    assert _wire_describe(dyn_broker, "") == {}  # nothing set on the default entity yet

    assert _wire_alter(dyn_broker, "", [("log.retention.ms", SET, "86400000")]) == (0, None)
    entry = _describe(admin, "0")["log.retention.ms"]
    assert entry.value == "86400000"
    assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    default_entity = _wire_describe(dyn_broker, "")
    assert list(default_entity) == ["log.retention.ms"]
    assert default_entity["log.retention.ms"].config_source == DYNAMIC_DEFAULT

    # this broker's own value wins over the default; the synonyms list every layer, highest first
    _incremental(admin, "0", [_set("log.retention.ms", "43200000")])
    entry = _describe(admin, "0")["log.retention.ms"]
    assert entry.value == "43200000"
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    wire = _wire_describe(dyn_broker, "0", ("log.retention.ms", "log.retention.hours"))
    assert [(s.value, s.source) for s in wire["log.retention.ms"].synonyms] == [
        ("43200000", DYNAMIC_BROKER), ("86400000", DYNAMIC_DEFAULT)
    ]
    hours = wire["log.retention.hours"].synonyms
    assert [(s.value, s.source) for s in hours] == [("168", STATIC), ("168", DEFAULT)]

    # a topic without override reads the dynamic value as its retention.ms, with its source
    admin.create_topics([NewTopic("dyn-src")], operation_timeout=10)["dyn-src"].result(timeout=10)
    tres = ConfigResource(ConfigResource.Type.TOPIC, "dyn-src")
    topic = admin.describe_configs([tres])[tres].result(timeout=10)
    assert topic["retention.ms"].value == "43200000"
    assert topic["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    _incremental(admin, "0", [_delete("log.retention.ms")])
    assert _wire_alter(dyn_broker, "", [("log.retention.ms", DELETE, None)]) == (0, None)
    entry = _describe(admin, "0")["log.retention.ms"]
    assert entry.source == ConfigSource.DEFAULT_CONFIG.value and entry.value is None
    assert _wire_describe(dyn_broker, "") == {}


def test_kafkas_refusals(dyn_broker: EmbeddedBroker) -> None:
    admin = _admin(dyn_broker)
    assert "Cannot update these configs dynamically: Set(broker.id)" in _refusal(
        admin, "0", [_set("broker.id", "3")]
    )
    code, message = _wire_alter(dyn_broker, "", [("ssl.client.auth", SET, "required")])
    assert code == 42 and message is not None
    assert "Cannot update these configs at default cluster level, broker id must be specified" in message
    assert "log.retention.ms" in _refusal(admin, "0", [_set("log.retention.ms", "soon")])
    # a dynamic key kaflite reads only at start-up is refused, never accepted without effect
    assert "restart" in _refusal(admin, "0", [_set("num.io.threads", "4")])
    assert "Unexpected broker id" in str(_wire_alter(dyn_broker, "7", [("log.retention.ms", SET, "1000")])[1])
    # validate_only changes nothing
    checked = _wire_alter(dyn_broker, "", [("log.segment.bytes", SET, "100000")], validate_only=True)
    assert checked == (0, None)
    assert _wire_describe(dyn_broker, "") == {}


def test_kerberos_keys_are_stored_and_described_as_on_a_broker_without_gssapi(dyn_broker: EmbeddedBroker) -> None:
    """librdkafka's suite (0081's AlterConfigs) sets sasl.kerberos.min.time.before.relogin on a broker as
    its valid broker config, with the legacy AlterConfigs: Kafka stores it (per-broker, dynamic), and without
    a GSSAPI listener nothing reads it, as nothing does here (GSSAPI is not served)."""
    import warnings

    admin = _admin(dyn_broker)
    res = ConfigResource(BROKER, "0", set_config={"sasl.kerberos.min.time.before.relogin": "58000"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy API is the one the suite calls
        admin.alter_configs([res])[res].result(timeout=10)
    entry = _describe(admin, "0")["sasl.kerberos.min.time.before.relogin"]
    assert (entry.value, entry.source) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert "Cannot update these configs at default cluster level" in str(
        _wire_alter(dyn_broker, "", [("sasl.kerberos.min.time.before.relogin", SET, "1000")])[1])
    _incremental(admin, "0", [_delete("sasl.kerberos.min.time.before.relogin")])
    assert _describe(admin, "0")["sasl.kerberos.min.time.before.relogin"].source == ConfigSource.DEFAULT_CONFIG.value


def _earliest(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dyn-probe"})
    try:
        low, _high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low)
    finally:
        c.close()


def test_topic_defaults_apply_live_to_logs_without_override(dyn_broker: EmbeddedBroker) -> None:
    """log.segment.bytes and log.retention.ms lowered on the default entity: the topic without override
    rolls small segments and loses its old ones; the topic with a retention.ms override keeps them."""
    admin = _admin(dyn_broker)
    for f in admin.create_topics(
        [NewTopic("dyn-ret"), NewTopic("dyn-keep", config={"retention.ms": "86400000"})], operation_timeout=10
    ).values():
        f.result(timeout=10)
    assert _wire_alter(dyn_broker, "", [("log.segment.bytes", SET, "1024")]) == (0, None)
    p = Producer({"bootstrap.servers": dyn_broker.bootstrap, "linger.ms": 0})
    for _ in range(60):
        for topic in ("dyn-ret", "dyn-keep"):
            p.produce(topic, b"x" * 200, partition=0)
            p.flush(10)
    time.sleep(0.3)  # the segments' timestamps are older than the 1 ms retention below
    assert _wire_alter(dyn_broker, "", [("log.retention.ms", SET, "1")]) == (0, None)
    try:
        wait_until("old segments deleted", lambda: _earliest(dyn_broker.bootstrap, "dyn-ret") > 0, timeout=10)
        assert _earliest(dyn_broker.bootstrap, "dyn-keep") == 0
    finally:
        _wire_alter(dyn_broker, "", [("log.retention.ms", DELETE, None), ("log.segment.bytes", DELETE, None)])


def test_message_max_bytes_lowered_refuses_a_larger_batch(dyn_broker: EmbeddedBroker) -> None:
    admin = _admin(dyn_broker)
    admin.create_topics([NewTopic("dyn-size")], operation_timeout=10)["dyn-size"].result(timeout=10)
    p = Producer({"bootstrap.servers": dyn_broker.bootstrap, "linger.ms": 0, "compression.type": "none"})
    errors: list[str] = []

    def send() -> None:
        errors.clear()
        p.produce("dyn-size", b"y" * 5000,
                  on_delivery=lambda err, _m: errors.append(err.name() if err else ""))
        p.flush(10)

    send()
    assert errors == [""]
    _incremental(admin, "0", [_set("message.max.bytes", "2000")])
    try:
        send()
        assert errors == ["MSG_SIZE_TOO_LARGE"]
    finally:
        _incremental(admin, "0", [_delete("message.max.bytes")])
    send()
    assert errors == [""]


def test_kafka_python_alter_configs_and_the_store_survives_a_restart(tmp_path: Path) -> None:
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    with EmbeddedBroker(data_dir=tmp_path) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
        try:
            res = KConfigResource(ConfigResourceType.BROKER, "0",
                                  configs={"log.retention.bytes": "123456789"})
            # AlterConfigs (the whole entity replaced), then IncrementalAlterConfigs
            assert admin.alter_configs([res], incremental=False) == {"broker": {"0": "OK"}}
            more = KConfigResource(ConfigResourceType.BROKER, "0", configs={"log.segment.bytes": "2000000"})
            assert admin.alter_configs([more], incremental=True) == {"broker": {"0": "OK"}}
            refused = admin.alter_configs(
                [KConfigResource(ConfigResourceType.BROKER, "0", configs={"log.dirs": "/tmp/elsewhere"})],
                raise_on_unknown=False,
            )
            message = refused["broker"]["0"]
            assert "Error 42" in message
            assert "Cannot update these configs dynamically: Set(log.dirs)" in message
        finally:
            admin.close()
    assert (tmp_path / "dynamic-broker-configs.json").exists()
    with EmbeddedBroker(data_dir=tmp_path) as b:
        described = _describe(_admin(b), "0")
        assert described["log.retention.bytes"].value == "123456789"
        assert described["log.retention.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert described["log.segment.bytes"].value == "2000000"


def _count(bootstrap: str, topic: str) -> int:
    """The records a consumer reads from the start of partition 0 to the high watermark."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dyn-count", "enable.auto.commit": False})
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        seen, last = 0, -1
        deadline = time.monotonic() + 10
        while last < high - 1 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen, last = seen + 1, m.offset()
        return seen
    finally:
        c.close()


def test_cleaner_settings_apply_live(dyn_broker: EmbeddedBroker) -> None:
    """log.cleanup.policy=compact and the cleaner's settings set on the default entity: the cleaner compacts
    a topic without override at its next pass, keeping the last record of the key."""
    admin = _admin(dyn_broker)
    admin.create_topics([NewTopic("dyn-compact")], operation_timeout=10)["dyn-compact"].result(timeout=10)
    settings = [("log.segment.bytes", "1024"), ("log.cleaner.backoff.ms", "100"),
                ("log.cleaner.min.cleanable.ratio", "0.01")]
    assert _wire_alter(dyn_broker, "", [(k, SET, v) for k, v in settings]) == (0, None)
    p = Producer({"bootstrap.servers": dyn_broker.bootstrap, "linger.ms": 0})
    for _ in range(40):
        p.produce("dyn-compact", b"v" * 200, key=b"k", partition=0)
        p.flush(10)
    try:
        assert _count(dyn_broker.bootstrap, "dyn-compact") == 40  # delete policy: nothing compacted
        assert _wire_alter(dyn_broker, "", [("log.cleanup.policy", SET, "compact")]) == (0, None)
        wait_until("the topic compacted", lambda: _count(dyn_broker.bootstrap, "dyn-compact") < 40,
                   timeout=15)
    finally:
        _wire_alter(dyn_broker, "", [(k, DELETE, None) for k, _ in settings]
                    + [("log.cleanup.policy", DELETE, None)])


def test_producer_state_keys_apply_live(dyn_broker: EmbeddedBroker) -> None:
    """producer.id.expiration.ms reaches every hosted log's config (what expiration reads);
    transaction.partition.verification.enable is what the produce path reads (Broker.setting)."""
    admin = _admin(dyn_broker)
    admin.create_topics([NewTopic("dyn-pid")], operation_timeout=10)["dyn-pid"].result(timeout=10)
    broker = dyn_broker.server.broker
    _incremental(admin, "0", [_set("producer.id.expiration.ms", "60000"),
                              _set("transaction.partition.verification.enable", "false")])
    try:
        logs = [p.log for p in broker.replica_manager.partitions.values() if p.log is not None]
        assert logs and all(log.config.producer_id_expiration_ms == 60000 for log in logs)
        assert broker.setting("transaction.partition.verification.enable") is False
    finally:
        _incremental(admin, "0", [_delete("producer.id.expiration.ms"),
                                  _delete("transaction.partition.verification.enable")])
    logs = [p.log for p in broker.replica_manager.partitions.values() if p.log is not None]
    assert all(log.config.producer_id_expiration_ms == 86400000 for log in logs)
    assert broker.setting("transaction.partition.verification.enable") is True


def test_a_stored_key_kaflite_cannot_apply_live_is_not_reported_in_effect(tmp_path: Path) -> None:
    """A dynamic key another tool stored (num.io.threads) is ignored with a warning: DescribeConfigs keeps
    the static value and source; a stored live key (log.retention.bytes) applies."""
    import json

    default = {"num.io.threads": "16", "log.retention.bytes": "5000000"}
    stored = {"version": 1, "entities": {"<default>": default}}
    (tmp_path / "dynamic-broker-configs.json").write_text(json.dumps(stored))
    with EmbeddedBroker(data_dir=tmp_path) as b:
        described = _describe(_admin(b), "0")
        assert described["num.io.threads"].source != ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert described["log.retention.bytes"].value == "5000000"
        assert described["log.retention.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def test_an_unknown_resource_type_is_refused_naming_the_allowed_ones(dyn_broker: EmbeddedBroker) -> None:
    with WireClient(dyn_broker.bootstrap) as c:
        d = c.request(dreq.DescribeConfigsRequest(
            resources=(dreq.DescribeConfigsResource(resource_type=i8(9), resource_name="x",
                                                    configuration_keys=None),), include_synonyms=False))
        a = c.request(ireq.IncrementalAlterConfigsRequest(
            resources=(ireq.AlterConfigsResource(resource_type=i8(8), resource_name="kaflite", configs=()),),
            validate_only=False))
    assert int(d.results[0].error_code.value) == 42  # INVALID_REQUEST
    assert d.results[0].error_message == "Unsupported resource type 9 (allowed: 2 TOPIC, 4 BROKER, 8 BROKER_LOGGER)"
    assert int(a.responses[0].error_code.value) == 42
    assert "8 BROKER_LOGGER is described, not altered" in (a.responses[0].error_message or "")
