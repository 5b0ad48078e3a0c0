"""The registry's HTTP/1.1 shell on asyncio streams: parse a request, run `Registry.handle` in a worker
thread (a write waits for the broker), send the JSON answer.

Why not the console's starlette/uvicorn: they are the optional `console` extra, and the registry must also
run inside `kaflite serve` (schema.registry.listener) on the base install. The API is small and JSON-only,
so a minimal server is enough.

Rules (tests/schema_registry/test_http.py):
- Keep-alive for HTTP/1.1 unless the client sends `Connection: close`; HTTP/1.0 closes after one answer.
- A request body is read by Content-Length (at most MAX_BODY bytes, else 413); chunked request bodies are
  refused with 411 (confluent-kafka and curl send Content-Length).
- Answers are `application/vnd.schemaregistry.v1+json`; a body that is not JSON is 422 with error_code
  422, as Confluent answers unparseable JSON; a store failure is 500 with Confluent's 50001.
- A malformed request line or header block closes the connection after a 400.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kaflite.schema_registry.api import CONTENT_TYPE, Registry, _RawSchema

log = logging.getLogger("kaflite.schema_registry")

MAX_HEADER = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           409: "Conflict", 411: "Length Required", 413: "Payload Too Large", 422: "Unprocessable Entity",
           500: "Internal Server Error"}


class RegistryServer:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the port bound (port 0 picks one)."""
        self.server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEADER)
        return int(self.server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening and end open (keep-alive) connections: Python 3.11's Server.close leaves them."""
        if self.server is not None:
            self.server.close()
            for task in list(self.connections):
                task.cancel()
            await asyncio.gather(*self.connections, return_exceptions=True)
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self.connections.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        except asyncio.LimitOverrunError:
            await self._send(writer, 400, {"error_code": 400, "message": "request headers too large"}, False)
            return False
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._send(writer, 400, {"error_code": 400, "message": "malformed request line"}, False)
            return False
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                await self._send(writer, 400, {"error_code": 400, "message": "malformed header"}, False)
                return False
            headers[name.strip().lower()] = value.strip()
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            await self._send(writer, 411, {"error_code": 411, "message": "send a Content-Length"}, False)
            return False
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            await self._send(writer, 413, {"error_code": 413, "message": "bad or too large Content-Length"}, False)
            return False
        raw = await reader.readexactly(length) if length else b""
        url = urlsplit(target)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        body: Any = None
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError as err:
                await self._send(writer, 422, {"error_code": 422, "message": f"Unrecognized JSON: {err}"}, keep)
                return keep
        try:
            status, answer = await asyncio.to_thread(self.registry.handle, method.upper(), url.path, query, body)
        except Exception as err:  # a store failure (broker unreachable, timeout): Confluent's 50001
            log.exception("schema registry request %s %s failed", method, url.path)
            status, answer = 500, {"error_code": 50001, "message": f"Error in the backend data store: {err}"}
        await self._send(writer, status, answer, keep, head_only=method.upper() == "HEAD")
        return keep

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, status: int, answer: Any, keep: bool,
                    head_only: bool = False) -> None:
        if isinstance(answer, _RawSchema):
            payload = str(answer).encode()
        else:
            payload = json.dumps(answer, ensure_ascii=False).encode()
        head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
                f"Content-Type: {CONTENT_TYPE}\r\n"
                f"Content-Length: {len(payload)}\r\n"
                f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n").encode()
        writer.write(head if head_only else head + payload)
        await writer.drain()
