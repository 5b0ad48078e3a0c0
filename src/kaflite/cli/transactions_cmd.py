"""`kaflite transactions list | describe | abort`, the kafka-transactions.sh vocabulary.

The requests go over the wire with the kio schemas (confluent-kafka's AdminClient has no transaction
APIs), each to the broker Kafka's Admin client sends it to:

- list: Metadata from a bootstrap broker names every live broker; ListTransactions goes to EVERY one
  (each lists the transactions of the `__transaction_state` partitions it leads) and the answers are
  merged, the broker's id in the Coordinator column; a broker that cannot answer fails the command, as
  kafka-transactions.sh fails (`Failed to list transactions`);
- describe: FindCoordinator (key type 1, the transactional id) to a bootstrap broker, then
  DescribeTransactions to that coordinator;
- abort: Metadata for the topic names the partition's leader; DescribeProducers (with `--start-offset`:
  the producer whose open transaction starts there) and WriteTxnMarkers (the ABORT marker) go to it.
  `--producer-id` needs `--producer-epoch` and `--coordinator-epoch`, as in kafka-transactions.sh (a
  negative coordinator epoch, DescribeProducers' -1 for a producer without a marker yet, is sent as 0).

A retriable answer (a coordinator loading or moved, a leader moved) is asked again, after looking the
broker up again, until `--timeout`. Output as kafka-transactions.sh prints it:

    list:     TransactionalId  Coordinator  ProducerId  TransactionState
    describe: CoordinatorId  TransactionalId  ProducerId  ProducerEpoch  TransactionState  TransactionTimeoutMs
              CurrentTransactionStartTimeMs  TransactionDurationMs  TopicPartitions
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from kaflite.cli.common import DEFAULT_BOOTSTRAP, EXIT_USAGE, Bootstrap, error_name, fail, handle_errors
from kaflite.cli.wire_cluster import WireCluster

__all__ = ["register"]

T = TypeVar("T")

transactions_app = typer.Typer(help="List, describe and abort transactions (like kafka-transactions.sh).",
                               no_args_is_help=True)

Timeout = Annotated[float, typer.Option("--timeout", help="Seconds to wait for the brokers' answers.", min=0.1)]

# answers after which Kafka's Admin client looks the broker up again and retries
_RETRY_COORDINATOR = {"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"}
_RETRY_LEADER = {"NOT_LEADER_OR_FOLLOWER", "REPLICA_NOT_AVAILABLE", "BROKER_NOT_AVAILABLE",
                 "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE"}


def register(app: typer.Typer) -> None:
    app.add_typer(transactions_app, name="transactions")


class _Retry(Exception):
    """A retriable answer: look the broker up again and ask again (until the deadline)."""


def _retrying(timeout: float, attempt: Callable[[], T]) -> T:
    """`attempt()` until it returns, at most `timeout` seconds; its last _Retry's reason fails the command."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return attempt()
        except _Retry as e:
            if time.monotonic() + 0.2 > deadline:
                fail(f"{e} (still after {timeout:g} s)")
            time.sleep(0.2)


class _Cluster(WireCluster):
    """The brokers behind `--bootstrap-server`, and the leader of a partition."""

    def leader(self, topic: str, partition: int) -> tuple[int, tuple[str, int]]:
        """The partition's leader (id, address); _Retry while it has none, fails for a missing partition."""
        md = self.metadata([topic])
        (t,) = [t for t in md.topics if t.name == topic]
        code = error_name(t.error_code)
        if code == "LEADER_NOT_AVAILABLE":
            raise _Retry(f"{topic}-{partition}: {code}")
        if code != "NONE":
            fail(f"{topic}-{partition}: {code}")
        found = [p for p in t.partitions if int(p.partition_index) == partition]
        if not found:
            fail(f"{topic}-{partition}: UNKNOWN_TOPIC_OR_PARTITION (the topic has {len(t.partitions)} partitions)")
        leader = int(found[0].leader_id)
        address = self.broker_addresses(md).get(leader)
        if leader < 0 or address is None:
            raise _Retry(f"{topic}-{partition}: LEADER_NOT_AVAILABLE")
        return leader, address


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    for line in [header, *rows]:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


@transactions_app.command("list")
@handle_errors
def list_transactions(bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP, timeout: Timeout = 15.0) -> None:
    """List the transactional ids every broker coordinates, with the coordinator, producer id and state."""
    from kio.schema.list_transactions.v0.request import ListTransactionsRequest
    from kio.schema.list_transactions.v0.response import ListTransactionsResponse

    cluster = _Cluster(bootstrap_server, timeout)
    rows = []
    for broker_id, address in sorted(cluster.broker_addresses(cluster.metadata(())).items()):
        def listed(address: tuple[str, int] = address, broker_id: int = broker_id) -> Any:
            resp = cluster.send(address, ListTransactionsRequest(state_filters=(), producer_id_filters=()),
                                ListTransactionsResponse)
            code = error_name(resp.error_code)
            if code == "COORDINATOR_LOAD_IN_PROGRESS":
                raise _Retry(f"ListTransactions to broker {broker_id}: {code}")
            if code != "NONE":
                fail(f"ListTransactions to broker {broker_id} failed: {code}")
            return resp

        resp = _retrying(timeout, listed)
        rows += [[str(s.transactional_id), str(broker_id), str(int(s.producer_id)), str(s.transaction_state)]
                 for s in resp.transaction_states]
    _table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)


