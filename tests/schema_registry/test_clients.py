"""The registry as Confluent's clients use it, on a real kaflite broker: confluent-kafka's
SchemaRegistryClient and AvroSerializer / AvroDeserializer (and JSONSerializer / JSONDeserializer,
ProtobufSerializer / ProtobufDeserializer) round-trip records produced and consumed through the broker, with auto.register.schemas on and off; an incompatible change is refused with 409;
a restarted registry replays _schemas and keeps every schema and id; `kaflite schema-registry` serves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from helpers import stop_process
from registry_helpers import ORDER_BAD, ORDER_V1, ORDER_V2, RunningRegistry


def round_trip(bootstrap: str, topic: str, serializer: Any, deserializer: Any,
               records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    producer = Producer({"bootstrap.servers": bootstrap})
    for record in records:
        value = serializer(record, SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, value=value)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[dict[str, Any]] = []
    try:
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            raw = msg.value()
            assert raw is not None and raw[0] == 0  # Confluent's wire format: magic byte, then the schema id
            out.append(deserializer(raw, SerializationContext(topic, MessageField.VALUE)))
            if len(out) == len(records):
                break
    finally:
        consumer.close()
    return out


def test_avro_round_trip_with_auto_register(kaflite_broker: Any, registry: RunningRegistry) -> None:
    client = registry.client()
    serializer = AvroSerializer(client, json.dumps(ORDER_V1))
    deserializer = AvroDeserializer(client)
    records = [{"id": 1, "item": "book"}, {"id": 2, "item": "pen"}]
    assert round_trip(kaflite_broker.bootstrap, "orders", serializer, deserializer, records) == records
    latest = client.get_latest_version("orders-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str) == ORDER_V1


def test_avro_without_auto_register_uses_the_registered_schema(kaflite_broker: Any,
                                                               registry: RunningRegistry) -> None:
    client = registry.client()
    unregistered = AvroSerializer(client, json.dumps(ORDER_V1), conf={"auto.register.schemas": False})
    with pytest.raises(Exception, match="40401|not found"):
        unregistered({"id": 1, "item": "x"}, SerializationContext("payments", MessageField.VALUE))
    schema_id = client.register_schema("payments-value", Schema(json.dumps(ORDER_V2), "AVRO"))
    serializer = AvroSerializer(registry.client(), json.dumps(ORDER_V2), conf={"auto.register.schemas": False})
    records = [{"id": 3, "item": "ink", "qty": 2}]
    got = round_trip(kaflite_broker.bootstrap, "payments", serializer, AvroDeserializer(registry.client()), records)
    assert got == records
    assert client.lookup_schema("payments-value", Schema(json.dumps(ORDER_V2), "AVRO")).schema_id == schema_id


def test_json_schema_round_trip_stores_the_schema_type(kaflite_broker: Any, registry: RunningRegistry) -> None:
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Click", "type": "object",
                         "properties": {"page": {"type": "string"}, "n": {"type": "integer"}},
                         "required": ["page"]})
    client = registry.client()
    records = [{"page": "/home", "n": 1}, {"page": "/cart", "n": 2}]
    got = round_trip(kaflite_broker.bootstrap, "clicks", JSONSerializer(schema, client),
                     JSONDeserializer(schema, schema_registry_client=client), records)
    assert got == records
    latest = client.get_latest_version("clicks-value")
    assert latest.schema.schema_type == "JSON" and json.loads(latest.schema.schema_str) == json.loads(schema)


def shipment_class() -> Any:
    """A Protobuf message class built at run time from a FileDescriptorProto (what protoc would generate
    for `package shop; message Shipment { int64 id = 1; string carrier = 2; repeated string items = 3; }`)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/shipment.proto", package="shop", syntax="proto3")
    message = fdp.message_type.add(name="Shipment")
    field_type = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=field_type.TYPE_INT64, label=field_type.LABEL_OPTIONAL)
    message.field.add(name="carrier", number=2, type=field_type.TYPE_STRING, label=field_type.LABEL_OPTIONAL)
    message.field.add(name="items", number=3, type=field_type.TYPE_STRING, label=field_type.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Shipment"))


def test_protobuf_round_trip_with_auto_register(kaflite_broker: Any, registry: RunningRegistry) -> None:
    shipment = shipment_class()
    client = registry.client()
    serializer = ProtobufSerializer(shipment, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(shipment, {"use.deprecated.format": False}, client)
    records = [shipment(id=1, carrier="post", items=["a", "b"]), shipment(id=2, carrier="ship")]
    assert round_trip(kaflite_broker.bootstrap, "shipments", serializer, deserializer, records) == records
    latest = client.get_latest_version("shipments-value")
    assert latest.version == 1 and latest.schema.schema_type == "PROTOBUF"
    # a .proto text that changes the carrier field's type is refused; one adding a field is not
    changed = 'syntax = "proto3";\npackage shop;\nmessage Shipment { int64 id = 1; int64 carrier = 2; }'
    assert client.test_compatibility("shipments-value", Schema(changed, "PROTOBUF")) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("shipments-value", Schema(changed, "PROTOBUF"))
    assert refused.value.http_status_code == 409
    added = ('syntax = "proto3";\npackage shop;\n'
             'message Shipment { int64 id = 1; string carrier = 2; repeated string items = 3; bool done = 4; }')
    assert client.register_schema_full_response("shipments-value", Schema(added, "PROTOBUF")).version == 2
    # without auto-registration the serializer needs its schema registered under the subject: refused
    # before, used once version 1's schema (the serializer's base64 descriptor) is registered there
    fixed = ProtobufSerializer(shipment, registry.client(),
                               {"use.deprecated.format": False, "auto.register.schemas": False})
    more = [shipment(id=3, carrier="air")]
    with pytest.raises(SchemaRegistryError, match="40401"):
        fixed(more[0], SerializationContext("shipments2", MessageField.VALUE))
    first = client.get_version("shipments-value", 1)
    assert client.register_schema("shipments2-value", first.schema) == first.schema_id
    got = round_trip(kaflite_broker.bootstrap, "shipments2", fixed, deserializer, more)
    assert got == more


def test_evolution_allowed_and_refused_with_409(registry: RunningRegistry) -> None:
    client = registry.client()
    client.register_schema("evolve-value", Schema(json.dumps(ORDER_V1), "AVRO"))
    client.register_schema("evolve-value", Schema(json.dumps(ORDER_V2), "AVRO"))  # a field with a default
    assert client.test_compatibility("evolve-value", Schema(json.dumps(ORDER_BAD), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("evolve-value", Schema(json.dumps(ORDER_BAD), "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    assert client.get_versions("evolve-value") == [1, 2]
    client.set_compatibility("evolve-value", "NONE")
    assert client.get_compatibility("evolve-value") == "NONE"
    assert client.register_schema_full_response("evolve-value", Schema(json.dumps(ORDER_BAD), "AVRO")).version == 3
    assert client.delete_version("evolve-value", 3) == 3
    assert client.get_versions("evolve-value") == [1, 2]


def test_restart_replays_every_schema_and_id(kaflite_broker: Any, registry: RunningRegistry,
                                             topic_name: str) -> None:
    before = registry.client()
    ids = {s: [before.get_version(s, v).schema_id for v in before.get_versions(s)] for s in before.get_subjects()}
    assert ids  # the earlier tests registered schemas
    second = RunningRegistry(kaflite_broker.bootstrap, topic_name)
    try:
        after = second.client()
        assert {s: [after.get_version(s, v).schema_id for v in after.get_versions(s)]
                for s in after.get_subjects()} == ids
        assert after.get_compatibility("evolve-value") == "NONE"
        assert after.get_versions("evolve-value") == [1, 2]  # the soft delete replayed
        fresh = {"type": "record", "name": "Fresh", "fields": [{"name": "f", "type": "int"}]}
        new_id = after.register_schema("fresh-value", Schema(json.dumps(fresh), "AVRO"))
        assert new_id == max(i for versions in ids.values() for i in versions) + 2  # +2: version 3 held an id
    finally:
        second.stop()


def test_cli_serves_the_registry(kaflite_broker: Any, tmp_path: Any) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kaflite", "schema-registry", "-b", kaflite_broker.bootstrap,
                             "--listen", "http://127.0.0.1:0", "--topic", f"_schemas_cli_{uuid.uuid4().hex[:6]}"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert line.startswith("schema registry on http://127.0.0.1:"), line
        url = line.split()[3]
        request = urllib.request.Request(f"{url}/subjects/cli-value/versions", method="POST",
                                         data=json.dumps({"schema": '"string"'}).encode(),
                                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.headers["Content-Type"] == "application/vnd.schemaregistry.v1+json"
            assert json.loads(answer.read())["id"] == 1
        with urllib.request.urlopen(f"{url}/subjects", timeout=10) as answer:
            assert json.loads(answer.read()) == ["cli-value"]
    finally:
        stop_process(proc, signal.SIGTERM)
    assert proc.returncode == 0
