"""The source's fast path: one partition's records fetched over kaflite's own client half of the Fetch
protocol and decoded into Arrow a window of `DECODE_WINDOW_BYTES` of records at a time (kaflite.spark.batches),
instead of a librdkafka `Message` per record.

Rules:
- used only when the client settings need nothing this client does not do: `security.protocol` absent
  or PLAINTEXT (TLS and SASL stay with librdkafka), and the leader's ApiVersions answer covers Fetch v12
  (Kafka 2.7 and later; kaflite); otherwise `fetch_range` returns at once and the caller reads the whole
  range through librdkafka;
- the partition's leader comes from the metadata the caller's librdkafka consumer fetched; one blocking
  connection to it (this runs in an executor task, never on an event loop), one Fetch v12 at a time plus
  the next one sent before the current answer is decoded and yielded (the broker reads while Spark works);
- `isolation.level` read_committed fetches with isolation level 1 (the broker stops at the last stable
  offset) and drops the rows of aborted transactions by the answer's aborted list;
- the answer's end (high watermark, or last stable offset under read_committed) at or below the fetch
  offset is the end of the log: the caller's `at_end` decides, as at librdkafka's partition EOF;
  OFFSET_OUT_OF_RANGE goes to the caller's `out_of_range` (data loss); NOT_LEADER_OR_FOLLOWER and the
  other leadership errors, and a lost connection, look the leader up again and retry after 100 ms,
  until `poll_timeout_ms` passes without progress (TimeoutError); any other error code is raised;
- a batch in message format v0/v1 ends the fast path: `fetch_range` returns its offset and the caller
  reads on from there through librdkafka.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from collections.abc import Callable, Generator
from typing import Any

import pyarrow as pa
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kaflite.protocol import fetch_v12
from kaflite.protocol.errors import ErrorCode, ProtocolError, error_name
from kaflite.protocol.fetch_v12 import PartitionAnswer
from kaflite.spark.batches import UnsupportedBatch, decode_windows

__all__ = ["FetchConnection", "fast_path_supported", "fetch_range"]

FETCH_API_KEY = 1
FETCH_VERSION = 12
MAX_WAIT_MS = 500
RETRY_BACKOFF_S = 0.1
DEFAULT_PARTITION_MAX_BYTES = 4 * 1024 * 1024
# records decoded into one Arrow batch (about 8,700 rows of 100 B values, near Spark's 10,000-row Arrow
# batches): with whole fetches, a zstd or lz4 fetch of 4 MiB inflated to about 40 MB per call, every
# buffer page-faulted afresh; with 1 MiB windows the source's task body (no Spark) spent 0.08-0.09 CPU-s
# per million rows on lz4 instead of 0.12-0.14, and 0.145-0.149 on zstd instead of 0.160-0.175
# (bench/spark_codec_bench.py, docs/spark.md)
DECODE_WINDOW_BYTES = 1024 * 1024
_MAX_FRAME = 512 * 1024 * 1024
_LEADERSHIP_ERRORS = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available, ErrorCode.kafka_storage_error,
    ErrorCode.replica_not_available, ErrorCode.offset_not_available, ErrorCode.request_timed_out,
})
_read_header_v0 = entity_reader(ResponseHeaderV0)
_read_header_v1 = entity_reader(ResponseHeader)
_read_versions = entity_reader(ApiVersionsResponse)
_read_metadata = entity_reader(MetadataResponse)
METADATA_API_KEY = 3
METADATA_VERSION = 12


class FetchError(RuntimeError):
    """The leader answered a Fetch with an error this path does not retry."""


def fast_path_supported(conf: dict[str, Any]) -> bool:
    """True when the client settings ask for nothing but a plaintext connection."""
    protocol = str(conf.get("security.protocol", "plaintext")).strip().lower()
    return protocol == "plaintext"


def partition_max_bytes(conf: dict[str, Any]) -> int:
    try:
        return max(int(conf.get("max.partition.fetch.bytes", DEFAULT_PARTITION_MAX_BYTES)), 1)
    except (TypeError, ValueError):
        return DEFAULT_PARTITION_MAX_BYTES


class FetchConnection:
    """One blocking connection to a partition's leader: ApiVersions, then Fetch v12 requests."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation = 0
        # one receive buffer for the connection's life, grown to the largest answer: a fresh 4 MiB buffer
        # per Fetch was zero-filled and page-faulted in afresh every time (about 1,000 faults per answer).
        # An answer's frame is read only until the next receive (kio copies the records out of it).
        self._frame = bytearray()

    def close(self) -> None:
        self.sock.close()

    def _send(self, req: Any) -> int:
        self.correlation += 1
        flexible = bool(req.__flexible__)
        header_type = RequestHeader if flexible else RequestHeaderV1
        buf = io.BytesIO()
        entity_writer(header_type)(buf, header_type(
            request_api_key=i16(req.__api_key__), request_api_version=i16(req.__version__),
            correlation_id=i32(self.correlation), client_id=self.client_id))
        entity_writer(type(req))(buf, req)
        body = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        return self.correlation

    def _next_header(self, api_key: int, version: int) -> bytes:
        """The next request's header v2 (flexible versions), by hand: api key, version, a new correlation
        id, the client id and no tagged fields."""
        self.correlation += 1
        client = self.client_id.encode("utf-8")
        return struct.pack(">hhih", api_key, version, self.correlation, len(client)) + client + b"\x00"

    def _send_body(self, api_key: int, version: int, body: bytes) -> int:
        """A request whose body is already encoded, under a request header v2 (flexible versions)."""
        head = self._next_header(api_key, version)
        self.sock.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
        return self.correlation

    def _receive_exactly(self, n: int) -> bytearray:
        out = bytearray(n)
        self._receive_into(memoryview(out))
        return out

    def _receive_into(self, view: memoryview) -> None:
        n, got = len(view), 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("the broker closed the connection")
            got += k

    def _receive(self, correlation: int, flexible: bool) -> tuple[memoryview, int]:
        """The answer's frame (valid until the next receive: it is the connection's buffer) and where its
        body starts."""
        (size,) = struct.unpack(">i", self._receive_exactly(4))
        if not 4 <= size <= _MAX_FRAME:
            raise ConnectionError(f"bad frame size {size}")
        if len(self._frame) < size:
            self._frame = bytearray(size)
        view = memoryview(self._frame)[:size]
        self._receive_into(view)
        frame = view.toreadonly()  # kio reads read-only buffers only
        (corr,) = struct.unpack_from(">i", frame, 0)
        if corr != correlation:
            raise ConnectionError(f"correlation id {corr}, expected {correlation}")
        _header, offset = (_read_header_v1 if flexible else _read_header_v0)(frame, 0)
        return frame, offset

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """{api key: (min version, max version)} of the broker; empty if it answers with an error."""
        corr = self._send(ApiVersionsRequest())
        frame, offset = self._receive(corr, flexible=False)  # ApiVersions answers with header v0, always
        resp, _ = _read_versions(frame, offset)
        if int(getattr(resp.error_code, "value", resp.error_code)) != 0:
            return {}
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}

    def request(self, req: Any, reader: Any) -> Any:
        """A flexible-version request and its decoded answer (kio)."""
        corr = self._send(req)
        frame, offset = self._receive(corr, flexible=True)
        return reader(frame, offset)[0]

    def supports_fetch_v12(self) -> bool:
        lo, hi = self.api_versions().get(FETCH_API_KEY, (1, 0))
        return lo <= FETCH_VERSION <= hi

    def send_fetch(self, topic: str, partition: int, offset: int, max_bytes: int, read_committed: bool) -> int:
        body = fetch_v12.encode_request(
            replica_id=-1, max_wait_ms=MAX_WAIT_MS, min_bytes=1, max_bytes=max(max_bytes, 1024 * 1024),
            isolation_level=1 if read_committed else 0, session_id=0, session_epoch=-1,
            # (partition, current leader epoch, fetch offset, last fetched epoch, log start offset, max bytes)
            topics=[(topic, [(partition, -1, offset, -1, -1, max_bytes)])])
        return self._send_body(FETCH_API_KEY, FETCH_VERSION, body)

    def receive_fetch(self, correlation: int, topic: str, partition: int) -> PartitionAnswer:
        """The partition's part of the answer. Its `records` is a view of the connection's buffer, valid
        until the next receive: decoded by hand (kaflite.protocol.fetch_v12), because kio copied every
        answer's records out of the frame, a memcpy of the whole fetch (about a tenth of the task body's
        CPU, bench/spark_codec_bench.py)."""
        frame, offset = self._receive(correlation, flexible=True)
        try:
            resp = fetch_v12.decode_response(frame, offset)
        except ProtocolError as e:
            raise ConnectionError(str(e)) from None
        if resp.error_code != ErrorCode.none:
            raise FetchError(f"Fetch of {topic}-{partition} refused: {error_name(resp.error_code)}")
        for t in resp.responses:
            if t.topic == topic:
                for p in t.partitions:
                    if p.partition_index == partition:
                        return p
        raise ConnectionError(f"the Fetch answer has no {topic}-{partition}")


