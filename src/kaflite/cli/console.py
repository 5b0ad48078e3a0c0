"""`kaflite produce` and `kaflite consume`: console producer and consumer through confluent-kafka.

produce: one record per stdin line; `--key-separator` splits `key<SEP>value`, `--header K=V` adds headers,
`--partition` pins a partition, `--acks` chooses 0 / 1 / all. Exits 1 if any record is not acknowledged.

consume: without `--follow` it reads up to the end of every partition (as it was when the consumer got
there, librdkafka's "partition EOF") and exits; with `--follow` it keeps waiting for new records until
Ctrl-C, `--max-messages` or `--idle-timeout`. Without `--group` it assigns the partitions itself (no
group, no commits); with `--group` it subscribes and commits like kafka-console-consumer.sh. The text
format is Kafka's DefaultMessageFormatter: optional `CreateTime:<ms>`, `Partition:<p>`, `Offset:<o>`,
headers (`k:v,k2:v2` or `NO_HEADERS`), key, then the value, separated by `--separator` (a tab).
"""

from __future__ import annotations

import json
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    Bootstrap,
    ClientErrors,
    check_reachable,
    client_config,
    describe_exception,
    fail,
    handle_errors,
    parse_key_values,
)

__all__ = ["format_record", "register"]

ClientProperty = Annotated[
    list[str] | None,
    typer.Option(
        "--property",
        "-X",
        metavar="KEY=VALUE",
        help="A librdkafka client property (repeatable), e.g. -X enable.idempotence=true.",
    ),
]
_ACKS = {"0": "0", "1": "1", "all": "all", "-1": "all"}


def register(app: typer.Typer) -> None:
    app.command("produce")(produce)
    app.command("consume")(consume)


def _unescape_separator(sep: str) -> str:
    """Let shells pass tabs and newlines as `\\t` / `\\n`."""
    return sep.replace("\\t", "\t").replace("\\n", "\n")


class StopRequest:
    """SIGINT/SIGTERM set a flag that the consume loop checks between records, so that a record is either
    printed and counted or not at all, and the consumer is always closed (commit, leave the group)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: keep the default behaviour
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


class InterruptsRaise:
    """SIGINT/SIGTERM raise KeyboardInterrupt while active, whatever disposition the process inherited.

    A process started with SIGINT ignored (a background job of a non-interactive shell, `nohup`, some CI
    runners) never gets Python's default handler; `produce` blocks in a stdin read, which only an
    exception raised by a handler interrupts, so it installs its own rather than relying on the default."""

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    def __enter__(self) -> InterruptsRaise:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[sig] = signal.signal(sig, self._raise)
            except ValueError:  # not the main thread: keep the inherited behaviour
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _client(factory: Any, settings: dict[str, Any]) -> Any:
    """Create a Producer/Consumer; a property librdkafka refuses is a usage error naming it."""
    try:
        return factory(settings)
    except Exception as err:  # KafkaException / ValueError from librdkafka's configuration
        fail(f"--property: {describe_exception(err)}", EXIT_USAGE)


def _topic_partitions(client: Any, topic: str, timeout: float) -> int:
    """Partition count of `topic`, failing with one line when it does not exist."""
    try:
        md = client.list_topics(topic, timeout=timeout)
    except Exception as err:
        fail(f"fetching metadata of topic {topic!r}: {describe_exception(err)}")
    tm = md.topics.get(topic)
    if tm is None or (tm.error is not None and not tm.partitions):
        reason = tm.error.str() if tm is not None and tm.error is not None else "unknown topic"
        fail(f"Topic '{topic}' does not exist ({reason})")
    return len(tm.partitions)


# --------------------------------------------------------------------------------------------------
# produce


def _lines(stream: Any) -> Iterator[bytes]:
    """stdin's lines as bytes without their line ending, so values are exactly the bytes given."""
    raw = getattr(stream, "buffer", None)
    for line in raw if raw is not None else (text.encode() for text in stream):
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield line


