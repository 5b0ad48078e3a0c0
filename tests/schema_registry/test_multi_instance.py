"""Two registry instances over one broker and one _schemas topic, with a writer elected through a consumer
group (kaflite.schema_registry.election): writes through either are served (the follower forwards them),
a registration through one is visible through the other within 1 s, ids are never given twice, and when
the writer stops the other takes over with ids above every earlier one; `kaflite schema-registry
--elect-writer` joins them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from helpers import stop_process
from registry_helpers import RunningRegistry


def avro(name: str) -> Schema:
    return Schema(json.dumps({"type": "record", "name": name, "fields": [{"name": "f", "type": "int"}]}), "AVRO")


def wait_for_writer(instances: list[RunningRegistry], timeout: float = 15.0) -> RunningRegistry:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        writers = [r for r in instances if r.service.election is not None and r.service.election.is_writer]
        if len(writers) == 1:
            return writers[0]
        time.sleep(0.05)
    raise AssertionError("no single writer elected")


def visible_within(client: SchemaRegistryClient, subject: str, schema_id: int, limit: float) -> float:
    start = time.monotonic()
    while True:
        try:
            if client.get_latest_version(subject).schema_id == schema_id:
                return time.monotonic() - start
        except SchemaRegistryError:
            pass
        if time.monotonic() - start > limit:
            raise AssertionError(f"{subject} id {schema_id} not visible within {limit} s")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def pair(kaflite_broker: Any) -> Iterator[list[RunningRegistry]]:
    topic = f"_schemas_multi_{uuid.uuid4().hex[:6]}"
    instances = [RunningRegistry(kaflite_broker.bootstrap, topic, elect_writer=True) for _ in range(2)]
    yield instances
    for instance in instances:
        if instance.thread.is_alive():
            instance.stop()


def test_writes_through_either_instance_are_visible_through_the_other_within_1s(pair: list[RunningRegistry]
                                                                                ) -> None:
    writer = wait_for_writer(pair)
    follower = next(r for r in pair if r is not writer)
    for source, target, subject in ((follower, writer, "via-follower-value"), (writer, follower, "via-writer-value")):
        client = SchemaRegistryClient({"url": source.url})
        schema_id = client.register_schema(subject, avro(subject.replace("-", "_")))
        assert visible_within(SchemaRegistryClient({"url": target.url}), subject, schema_id, 1.0) < 1.0
        # read-your-writes on the instance that took the request, even when it forwarded it
        assert client.get_latest_version(subject).schema_id == schema_id
    # config and deletes are forwarded too; refusals come back with the writer's status and code
    follower_client = SchemaRegistryClient({"url": follower.url})
    follower_client.set_compatibility("via-writer-value", "FULL")
    assert SchemaRegistryClient({"url": writer.url}).get_compatibility("via-writer-value") == "FULL"
    bad = Schema(json.dumps({"type": "record", "name": "via_writer_value",
                             "fields": [{"name": "f", "type": "string"}]}), "AVRO")
    with pytest.raises(SchemaRegistryError) as refused:
        follower_client.register_schema("via-writer-value", bad)
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409


def test_concurrent_registrations_through_both_never_share_an_id(pair: list[RunningRegistry]) -> None:
    ids: dict[str, int] = {}
    failures: list[BaseException] = []

    def register(instance: RunningRegistry, prefix: str) -> None:
        client = SchemaRegistryClient({"url": instance.url})
        try:
            for i in range(6):
                name = f"{prefix}{i}"
                ids[name] = client.register_schema(f"{name}-value", avro(name))
        except BaseException as err:  # reported below: a thread's failure must fail the test
            failures.append(err)

    threads = [threading.Thread(target=register, args=(instance, f"c{n}_")) for n, instance in enumerate(pair)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    assert len(ids) == 12 and len(set(ids.values())) == 12
    for instance in pair:
        client = SchemaRegistryClient({"url": instance.url})
        for name, schema_id in ids.items():
            assert visible_within(client, f"{name}-value", schema_id, 1.0) < 1.0


def test_the_other_instance_takes_over_when_the_writer_stops(pair: list[RunningRegistry]) -> None:
    writer = wait_for_writer(pair)
    survivor = next(r for r in pair if r is not writer)
    client = SchemaRegistryClient({"url": survivor.url})
    highest = max(client.get_version(s, v).schema_id for s in client.get_subjects() for v in client.get_versions(s))
    writer.stop()
    assert wait_for_writer([survivor]) is survivor
    new_id = client.register_schema("after-failover-value", avro("after_failover"))
    assert new_id == highest + 1


def test_cli_instance_with_elect_writer_joins(kaflite_broker: Any, pair: list[RunningRegistry]) -> None:
    survivor = next(r for r in pair if r.thread.is_alive())
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kaflite", "schema-registry", "-b", kaflite_broker.bootstrap,
                             "--listen", "http://127.0.0.1:0", "--topic", survivor.service.store.topic,
                             "--elect-writer"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert line.startswith("schema registry on http://127.0.0.1:"), line
        client = SchemaRegistryClient({"url": line.split()[3]})
        assert "after-failover-value" in client.get_subjects()  # replayed
        schema_id = client.register_schema("via-cli-value", avro("via_cli"))
        assert visible_within(SchemaRegistryClient({"url": survivor.url}), "via-cli-value", schema_id, 1.0) < 1.0
    finally:
        stop_process(proc, signal.SIGTERM)
    assert proc.returncode == 0
