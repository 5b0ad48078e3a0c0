"""Partition sizes on disk: DescribeLogDirs (API 35, v1) sent to each broker over a plain socket.

confluent-kafka's AdminClient does not expose DescribeLogDirs, so the console sends it itself with the
kio schemas (the same wire protocol, nothing kaflite-specific): it works against Apache Kafka too. A
broker that does not answer, or answers with an error, just leaves sizes unknown ("-" in the page).
"""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Mapping
from typing import Any

from kio.schema.describe_log_dirs.v1.request import DescribableLogDirTopic, DescribeLogDirsRequest
from kio.schema.describe_log_dirs.v1.response import DescribeLogDirsResponse
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

__all__ = ["describe_log_dirs"]

_MAX_FRAME = 64 * 1024 * 1024


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        out += chunk
    return bytes(out)


def describe_log_dirs(host: str, port: int, timeout: float = 3.0, topics: Mapping[str, list[int]] | None = None
                      ) -> dict[tuple[str, int], int]:
    """{(topic, partition): size in bytes} of the replicas on the broker at host:port (current logs, not
    future ones): every one, or those of `topics` {name: partitions}. Raises OSError / ConnectionError /
    ValueError when the broker cannot answer."""
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=i16(35), request_api_version=i16(1),
                                                    correlation_id=i32(1), client_id="kaflite-console"))
    wanted = None if topics is None else tuple(
        DescribableLogDirTopic(topic=TopicName(t), partitions=tuple(i32(p) for p in ps)) for t, ps in topics.items())
    entity_writer(DescribeLogDirsRequest)(buf, DescribeLogDirsRequest(topics=wanted))
    body = buf.getvalue()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _exactly(sock, 4))
        if not 4 <= size <= _MAX_FRAME:
            raise ValueError(f"DescribeLogDirs: bad frame size {size}")
        frame = _exactly(sock, size)
    (corr,) = struct.unpack_from(">i", frame, 0)
    if corr != 1:
        raise ValueError(f"DescribeLogDirs: unexpected correlation id {corr}")
    response: Any
    response, _ = entity_reader(DescribeLogDirsResponse)(frame, 4)
    sizes: dict[tuple[str, int], int] = {}
    for result in response.results:
        if int(result.error_code.value if hasattr(result.error_code, "value") else result.error_code):
            continue
        for t in result.topics:
            for p in t.partitions:
                if not p.is_future_key:
                    sizes[(str(t.name), int(p.partition_index))] = int(p.partition_size)
    return sizes
