"""The registry's HTTP shell (kaflite.schema_registry.http) over a socket, on an in-memory log: keep-alive,
content type, raw /schema answers, and the refusals of its rules."""

from __future__ import annotations

import asyncio
import json

from kaflite.schema_registry.api import MemoryLog, Registry
from kaflite.schema_registry.http import RegistryServer
from kaflite.schema_registry.model import State


async def _exchange(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)  # until the server closes
    writer.close()
    return data


def _request(method: str, path: str, body: bytes = b"", close: bool = False) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    if close:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + body


def test_keep_alive_content_type_raw_schema_and_refusals() -> None:
    async def main() -> None:
        state = State()
        server = RegistryServer(Registry(state, MemoryLog(state)))
        port = await server.start("127.0.0.1", 0)
        try:
            body = json.dumps({"schema": '"string"'}).encode()
            # two requests on one connection: the first is answered and the connection kept
            data = await _exchange(port, _request("POST", "/subjects/s/versions", body)
                                   + _request("GET", "/subjects/s/versions/1/schema", close=True))
            first, second = data.split(b"HTTP/1.1 ")[1:]
            assert first.startswith(b"200") and b"Connection: keep-alive" in first
            assert b"Content-Type: application/vnd.schemaregistry.v1+json" in first
            assert json.loads(first.split(b"\r\n\r\n", 1)[1])["id"] == 1
            assert second.startswith(b"200") and second.split(b"\r\n\r\n", 1)[1] == b'"string"'
            bad_json = await _exchange(port, _request("POST", "/subjects/s/versions", b"{nope", close=True))
            assert bad_json.startswith(b"HTTP/1.1 422") and b'"error_code": 422' in bad_json
            chunked = await _exchange(port, b"POST /subjects/s/versions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
            assert chunked.startswith(b"HTTP/1.1 411")
            garbage = await _exchange(port, b"HELLO\r\n\r\n")
            assert garbage.startswith(b"HTTP/1.1 400")
            missing = await _exchange(port, _request("GET", "/subjects/nope/versions", close=True))
            assert missing.startswith(b"HTTP/1.1 404") and b"40401" in missing
            old = await _exchange(port, b"GET /subjects?deleted=true HTTP/1.0\r\n\r\n")
            assert old.startswith(b"HTTP/1.1 200") and old.endswith(b'["s"]')
            # an idle keep-alive connection does not hold up stop()
            idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.sleep(0.05)
        finally:
            await asyncio.wait_for(server.stop(), 5)
        assert await asyncio.wait_for(idle_reader.read(), 5) == b""
        idle_writer.close()

    asyncio.run(main())
