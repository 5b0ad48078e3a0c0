"""`kaflite transactions list | describe | abort`, the kafka-transactions.sh vocabulary.

The requests go over the wire with the kio schemas (confluent-kafka's AdminClient has no transaction
APIs): ListTransactions, DescribeTransactions, DescribeProducers and WriteTxnMarkers, sent to the
bootstrap broker (on a single node the coordinator and every partition leader). Output as
kafka-transactions.sh prints it:

    list:     TransactionalId  Coordinator  ProducerId  TransactionState
    describe: CoordinatorId  TransactionalId  ProducerId  ProducerEpoch  TransactionState  TransactionTimeoutMs
              CurrentTransactionStartTimeMs  TransactionDurationMs  TopicPartitions
`abort --topic T --partition P --start-offset O` finds the producer whose open transaction starts at O
(DescribeProducers) and writes an ABORT marker for it (WriteTxnMarkers), as a hanging transaction is
aborted with kafka-transactions.sh; `--producer-id/--producer-epoch/--coordinator-epoch` give it directly.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from kaflite.cli.common import DEFAULT_BOOTSTRAP, EXIT_USAGE, _split_host_port, fail, handle_errors

__all__ = ["register"]

transactions_app = typer.Typer(help="List, describe and abort transactions (like kafka-transactions.sh).",
                               no_args_is_help=True)

Bootstrap = Annotated[
    str,
    typer.Option("--bootstrap-server", "-b", envvar="KAFLITE_BOOTSTRAP",
                 help="host:port of a broker (comma-separated list allowed)."),
]
Timeout = Annotated[float, typer.Option("--timeout", help="Seconds to wait for the broker's answer.", min=0.1)]


def register(app: typer.Typer) -> None:
    app.add_typer(transactions_app, name="transactions")


def _send(bootstrap: str, req: Any, response_schema: Any, timeout: float) -> Any:
    from kaflite.console.wire import request

    host, port = _split_host_port(bootstrap.split(",")[0])
    try:
        return request(host, port, req, response_schema, timeout)
    except OSError as e:
        fail(f"cannot reach {host}:{port}: {e.strerror or e}")


def _error_name(code: Any) -> str:
    from kaflite.protocol.errors import ErrorCode

    value = int(code.value if hasattr(code, "value") else code)
    return ErrorCode(value).name.upper()


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    for line in [header, *rows]:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


@transactions_app.command("list")
@handle_errors
def list_transactions(bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP, timeout: Timeout = 15.0) -> None:
    """List the transactional ids the coordinator knows, with their producer id and state."""
    from kio.schema.list_transactions.v0.request import ListTransactionsRequest
    from kio.schema.list_transactions.v0.response import ListTransactionsResponse

    resp = _send(bootstrap_server, ListTransactionsRequest(state_filters=(), producer_id_filters=()),
                 ListTransactionsResponse, timeout)
    if _error_name(resp.error_code) != "NONE":
        fail(f"ListTransactions failed: {_error_name(resp.error_code)}")
    rows = [[str(s.transactional_id), "-", str(int(s.producer_id)), str(s.transaction_state)]
            for s in resp.transaction_states]
    _table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)


def _raw_request(bootstrap: str, req: Any, timeout: float) -> bytes:
    """Send a flexible kio request; the response body after its header (decoded by hand where kio cannot:
    it refuses the -1 timestamps Kafka uses for "none")."""
    import io
    import socket
    import struct

    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_writer
    from kio.static.primitive import i16, i32

    from kaflite.console.wire import _exactly

    host, port = _split_host_port(bootstrap.split(",")[0])
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=i16(req.__api_key__), request_api_version=i16(
        req.__version__), correlation_id=i32(1), client_id="kaflite-cli"))
    entity_writer(type(req))(buf, req)
    body = buf.getvalue()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            (size,) = struct.unpack(">i", _exactly(sock, 4))
            frame = _exactly(sock, size)
    except OSError as e:
        fail(f"cannot reach {host}:{port}: {e.strerror or e}")
    return frame[5:]  # correlation id, empty tagged fields


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def fixed(self, fmt: str) -> int:
        import struct

        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1
        v = self.data[self.pos:self.pos + max(n, 0)].decode()
        self.pos += max(n, 0)
        return v

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


@transactions_app.command("describe")
@handle_errors
def describe_transaction(
    transactional_id: Annotated[str, typer.Option("--transactional-id", help="The transactional id.")],
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Describe one transactional id: producer id and epoch, state, timeout, partitions of the transaction."""
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.types import TransactionalId

    from kaflite.protocol.errors import ErrorCode

    r = _Reader(_raw_request(bootstrap_server, DescribeTransactionsRequest(
        transactional_ids=(TransactionalId(transactional_id),)), timeout))
    r.fixed(">i")  # throttle time
    if r.uvarint() != 2:
        fail("DescribeTransactions: expected one answer")
    code = ErrorCode(r.fixed(">h"))
    tid, state = r.string(), r.string()
    timeout_ms, start = r.fixed(">i"), r.fixed(">q")
    pid, epoch = r.fixed(">q"), r.fixed(">h")
    partitions = []
    for _ in range(r.uvarint() - 1):
        topic = r.string()
        partitions += [f"{topic}-{r.fixed('>i')}" for _ in range(r.uvarint() - 1)]
        r.tags()
    if code is not ErrorCode.none:
        fail(f"transactional id {transactional_id!r}: {code.name.upper()}")
    duration = str(int(time.time() * 1000) - start) if start >= 0 else "None"
    _table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
            "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
           [["-", tid, str(pid), str(epoch), state, str(timeout_ms), str(start) if start >= 0 else "None", duration,
             ",".join(partitions)]])


