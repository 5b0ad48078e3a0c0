"""The schema registry on a three-broker cluster (real ZooKeeper, three `python -m kaflite.server` processes):
the `_schemas` topic it creates is replicated on every broker with min.insync.replicas=2 and compacted; kill -9
of that topic's leader leaves the registry registering (new ids above every earlier one) and every earlier
schema readable, and a registry started afterwards replays every schema and id from the two brokers left."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from cluster.conftest import BrokerProcesses
from helpers import wait_until
from kaflite.cluster.zk import KafkaZkClient
from registry_helpers import RunningRegistry

FAST = ("replica.lag.time.max.ms=4000", "replica.fetch.backoff.ms=200")
TOPIC = "_schemas"


def avro(name: str, extra: int = 0) -> Schema:
    fields = [{"name": "id", "type": "long"}] + [{"name": f"f{i}", "type": "int", "default": i} for i in range(extra)]
    return Schema(json.dumps({"type": "record", "name": name, "fields": fields}), "AVRO")


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:  # no client cache: what the registry holds now
        return json.loads(answer.read())


def everything(url: str) -> dict[tuple[str, int], tuple[int, str]]:
    """(subject, version) -> (id, schema text), read back through the REST API."""
    out = {}
    for subject in get(f"{url}/subjects"):
        for version in get(f"{url}/subjects/{subject}/versions"):
            v = get(f"{url}/subjects/{subject}/versions/{version}")
            out[(subject, version)] = (v["id"], v["schema"])
    return out


def test_registry_survives_kill_9_of_the_schemas_leader(brokers: BrokerProcesses, zk: KafkaZkClient) -> None:
    brokers.start_registered(zk, 1, 2, 3, overrides=FAST)
    # a write waits up to 20 s: the failover below takes 4-5 s here, more on a loaded machine
    first = RunningRegistry(brokers.bootstrap(), TOPIC, timeout=20.0)
    restarted: RunningRegistry | None = None
    try:
        # the topic the registry created: one partition on all three brokers, compacted, two in sync to write
        wait_until("a leader for _schemas-0", lambda: zk.get_partition_states([(TOPIC, 0)])[(TOPIC, 0)])
        assignment = zk.get_topic_assignment(TOPIC)
        assert assignment is not None and sorted(assignment[0].partitions[0]) == [1, 2, 3]
        resource = ConfigResource("TOPIC", TOPIC)
        admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})  # alive until the answer came
        configs = admin.describe_configs([resource])[resource].result(30)
        assert configs["cleanup.policy"].value == "compact"
        assert configs["min.insync.replicas"].value == "2"

        client = SchemaRegistryClient({"url": first.url})
        registered: dict[tuple[str, int], int] = {}
        for subject in ("orders-value", "users-value"):
            for extra in range(3):  # three compatible versions each (fields added with defaults)
                schema_id = client.register_schema(subject, avro(subject.split("-")[0], extra))
                registered[(subject, extra + 1)] = schema_id
        before = everything(first.url)
        assert {k: v[0] for k, v in before.items()} == registered
        wait_until("_schemas-0 in sync on 1, 2, 3", lambda: sorted(
            zk.get_partition_states([(TOPIC, 0)])[(TOPIC, 0)].isr) == [1, 2, 3])  # type: ignore[union-attr]

        state = zk.get_partition_states([(TOPIC, 0)])[(TOPIC, 0)]
        assert state is not None
        dead = state.leader
        brokers.kill(dead)  # SIGKILL by pid
        alive = [b for b in (1, 2, 3) if b != dead]

        # the next registration waits out the leader's ZooKeeper session (3 s) and the election, then succeeds
        t0 = time.monotonic()
        new_id = client.register_schema("orders-value", avro("orders", 3))
        failover_s = time.monotonic() - t0
        new_state = zk.get_partition_states([(TOPIC, 0)])[(TOPIC, 0)]
        assert new_state is not None and new_state.leader in alive
        assert new_id > max(registered.values())
        registered[("orders-value", 4)] = new_id
        more_id = SchemaRegistryClient({"url": first.url}).register_schema("payments-value", avro("payments"))
        assert more_id > new_id
        registered[("payments-value", 1)] = more_id
        print(f"first registration after kill -9 of broker {dead} (the _schemas leader): {failover_s:.2f} s")
        assert failover_s < 15

        # every earlier schema still readable, by subject and version and by id
        after = everything(first.url)
        assert {k: v[0] for k, v in after.items()} == registered
        assert all(after[k] == v for k, v in before.items())
        for (_, _), (schema_id, text) in before.items():
            assert get(f"{first.url}/schemas/ids/{schema_id}")["schema"] == text

        # a registry started now, on the two brokers left, replays every schema and id
        first.stop()
        restarted = RunningRegistry(brokers.bootstrap(*alive), TOPIC)
        assert everything(restarted.url) == after
        assert restarted.service.state.max_id == max(registered.values())
    finally:
        if first.thread.is_alive():
            first.stop()
        if restarted is not None:
            restarted.stop()
