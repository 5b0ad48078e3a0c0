"""From one request frame to the buffers of its response: header, registry lookup, decode, handle, encode.

Rules (what Kafka's SocketServer/KafkaApis do):
- ApiVersions at a version the broker does not serve gets a v0 response with UNSUPPORTED_VERSION (35)
  and the full API list, so any client can learn what to speak;
- any other unknown api key or unsupported version, or a body that does not decode, is a protocol
  violation: the connection is closed (`CloseConnection`) with one log line;
- a handler returning None means "no response" (Produce with acks=0);
- every request carries the session of the connection it came in on (listener, security protocol and
  principal, decided once per connection; one dispatcher per bound listener);
  the throttle time a quota set on the context (`ctx.throttle_time_ms`) goes into the response's
  `throttle_time` (hot-encoded responses write their own), and a throttle is told to the connection
  (`on_throttle`) before the answer is returned, so it mutes itself once the answer is sent (KIP-219);
- with a `request_percentage` quota set, the handler's time on the event loop (server/quota/timing.py)
  is recorded against it (Kafka's request quota on request-handler thread time), except for the
  broker-to-broker APIs of REQUEST_QUOTA_EXEMPT and a follower's Fetch.
- with `kaflite.faults.enable=true` (server/faults.py) every decoded request is first shown to the broker's
  FaultInjector: an injected error is answered with `faults_response.error_response` (the handler does not
  run), a delay sleeps before the handler, a dropped connection closes it unanswered; a DescribeConfigs or
  IncrementalAlterConfigs of the pseudo resource `kaflite.faults` lists or changes the rules
  (`faults_admin.py`, what `kaflite faults` sends); a throttle fault becomes the context's throttle time
  (answered and muted like a quota's), a half-close fault raises `HalfCloseConnection`;
- a large frame arrives as the bytearray it was read into (protocol/framing.py): Produce is decoded from it
  as it is (its records appended from a read-only view, never copied in this process), any other request
  from a `bytes` copy of it (kio's readers and the bytes fields they return want bytes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.messages import (
    API_VERSIONS_KEY,
    PRODUCE_KEY,
    ProtocolError,
    RequestHeader,
    decode_request,
    encode_raw_response,
    encode_response,
    parse_request_header,
)
from kaflite.server.authorizer import Session
from kaflite.server.context import RequestContext
from kaflite.server.handlers import EncodedBody, Registry
from kaflite.server.quota.manager import REQUEST_PERCENTAGE
from kaflite.server.quota.timing import LoopTimer, timed
from kaflite.server.services import Slot

if TYPE_CHECKING:
    from kaflite.server.broker import Broker
    from kaflite.server.config import Listener

__all__ = ["CloseConnection", "Dispatcher", "HalfCloseConnection"]

log = logging.getLogger("kaflite.server")
# called with the id of each client connection that ends (after its last request was answered)
CONNECTION_CLOSED: Slot[list[Callable[[int], None]]] = Slot("connection_closed")


class CloseConnection(Exception):
    """The request cannot be answered; the connection must be closed."""


class HalfCloseConnection(CloseConnection):
    """Shut down the connection's write side, unanswered, and keep reading until the client closes."""


# Kafka's broker-to-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown,
# WriteTxnMarkers, AlterPartition), answered without the request quota (sendResponseExemptThrottle); a
# follower's Fetch is exempted in its handler
REQUEST_QUOTA_EXEMPT = frozenset({4, 5, 6, 7, 27, 56})