def find_leader(conf: dict[str, Any], topic: str, partition: int, timeout_s: float) -> tuple[str, int] | None:
    """The partition's leader (host, port) from a Metadata v12 request to the first bootstrap broker that
    answers; None when no bootstrap broker answers or takes Metadata v12 (the caller asks librdkafka).

    Why not librdkafka: a fresh librdkafka consumer's first `list_topics` took 50-60 ms instead of 1 ms
    one time in three (a task's first batch that late, with no CPU to show for it); this is one connection,
    ApiVersions and Metadata, about 1 ms on loopback."""
    client_id = str(conf.get("client.id", "kaflite-spark"))
    for server in str(conf.get("bootstrap.servers", "")).split(","):
        host, _, port = server.strip().rpartition(":")
        if not host:
            continue
        try:
            conn = FetchConnection(host.strip("[]"), int(port), client_id, timeout_s)
        except (OSError, ValueError):
            continue
        try:
            lo, hi = conn.api_versions().get(METADATA_API_KEY, (1, 0))
            if not lo <= METADATA_VERSION <= hi:
                return None
            resp = conn.request(MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                allow_auto_topic_creation=False, include_topic_authorized_operations=False), _read_metadata)
        except (OSError, ConnectionError, ValueError):
            continue
        finally:
            conn.close()
        brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in resp.brokers}
        for t in resp.topics:
            if str(t.name) == topic and int(getattr(t.error_code, "value", t.error_code)) == 0:
                for p in t.partitions:
                    if int(p.partition_index) == partition and int(p.leader_id) in brokers:
                        return brokers[int(p.leader_id)]
        raise ConnectionError(f"{topic}-{partition} has no leader in the metadata")
    return None