def _raw_request(address: tuple[str, int], req: Any, timeout: float) -> bytes:
    """Send a flexible kio request; the response body after its header (decoded by hand where kio cannot:
    it refuses the -1 timestamps Kafka uses for "none")."""
    import io
    import socket
    import struct

    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_writer
    from kio.static.primitive import i16, i32

    from kaflite.cluster.wire import _exactly

    host, port = address
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
    except (OSError, ConnectionError) as e:
        fail(f"cannot reach {host}:{port}: {getattr(e, 'strerror', None) or e}")
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


def _transaction_coordinator(cluster: _Cluster, transactional_id: str) -> tuple[int, tuple[str, int]]:
    """FindCoordinator key type 1 (v4, batched form): the broker coordinating `transactional_id`."""
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
    from kio.static.primitive import i8

    resp = cluster.send_any(FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(transactional_id,)),
                            FindCoordinatorResponse)
    (c,) = resp.coordinators
    code = error_name(c.error_code)
    if code in _RETRY_COORDINATOR:
        raise _Retry(f"the coordinator of transactional id {transactional_id!r}: {code}")
    if code != "NONE":
        fail(f"the coordinator of transactional id {transactional_id!r}: {code}")
    return int(c.node_id), (str(c.host), int(c.port))


@transactions_app.command("describe")
@handle_errors
def describe_transaction(
    transactional_id: Annotated[str, typer.Option("--transactional-id", help="The transactional id.")],
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Timeout = 15.0,
) -> None:
    """Describe one transactional id at its coordinator: producer id and epoch, state, timeout, partitions."""
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.types import TransactionalId

    from kaflite.protocol.errors import ErrorCode

    cluster = _Cluster(bootstrap_server, timeout)

    def described() -> tuple[int, _Reader]:
        coordinator, address = _transaction_coordinator(cluster, transactional_id)
        r = _Reader(_raw_request(address, DescribeTransactionsRequest(
            transactional_ids=(TransactionalId(transactional_id),)), timeout))
        r.fixed(">i")  # throttle time
        if r.uvarint() != 2:
            fail("DescribeTransactions: expected one answer")
        code = ErrorCode(r.fixed(">h")).name.upper()
        if code in _RETRY_COORDINATOR:  # moved or loading: find it again
            raise _Retry(f"DescribeTransactions of {transactional_id!r} at broker {coordinator}: {code}")
        if code != "NONE":
            fail(f"transactional id {transactional_id!r}: {code}")
        return coordinator, r

    coordinator, r = _retrying(timeout, described)
    tid, state = r.string(), r.string()
    timeout_ms, start = r.fixed(">i"), r.fixed(">q")
    pid, epoch = r.fixed(">q"), r.fixed(">h")
    partitions = []
    for _ in range(r.uvarint() - 1):
        topic = r.string()
        partitions += [f"{topic}-{r.fixed('>i')}" for _ in range(r.uvarint() - 1)]
        r.tags()
    duration = str(int(time.time() * 1000) - start) if start >= 0 else "None"
    _table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
            "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
           [[str(coordinator), tid, str(pid), str(epoch), state, str(timeout_ms), str(start) if start >= 0 else "None",
             duration, ",".join(partitions)]])


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
    """Abort a hanging transaction on one partition by writing its ABORT marker at the partition's leader."""
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

    if start_offset is None:
        if producer_id is None:
            fail("give --start-offset, or --producer-id with --producer-epoch and --coordinator-epoch", EXIT_USAGE)
        if producer_epoch is None:
            fail("--producer-id needs --producer-epoch", EXIT_USAGE)
        if coordinator_epoch is None:
            fail("--producer-id needs --coordinator-epoch", EXIT_USAGE)
    cluster = _Cluster(bootstrap_server, timeout)
    if start_offset is not None:
        def open_transaction() -> Any:
            leader, address = cluster.leader(topic, partition)
            resp = cluster.send(address, DescribeProducersRequest(topics=(TopicRequest(
                name=TopicName(topic), partition_indexes=(i32(partition),)),)), DescribeProducersResponse)
            (p,) = resp.topics[0].partitions
            code = error_name(p.error_code)
            if code in _RETRY_LEADER:
                raise _Retry(f"DescribeProducers of {topic}-{partition} at broker {leader}: {code}")
            if code != "NONE":
                fail(f"{topic}-{partition}: {code}")
            match = [s for s in p.active_producers if int(s.current_txn_start_offset) == start_offset]
            if not match:
                fail(f"{topic}-{partition}: no open transaction starts at offset {start_offset}")
            return match[0]

        found = _retrying(timeout, open_transaction)
        producer_id, producer_epoch = int(found.producer_id), int(found.producer_epoch)
        coordinator_epoch = int(found.coordinator_epoch)  # as kafka-transactions.sh: the partition's, not the option
    assert producer_id is not None and producer_epoch is not None and coordinator_epoch is not None
    marker = WritableTxnMarker(producer_id=ProducerId(producer_id), producer_epoch=i16(producer_epoch),
                               transaction_result=False, topics=(WritableTxnMarkerTopic(
                                   name=TopicName(topic), partition_indexes=(i32(partition),)),),
                               coordinator_epoch=i32(max(coordinator_epoch, 0)))

    def written() -> int:
        leader, address = cluster.leader(topic, partition)
        out = cluster.send(address, WriteTxnMarkersRequest(markers=(marker,)), WriteTxnMarkersResponse)
        code = error_name(out.markers[0].topics[0].partitions[0].error_code)
        if code in _RETRY_LEADER:
            raise _Retry(f"WriteTxnMarkers for {topic}-{partition} at broker {leader}: {code}")
        if code != "NONE":
            fail(f"{topic}-{partition}: the ABORT marker was refused: {code}")
        return leader

    leader = _retrying(timeout, written)
    typer.echo(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) on {topic}-{partition} "
               f"(leader: broker {leader})")