class Dispatcher:
    def __init__(self, broker: Broker, registry: Registry, listener: Listener | None = None) -> None:
        self.broker = broker
        self.registry = registry
        self.listener = listener

    def connection_closed(self, connection_id: int) -> None:
        """A client connection ended (after its last request): the hooks registered in the broker's
        CONNECTION_CLOSED slot (share sessions, Kafka's ConnectionDisconnectListener) run."""
        for hook in list(self.broker.services.get(CONNECTION_CLOSED) or ()):
            try:
                hook(connection_id)
            except Exception:  # noqa: BLE001 - one failing hook must not keep the others from running
                log.exception("a connection-closed hook failed")

    async def dispatch(
        self, frame: bytes | bytearray, client_host: str = "", connection_id: int = 0,
        session: Session | None = None, on_throttle: Callable[[int], None] | None = None,
    ) -> list[bytes | memoryview] | None:
        # module rules: a large frame (a bytearray) is read through a read-only view (kio's varint reader
        # refuses writable buffers), and copied into bytes for any request but Produce
        body: bytes | memoryview = memoryview(frame).toreadonly() if isinstance(frame, bytearray) else frame
        try:
            header, offset = parse_request_header(body)
        except ProtocolError as e:
            raise CloseConnection(f"bad request header: {e}") from e
        if header.api_key != PRODUCE_KEY and isinstance(frame, bytearray):
            body = bytes(frame)
        handler = self.registry.lookup(header.api_key, header.api_version)
        if handler is None:
            if header.api_key == API_VERSIONS_KEY:
                return self.unsupported_api_versions(header.correlation_id)
            if self.registry.has_api(header.api_key):
                raise CloseConnection(
                    f"unsupported version {header.api_version} of api key {header.api_key}"
                )
            raise CloseConnection(f"unknown api key {header.api_key} (version {header.api_version})")
        try:
            request = decode_request(header, body, offset)
        except ProtocolError as e:
            raise CloseConnection(str(e)) from e
        if session is None:  # a caller without a connection (tests): the listener's anonymous session
            session = Session.on(self.listener, client_host)
        faults = self.broker.faults  # None unless kaflite.faults.enable
        injected_throttle_ms = 0  # a throttle fault's, set before the handler so hot encoders write it too
        if faults is not None:
            if header.api_key in (32, 44):  # the rules themselves, managed over the wire (faults_admin.py)
                from kaflite.server.faults_admin import answer as answer_rules

                ctx = RequestContext(self.broker, header, client_host, connection_id, session)
                managed = await answer_rules(ctx, request, faults)
                if managed is not None:
                    return encode_response(header.api_key, header.api_version, header.correlation_id, managed)
            rule = faults.match(header.api_key, header.client_id, request)
            if rule is not None:
                if rule.kind == "drop":
                    raise CloseConnection(f"fault injected (rule {rule.id}): connection dropped")
                if rule.kind == "half_close":
                    raise HalfCloseConnection(f"fault injected (rule {rule.id}): connection half-closed")
                if rule.kind == "throttle":
                    injected_throttle_ms = rule.ms
                if rule.kind == "delay":
                    await asyncio.sleep(rule.ms / 1000.0)
                elif rule.error is not None:
                    from kaflite.server.faults_response import error_response

                    return _encode(header, error_response(header.api_key, header.api_version, request,
                                                          rule.error))
        ctx = RequestContext(self.broker, header, client_host, connection_id, session, request_bytes=len(frame))
        ctx.throttle_time_ms = injected_throttle_ms  # quotas raise it with max(), never lower it
        metrics = self.broker.metrics  # None unless metrics.listener is set
        started = time.perf_counter() if metrics is not None else 0.0
        if self.broker.quotas.enabled(REQUEST_PERCENTAGE) and header.api_key not in REQUEST_QUOTA_EXEMPT:
            timer = LoopTimer()
            ctx.loop_time_ns = timer.elapsed_ns
            response = await timed(timer, handler(ctx, request))
            ctx.record_request_time()  # unless the handler did (Produce, Fetch: before encoding)
        else:
            response = await handler(ctx, request)
        if metrics is not None:
            metrics.request(header.api_key, time.perf_counter() - started)
        if ctx.throttle_time_ms > 0 and on_throttle is not None:  # KIP-219: the connection mutes itself
            on_throttle(ctx.throttle_time_ms)
        if response is None:
            return None
        if ctx.throttle_time_ms and not isinstance(response, EncodedBody) and hasattr(response, "throttle_time") \
                and not isinstance(response, type):  # hot encoders wrote ctx.throttle_time_ms themselves
            response = dataclasses.replace(response, throttle_time=timedelta(milliseconds=ctx.throttle_time_ms))
        return _encode(header, response)

    def unsupported_api_versions(self, correlation_id: int) -> list[bytes | memoryview]:
        from kaflite.server.handlers.api_versions import api_versions_response

        response = api_versions_response(self.registry, 0, ErrorCode.unsupported_version)
        return encode_response(API_VERSIONS_KEY, 0, correlation_id, response)


def _encode(header: RequestHeader, response: Any) -> list[bytes | memoryview]:
    """The framed answer to `header`: a kio response entity, or an `EncodedBody` from a hand-written
    encoder (Produce, Fetch, Metadata hot paths; every Produce v0-v2 answer, which kio has no schema for)."""
    if isinstance(response, EncodedBody):
        return encode_raw_response(header.api_key, header.api_version, header.correlation_id, response.parts)
    return encode_response(header.api_key, header.api_version, header.correlation_id, response)
