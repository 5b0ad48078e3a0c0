"""Start and stop a broker: bind the listener, serve connections, shut down cleanly.

`run_broker(config)` is what `kaflite serve` and `python -m kaflite.server` call: it blocks until
SIGTERM/SIGINT, then stops accepting, closes connections and flushes and closes the logs.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable

from kaflite.server.allocator import tune_allocator
from kaflite.server.broker import Broker
from kaflite.server.config import BrokerConfig, Listener
from kaflite.server.config.keys_network import parse_per_ip_overrides
from kaflite.server.connection import (
    DEFAULT_QUEUED_MAX_REQUEST_BYTES,
    ConnectionLimits,
    Connections,
    KafkaConnection,
)
from kaflite.server.coordinators.groups import GROUP_SERVICE
from kaflite.server.coordinators.share_state import SHARE_COORDINATOR
from kaflite.server.dispatcher import Dispatcher
from kaflite.server.handlers import Registry, load_registry
from kaflite.server.loop_watchdog import LoopWatchdog
from kaflite.server.metrics import BrokerMetrics, KafliteCollector, MetricsEndpoint, parse_metrics_listener
from kaflite.server.security.settings import ListenerSecurity, listener_security

__all__ = ["KafkaServer", "bind_sockets", "new_event_loop", "run_broker"]

log = logging.getLogger("kaflite.server")

# seconds between listening and loading the protocol schemas (KafkaServer._warm_schemas_later)
SCHEMA_WARM_UP_DELAY_S = 1.0


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when available (about twice the socket throughput), asyncio's otherwise."""
    try:
        import uvloop

        return uvloop.new_event_loop()  # type: ignore[no-any-return]
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux/macOS
        return asyncio.new_event_loop()


