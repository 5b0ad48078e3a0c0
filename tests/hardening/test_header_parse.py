"""An unknown api key or an out-of-range version costs O(1): 200 frames of api version 32767 (the issue's
attack) leave the broker's memory where it was, and each is answered as Kafka does."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from brokerproc import BrokerProcess
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.index import schema_name_map
from kio.serial import entity_reader

from kaflite.protocol import messages
from kaflite.protocol.messages import ProtocolError, parse_request_header


def _frame(api_key: int, version: int, corr: int = 7) -> bytes:
    body = struct.pack(">hhih", api_key, version, corr, 4) + b"evil" + b"\x00\x00"
    return struct.pack(">i", len(body)) + body


def test_header_parse_of_absurd_versions_builds_nothing() -> None:
    known_pairs = sum(len(versions) for versions in schema_name_map.values())
    for key in range(-5, 120):
        for version in (-32768, -1, 99, 32767):
            try:
                parse_request_header(_frame(key, version)[4:])
            except ProtocolError:
                pass
    # only (key, version) pairs kio knows are ever cached: a bounded set, whatever the input
    assert messages._request_schema.cache_info().currsize <= known_pairs
    assert messages._request_schema.cache_info().misses <= known_pairs


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def test_version_32767_frames_do_not_grow_the_broker(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        broker.wait_warmed()  # (the schemas' warm-up: memory of its own, not the frames')
        before = broker.rss()
        for i in range(200):
            key = i % 90  # every api key kio knows, and a few beyond
            with socket.create_connection(("127.0.0.1", broker.port), 5) as s:
                s.settimeout(5)
                s.sendall(_frame(key, 32767))
                if key == 18:  # ApiVersions: answered with UNSUPPORTED_VERSION and the table, as Kafka
                    (size,) = struct.unpack(">i", _recv_exact(s, 4))
                    payload = _recv_exact(s, size)
                    assert struct.unpack(">i", payload[:4])[0] == 7
                    resp, _ = entity_reader(ApiVersionsResponse)(payload, 4)
                    assert resp.error_code.value == 35
                    assert any(k.api_key == 1 for k in resp.api_keys)
                else:  # anything else: the connection is closed
                    assert s.recv(1) == b""
        after = broker.rss()
        assert after - before < 10, f"RSS {before:.1f} -> {after:.1f} MiB"
        assert broker.alive()
