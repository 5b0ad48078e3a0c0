"""Capture the request frames real clients send (confluent-kafka, kafka-python, aiokafka) through a
recording proxy in front of a kaflite broker; writes tests/hardening/data/client-frames.jsonl, the seed
corpus of the fuzz test (`python tests/hardening/capture_frames.py`; needs only the venv).

Each line: {"client": ..., "api_key": k, "api_version": v, "frame": hex of the frame without its size}.
The broker advertises the proxy's address, so every connection of every client passes through it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "client-frames.jsonl"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Recorder:
    def __init__(self, broker_port: int) -> None:
        self.broker_port = broker_port
        self.client = "?"
        self.frames: list[dict[str, object]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.broker_port)

        async def upstream() -> None:
            try:
                while True:
                    size_b = await reader.readexactly(4)
                    (size,) = struct.unpack(">i", size_b)
                    frame = await reader.readexactly(size)
                    key, ver = struct.unpack_from(">hh", frame)
                    self.frames.append({"client": self.client, "api_key": key, "api_version": ver,
                                        "frame": frame.hex()})
                    up_w.write(size_b + frame)
                    await up_w.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                up_w.close()

        async def downstream() -> None:
            try:
                while data := await up_r.read(65536):
                    writer.write(data)
                    await writer.drain()
            except ConnectionError:
                pass
            finally:
                writer.close()

        await asyncio.gather(upstream(), downstream())


def run_clients(bootstrap: str, rec: Recorder) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    rec.client = "confluent-kafka"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("cap-a", 3, 1), NewTopic("cap-b", 1, 1, config={"cleanup.policy": "compact"})]).values():
        f.result(10)
    admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "cap-a")])[
        ConfigResource(ConfigResource.Type.TOPIC, "cap-a")].result(10)
    admin.create_partitions([NewPartitions("cap-a", 4)])["cap-a"].result(10)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                      "enable.idempotence": codec == "zstd"})
        for i in range(20):
            p.produce("cap-a", key=b"k%d" % i, value=b"value-%d" % i, headers=[("h", b"x")])
        p.produce("cap-b", key=b"same", value=None)
        p.flush(10)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "cap-group", "auto.offset.reset": "earliest",
                  "enable.auto.commit": True, "auto.commit.interval.ms": 200})
    c.subscribe(["cap-a"])
    deadline = time.monotonic() + 20
    got = 0
    while got < 50 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.commit(asynchronous=False)
    c.close()
    admin.list_consumer_groups().result(10)
    admin.describe_consumer_groups(["cap-group"])["cap-group"].result(10)

    rec.client = "kafka-python"
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic as KNewTopic

    ka = KafkaAdminClient(bootstrap_servers=bootstrap)
    ka.create_topics([KNewTopic("cap-k", 2, 1)])
    kp = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for i in range(20):
        kp.send("cap-k", key=b"k%d" % i, value=b"kv-%d" % i)
    kp.flush(10)
    kp.close()
    kc = KafkaConsumer("cap-k", bootstrap_servers=bootstrap, group_id="cap-kgroup", auto_offset_reset="earliest",
                       consumer_timeout_ms=5000)
    for n, _m in enumerate(kc):
        if n >= 19:
            break
    kc.commit()
    kc.close()
    for call in (lambda: ka.describe_groups(["cap-kgroup"]), lambda: ka.list_group_offsets("cap-kgroup"),
                 lambda: ka.describe_cluster(), lambda: ka.describe_log_dirs(), lambda: ka.describe_topics(["cap-k"]),
                 lambda: ka.list_groups(), lambda: ka.describe_configs([])):
        try:
            call()
        except Exception as e:  # noqa: BLE001 - an API kaflite does not serve: its frame is still captured
            print("kafka-python:", type(e).__name__, e)
    ka.delete_topics(["cap-k"])
    ka.close()

    rec.client = "aiokafka"
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def aio() -> None:
        prod = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await prod.start()
        for i in range(20):
            await prod.send_and_wait("cap-a", key=b"a%d" % i, value=b"aio-%d" % i)
        await prod.stop()
        cons = AIOKafkaConsumer("cap-a", bootstrap_servers=bootstrap, group_id="cap-agroup",
                                auto_offset_reset="earliest")
        await cons.start()
        got = 0
        end = time.monotonic() + 20
        while got < 20 and time.monotonic() < end:
            batch = await cons.getmany(timeout_ms=500)
            got += sum(len(v) for v in batch.values())
        await cons.commit()
        await cons.stop()

    asyncio.run(aio())
    rec.client = "confluent-kafka"
    admin.delete_topics(["cap-b"])["cap-b"].result(10)


def main() -> None:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    from brokerproc import BrokerProcess

    proxy_port = _free_port()
    tmp = Path(tempfile.mkdtemp())
    broker = BrokerProcess(tmp / "data", {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"})
    broker.start()
    rec = Recorder(broker.port)
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(asyncio.start_server(rec.handle, "127.0.0.1", proxy_port))
        started.set()
        loop.run_forever()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    started.wait(10)
    try:
        run_clients(f"127.0.0.1:{proxy_port}", rec)
    finally:
        broker.stop()
        loop.call_soon_threadsafe(loop.stop)
    seen: set[tuple[str, int, int, str]] = set()
    lines = []
    for f in rec.frames:
        # drop the correlation id from the dedup key: the same request shape once per client
        key = (str(f["client"]), int(f["api_key"]), int(f["api_version"]), str(f["frame"])[16:])  # type: ignore[call-overload]
        if key in seen:
            continue
        seen.add(key)
        lines.append(json.dumps(f, sort_keys=True))
    OUT.write_text("\n".join(lines) + "\n")
    apis = sorted({(int(f["api_key"]), int(f["api_version"])) for f in rec.frames})  # type: ignore[call-overload]
    print(f"{len(lines)} distinct frames of {len(rec.frames)} captured; (api, version): {apis}")


if __name__ == "__main__":
    main()