@transactions_app.command("abort")
@handle_errors
def abort_transaction(
    topic: Annotated[str, typer.Option("--topic", help="The partition's topic.")],
    partition: Annotated[int, typer.Option("--partition", help="The partition.", min=0)],
    start_offset: Annotated[int | None, typer.Option("--start-offset",
                                                     help="First offset of the open transaction to abort.")] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id")] = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option("--coordinator-epoch")] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Abort a hanging transaction on one partition by writing its ABORT marker."""
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
    from kio.schema.describe_producers.v0.response import DescribeProducersResponse
    from kio.schema.types import ProducerId, TopicName
    from kio.schema.write_txn_markers.v1.request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )
    from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse
    from kio.static.primitive import i16, i32

    if start_offset is None and (producer_id is None or producer_epoch is None):
        fail("give --start-offset, or --producer-id with --producer-epoch (and --coordinator-epoch)", EXIT_USAGE)
    if start_offset is not None:
        resp = _send(bootstrap_server, DescribeProducersRequest(topics=(TopicRequest(
            name=TopicName(topic), partition_indexes=(i32(partition),)),)), DescribeProducersResponse, timeout)
        (p,) = resp.topics[0].partitions
        if _error_name(p.error_code) != "NONE":
            fail(f"{topic}-{partition}: {_error_name(p.error_code)}")
        match = [s for s in p.active_producers if int(s.current_txn_start_offset) == start_offset]
        if not match:
            fail(f"{topic}-{partition}: no open transaction starts at offset {start_offset}")
        producer_id, producer_epoch = int(match[0].producer_id), int(match[0].producer_epoch)
        coordinator_epoch = max(int(match[0].coordinator_epoch), 0) if coordinator_epoch is None else coordinator_epoch
    assert producer_id is not None and producer_epoch is not None
    marker = WritableTxnMarker(producer_id=ProducerId(producer_id), producer_epoch=i16(producer_epoch),
                               transaction_result=False, topics=(WritableTxnMarkerTopic(
                                   name=TopicName(topic), partition_indexes=(i32(partition),)),),
                               coordinator_epoch=i32(coordinator_epoch or 0))
    out = _send(bootstrap_server, WriteTxnMarkersRequest(markers=(marker,)), WriteTxnMarkersResponse, timeout)
    code = _error_name(out.markers[0].topics[0].partitions[0].error_code)
    if code != "NONE":
        fail(f"{topic}-{partition}: the ABORT marker was refused: {code}")
    typer.echo(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) on {topic}-{partition}")