@handle_errors
def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to.")],
    key_separator: Annotated[
        str | None,
        typer.Option("--key-separator", "-k", help="Split each line into key<SEP>value (e.g. ':' or '\\t')."),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header", "-H", metavar="KEY=VALUE", help="A header added to every record (repeatable)."
        ),
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", min=0, help="Write every record to this partition.")
    ] = None,
    acks: Annotated[str, typer.Option("--acks", help="0, 1 or all (-1).")] = "all",
    compression: Annotated[
        str, typer.Option("--compression", help="none, gzip, snappy, lz4 or zstd.")
    ] = "none",
    linger_ms: Annotated[int, typer.Option("--linger-ms", min=0, help="Batching delay of the producer.")] = 5,
    client_property: ClientProperty = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=0.1, help="Seconds to wait for the broker to acknowledge every record."
        ),
    ] = 30.0,
) -> None:
    """Write stdin lines to TOPIC, one record per line."""
    from confluent_kafka import Producer

    if acks not in _ACKS:
        fail(f"--acks: expected 0, 1, all or -1, got {acks!r}", EXIT_USAGE)
    if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        fail(f"--compression: expected none, gzip, snappy, lz4 or zstd, got {compression!r}", EXIT_USAGE)
    headers = [(k, v.encode()) for k, v in parse_key_values(header, "--header").items()]
    sep = _unescape_separator(key_separator) if key_separator is not None else None
    if sep == "":
        fail("--key-separator: expected a non-empty separator", EXIT_USAGE)
    extra = parse_key_values(client_property, "--property")
    check_reachable(bootstrap_server)
    errors = ClientErrors()
    settings = {
        "acks": _ACKS[acks],
        "compression.type": compression,
        "linger.ms": linger_ms,
        "message.timeout.ms": int(timeout * 1000),
        **extra,
    }
    producer = _client(Producer, client_config(bootstrap_server, errors, **settings))
    count = _topic_partitions(producer, topic, timeout)
    if partition is not None and partition >= count:
        fail(f"--partition: topic {topic} has partitions 0..{count - 1}, got {partition}", EXIT_USAGE)

    failures: list[str] = []
    delivered = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal delivered
        if err is not None:
            failures.append(err.str())
        else:
            delivered += 1

    sep_bytes = sep.encode() if sep is not None else None
    with InterruptsRaise():  # Ctrl-C / SIGTERM: stop reading, deliver what was read
        try:
            for number, line in enumerate(_lines(sys.stdin), 1):
                key: bytes | None = None
                value = line
                if sep_bytes is not None:
                    key, found, value = line.partition(sep_bytes)
                    if not found:
                        producer.flush(timeout)
                        fail(f"line {number}: no key separator {sep!r} in {line.decode(errors='replace')!r}")
                kwargs: dict[str, Any] = {"value": value, "on_delivery": on_delivery}
                if key is not None:
                    kwargs["key"] = key
                if headers:
                    kwargs["headers"] = headers
                if partition is not None:
                    kwargs["partition"] = partition
                while True:
                    try:
                        producer.produce(topic, **kwargs)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain
                        producer.poll(0.1)
                producer.poll(0)
                if failures:
                    break
                fatal = errors.fatal()
                if fatal:
                    fail(f"producing to {topic!r}: {fatal}")
        except KeyboardInterrupt:  # Ctrl-C: stop reading, still deliver what was read (as Kafka's tool does)
            pass
        try:
            remaining = producer.flush(timeout)
        except (KeyboardInterrupt, SystemError):  # Ctrl-C while waiting (librdkafka reports it as SystemError)
            remaining = len(producer)
            if remaining:
                fail(f"producing to {topic!r}: interrupted with {remaining} record(s) not acknowledged", 130)
    if failures:
        fail(f"producing to {topic!r}: {len(failures)} record(s) not acknowledged: {failures[0]}")
    if remaining:
        fail(f"producing to {topic!r}: {remaining} record(s) not acknowledged within {timeout:g} s")
    typer.echo(f"Produced {delivered} record(s) to {topic}.", err=True)


# --------------------------------------------------------------------------------------------------
# consume


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def format_record(
    msg: Any,
    *,
    print_timestamp: bool = False,
    print_partition: bool = False,
    print_offset: bool = False,
    print_headers: bool = False,
    print_key: bool = False,
    separator: str = "\t",
) -> str:
    """One record in kafka-console-consumer.sh's DefaultMessageFormatter layout."""
    parts: list[str] = []
    if print_timestamp:
        kind, ts = msg.timestamp()
        parts.append({1: f"CreateTime:{ts}", 2: f"LogAppendTime:{ts}"}.get(kind, "NO_TIMESTAMP"))
    if print_partition:
        parts.append(f"Partition:{msg.partition()}")
    if print_offset:
        parts.append(f"Offset:{msg.offset()}")
    if print_headers:
        hdrs = msg.headers() or []
        parts.append(",".join(f"{k}:{_text(v)}" for k, v in hdrs) if hdrs else "NO_HEADERS")
    if print_key:
        parts.append(_text(msg.key()))
    parts.append(_text(msg.value()))
    return separator.join(parts)


def _json_record(msg: Any) -> str:
    kind, ts = msg.timestamp()
    return json.dumps(
        {
            "topic": msg.topic(),
            "partition": msg.partition(),
            "offset": msg.offset(),
            "timestamp": ts if kind else None,
            "timestamp_type": {1: "CreateTime", 2: "LogAppendTime"}.get(kind),
            "key": None if msg.key() is None else _text(msg.key()),
            "value": None if msg.value() is None else _text(msg.value()),
            "headers": [[k, None if v is None else _text(v)] for k, v in (msg.headers() or [])],
        }
    )


