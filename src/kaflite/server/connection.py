"""The asyncio shell of one client connection: bytes in, frames to the dispatcher, responses out in order.

Rules:
- requests of one connection are handled one at a time, in arrival order, and their responses are
  written in that order (Kafka mutes a channel while a request is in flight), so pipelining clients
  (librdkafka keeps up to 5 produce requests in flight) get answers in order;
- backpressure: reading pauses when `queued.max.requests` frames or 32 MiB are queued (a client cannot make the broker
  buffer without bound), and the worker waits while the socket's write buffer is above its high-water
  mark, so a slow reader slows its own requests down;
- a framing or protocol violation logs one line and closes only this connection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from collections import deque
from dataclasses import dataclass

from kaflite.protocol.framing import FrameDecoder, FrameError
from kaflite.server.dispatcher import CloseConnection, Dispatcher

__all__ = ["ConnectionLimits", "KafkaConnection"]

log = logging.getLogger("kaflite.server")

MAX_QUEUED_BYTES = 32 * 1024 * 1024
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Per-connection settings from the broker config (Kafka's names in the comments)."""

    max_frame_bytes: int = 104_857_600  # socket.request.max.bytes
    max_queued_requests: int = 16  # queued.max.requests (read-ahead per connection)
    send_buffer_bytes: int = -1  # socket.send.buffer.bytes (-1: OS default)
    receive_buffer_bytes: int = -1  # socket.receive.buffer.bytes
    max_connections: int = 2**31 - 1  # max.connections


class KafkaConnection(asyncio.Protocol):
    def __init__(self, dispatcher: Dispatcher, limits: ConnectionLimits, registry_of: set[KafkaConnection]) -> None:
        self.dispatcher = dispatcher
        self.limits = limits
        self.decoder = FrameDecoder(limits.max_frame_bytes)
        self.last_active = time.monotonic()
        self.busy = False
        self.frames: deque[bytes] = deque()
        self.queued_bytes = 0
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.id = next(_ids)
        self._wakeup: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._closed = False
        self._worker: asyncio.Task[None] | None = None
        self._all = registry_of

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if len(self._all) >= self.limits.max_connections:
            log.warning("refusing connection from %s: max.connections=%d reached", self.peer, self.limits.max_connections)
            self._closed = True
            transport.close()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.limits.send_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.limits.send_buffer_bytes)
                if self.limits.receive_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.limits.receive_buffer_bytes)
            except OSError:
                pass
        self._all.add(self)
        self._worker = asyncio.ensure_future(self._run())

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        self.last_active = time.monotonic()
        try:
            frames = self.decoder.feed(data)
        except FrameError as e:
            self.abort(f"framing error: {e}")
            return
        if frames:
            self.frames.extend(frames)
            self.queued_bytes += sum(len(f) for f in frames)
            self._wake()
            if len(self.frames) >= self.limits.max_queued_requests or self.queued_bytes >= MAX_QUEUED_BYTES:
                self._pause_reading()

    def eof_received(self) -> bool | None:
        return None  # close the transport; queued requests are dropped like Kafka does

    def connection_lost(self, exc: Exception | None) -> None:
        # Stays in the server's set until the worker ends: a request still parked (a long poll) must be
        # cancelled by a shutdown like any other.
        self._closed = True
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    # -- worker ------------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._serve()
        finally:
            self._all.discard(self)

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        host = self.peer.rpartition(":")[0]
        while not self._closed:
            if not self.frames:
                self._wakeup = loop.create_future()
                await self._wakeup
                continue
            frame = self.frames.popleft()
            self.queued_bytes -= len(frame)
            self.busy = True
            if (
                self._reading_paused
                and len(self.frames) <= self.limits.max_queued_requests // 2
                and self.queued_bytes < MAX_QUEUED_BYTES // 2
            ):
                self._resume_reading()
            try:
                out = await self.dispatcher.dispatch(frame, host, self.id)
                self.busy = False
                self.last_active = time.monotonic()
            except CloseConnection as e:
                self.abort(str(e))
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.exception("request from %s failed; closing the connection", self.peer)
                self.abort(f"{type(e).__name__}: {e}", quiet=True)
                return
            if out is None or self._closed or self.transport is None:
                continue
            self.transport.writelines(out)
            if self._writable is not None and not self._writable.done():
                await self._writable

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self.transport is not None and not self._closed:
            self._reading_paused = False
            self.transport.resume_reading()

    def abort(self, reason: str, quiet: bool = False) -> None:
        if not quiet:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        self.frames.clear()
        self.queued_bytes = 0
        self._wake()
        if self.transport is not None:
            self.transport.close()

    async def shutdown(self) -> None:
        self.abort("broker shutting down", quiet=True)
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except (asyncio.CancelledError, Exception):
                pass
