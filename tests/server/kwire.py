"""A tiny raw Kafka client for tests: send kio requests (or raw bytes), read frames back."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, request: Any, client_id: str | None = "kwire") -> int:
        self.corr += 1
        header_cls = HeaderV2 if request.__flexible__ else HeaderV1
        buf = io.BytesIO()
        entity_writer(header_cls)(
            buf,
            header_cls(
                request_api_key=i16(request.__api_key__),
                request_api_version=i16(request.__version__),
                correlation_id=i32(self.corr),
                client_id=client_id,
            ),
        )
        entity_writer(type(request))(buf, request)
        body = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        return self.corr

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            out += chunk
        return bytes(out)

    def request(self, request: Any) -> Any:
        corr = self.send(request)
        frame = self.read_frame()
        return decode_response(request.__api_key__, request.__version__, frame, corr)

    def is_closed(self, wait: float = 5.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True


def decode_response(api_key: int, version: int, frame: bytes, corr: int | None = None) -> Any:
    schema = load_response_schema(api_key, version)
    (got_corr,) = struct.unpack_from(">i", frame, 0)
    if corr is not None:
        assert got_corr == corr
    offset = 4
    if schema.__flexible__ and api_key != 18:
        assert frame[4] == 0  # no tagged fields in our response headers
        offset = 5
    body, size = entity_reader(schema)(frame, offset)
    assert offset + size == len(frame), "response has trailing bytes"
    return body
