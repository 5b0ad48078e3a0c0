"""Hostile and slow clients, as raw sockets (shared by the hardening tests and bench/hardening_bench.py)."""

from __future__ import annotations

import socket
import struct
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def fetch_v4_frame(topic: str, partition: int = 0, offset: int = 0, max_bytes: int = 57_671_680,
                   corr: int = 1, max_wait_ms: int = 500) -> bytes:
    """A Fetch v4 request (header v1) asking for up to `max_bytes` of one partition."""
    name = topic.encode()
    body = struct.pack(">hhih", 1, 4, corr, 6) + b"attack"
    body += struct.pack(">iiiib", -1, max_wait_ms, 1, max_bytes, 0)
    body += struct.pack(">ih", 1, len(name)) + name
    body += struct.pack(">iiqi", 1, partition, offset, max_bytes)
    return struct.pack(">i", len(body)) + body


def fetch_many_v4_frame(topic: str, partitions: int, max_bytes: int = 57_671_680, corr: int = 1) -> bytes:
    """A Fetch v4 request for every partition of a topic from offset 0 (32 KiB per partition)."""
    name = topic.encode()
    body = struct.pack(">hhih", 1, 4, corr, 6) + b"attack"
    body += struct.pack(">iiiib", -1, 500, 1, max_bytes, 0)
    body += struct.pack(">ih", 1, len(name)) + name + struct.pack(">i", partitions)
    for p in range(partitions):
        body += struct.pack(">iqi", p, 0, 32 * 1024)
    return struct.pack(">i", len(body)) + body


def non_readers(port: int, topic: str, n: int, rcvbuf: int = 65536) -> list[socket.socket]:
    """n connections that each send one Fetch for the whole partition and never read the answer."""
    socks = []
    for i in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(("127.0.0.1", port))
        s.sendall(fetch_v4_frame(topic, corr=i + 1))
        socks.append(s)
    return socks


class SlowReader(threading.Thread):
    """Fetches the partition from the start again and again, reading answers at `rate` bytes/s."""

    def __init__(self, port: int, topic: str, rate: float = 500_000, rcvbuf: int = 65536) -> None:
        super().__init__(daemon=True)
        self.port, self.topic, self.rate, self.rcvbuf = port, topic, rate, rcvbuf
        self.stop = threading.Event()
        self.received = 0

    def run(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)
        s.connect(("127.0.0.1", self.port))
        s.settimeout(30)
        step = 0.05
        try:
            corr = 0
            while not self.stop.is_set():
                corr += 1
                s.sendall(fetch_v4_frame(self.topic, corr=corr))
                size = struct.unpack(">i", _exactly(s, 4))[0]
                left = size
                while left and not self.stop.is_set():
                    chunk = s.recv(min(left, int(self.rate * step)))
                    if not chunk:
                        return
                    left -= len(chunk)
                    self.received += len(chunk)
                    time.sleep(step)
                if left:
                    return
        except OSError:
            return
        finally:
            s.close()


def _exactly(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def fill_topic(bootstrap: str, topic: str, total_bytes: int, value_size: int = 1000) -> int:
    """Produce `total_bytes` of values into partition 0; returns the number of records acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1, "compression.type": "none",
                  "queue.buffering.max.messages": 200000})
    acked = [0]

    def done(err: object, _msg: object) -> None:
        if err is None:
            acked[0] += 1

    value = b"x" * value_size
    for _ in range(total_bytes // value_size):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    p.flush(120)
    return acked[0]


def consume_rate(bootstrap: str, topic: str, records: int, timeout: float = 120) -> float:
    """Records/s of a confluent-kafka consumer reading `records` from the start of partition 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rate-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    start = time.monotonic()
    deadline = start + timeout
    while got < records and time.monotonic() < deadline:
        msgs = c.consume(10000, 0.5)
        got += sum(1 for m in msgs if m.error() is None)
    elapsed = time.monotonic() - start
    c.close()
    if got < records:
        raise AssertionError(f"consumed {got} of {records} records in {elapsed:.1f} s")
    return got / elapsed
