"""The asyncio shell of one client connection: bytes in, frames to the dispatcher, responses out in order.

Rules:
- requests of one connection are handled one at a time, in arrival order, and their responses are
  written in that order (Kafka mutes a channel while a request is in flight), so pipelining clients
  (librdkafka keeps up to 5 produce requests in flight) get answers in order;
- backpressure on requests: reading pauses when `queued.max.requests` frames or 32 MiB are queued on this
  connection, or when the requests read ahead by all connections together reach
  `queued.max.request.bytes` (100 MiB when unset; Kafka's default -1 is unbounded), so no client, and no
  crowd of clients, can make the broker buffer requests without bound;
- backpressure on responses (Kafka mutes a channel whose response is not sent yet): while the socket's
  write buffer is above its high-water mark the worker handles no further request of this connection and
  reading pauses; stored batches of a Fetch answer are `FileSlice`s read from the segment file in chunks
  of SEND_CHUNK as the client drains, so an answer never sits in memory whole: a connection holds at most
  its high-water mark plus one chunk of response bytes, whatever `fetch.max.bytes` says;
- a framing or protocol violation closes only this connection, logged at DEBUG (a hostile client could
  otherwise fill the log), with a count of connections closed that way at INFO once per minute; an
  unexpected handler error logs one line without a traceback (DEBUG has it);
- never silence: whatever fails while a request is handled or its answer sent (a handler's exception, a
  future it awaited cancelled by someone else, a stored slice that cannot be read) closes the connection,
  so a client is never left waiting for an answer behind a dead worker; only the connection's own
  shutdown cancels the worker quietly;
- who is connecting is decided once per connection (`self.session`): PLAINTEXT is User:ANONYMOUS with no
  further cost; SSL takes the client certificate's principal when the handshake is done; a SASL
  listener's frames go to the connection's SaslAuthenticator (server/security/sasl.py) until it
  completes, and nothing reaches the dispatcher before then except ApiVersions; while unauthenticated a
  frame may be at most SASL_MAX_RECEIVE bytes (Kafka's sasl.server.max.receive.size default);
- a SASL session with a lifetime (KIP-368: connections.max.reauth.ms, a token's expiry) has a SessionGate
  (server/security/sasl.py): a SaslHandshake may begin a re-authentication on the same connection (its
  frames go to a new SaslAuthenticator, the principal must stay the same), any other request after the
  session's end closes the connection without being served; connections without a lifetime pay nothing;
- a throttled request (a client quota, server/quota) is answered at once with its throttle time, and then
  the connection is muted for that long (KIP-219): reading pauses and no queued request is handled until
  a `loop.call_later` unmutes it; nothing sleeps on the loop, and a close ends the mute at once;
- a half-close fault (server/faults.py) shuts down the write side only (`write_eof`): later requests are
  read and discarded, unanswered, until the client closes (EOF closes the transport) or the connection is
  aborted; a TLS transport cannot write EOF alone, so it is closed instead;
- a connection beyond `max.connections.per.ip` (or its address's entry in `.overrides`) from its address,
  then one beyond `max.connections` in all, is closed at once, unanswered (Kafka's ConnectionQuotas checks
  the same two in that order); the count per address is kept in `Connections.per_ip`, which holds only
  addresses with a live connection.
- when a connection's worker ends (its last request answered, or the connection closed), the
  dispatcher's `connection_closed(id)` runs once: the hooks the broker registered for connection ends
  (the share sessions opened on it end, handlers/share.py).
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import logging
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kaflite.protocol.framing import Frame, FrameDecoder, FrameError
from kaflite.server.authorizer import Session
from kaflite.server.dispatcher import CloseConnection, Dispatcher, HalfCloseConnection
from kaflite.server.stopping import cancel_until_done
from kaflite.storage.file_slice import FileSlice

if TYPE_CHECKING:
    from kaflite.server.security.sasl import SaslAuthenticator, SessionGate
    from kaflite.server.security.settings import ListenerSecurity

__all__ = ["ConnectionLimits", "Connections", "KafkaConnection", "RefusalCounter"]

log = logging.getLogger("kaflite.server")

MAX_QUEUED_BYTES = 32 * 1024 * 1024
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 100 * 1024 * 1024
SEND_CHUNK = 256 * 1024  # bytes of a FileSlice read and written at a time
SEND_HIGH_WATER = 256 * 1024  # the transport's write buffer high-water mark (per connection)
SASL_MAX_RECEIVE = 524288  # the largest frame before SASL authentication completes
_ids = itertools.count(1)


class RefusalCounter:
    """Connections closed for a client's fault, summarised at INFO at most once per `interval_s`
    (each one is logged at DEBUG): one line a minute instead of one line per bad input."""

    def __init__(self, interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.count = 0
        self.total = 0
        self.reasons: dict[str, int] = {}
        self._since = clock()

    def note(self, reason: str) -> None:
        self.count += 1
        self.total += 1
        kind = reason.split(":", 1)[0][:60]
        if kind in self.reasons or len(self.reasons) < 20:  # bounded: keyed by client input
            self.reasons[kind] = self.reasons.get(kind, 0) + 1
        self.maybe_report()

    def maybe_report(self) -> None:
        now = self.clock()
        if self.count and now - self._since >= self.interval_s:
            top = ", ".join(f"{k} x{v}" for k, v in sorted(self.reasons.items(), key=lambda kv: -kv[1])[:5])
            log.info("closed %d connections in the last %.0f s for protocol violations (%s); DEBUG logs each",
                     self.count, now - self._since, top)
            self.count = 0
            self.reasons.clear()
            self._since = now


class Connections(set["KafkaConnection"]):
    """The server's live connections plus what they share: the request bytes read ahead by all of them
    (bounded by `queued.max.request.bytes`) and the refusal counter."""

    def __init__(self) -> None:
        super().__init__()
        self.queued_request_bytes = 0
        self.paused_for_budget: set[KafkaConnection] = set()
        self.refusals = RefusalCounter()
        self.per_ip: dict[str, int] = {}  # live connections per client address (max.connections.per.ip)

    def release(self, nbytes: int, budget: int) -> None:
        self.queued_request_bytes -= nbytes
        if self.paused_for_budget and self.queued_request_bytes < budget // 2:
            waiting, self.paused_for_budget = self.paused_for_budget, set()
            for conn in waiting:
                conn._maybe_resume_reading()  # noqa: SLF001


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Per-connection settings from the broker config (Kafka's names in the comments)."""

    max_frame_bytes: int = 104_857_600  # socket.request.max.bytes
    max_queued_requests: int = 16  # queued.max.requests (read-ahead per connection)
    send_buffer_bytes: int = -1  # socket.send.buffer.bytes (-1: OS default)
    receive_buffer_bytes: int = -1  # socket.receive.buffer.bytes
    max_connections: int = 2**31 - 1  # max.connections
    max_connections_per_ip: int = 2**31 - 1  # max.connections.per.ip
    per_ip_overrides: tuple[tuple[str, int], ...] = ()  # max.connections.per.ip.overrides (normalised addresses)
    max_queued_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES  # queued.max.request.bytes (broker-wide)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, limits: ConnectionLimits, registry_of: set[KafkaConnection],
                 security: ListenerSecurity | None = None) -> None:
        self.dispatcher = dispatcher
        self.security = security
        self.session = Session()
        self.sasl: SaslAuthenticator | None = None  # set until a SASL listener's client has authenticated
        self.gate: SessionGate | None = None  # an authenticated SASL session that ends (KIP-368)
        self.limits = limits
        self.decoder = FrameDecoder(limits.max_frame_bytes)
        self.last_active = time.monotonic()
        self.busy = False
        self.frames: deque[Frame] = deque()
        self.queued_bytes = 0
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.id = next(_ids)
        self._wakeup: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._throttle_ms = 0  # set by the dispatcher when the request being handled earned a throttle
        self._muted: asyncio.Future[None] | None = None  # until a throttle ends (KIP-219)
        self._half_closed = False  # a half-close fault shut our write side; nothing is answered any more
        self._closed = False
        self._worker: asyncio.Task[None] | None = None
        self._all = registry_of
        self._shared = registry_of if isinstance(registry_of, Connections) else Connections()
        self._ip: str | None = None  # counted in _shared.per_ip while set

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        ip = _normalised_ip(peer[0]) if isinstance(peer, tuple) else self.peer
        ip_limit = dict(self.limits.per_ip_overrides).get(ip, self.limits.max_connections_per_ip)
        if self._shared.per_ip.get(ip, 0) >= ip_limit:  # Kafka checks the address first, then the total
            log.debug("refusing connection from %s: max.connections.per.ip=%d reached", self.peer, ip_limit)
            self._shared.refusals.note(f"max.connections.per.ip={ip_limit} reached")
            self._closed = True
            transport.close()
            return
        if len(self._all) >= self.limits.max_connections:
            log.debug("refusing connection from %s: max.connections=%d reached", self.peer, self.limits.max_connections)
            self._shared.refusals.note(f"max.connections={self.limits.max_connections} reached")
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
        try:
            transport.set_write_buffer_limits(high=SEND_HIGH_WATER)  # type: ignore[attr-defined]
        except (AttributeError, NotImplementedError, ValueError):  # pragma: no cover - exotic transports
            pass
        self.session = Session.on(self.dispatcher.listener, self.peer.rpartition(":")[0])
        if self.security is not None and not self._secure(transport):
            return
        self._all.add(self)
        self._ip = ip
        self._shared.per_ip[ip] = self._shared.per_ip.get(ip, 0) + 1
        self._worker = asyncio.ensure_future(self._run())

    def _secure(self, transport: asyncio.BaseTransport) -> bool:
        """The principal of an SSL connection (its client certificate), the authenticator of a SASL one."""
        sec = self.security
        assert sec is not None
        if sec.sasl:
            self.sasl = sec.new_authenticator()
            self.decoder.max_frame_bytes = min(self.decoder.max_frame_bytes, SASL_MAX_RECEIVE)
        elif sec.tls:
            from kaflite.server.config.principal_rules import NoMatchingRule
            from kaflite.server.security.tls import certificate_principal

            try:
                principal = certificate_principal(transport.get_extra_info("ssl_object"), sec.mapper)
            except (NoMatchingRule, ValueError) as e:
                log.info("closing SSL connection from %s: %s", self.peer, e)
                self._closed = True
                transport.close()
                return False
            self.session = replace(self.session, principal=principal)
        return True

    # The socket reads straight into the frame decoder's buffer (BufferedProtocol): a request is copied
    # once in this process, not three times (bytes read, appended to a buffer, sliced out).
    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed or self._half_closed:  # half-closed: read (to see the client's EOF), answer nothing
            return
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except FrameError as e:
            self.abort(f"framing error: {e}")
            return
        self._arrived(frames)

    def data_received(self, data: bytes) -> None:
        """Bytes read elsewhere (a transport that does not read into buffers; tests)."""
        if self._closed or self._half_closed:
            return
        try:
            frames = self.decoder.feed(data)
        except FrameError as e:
            self.abort(f"framing error: {e}")
            return
        self._arrived(frames)

    def _arrived(self, frames: list[Frame]) -> None:
        self.last_active = time.monotonic()
        if frames:
            self.frames.extend(frames)
            n = sum(len(f) for f in frames)
            self.queued_bytes += n
            self._shared.queued_request_bytes += n
            self._wake()
            if len(self.frames) >= self.limits.max_queued_requests or self.queued_bytes >= MAX_QUEUED_BYTES:
                self._pause_reading()
            elif self._shared.queued_request_bytes >= self.limits.max_queued_request_bytes:
                self._shared.paused_for_budget.add(self)
                self._pause_reading()

    def eof_received(self) -> bool | None:
        return None  # close the transport; queued requests are dropped like Kafka does

    def connection_lost(self, exc: Exception | None) -> None:
        # Stays in the server's set until the worker ends: a request still parked (a long poll) must be
        # cancelled by a shutdown like any other.
        self._closed = True
        self.frames.clear()
        self._shared.release(self.queued_bytes, self.limits.max_queued_request_bytes)
        self._shared.paused_for_budget.discard(self)
        self.queued_bytes = 0
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        if self._muted is not None and not self._muted.done():
            self._muted.set_result(None)

    def pause_writing(self) -> None:
        # Kafka mutes the channel: no new request is read while the answer waits for the client
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()
        self._pause_reading()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._maybe_resume_reading()

    def _maybe_resume_reading(self) -> None:
        if (
            self._reading_paused
            and (self._writable is None or self._writable.done())
            and (self._muted is None or self._muted.done())
            and len(self.frames) <= self.limits.max_queued_requests // 2
            and self.queued_bytes < MAX_QUEUED_BYTES // 2
            and self._shared.queued_request_bytes < self.limits.max_queued_request_bytes
        ):
            self._resume_reading()

    # -- worker ------------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._serve()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a failure while sending (the dispatcher's own are handled in _serve)
            self._failed("sending the answer", e)
        finally:
            self._all.discard(self)
            # after its last request was answered: what the connection held (share sessions) ends now
            closed = getattr(self.dispatcher, "connection_closed", None)
            if closed is not None:
                closed(self.id)
            if self._ip is not None:
                left = self._shared.per_ip[self._ip] - 1
                if left:
                    self._shared.per_ip[self._ip] = left
                else:  # no entry per address ever seen: the map holds only addresses connected now
                    del self._shared.per_ip[self._ip]
                self._ip = None

    def _failed(self, what: str, e: BaseException) -> None:
        # one line, no traceback: the request came from a client, its content is no bug report
        log.error("request from %s failed (%s), closing the connection: %s: %s", self.peer, what,
                  type(e).__name__, str(e)[:300])
        log.debug("the failed request's traceback", exc_info=e)
        self.abort(f"{type(e).__name__}: {e}", quiet=True)

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        host = self.peer.rpartition(":")[0]
        while not self._closed:
            if self._half_closed:
                self._wakeup = loop.create_future()
                await self._wakeup
                continue
            if self._muted is not None and not self._muted.done():
                await self._muted
                continue
            if not self.frames:
                self._wakeup = loop.create_future()
                await self._wakeup
                continue
            frame = self.frames.popleft()
            self.queued_bytes -= len(frame)
            self._shared.release(len(frame), self.limits.max_queued_request_bytes)
            self.busy = True
            self._maybe_resume_reading()
            if self.sasl is not None:
                if not await self._authenticate(frame):
                    continue
            elif self.gate is not None and not await self._session_allows(frame):
                continue
            try:
                out = await self.dispatcher.dispatch(frame, host, self.id, self.session, self._throttled)
                self.busy = False
                self.last_active = time.monotonic()
            except HalfCloseConnection as e:
                self._half_close(str(e))
                continue  # the loop waits, doing nothing, for the client's close (connection_lost)
            except CloseConnection as e:
                self.abort(str(e))
                return
            except asyncio.CancelledError as e:
                task = asyncio.current_task()
                if task is None or task.cancelling():  # this connection is being shut down
                    raise
                # something the handler awaited was cancelled, not this connection: the client would
                # otherwise wait for an answer forever behind a dead worker
                self._failed("handling it", e)
                return
            except Exception as e:
                self._failed("handling it", e)
                return
            if out is None or self._closed or self.transport is None:
                _close_slices(out)
            else:
                await self._send(out)
            if self._throttle_ms and not self._closed:
                self._mute(self._throttle_ms)
            self._throttle_ms = 0

    def _half_close(self, reason: str) -> None:
        """A fault (server/faults.py): the write side is shut down (the client reads EOF), nothing more is
        answered, and the socket stays open until the client closes it (or the idle reaper, a shutdown)."""
        log.debug("half-closing connection from %s: %s", self.peer, reason)
        self._half_closed = True
        self.busy = False  # so connections.max.idle.ms reaps it if the client never closes
        self.frames.clear()
        self._shared.release(self.queued_bytes, self.limits.max_queued_request_bytes)
        self.queued_bytes = 0
        transport = self.transport
        if transport is None:
            return
        if transport.can_write_eof():
            transport.write_eof()
        else:  # TLS: no write-side shutdown without closing
            self.abort(reason, quiet=True)

    def _throttled(self, ms: int) -> None:
        self._throttle_ms = max(self._throttle_ms, ms)

    def _mute(self, ms: int) -> None:
        """KIP-219: the answer carrying the throttle time is sent; read nothing more for `ms`."""
        loop = asyncio.get_running_loop()
        self._muted = loop.create_future()
        self._pause_reading()
        loop.call_later(ms / 1000, self._unmute)

    def _unmute(self) -> None:
        if self._muted is not None and not self._muted.done():
            self._muted.set_result(None)
        self._maybe_resume_reading()

    async def _authenticate(self, frame: Frame) -> bool:
        """One frame of a SASL exchange; True when the frame is ApiVersions, for the dispatcher."""
        assert self.sasl is not None
        try:
            # a large frame is a bytearray (protocol/framing.py); the authenticator's readers want bytes
            step = self.sasl.receive(bytes(frame) if isinstance(frame, bytearray) else frame)
        except Exception as e:  # a client's malformed exchange: its fault, closed like a protocol violation
            self.abort(f"SASL exchange failed: {type(e).__name__}")
            return False
        if step.dispatch:
            return True
        self.busy = False
        if step.response is not None and not self._closed and self.transport is not None:
            await self._send(step.response)
        if step.close is not None:
            if step.delay_ms:
                # Kafka delays the close, not the answer: the client reads the error before the EOF
                # (kafka-python drops a response that arrives together with the EOF)
                self.frames.clear()
                await asyncio.sleep(step.delay_ms / 1000)
            self.abort(step.close)  # close() flushes what was written first
        elif step.principal is not None:
            reauth = self.sasl.reauth_of is not None
            self.session = replace(self.session, principal=step.principal)
            mechanism = self.sasl.mechanism
            self.sasl = None
            self.decoder.max_frame_bytes = self.limits.max_frame_bytes
            if step.session_end_ms is None:
                self.gate = None
            elif self.gate is None:
                from kaflite.server.security.sasl import SessionGate

                self.gate = SessionGate(step.session_end_ms, mechanism, step.principal)
            else:
                self.gate.end_ms = step.session_end_ms
            log.debug("connection %s from %s %s as %s", self.id, self.peer,
                      "re-authenticated" if reauth else "authenticated", step.principal)
        return False

    async def _session_allows(self, frame: Frame) -> bool:
        """KIP-368 on an authenticated connection whose session ends: True to serve the frame; a
        SaslHandshake that begins a re-authentication is handled here; after the session's end the
        connection is closed (Kafka's SocketServer closes an expired channel on its next request)."""
        gate = self.gate
        assert gate is not None and self.security is not None
        verdict = gate.check(int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1)
        if verdict == gate.SERVE:
            return True
        if verdict == gate.REAUTHENTICATE:
            self.sasl = self.security.reauthenticator(gate.mechanism, gate.principal)
            self.decoder.max_frame_bytes = min(self.decoder.max_frame_bytes, SASL_MAX_RECEIVE)
            await self._authenticate(frame)
            return False
        self.busy = False
        self.abort("SASL session expired (connections.max.reauth.ms or the credential's expiry) and the "
                   "client did not re-authenticate")
        return False

    async def _send(self, out: list[bytes | memoryview]) -> None:
        """Write one response in order. FileSlices are read from the file in pieces of at most SEND_CHUNK,
        and what is gathered is written every SEND_CHUNK bytes, each time only when the socket's write
        buffer is below its high-water mark: however many partitions a fetch names, the bytes of its
        answer in memory stay under the high-water mark plus one chunk."""
        transport = self.transport
        assert transport is not None
        pending: list[bytes | memoryview] = []
        gathered = 0
        try:
            for part in out:
                if not isinstance(part, FileSlice):
                    pending.append(part)
                    gathered += len(part)
                else:
                    pos, size = 0, len(part)
                    while pos < size:
                        try:
                            chunk = part.read(pos, SEND_CHUNK - gathered if gathered < SEND_CHUNK else SEND_CHUNK)
                        except OSError as e:  # unreadable now (out of descriptors, I/O error)
                            log.warning("closing connection from %s: stored data unreadable while being sent: %s",
                                        self.peer, e)
                            chunk = b""
                        if not chunk:  # the segment went or shrank under the answer: its size prefix would lie
                            self.abort(f"stored data changed while being sent ({part})", quiet=True)
                            return
                        pending.append(chunk)
                        gathered += len(chunk)
                        pos += len(chunk)
                        if gathered >= SEND_CHUNK:
                            transport.writelines(pending)
                            pending, gathered = [], 0
                            if self._writable is not None and not self._writable.done():
                                await self._writable
                            if self._closed:
                                return
                    part.close()
            if pending:
                transport.writelines(pending)
            if self._writable is not None and not self._writable.done():
                await self._writable
        finally:
            _close_slices(out)

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
            log.debug("closing connection from %s: %s", self.peer, reason)
            self._shared.refusals.note(reason)
        self._closed = True
        self.frames.clear()
        self._shared.release(self.queued_bytes, self.limits.max_queued_request_bytes)
        self._shared.paused_for_budget.discard(self)
        self.queued_bytes = 0
        self._wake()
        if self._muted is not None and not self._muted.done():
            self._muted.set_result(None)
        if self.transport is not None:
            self.transport.close()

    async def shutdown(self) -> None:
        self.abort("broker shutting down", quiet=True)
        if self._worker is not None:
            # a handler awaiting asyncio.wait_for may swallow one cancellation on Python 3.11 (server/stopping.py)
            await cancel_until_done(self._worker)


def _close_slices(out: list[bytes | memoryview] | None) -> None:
    for part in out or ():
        if isinstance(part, FileSlice):
            part.close()


def _normalised_ip(host: str) -> str:
    """The peer's address as max.connections.per.ip.overrides spells it (an IPv6 scope id dropped, an
    IPv4-mapped IPv6 address as its IPv4 one, as Java's InetAddress reads it)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return (mapped or address).compressed
