"""One kio request over a plain socket, answered synchronously: what the web console, the reassignment and
`cluster up` commands and the test kit (`EmbeddedCluster`) send to a broker for an API confluent-kafka's
AdminClient does not expose. Blocking: never call it on an event loop.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

__all__ = ["request"]

_MAX_FRAME = 64 * 1024 * 1024


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        out += chunk
    return bytes(out)


def request(host: str, port: int, req: Any, response_schema: Any, timeout: float = 3.0) -> Any:
    """Send one kio request, return the decoded response (flexible versions use header v2 / v1)."""
    flexible = bool(req.__flexible__)
    header_cls = RequestHeaderV2 if flexible else RequestHeaderV1
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=i16(req.__api_key__), request_api_version=i16(
        req.__version__), correlation_id=i32(1), client_id="kaflite-console"))
    entity_writer(type(req))(buf, req)
    body = buf.getvalue()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _exactly(sock, 4))
        if not 4 <= size <= _MAX_FRAME:
            raise ValueError(f"bad frame size {size}")
        frame = _exactly(sock, size)
    (corr,) = struct.unpack_from(">i", frame, 0)
    if corr != 1:
        raise ValueError(f"unexpected correlation id {corr}")
    offset = 4
    if flexible:
        _header, offset = entity_reader(ResponseHeaderV1)(frame, 0)
    response, _ = entity_reader(response_schema)(frame, offset)
    return response
