"""pytest plugin (registered through the `pytest11` entry point): a kaflite broker fixture.

    def test_my_pipeline(kaflite_broker):
        producer = confluent_kafka.Producer({"bootstrap.servers": kaflite_broker.bootstrap})

`kaflite_broker` is an in-process `EmbeddedBroker` on an ephemeral loopback port with a temporary data
directory, started once per test module and stopped afterwards.

`kaflite_secured_broker` is the same with security: SASL_SSL (PLAIN and SCRAM users alice and bob, a
generated CA) unless the module parametrizes it indirectly with "ssl", "sasl_plaintext" or "sasl_ssl":

    @pytest.mark.parametrize("kaflite_secured_broker", ["sasl_plaintext"], indirect=True)
    def test_login(kaflite_secured_broker):
        producer = confluent_kafka.Producer(kaflite_secured_broker.confluent_config(user="bob"))

`kaflite_cluster` is an `EmbeddedCluster` (server/embedded_cluster.py): a ZooKeeper and three broker
processes, started once per test module (it needs Java and ZooKeeper's jars, as `kaflite cluster up`);
a module that wants another size parametrizes it indirectly with the number of brokers:

    def test_failover(kaflite_cluster):
        kaflite_cluster.kill(kaflite_cluster.leader("orders", 0))
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def kaflite_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from kaflite.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kaflite-data")) as broker:
        yield broker


@pytest.fixture(scope="module")
def kaflite_secured_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from kaflite.server.embedded import EmbeddedBroker

    security = getattr(request, "param", "sasl_ssl")
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kaflite-secured"), security=security) as broker:
        yield broker


@pytest.fixture(scope="module")
def kaflite_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from kaflite.server.embedded_cluster import EmbeddedCluster

    brokers = getattr(request, "param", 3)
    # fault injection on, so cluster.expire_member / force_rebalance work as on kaflite_broker's broker
    with EmbeddedCluster(brokers, data_dir=tmp_path_factory.mktemp("kaflite-cluster"),
                         overrides={"kaflite.faults.enable": "true"}) as cluster:
        yield cluster