def _peek_next(data: bytes | memoryview, offset: int) -> int:
    """The fetch offset after the whole batches of `data` (headers only), for the pipelined request."""
    pos, end = 0, len(data)
    while end - pos >= 61:
        base, length = struct.unpack_from(">qi", data, pos)
        lod = struct.unpack_from(">i", data, pos + 23)[0]
        if pos + length + 12 > end or data[pos + 16] != 2:
            break
        offset = max(offset, base + lod + 1)
        pos += length + 12
    return offset


def fetch_range(
    leader: Callable[[], tuple[str, int]],
    conf: dict[str, Any],
    topic: str,
    partition: int,
    begin: int,
    until: int,
    include_headers: bool,
    poll_timeout_ms: int,
    at_end: Callable[[int], None],
    out_of_range: Callable[[int], int],
) -> Generator[pa.RecordBatch, None, int | None]:
    """Yield the rows of [begin, until) of one partition as Arrow batches; return None when the range is
    done, or the offset from which the caller must read on another way (fast path not possible).

    `leader()` gives the (host, port) of the partition's leader, looked up again after errors;
    `at_end(offset)` is called when the log ends at `offset` < until (then the range is over);
    `out_of_range(offset)` answers OFFSET_OUT_OF_RANGE with the offset to go on from."""
    read_committed = str(conf.get("isolation.level", "read_uncommitted")).lower() == "read_committed"
    max_bytes = partition_max_bytes(conf)
    client_id = str(conf.get("client.id", "kaflite-spark"))
    next_offset = begin
    deadline = time.monotonic() + poll_timeout_ms / 1000
    conn: FetchConnection | None = None
    in_flight: tuple[int, int] | None = None  # (correlation, fetch offset)
    try:
        while next_offset < until:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Cannot fetch records in [{next_offset}, {until}) of {topic}-{partition} within "
                    f"kafkaConsumer.pollTimeoutMs={poll_timeout_ms}"
                )
            try:
                if conn is None:
                    host, port = leader()
                    conn = FetchConnection(host, port, client_id, poll_timeout_ms / 1000 + MAX_WAIT_MS / 1000)
                    if not conn.supports_fetch_v12():
                        return next_offset
                    in_flight = None
                if in_flight is None or in_flight[1] != next_offset:
                    if in_flight is not None:  # sent for an offset we did not reach: read and drop it
                        conn.receive_fetch(in_flight[0], topic, partition)
                    in_flight = (conn.send_fetch(topic, partition, next_offset, max_bytes, read_committed),
                                 next_offset)
                part = conn.receive_fetch(in_flight[0], topic, partition)
                in_flight = None
            except (OSError, ConnectionError):
                if conn is not None:
                    conn.close()
                conn, in_flight = None, None
                time.sleep(RETRY_BACKOFF_S)
                continue
            code = part.error_code  # an int: ErrorCode is an IntEnum, and a newer broker's code is named below
            if code == ErrorCode.offset_out_of_range:
                next_offset = out_of_range(next_offset)
                deadline = time.monotonic() + poll_timeout_ms / 1000
                continue
            if code in _LEADERSHIP_ERRORS:
                conn.close()
                conn = None
                time.sleep(RETRY_BACKOFF_S)
                continue
            if code != ErrorCode.none:
                raise FetchError(f"Fetch of {topic}-{partition} at offset {next_offset} answered {error_name(code)}")
            # a view of the connection's buffer: decoded (copied into Arrow buffers) before the next receive
            data = part.records if part.records is not None else memoryview(b"")
            ahead = _peek_next(data, next_offset)
            if next_offset < ahead < until:
                # the next request goes out before this answer is decoded: the broker reads meanwhile
                in_flight = (conn.send_fetch(topic, partition, ahead, max_bytes, read_committed), ahead)
            aborted = None
            if read_committed:
                aborted = list(part.aborted_transactions or ())
            fetched_at = next_offset
            try:
                # a compressed fetch inflates many times over: decoded a window at a time (batches.py)
                for rows, after in decode_windows(data, topic, partition, fetched_at, until, include_headers,
                                                  aborted, window_bytes=DECODE_WINDOW_BYTES):
                    if rows is not None and rows.num_rows:
                        yield rows
                    next_offset = max(next_offset, after)
            except UnsupportedBatch as e:
                return e.offset
            if next_offset > fetched_at:
                deadline = time.monotonic() + poll_timeout_ms / 1000
                continue
            end = part.last_stable_offset if read_committed else part.high_watermark
            if 0 <= end <= next_offset:
                at_end(next_offset)
                return None
        return None
    finally:
        if conn is not None:
            conn.close()
