"""Start and stop a broker: bind the listener, serve connections, shut down cleanly.

`run_broker(config)` is what `kaflite serve` and `python -m kaflite.server` call: it blocks until
SIGTERM/SIGINT, then stops accepting, closes connections and flushes and closes the logs.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from typing import Any

from kaflite.server.broker import Broker, parse_listeners
from kaflite.server.connection import (
    DEFAULT_QUEUED_MAX_REQUEST_BYTES,
    ConnectionLimits,
    Connections,
    KafkaConnection,
)
from kaflite.server.dispatcher import Dispatcher
from kaflite.server.handlers import Registry, load_registry

__all__ = ["KafkaServer", "new_event_loop", "run_broker"]

log = logging.getLogger("kaflite.server")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when available (about twice the socket throughput), asyncio's otherwise."""
    try:
        import uvloop

        return uvloop.new_event_loop()  # type: ignore[no-any-return]
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux/macOS
        return asyncio.new_event_loop()


class KafkaServer:
    """A broker plus its listening socket."""

    def __init__(self, config: Any, registry: Registry | None = None) -> None:
        self.broker = Broker(config)
        self.registry = registry if registry is not None else load_registry()
        self.broker.registry = self.registry
        self.dispatcher = Dispatcher(self.broker, self.registry)
        self._server: asyncio.base_events.Server | None = None
        self._connections = Connections()
        self._reaper: asyncio.Future[None] | None = None
        self.host = ""
        self.port = 0

    async def start(self) -> None:
        await self.broker.start()
        try:
            for hook in self.registry.startup:
                hook(self.broker)
        except BaseException:
            await self.broker.stop()
            raise
        listeners = parse_listeners(self.broker.setting("listeners"))
        listener = listeners[0] if listeners else None
        host = listener.host if listener is not None else "127.0.0.1"
        port = listener.port if listener is not None else 9092
        setting = self.broker.setting
        limits = ConnectionLimits(
            max_frame_bytes=int(setting("socket.request.max.bytes")),
            max_queued_requests=max(1, min(int(setting("queued.max.requests")), 500)),
            send_buffer_bytes=int(setting("socket.send.buffer.bytes")),
            receive_buffer_bytes=int(setting("socket.receive.buffer.bytes")),
            max_connections=int(setting("max.connections")),
            max_queued_request_bytes=_queued_max_request_bytes(setting),
        )
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                lambda: KafkaConnection(self.dispatcher, limits, self._connections),
                host or None,
                port,
                reuse_address=True,
                backlog=int(setting("socket.listen.backlog.size")),
            )
        except BaseException:
            await self.broker.stop()
            raise
        sock = self._server.sockets[0]
        self.host, self.port = sock.getsockname()[:2]
        self.broker.set_bound_address(host, self.port)
        idle_ms = int(setting("connections.max.idle.ms"))
        if idle_ms > 0:
            self._reaper = asyncio.ensure_future(self._close_idle(idle_ms / 1000.0))
        log.info(
            "kaflite listening on %s:%d (advertised %s), data in %s",
            host or "0.0.0.0",
            self.port,
            self.broker.advertised,
            ",".join(str(d) for d in self.broker.log_dirs),
        )

    async def _close_idle(self, idle_s: float) -> None:
        """connections.max.idle.ms: close connections with no traffic and no request in flight."""
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.05), 30.0))
            now = time.monotonic()
            self._connections.refusals.maybe_report()
            for conn in list(self._connections):
                if not conn.busy and not conn.frames and now - conn.last_active >= idle_s:
                    log.info("closing connection from %s: idle for %.0f ms", conn.peer, (now - conn.last_active) * 1000)
                    conn.abort("idle", quiet=True)

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            await conn.shutdown()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except (TimeoutError, Exception):
                pass
            self._server = None
        await self.broker.stop()
        log.info("kaflite stopped (%s)", cpu_usage())


def _queued_max_request_bytes(setting: Any) -> int:
    """Kafka's `queued.max.request.bytes` (request bytes read ahead, all connections together); Kafka's
    -1 (unbounded) becomes DEFAULT_QUEUED_MAX_REQUEST_BYTES: a Python broker cannot afford no bound."""
    try:
        value = int(setting("queued.max.request.bytes"))
    except Exception:  # noqa: BLE001 - a config without the key
        value = -1
    return value if value > 0 else DEFAULT_QUEUED_MAX_REQUEST_BYTES


def cpu_usage() -> str:
    """This process's own CPU accounting (getrusage), logged at shutdown."""
    try:
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
    except (ImportError, OSError):  # pragma: no cover - not on POSIX
        return "cpu usage unavailable"
    return f"cpu user {ru.ru_utime:.2f} s, system {ru.ru_stime:.2f} s, max rss {ru.ru_maxrss // 1024} MiB"


def configure_logging(level: int = logging.INFO) -> None:
    root = logging.getLogger("kaflite")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(level)


def run_broker(config: Any) -> None:
    """Serve until SIGTERM or SIGINT, then shut down cleanly (blocking)."""
    configure_logging()
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    server = KafkaServer(config)
    stop = asyncio.Event()

    async def main() -> None:
        await server.start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - not on the main thread
                pass
        try:
            await stop.wait()
        finally:
            log.info("shutting down")
            await server.stop()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