class KafkaServer:
    """A broker plus one listening socket per client listener (every listener of `listeners` except
    the KRaft controller listeners named by `controller.listener.names`), each with its own dispatcher
    so a request knows the listener and security protocol it came in on."""

    def __init__(self, config: BrokerConfig, registry: Registry | None = None) -> None:
        self.config = config
        self.broker = Broker(config)
        self.registry = registry if registry is not None else load_registry()
        self.broker.registry = self.registry
        if config["kaflite.faults.enable"]:
            from kaflite.server.faults import FaultInjector

            self.broker.faults = FaultInjector()
        self.dispatcher = Dispatcher(self.broker, self.registry, config.client_listeners[0])
        self._servers: list[asyncio.base_events.Server] = []
        self._securities: list[ListenerSecurity] = []  # closed at stop (a JWKS refresh thread)
        self._connections = Connections()
        self._reaper: asyncio.Future[None] | None = None
        self.bound: list[Listener] = []  # the client listeners as bound (port 0 resolved)
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.watchdog: LoopWatchdog | None = None  # the loop's lag and stalls (server/loop_watchdog.py)
        self.schemas_warmed: asyncio.Future[int] | None = None  # Registry.warm_schemas, soon after listening
        self.host = ""
        self.port = 0

    async def start(self) -> None:
        self.watchdog = LoopWatchdog()
        self.watchdog.start()  # from the start: loading the logs and the replay must not block the loop either
        try:
            await self._start()
        except BaseException:
            self.watchdog.stop()
            raise

    async def _start(self) -> None:
        config = self.config
        # Every socket is bound before the broker opens its data directories, so that an address in use
        # (or not of this host) stops start-up with nothing created on disk: no initialised directory left
        # where there was none, an existing one as it was. The sockets listen only once the broker is ready;
        # until then a client is refused, as before they were bound.
        unused: list[socket.socket] = []
        try:
            per_listener = []
            for listener in config.client_listeners:
                socks = await bind_sockets(listener.host or None, listener.port)
                unused.extend(socks)
                per_listener.append(socks)
            metrics_url = config["metrics.listener"]
            metrics_socks = await bind_sockets(*parse_metrics_listener(metrics_url)) if metrics_url else []
            unused.extend(metrics_socks)
            await self.broker.start()
        except BaseException:
            for sock in unused:
                sock.close()
            raise
        try:
            for hook in self.registry.startup:
                pending = hook(self.broker)
                if inspect.isawaitable(pending):  # e.g. a replay running in a worker thread
                    await pending
        except BaseException:
            for sock in unused:
                sock.close()
            await self.broker.stop()
            raise
        limits = ConnectionLimits(
            max_frame_bytes=int(config["socket.request.max.bytes"]),
            max_queued_requests=max(1, min(int(config["queued.max.requests"]), 500)),
            send_buffer_bytes=int(config["socket.send.buffer.bytes"]),
            receive_buffer_bytes=int(config["socket.receive.buffer.bytes"]),
            max_connections=int(config["max.connections"]),
            max_connections_per_ip=int(config["max.connections.per.ip"]),
            per_ip_overrides=tuple((parse_per_ip_overrides(config["max.connections.per.ip.overrides"] or "")
                                    or {}).items()),
            max_queued_request_bytes=_queued_max_request_bytes(config),
        )
        loop = asyncio.get_running_loop()
        backlog = int(config["socket.listen.backlog.size"])
        try:
            for listener, socks in zip(config.client_listeners, per_listener, strict=True):
                dispatcher = Dispatcher(self.broker, self.registry, listener)
                if not self._servers:
                    self.dispatcher = dispatcher
                # None on PLAINTEXT; files (key and trust stores) are read here, a bad one refuses start-up
                security = listener_security(config, listener, self.broker.scram_credentials)
                if security is not None:
                    self._securities.append(security)

                def protocol(d: Dispatcher = dispatcher, sec: ListenerSecurity | None = security) -> KafkaConnection:
                    return KafkaConnection(d, limits, self._connections, sec)

                for sock in socks:  # one per address of the listener's host (all interfaces: IPv4 and IPv6)
                    server = await loop.create_server(
                        protocol, sock=sock, backlog=backlog,
                        ssl=security.ssl_context if security is not None else None,
                    )
                    unused.remove(sock)  # the server owns it now
                    self._servers.append(server)
                port = socks[0].getsockname()[1]
                self.bound.append(
                    Listener(listener.name, listener.host, int(port), listener.security_protocol)
                )
        except BaseException:
            for server in self._servers:
                server.close()
            self._servers.clear()
            for sock in unused:
                sock.close()
            self._close_securities()
            await self.broker.stop()
            raise
        self.host, self.port = self.bound[0].host, self.bound[0].port
        self.broker.set_bound_listeners(self.bound)
        # clients are accepted from here; the protocol schemas load a little later, off the loop
        # (non-essential: a request whose schema is not loaded yet loads it itself)
        self.schemas_warmed = asyncio.ensure_future(self._warm_schemas_later())
        if metrics_socks:
            await self._start_metrics(metrics_socks)
        idle_ms = int(config["connections.max.idle.ms"])
        if idle_ms > 0:
            self._reaper = asyncio.ensure_future(self._close_idle(idle_ms / 1000.0))
        skipped = [li for li in config.listeners if li.name in config.controller_listener_names]
        for li in self.bound:
            log.info(
                "kaflite listening on %s:%d (listener %s, security protocol %s, advertised %s), data in %s",
                li.host or "0.0.0.0",
                li.port,
                li.name,
                li.security_protocol,
                self.broker.advertised_for(li.name),
                ",".join(str(d) for d in self.broker.log_dirs),
            )
        if skipped:
            log.info(
                "not binding %s: controller.listener.names (kaflite has no KRaft controller)",
                ", ".join(str(li) for li in skipped),
            )

    async def _warm_schemas_later(self) -> int:
        """`Registry.warm_schemas` in a worker thread, SCHEMA_WARM_UP_DELAY_S after the broker listens: the
        first requests of the clients waiting for a restart (ApiVersions, then a Metadata answer naming every
        partition, the longest of a start) are answered without a thread importing ~100 schema modules
        beside them under the GIL (0.3 s of CPU, taken from the first answer at a start of 10,000 partitions
        when it began at once)."""
        await asyncio.sleep(SCHEMA_WARM_UP_DELAY_S)
        return await asyncio.get_running_loop().run_in_executor(None, self.registry.warm_schemas)

    async def _start_metrics(self, socks: list[socket.socket]) -> None:
        """metrics.listener (its sockets bound by `_start`): count in the hot path from now on, serve
        /metrics on this loop."""
        self.broker.metrics = BrokerMetrics()
        services = self.broker.services
        collector = KafliteCollector(self.broker, self.broker.metrics, self._connections_by_listener, self.watchdog,
                                     group_service=lambda: services.get(GROUP_SERVICE),
                                     share_coordinator=lambda: services.get(SHARE_COORDINATOR))
        self.metrics_endpoint = MetricsEndpoint(collector)
        try:
            await self.metrics_endpoint.start_on(socks)
        except BaseException:
            for sock in socks:
                sock.close()
            for server in self._servers:
                server.close()
            self._servers.clear()
            await self.broker.stop()
            raise

    def _connections_by_listener(self) -> dict[str, int]:
        counts = {li.name: 0 for li in self.bound}
        for conn in self._connections:
            listener = conn.dispatcher.listener
            name = listener.name if listener is not None else "PLAINTEXT"
            counts[name] = counts.get(name, 0) + 1
        return counts

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

    def _close_securities(self) -> None:
        for sec in self._securities:
            sec.close()
        self._securities.clear()

    async def stop(self) -> None:
        # in a cluster, leadership moves off this broker first, while it still answers (NOT_LEADER_OR_FOLLOWER
        # sends clients to the new leaders; a closed listener would leave them waiting for fresh metadata)
        await self.broker.controlled_shutdown()
        if self.schemas_warmed is not None and not self.schemas_warmed.done():
            # (the worker finishes on its own; its result must not be delivered to a closed loop)
            self.schemas_warmed.cancel()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
            self.metrics_endpoint = None
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for server in self._servers:
            server.close()
        for conn in list(self._connections):
            await conn.shutdown()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 2)
            except (TimeoutError, Exception):
                pass
        self._servers.clear()
        self._close_securities()
        # no client is served any more: the broker's shutdown (closing and fsyncing every log) blocks the
        # loop on purpose, which is no stall to report
        if self.watchdog is not None:
            self.watchdog.stop()
        await self.broker.stop()
        log.info("kaflite stopped (%s)", cpu_usage())