@handle_errors
def consume(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    from_beginning: Annotated[
        bool,
        typer.Option("--from-beginning", help="Start at the earliest offset (default: the end, as Kafka)."),
    ] = False,
    offset: Annotated[
        int | None, typer.Option("--offset", min=0, help="Start at this offset (needs --partition).")
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", min=0, help="Read only this partition.")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep waiting for new records (until Ctrl-C).")
    ] = False,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", "-n", min=1, help="Exit after this many records.")
    ] = None,
    group: Annotated[
        str | None,
        typer.Option("--group", "-g", help="Consume as a member of this consumer group (commits offsets)."),
    ] = None,
    print_key: Annotated[bool, typer.Option("--print-key", help="Print the key before the value.")] = False,
    print_headers: Annotated[
        bool, typer.Option("--print-headers", help="Print headers (k:v,k2:v2).")
    ] = False,
    print_partition: Annotated[bool, typer.Option("--print-partition", help="Print Partition:<p>.")] = False,
    print_offset: Annotated[bool, typer.Option("--print-offset", help="Print Offset:<o>.")] = False,
    print_timestamp: Annotated[
        bool, typer.Option("--print-timestamp", help="Print CreateTime:<ms>.")
    ] = False,
    separator: Annotated[str, typer.Option("--separator", help="Separator between printed fields.")] = "\\t",
    output_json: Annotated[bool, typer.Option("--json", help="One JSON object per record.")] = False,
    idle_timeout: Annotated[
        float | None,
        typer.Option(
            "--idle-timeout",
            min=0.1,
            help="Exit when no record arrives for this many seconds (default: never with --follow, 15 s "
            "without it, as a bound on waiting for the end).",
        ),
    ] = None,
    client_property: ClientProperty = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Print TOPIC's records to stdout."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

    if offset is not None and partition is None:
        fail("--offset: needs --partition", EXIT_USAGE)
    if offset is not None and group is not None:
        fail("--offset: cannot be combined with --group (the group's committed offsets decide)", EXIT_USAGE)
    sep = _unescape_separator(separator)
    extra = parse_key_values(client_property, "--property")
    check_reachable(bootstrap_server)
    errors = ClientErrors()
    settings: dict[str, Any] = {
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        "enable.auto.commit": group is not None,
        "group.id": group if group is not None else f"kaflite-console-{uuid.uuid4().hex[:12]}",
        **extra,
    }
    consumer = _client(Consumer, client_config(bootstrap_server, errors, **settings))
    received = 0
    with StopRequest() as stop:
        assigned: set[tuple[str, int]] = set()
        at_end: set[tuple[str, int]] = set()
        try:
            count = _topic_partitions(consumer, topic, 15.0)
            if partition is not None and partition >= count:
                fail(f"--partition: topic {topic} has partitions 0..{count - 1}, got {partition}", EXIT_USAGE)
            if group is None:
                start = offset if offset is not None else (OFFSET_BEGINNING if from_beginning else OFFSET_END)
                ids = [partition] if partition is not None else list(range(count))
                consumer.assign([TopicPartition(topic, p, start) for p in ids])
                assigned.update((topic, p) for p in ids)
            else:

                def on_assign(c: Any, tps: list[Any]) -> None:
                    assigned.update((tp.topic, tp.partition) for tp in tps)

                def on_revoke(c: Any, tps: list[Any]) -> None:
                    for tp in tps:
                        assigned.discard((tp.topic, tp.partition))
                        at_end.discard((tp.topic, tp.partition))

                consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

            idle = idle_timeout if idle_timeout is not None else (None if follow else 15.0)
            last_progress = time.monotonic()
            out = sys.stdout
            while (max_messages is None or received < max_messages) and not stop.requested:
                msg = consumer.poll(0.2)
                fatal = errors.fatal()
                if fatal:
                    fail(f"consuming {topic!r}: {fatal}")
                now = time.monotonic()
                if msg is None:
                    if idle is not None and now - last_progress > idle:
                        if follow or idle_timeout is not None:
                            break  # an explicit idle timeout (or --follow with one) ends the run normally
                        fail(
                            f"consuming {topic!r}: did not reach the end of the topic within {idle:g} s "
                            f"({len(at_end)}/{len(assigned)} partitions at the end)"
                        )
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add((str(msg.topic()), msg.partition() or 0))
                        last_progress = now
                        if not follow and assigned and assigned <= at_end:
                            break
                        continue
                    if err.fatal() or not err.retriable():
                        fail(f"consuming {topic!r}: {err.str()}")
                    continue
                last_progress = now
                at_end.discard((str(msg.topic()), msg.partition() or 0))
                line = (
                    _json_record(msg)
                    if output_json
                    else format_record(
                        msg,
                        print_timestamp=print_timestamp,
                        print_partition=print_partition,
                        print_offset=print_offset,
                        print_headers=print_headers,
                        print_key=print_key,
                        separator=sep,
                    )
                )
                try:
                    out.write(line + "\n")
                    if follow:
                        out.flush()
                except BrokenPipeError:  # `kaflite consume ... | head`: the reader is gone, stop quietly
                    break
                received += 1
        finally:
            # close() leaves the group and commits (with --group), so the next member continues from here
            consumer.close()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    typer.echo(f"Processed a total of {received} messages", err=True)
