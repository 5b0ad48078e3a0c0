"""One broker-to-broker connection (Kafka's NetworkClient as the inter-broker senders use it): requests
one at a time (flexible versions with request header v2 and response header v1, others - SaslHandshake -
with v1 and v0), over the other broker's endpoint on the inter-broker listener.

Rules:
- `open` connects through the broker's one `BrokerConnector` (server/security/client.py): TLS and the
  SASL login of the inter-broker listener's security protocol happen there, before the first request
  (no connector: PLAINTEXT);
- a request waits at most `timeout_s` for its bytes to leave (drain) and as long for its answer; a frame
  of a bad size or another correlation id is a ConnectionError (the caller closes the connection and
  opens a new one);
- the address of a broker is its endpoint on `inter.broker.listener.name` in the metadata image, else its
  first registered endpoint; a broker the image does not know is a ConnectionError.
Used by the replica fetchers (Fetch, OffsetForLeaderEpoch) and the transaction coordinator's marker channel
(WriteTxnMarkers).
"""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kaflite.cluster.metadata import MetadataImage
from kaflite.server.security.client import BrokerConnector

__all__ = ["BrokerConnection", "address_of"]

_MAX_FRAME = 256 * 1024 * 1024


def address_of(image: MetadataImage, broker: int, listener: str | None) -> tuple[str, int]:
    """(host, port) of `broker` on the inter-broker listener (else its first endpoint)."""
    reg = image.brokers.get(broker)
    if reg is None:
        raise ConnectionError(f"broker {broker} is not registered")
    ep = reg.endpoint(listener) if listener else None
    ep = ep or reg.endpoint()
    if ep is None:
        raise ConnectionError(f"broker {broker} has no endpoint")
    return ep.host, ep.port


class BrokerConnection:
    """One broker-to-broker connection: kio requests, one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self.correlation = 0

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout_s: float,
                   connector: BrokerConnector | None = None) -> BrokerConnection:
        """A connection ready for requests: connected, and authenticated as the connector says."""
        if connector is None:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
            return cls(reader, writer, client_id)
        reader, writer = await connector.open_stream(host, port, timeout_s)
        conn = cls(reader, writer, client_id)
        try:
            await connector.authenticate(conn, timeout_s)
        except BaseException:
            conn.close()
            raise
        return conn

    async def request(self, req: Any, response_schema: Any, timeout_s: float) -> Any:
        self.correlation += 1
        buf = io.BytesIO()
        flexible = bool(req.__flexible__)
        header = RequestHeader if flexible else RequestHeaderV1
        entity_writer(header)(buf, header(
            request_api_key=i16(req.__api_key__), request_api_version=i16(req.__version__),
            correlation_id=i32(self.correlation), client_id=self.client_id))
        entity_writer(type(req))(buf, req)
        frame = await self._exchange(buf.getvalue(), timeout_s)
        _header, offset = entity_reader(ResponseHeader if flexible else ResponseHeaderV0)(frame, 0)
        response, _ = entity_reader(response_schema)(frame, offset)
        return response

    async def request_flexible_bytes(self, api_key: int, version: int, body: bytes,
                                     timeout_s: float) -> tuple[bytes, int]:
        """A request whose body the caller encoded (a flexible version: request header v2), and the answer's
        frame with the offset of its body (after response header v1) for the caller's own decoder."""
        self.correlation += 1
        client = self.client_id.encode()
        head = struct.pack(">hhih", api_key, version, self.correlation, len(client)) + client + b"\x00"
        frame = await self._exchange(head + body, timeout_s)
        if len(frame) < 5 or frame[4] != 0:  # response header v1: the correlation id, then no tagged field
            raise ConnectionError("a response header with tagged fields (Kafka defines none)")
        return frame, 5

    async def _exchange(self, request: bytes, timeout_s: float) -> bytes:
        """Send one request frame, read its answer's frame (checked: size, correlation id)."""
        self.writer.write(struct.pack(">i", len(request)) + request)
        # bounded too: a peer that stops reading (a paused broker) must not hold the sender forever
        await asyncio.wait_for(self.writer.drain(), timeout_s)
        head = await asyncio.wait_for(self.reader.readexactly(4), timeout_s)
        (size,) = struct.unpack(">i", head)
        if not 4 <= size <= _MAX_FRAME:
            raise ConnectionError(f"bad frame size {size}")
        frame = await asyncio.wait_for(self.reader.readexactly(size), timeout_s)
        (corr,) = struct.unpack_from(">i", frame, 0)
        if corr != self.correlation:
            raise ConnectionError(f"correlation id {corr}, expected {self.correlation}")
        return frame

    def close(self) -> None:
        self.writer.close()