async def bind_sockets(host: str | None, port: int) -> list[socket.socket]:
    """Sockets bound to (host, port), not yet listening, as `loop.create_server(host=..., port=...)` binds
    them: one per address the host resolves to (None: every interface, IPv4 and IPv6), SO_REUSEADDR, IPv6
    sockets IPv6-only. A failure raises asyncio's OSError, "error while attempting to bind on address
    ('HOST', PORT): <reason>", which `kaflite serve` turns into a line naming the key."""
    loop = asyncio.get_running_loop()
    # resolved in a worker thread (getaddrinfo blocks); duplicates dropped, the resolver's order kept
    infos = dict.fromkeys(await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in infos:
            try:
                sock = socket.socket(family, kind, proto)
            except OSError:  # a family this host cannot open (IPv6 disabled): skipped, as asyncio does
                continue
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as e:
                reason = (e.strerror or str(e)).lower()
                raise OSError(e.errno, f"error while attempting to bind on address {address!r}: {reason}") from None
            sock.setblocking(False)
        if not socks:
            raise OSError(f"no address to bind for {host or '*'}:{port}")
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


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


def run_broker(config: BrokerConfig, on_started: Callable[[KafkaServer], None] | None = None,
               on_stopping: Callable[[], Awaitable[None]] | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then shut down cleanly (blocking). `on_started(server)` runs once
    every listener is bound (e.g. to print the addresses actually bound); `on_stopping()` is awaited before
    the broker stops (a co-hosted service, such as the schema registry, stops while its broker still
    answers)."""
    configure_logging()
    tune_allocator()  # this process is the broker's own: freed memory kept for reuse (server/allocator.py)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    server = KafkaServer(config)
    stop = asyncio.Event()

    async def main() -> None:
        await server.start()
        # before on_started: a SIGTERM it sends (the co-hosted registry without a listener to reach) or
        # one that arrives meanwhile stops the broker cleanly instead of killing the process
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - not on the main thread
                pass
        if on_started is not None:
            on_started(server)
        frozen = asyncio.ensure_future(freeze_start_up_heap(server))
        try:
            await stop.wait()
        finally:
            frozen.cancel()
            log.info("shutting down")
            if on_stopping is not None:
                await on_stopping()
            await server.stop()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


async def freeze_start_up_heap(server: KafkaServer) -> int:
    """Once the broker has started and its protocol schemas are loaded, move every object that exists to the
    garbage collector's permanent generation (`gc.freeze`; returns how many). Why: a full (generation 2)
    collection traverses every tracked object, and the start-up heap (kio's schema classes, modules, the
    logs' state) is most of them and never garbage; such a collection runs on whichever thread allocates,
    the event loop's included, and took 30-65 ms (295 ms on a starved machine) with nothing collected in
    bench/loop_stall_bench.py runs, the loop's longest stall while idle. After the freeze a full collection
    looks only at what was made since (0.1 ms idle). Only the broker's own process does it (`run_broker`):
    a process that starts brokers repeatedly (the tests) would pin each start's garbage."""
    if server.schemas_warmed is not None:
        await server.schemas_warmed
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("start-up heap frozen: %d objects out of the garbage collector's full passes", frozen)
    return frozen


def _queued_max_request_bytes(config: BrokerConfig) -> int:
    """Kafka's `queued.max.request.bytes` (request bytes read ahead, all connections together); Kafka's
    -1 (unbounded) becomes DEFAULT_QUEUED_MAX_REQUEST_BYTES: a Python broker cannot afford no bound."""
    value = int(config["queued.max.request.bytes"])
    return value if value > 0 else DEFAULT_QUEUED_MAX_REQUEST_BYTES
