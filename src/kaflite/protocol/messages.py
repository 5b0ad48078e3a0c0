"""Sans-IO request/response codec on top of kio's schemas: request header, body, response header.

Rules (Kafka's `RequestHeader.json` / `ResponseHeader.json`):
- the request header is v2 (flexible: tagged fields after client id) when the request's body version is
  flexible, v1 otherwise; `client_id` is always a legacy int16-length string, even in v2;
- the response header is v1 (correlation id + tagged fields) for flexible responses, v0 otherwise, except
  ApiVersions whose response header is always v0 (clients parse it before they know the broker's versions);
- unknown tagged fields are skipped and leftover bytes after a body are ignored (librdkafka sends three
  extra bytes on Metadata v9+), never rejected;
- parsing a header costs O(1) whatever api key and version it names: the known (key, version) pairs come
  from kio's index (a table lookup), schemas are loaded and cached only for pairs kio knows (a bounded
  set), and a version beyond the newest known one is judged by that newest one alone, so a hostile
  `api_version = 32767` builds nothing (it used to load and cache every lower version).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.serial.readers import read_unsigned_varint

from kaflite.protocol import produce_request
from kaflite.protocol.errors import ProtocolError
from kaflite.protocol.guard import check_request_lengths

__all__ = [
    "API_VERSIONS_KEY",
    "PRODUCE_KEY",
    "ProtocolError",
    "RequestHeader",
    "decode_request",
    "encode_response",
    "parse_request_header",
    "request_schema",
    "response_schema",
    "schema_known",
]

# the api keys the request path itself tests for (the handlers name theirs); kio has no enum of them
PRODUCE_KEY = 0
API_VERSIONS_KEY = 18
_HEADER = struct.Struct(">hhih")
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def schema_known(api_key: int, version: int) -> bool:
    """Whether kio has the request and response schemas of (api key, version), without loading them."""
    return _known(api_key, version)


def _known(api_key: int, version: int) -> bool:
    """Whether kio has schemas for (api key, version): two dict lookups, nothing loaded."""
    name = api_key_map.get(api_key)
    return name is not None and version in schema_name_map[name]


def newest_known_version(api_key: int) -> int:
    """The newest version of an api key kio knows, -1 for an unknown key (bounded cache: keys kio knows)."""
    name = api_key_map.get(api_key)
    return -1 if name is None else _newest_of(name)


@cache
def _newest_of(name: str) -> int:
    return max(schema_name_map[name])


def request_schema(api_key: int, version: int) -> type[Any] | None:
    """kio's request class for (api key, version), or None when kio has no such schema. Only pairs kio
    knows reach the cache, so its size is bounded whatever clients send."""
    return _request_schema(api_key, version) if _known(api_key, version) else None


def response_schema(api_key: int, version: int) -> type[Any] | None:
    return _response_schema(api_key, version) if _known(api_key, version) else None


@cache
def _request_schema(api_key: int, version: int) -> type[Any] | None:
    try:
        return load_request_schema(api_key, version)
    except Exception:
        return None


@cache
def _response_schema(api_key: int, version: int) -> type[Any] | None:
    try:
        return load_response_schema(api_key, version)
    except Exception:
        return None


def _is_flexible_request(api_key: int, version: int) -> bool:
    schema = request_schema(api_key, version)
    if schema is not None:
        return bool(schema.__flexible__)
    # A version kio does not know: one newer than every schema is flexible whenever the newest known one
    # is (what Kafka assumes for an ApiVersions probe from a newer client); an unknown key or a negative
    # version has no tagged fields to skip. One lookup, whatever the version.
    newest = newest_known_version(api_key)
    if newest < 0 or version < newest:
        return False
    schema = request_schema(api_key, newest)
    return bool(schema is not None and schema.__flexible__)


def _skip_tagged_fields(buf: bytes | memoryview, offset: int) -> int:
    count, n = read_unsigned_varint(buf, offset)
    offset += n
    for _ in range(count):
        _tag, n = read_unsigned_varint(buf, offset)
        offset += n
        size, n = read_unsigned_varint(buf, offset)
        offset += n + size
    if offset > len(buf):
        raise ProtocolError("tagged fields run past the end of the frame")
    return offset


def parse_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Parse the request header at the start of a frame; returns it and the offset of the body."""
    if len(frame) < _HEADER.size:
        raise ProtocolError(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEADER.unpack_from(frame, 0)
    offset = _HEADER.size
    client_id: str | None = None
    if client_len >= 0:
        if offset + client_len > len(frame):
            raise ProtocolError("client id runs past the end of the frame")
        client_id = bytes(frame[offset : offset + client_len]).decode("utf-8", "replace")
        offset += client_len
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if _is_flexible_request(api_key, api_version):
        try:
            offset = _skip_tagged_fields(frame, offset)
        except (SerialError, ValueError, IndexError) as e:  # kio's varint reader: short buffer, > 5 bytes
            raise ProtocolError(f"bad tagged fields in request header: {e}") from e
    return header, offset


_READERS: dict[Any, Any] = {}
_WRITERS: dict[Any, Any] = {}


def _reader(schema: Any) -> Any:
    r = _READERS.get(schema)
    if r is None:
        r = _READERS[schema] = entity_reader(schema)
    return r


def _writer(schema: Any) -> Any:
    w = _WRITERS.get(schema)
    if w is None:
        w = _WRITERS[schema] = entity_writer(schema)
    return w


def decode_request(header: RequestHeader, frame: bytes | memoryview, offset: int) -> Any:
    """Decode the body of a request with kio (Produce by hand: v0-v2, which kio lacks, and v3-v13 for speed);
    trailing bytes are ignored."""
    if header.api_key == PRODUCE_KEY:  # the request that carries the data: by hand, its records left in the frame
        if header.api_version in produce_request.VERSIONS:
            return produce_request.decode_request(frame, offset, header.api_version)
    schema = request_schema(header.api_key, header.api_version)
    if schema is None:
        raise ProtocolError(f"no schema for api key {header.api_key} version {header.api_version}")
    check_request_lengths(schema, frame, offset)  # kio aborts the process on some absurd lengths
    try:
        body, _size = _reader(schema)(frame, offset)
    except Exception as e:
        raise ProtocolError(
            f"cannot decode {schema.__name__} v{header.api_version}: {type(e).__name__}: {e}"
        ) from e
    return body


def response_header_bytes(api_key: int, version: int, correlation_id: int) -> bytes:
    flexible_header = api_key != API_VERSIONS_KEY and _is_flexible_response(api_key, version)
    return _CORRELATION.pack(correlation_id) + (b"\x00" if flexible_header else b"")


def _is_flexible_response(api_key: int, version: int) -> bool:
    return _known(api_key, version) and _is_flexible_known_response(api_key, version)


@cache
def _is_flexible_known_response(api_key: int, version: int) -> bool:
    schema = response_schema(api_key, version)
    return bool(schema is not None and schema.__flexible__)


def encode_body(response: Any) -> bytes:
    buf = io.BytesIO()
    _writer(type(response))(buf, response)
    return buf.getvalue()


def encode_response(
    api_key: int, version: int, correlation_id: int, response: Any
) -> list[bytes | memoryview]:
    """Size prefix + response header + body of a kio response entity, ready for `writelines`."""
    head = response_header_bytes(api_key, version, correlation_id)
    body = encode_body(response)
    return [_SIZE.pack(len(head) + len(body)), head, body]


def encode_raw_response(
    api_key: int, version: int, correlation_id: int, body_parts: list[bytes | memoryview]
) -> list[bytes | memoryview]:
    """Size prefix + response header around a body already encoded as a list of buffers (hot paths)."""
    head = response_header_bytes(api_key, version, correlation_id)
    size = len(head) + sum(len(p) for p in body_parts)
    return [_SIZE.pack(size), head, *body_parts]
