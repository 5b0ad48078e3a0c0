"""python-schema-registry-client (a second, independent client of Confluent's REST API, on httpx) against
the registry on a real kaflite broker: the registration / lookup / compatibility scenarios of
test_clients.py, its Avro and JSON message serializers round-tripping records through the broker, and
schemas registered by confluent-kafka's client found with the same ids through it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema
from schema_registry.client import SchemaRegistryClient, errors, schema
from schema_registry.serializers import AvroMessageSerializer, JsonMessageSerializer

from registry_helpers import ORDER_BAD, ORDER_V1, ORDER_V2


@pytest.fixture(scope="module")
def client(registry: Any) -> SchemaRegistryClient:
    return SchemaRegistryClient(url=registry.url)


def produce_and_consume(bootstrap: str, topic: str, payloads: list[bytes]) -> list[bytes]:
    import uuid

    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer

    producer = CKProducer({"bootstrap.servers": bootstrap})
    for payload in payloads:
        producer.produce(topic, value=payload)
    assert producer.flush(10) == 0
    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                           "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[bytes] = []
    try:
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            value = msg.value()
            assert value is not None
            out.append(value)
            if len(out) == len(payloads):
                break
    finally:
        consumer.close()
    return out


def test_register_lookup_and_read_back(client: SchemaRegistryClient) -> None:
    avro = schema.AvroSchema(ORDER_V1)
    schema_id = client.register("psrc-orders-value", avro)
    assert client.register("psrc-orders-value", avro) == schema_id  # the same schema: its id again
    found = client.check_version("psrc-orders-value", avro)
    assert found is not None and found.schema_id == schema_id and found.version == 1
    assert client.get_by_id(schema_id) == avro
    version = client.get_schema("psrc-orders-value", "latest")
    assert version is not None and version.version == 1 and version.schema_id == schema_id
    assert client.get_versions("psrc-orders-value") == [1]
    assert "psrc-orders-value" in client.get_subjects()
    assert client.check_version("psrc-orders-value", schema.AvroSchema(ORDER_V2)) is None
    assert client.get_schema("psrc-missing-value") is None


def test_evolution_allowed_and_refused_with_409(client: SchemaRegistryClient) -> None:
    client.register("psrc-evolve-value", schema.AvroSchema(ORDER_V1))
    assert client.test_compatibility("psrc-evolve-value", schema.AvroSchema(ORDER_V2)) is True
    assert client.test_compatibility("psrc-evolve-value", schema.AvroSchema(ORDER_BAD)) is False
    with pytest.raises(errors.ClientError) as refused:
        client.register("psrc-evolve-value", schema.AvroSchema(ORDER_BAD))
    assert refused.value.http_code == 409
    client.register("psrc-evolve-value", schema.AvroSchema(ORDER_V2))
    assert client.update_compatibility("NONE", "psrc-evolve-value") is True
    assert client.get_compatibility("psrc-evolve-value") == "NONE"
    client.register("psrc-evolve-value", schema.AvroSchema(ORDER_BAD))
    assert client.get_versions("psrc-evolve-value") == [1, 2, 3]
    assert client.delete_version("psrc-evolve-value", 3) == 3
    assert client.get_versions("psrc-evolve-value") == [1, 2]
    assert client.delete_subject("psrc-evolve-value") == [1, 2]
    assert client.get_versions("psrc-evolve-value") == []


def test_json_schema_compatibility(client: SchemaRegistryClient) -> None:
    v1 = {"type": "object", "properties": {"page": {"type": "string"}}, "additionalProperties": False}
    v2 = {**v1, "properties": {**v1["properties"], "n": {"type": "integer"}}}  # optional, closed model
    v3 = {**v1, "required": ["page", "n"], "properties": v2["properties"]}
    client.register("psrc-json-value", schema.JsonSchema(v1), schema_type="JSON")
    assert client.test_compatibility("psrc-json-value", schema.JsonSchema(v2), schema_type="JSON") is True
    client.register("psrc-json-value", schema.JsonSchema(v2), schema_type="JSON")
    assert client.test_compatibility("psrc-json-value", schema.JsonSchema(v3), schema_type="JSON") is False


def test_avro_and_json_serializers_round_trip_through_the_broker(kaflite_broker: Any,
                                                                  client: SchemaRegistryClient) -> None:
    avro = AvroMessageSerializer(client)
    records = [{"id": 1, "item": "book"}, {"id": 2, "item": "pen"}]
    payloads = [avro.encode_record_with_schema("psrc-avro-value", schema.AvroSchema(ORDER_V1), r) for r in records]
    got = produce_and_consume(kaflite_broker.bootstrap, "psrc-avro", payloads)
    assert [avro.decode_message(p) for p in got] == records
    as_json = JsonMessageSerializer(client)
    click = schema.JsonSchema({"type": "object", "properties": {"page": {"type": "string"}}})
    clicks = [{"page": "/home"}, {"page": "/cart"}]
    payloads = [as_json.encode_record_with_schema("psrc-json-clicks-value", click, r) for r in clicks]
    got = produce_and_consume(kaflite_broker.bootstrap, "psrc-json-clicks", payloads)
    assert [as_json.decode_message(p) for p in got] == clicks


def test_schemas_registered_by_confluent_kafka_have_the_same_ids(registry: Any, client: SchemaRegistryClient
                                                                  ) -> None:
    other = registry.client()
    schema_id = other.register_schema("psrc-cross-value", Schema(json.dumps(ORDER_V2), "AVRO"))
    found = client.check_version("psrc-cross-value", schema.AvroSchema(ORDER_V2))
    assert found is not None and found.schema_id == schema_id
    assert client.get_by_id(schema_id) == schema.AvroSchema(ORDER_V2)
