"""Dynamic broker configuration on three brokers (Kafka's ZooKeeper mode, server/dynamic_config.py): a
<default> change reaches every broker within a second, a per-broker change only that broker, both stored
as Kafka stores them (/config/brokers/<default>, /config/brokers/<id>)."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from kio.schema.incremental_alter_configs.v1 import request as ireq
from kio.static.primitive import i8

from cluster.conftest import BrokerProcesses
from helpers import holds_by
from kaflite.cluster.zk import KafkaZkClient
from server.kwire import WireClient


def _retention(bootstrap: str, broker_id: int) -> tuple[str | None, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    entry = admin.describe_configs([res])[res].result(timeout=10)["log.retention.ms"]
    return entry.value, entry.source


def test_default_and_per_broker_changes_reach_the_right_brokers(
    brokers: BrokerProcesses, zk: KafkaZkClient
) -> None:
    brokers.start_registered(zk, 1, 2, 3)
    # the default entity (Kafka's empty name, which the clients refuse to send) through broker 2
    config = ireq.AlterableConfig(name="log.retention.ms", config_operation=i8(0), value="3600000")
    with WireClient(brokers.bootstrap(2)) as c:
        r = c.request(ireq.IncrementalAlterConfigsRequest(
            resources=(ireq.AlterConfigsResource(resource_type=i8(4), resource_name="", configs=(config,)),),
            validate_only=False))
    assert int(r.responses[0].error_code.value) == 0, r.responses[0].error_message
    assert zk.get_entity_config("brokers", "<default>") == {"log.retention.ms": "3600000"}
    deadline = time.monotonic() + 1.0  # each broker applies the change within 1 s of the answer
    for b in (1, 2, 3):

        def applied(b: int = b) -> bool:
            return _retention(brokers.bootstrap(b), b) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

        holds_by(f"broker {b} describes the new default", applied, deadline)

    # broker 3's own value: only broker 3 changes
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap(3)})
    res = ConfigResource(ConfigResource.Type.BROKER, "3", incremental_configs=[
        ConfigEntry("log.retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(timeout=10)
    assert zk.get_entity_config("brokers", "3") == {"log.retention.ms": "7200000"}
    assert _retention(brokers.bootstrap(3), 3) == ("7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    time.sleep(1)  # and the others do not (what does not happen has no condition to wait for)
    for b in (1, 2):
        assert _retention(brokers.bootstrap(b), b) == (
            "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        )
