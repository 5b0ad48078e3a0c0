"""Shared by the console tests: the known data set and the console served by uvicorn on a free loopback
port (the same app `kaflite console` runs), reached over real HTTP."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from helpers import free_port

ORDERS_PARTITIONS = 3
ORDERS_RECORDS = 60
BASE_TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: record i of `orders` has timestamp BASE_TS + i * 1000


@dataclass
class ConsoleCluster:
    bootstrap: str
    orders: str
    events: str
    billing: str
    audit: str
    #: (partition, offset, key, value, timestamp) of every record produced to `orders`
    produced: list[tuple[int, int, bytes, bytes, int]] = field(default_factory=list)
    consumers: list[Any] = field(default_factory=list)
    #: log end offset of each `events` partition
    events_ends: dict[int, int] = field(default_factory=dict)


def _wait_assigned(consumer: Any, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        consumer.poll(0.2)
        if consumer.assignment():
            return
    raise AssertionError("consumer got no assignment")


@contextlib.contextmanager
def make_cluster(bs: str) -> Iterator[ConsoleCluster]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient, NewTopic

    tag = uuid.uuid4().hex[:6]
    cl = ConsoleCluster(bs, f"orders-{tag}", f"events-{tag}", f"billing-{tag}", f"audit-{tag}")
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.create_topics([NewTopic(cl.orders, ORDERS_PARTITIONS, 1),
                                    NewTopic(cl.events, 2, 1, config={"retention.ms": "3600000"})]).values():
        fut.result(10)
    # murmur2_random: the Java client's partitioner, the one the key search assumes
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 0, "partitioner": "murmur2_random"})
    delivered: list[tuple[int, int, bytes, bytes, int]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))

    for i in range(ORDERS_RECORDS):
        key = f"customer-{i % 5}".encode()
        value = json.dumps({"order": i, "amount": i * 10}).encode()
        producer.produce(cl.orders, key=key, value=value, timestamp=BASE_TS + i * 1000,
                         headers=[("source", f"test-{i}".encode())], on_delivery=on_delivery)
        producer.flush(10)  # one at a time: offsets follow i within each partition
    def on_event(err: Any, msg: Any) -> None:
        assert err is None, err
        cl.events_ends[msg.partition()] = max(cl.events_ends.get(msg.partition(), 0), msg.offset() + 1)

    for i in range(40):
        producer.produce(cl.events, key=b"hot" if i % 4 else f"k{i}".encode(), value=f"event {i}".encode(),
                         on_delivery=on_event)
    producer.flush(10)
    cl.produced = delivered

    # classic group: consume the first 10 records of each orders partition, commit, stay a member
    billing = Consumer({"bootstrap.servers": bs, "group.id": cl.billing, "auto.offset.reset": "earliest",
                        "enable.auto.commit": False, "partition.assignment.strategy": "range",
                        "client.id": "billing-app", "client.rack": "rack-a"})
    billing.subscribe([cl.orders])
    _wait_assigned(billing)
    billing.commit(offsets=[CTP(cl.orders, p, 10) for p in range(ORDERS_PARTITIONS)], asynchronous=False)
    # KIP-848 group on events
    audit = Consumer({"bootstrap.servers": bs, "group.id": cl.audit, "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": "audit-app",
                      "client.rack": "rack-b"})
    audit.subscribe([cl.events])
    _wait_assigned(audit)
    audit.commit(offsets=[CTP(cl.events, p, min(5, cl.events_ends.get(p, 0))) for p in range(2)],
                 asynchronous=False)
    cl.consumers = [billing, audit]
    try:
        yield cl
    finally:
        for c in cl.consumers:
            c.close()


class ConsoleServer:
    """The console app under uvicorn on a background thread, on 127.0.0.1:<free port>."""

    def __init__(self, bootstrap: str, **settings: Any) -> None:
        import uvicorn

        from kaflite.console.app import ConsoleSettings, create_app

        self.app = create_app(ConsoleSettings(bootstrap, **settings))
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                                   log_level="warning", access_log=False, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, name="console-under-test", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ConsoleServer:
        self.thread.start()
        end = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < end, "console did not start"
            assert self.thread.is_alive(), "console thread died"
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)

    def get(self, path: str, timeout: float = 30) -> tuple[int, str, dict[str, str]]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
                return r.status, r.read().decode("utf-8", "replace"), dict(r.headers)
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode("utf-8", "replace"), dict(err.headers)

    def get_bytes(self, path: str) -> tuple[int, bytes, dict[str, str]]:
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)

    def post(self, path: str, form: dict[str, str]) -> tuple[int, str, dict[str, str]]:
        from urllib.parse import urlencode

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        opener = urllib.request.build_opener(NoRedirect)
        req = urllib.request.Request(self.url + path, data=urlencode(form).encode(), method="POST")
        try:
            with opener.open(req, timeout=30) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode("utf-8", "replace"), dict(err.headers)


# The schema registry's known content (register_known_schemas): `orders-value` three Avro versions, the
# third soft-deleted, at the global level; `events-value` one JSON Schema at its own level NONE;
# `shop-users` a Protobuf schema as text. Ids 1, 2, 3 (orders), 4 (events), 5 (users).
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}
ORDER_V2 = {**ORDER_V1, "fields": ORDER_V1["fields"] + [{"name": "qty", "type": "int", "default": 1}]}
ORDER_V3 = {**ORDER_V2, "fields": ORDER_V2["fields"] + [{"name": "note", "type": "string", "default": ""}]}
EVENT_SCHEMA = {"type": "object", "properties": {"kind": {"type": "string"}}}
KNOWN_IDS = {"orders-value": [1, 2, 3], "events-value": [4], "shop-users": [5]}
USER_PROTO = 'syntax = "proto3";\npackage shop;\n\nmessage User {\n  string name = 1;\n  int64 id = 2;\n}\n'


def register_known_schemas(url: str) -> dict[str, list[int]]:
    """Register the known content through confluent-kafka's client; subject -> ids of its versions."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": url})
    ids = {"orders-value": [client.register_schema("orders-value", Schema(json.dumps(s), "AVRO"))
                            for s in (ORDER_V1, ORDER_V2, ORDER_V3)]}
    client.delete_version("orders-value", 3)
    client.set_compatibility("events-value", "NONE")
    ids["events-value"] = [client.register_schema("events-value", Schema(json.dumps(EVENT_SCHEMA), "JSON"))]
    ids["shop-users"] = [client.register_schema("shop-users", Schema(USER_PROTO, "PROTOBUF"))]
    return ids
