"""Topic configs Kafka 3.x accepts, deprecated ones included (message.format.version, ...): created,
altered (AlterConfigs and IncrementalAlterConfigs) and described as Kafka does, with no effect here."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic


def _admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _describe(admin: AdminClient, topic: str) -> dict:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([res])[res].result(timeout=10)


def test_message_format_version_alter_and_describe(broker) -> None:
    admin = _admin(broker)
    admin.create_topics([NewTopic("fmt", 1, 1, config={"message.format.version": "2.8",
                                                        "message.downconversion.enable": "false"})])["fmt"].result(10)
    entries = _describe(admin, "fmt")
    assert entries["message.format.version"].value == "2.8"
    assert entries["message.downconversion.enable"].value == "false"
    res = ConfigResource(ConfigResource.Type.TOPIC, "fmt", set_config={"message.format.version": "3.0-IV1",
                                                                       "compression.gzip.level": "5",
                                                                       "local.retention.ms": "-2"})
    admin.alter_configs([res])[res].result(timeout=10)
    entries = _describe(admin, "fmt")
    assert entries["message.format.version"].value == "3.0-IV1"
    assert entries["compression.gzip.level"].value == "5"
    inc = ConfigResource(ConfigResource.Type.TOPIC, "fmt", incremental_configs=[
        ConfigEntry("message.format.version", "0.10.2", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([inc])[inc].result(timeout=10)
    assert _describe(admin, "fmt")["message.format.version"].value == "0.10.2"


def test_a_topic_without_overrides_describes_the_broker_defaults(broker) -> None:
    admin = _admin(broker)
    admin.create_topics([NewTopic("fmt-default", 1, 1)])["fmt-default"].result(10)
    entries = _describe(admin, "fmt-default")
    assert entries["message.format.version"].value == "3.0-IV1"
    assert entries["compression.zstd.level"].value == "3"
    assert entries["local.retention.bytes"].value == "-2"


@pytest.mark.parametrize("key, value", [("message.format.version", "banana"), ("compression.gzip.level", "12")])
def test_bad_values_are_refused_naming_the_key(broker, key: str, value: str) -> None:
    admin = _admin(broker)
    admin.create_topics([NewTopic(f"fmt-bad-{key}", 1, 1)])[f"fmt-bad-{key}"].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, f"fmt-bad-{key}", set_config={key: value})
    with pytest.raises(Exception) as err:
        admin.alter_configs([res])[res].result(timeout=10)
    assert key in str(err.value)


@pytest.mark.parametrize("value", ["0.10.0.0", "0.10.0-IV1", "2.8.1", "3.0"])
def test_every_spelling_kafka_reads_as_a_release_is_accepted(broker, value: str) -> None:
    # librdkafka's 0092 sets the four-part 0.10.0.0 that Kafka documents and truncates to 0.10.0
    admin = _admin(broker)
    topic = f"fmt-{value}"
    admin.create_topics([NewTopic(topic, 1, 1, config={"message.format.version": value})])[topic].result(10)
    assert _describe(admin, topic)["message.format.version"].value == value


@pytest.mark.parametrize("value", ["9.1", "0.10", "2.8-beta"])
def test_a_release_kafka_does_not_know_is_refused(broker, value: str) -> None:
    admin = _admin(broker)
    with pytest.raises(Exception) as err:
        admin.create_topics([NewTopic(f"fmt-x{value}", 1, 1, config={"message.format.version": value})])[
            f"fmt-x{value}"].result(10)
    assert "message.format.version" in str(err.value)
