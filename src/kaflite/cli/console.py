"""`kaflite produce` and `kaflite consume`: console producer and consumer through confluent-kafka.

produce: one record per stdin line; `--key-separator` splits `key<SEP>value`, `--header K=V` adds headers,
`--partition` pins a partition, `--acks` chooses 0 / 1 / all. Exits 1 if any record is not acknowledged.

consume: like kafka-console-consumer.sh it waits for new records until Ctrl-C, `--max-messages` or
`--timeout-ms`; with `-e` / `--exit-at-end` (kcat) it reads up to the end of every partition (as it was
when the consumer got there, librdkafka's "partition EOF") and exits. `--offset` takes Kafka's
earliest|latest|N and kcat/rpk's -N (last N), +N, s@ts / @ts. Without `--group` it assigns the partitions
itself (no group, no commits); with `--group` it subscribes and commits like kafka-console-consumer.sh.
Kafka's spellings sit beside ours: `--topic`, `--property print.key=true` and the other formatter
properties, `--consumer-property` / `--producer-property` (= `-X`, librdkafka's keys). The text
format is Kafka's DefaultMessageFormatter: optional `CreateTime:<ms>`, `Partition:<p>`, `Offset:<o>`,
headers (`k:v,k2:v2` or `NO_HEADERS`), key, then the value, separated by `--separator` (a tab).
"""

from __future__ import annotations

import datetime
import json
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
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
    one_topic,
    parse_key_values,
)

__all__ = ["StartOffset", "format_record", "parse_offset", "register"]

TopicOption = Annotated[
    str | None, typer.Option("--topic", "-t", help="The topic (kafka-console-*.sh / kcat spelling).")
]
ToolProperty = Annotated[
    list[str] | None,
    typer.Option(
        "--property",
        metavar="KEY=VALUE",
        help="A property of Kafka's console tool (repeatable; see the command's help); any other key is "
        "passed to librdkafka.",
    ),
]
ClientProperty = Annotated[
    list[str] | None,
    typer.Option(
        "--client-property",
        "-X",
        metavar="KEY=VALUE",
        help="A librdkafka client property (repeatable), e.g. -X enable.idempotence=true (also spelled "
        "--producer-property / --consumer-property).",
    ),
]
_ACKS = {"0": "0", "1": "1", "all": "all", "-1": "all"}


def register(app: typer.Typer) -> None:
    app.command("produce")(produce)
    app.command("consume")(consume)


def _true(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        fail(f"--property {key}: expected true or false, got {value!r}", EXIT_USAGE)
    return value.lower() == "true"


def split_properties(pairs: dict[str, str], tool_keys: frozenset[str]) -> tuple[dict[str, str], dict[str, str]]:
    """--property KEY=VALUE pairs split into the console tool's own keys and librdkafka's."""
    tool = {k: v for k, v in pairs.items() if k in tool_keys}
    return tool, {k: v for k, v in pairs.items() if k not in tool_keys}


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
        fail(f"-X/--property: {describe_exception(err)}", EXIT_USAGE)


def _topic_exists(client: Any, topic: str, timeout: float) -> bool | None:
    """Whether `topic` exists, from a Metadata request for every topic (which creates none); None when
    that request fails (the produce path reports the failure itself)."""
    try:
        return topic in client.list_topics(timeout=timeout).topics
    except Exception:  # noqa: BLE001 - only for the note
        return None


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


# kafka-console-producer.sh's LineMessageReader properties this command understands.
PRODUCER_TOOL_KEYS = frozenset({"parse.key", "key.separator"})


@handle_errors
def produce(
    topic_arg: Annotated[str | None, typer.Argument(metavar="TOPIC", help="Topic to write to.")] = None,
    topic_opt: TopicOption = None,
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
    tool_property: ToolProperty = None,
    client_property: ClientProperty = None,
    producer_property: Annotated[
        list[str] | None,
        typer.Option("--producer-property", metavar="KEY=VALUE", help="Same as -X.", hidden=True),
    ] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=0.1, help="Seconds to wait for the broker to acknowledge every record."
        ),
    ] = 30.0,
) -> None:
    """Write stdin lines to TOPIC, one record per line.

    Kafka's spelling works too: --topic T, --property parse.key=true --property key.separator=: (the
    separator defaults to a tab with parse.key, as kafka-console-producer.sh)."""
    from confluent_kafka import Producer

    topic = one_topic(topic_arg, topic_opt)
    tool, librdkafka = split_properties(parse_key_values(tool_property, "--property"), PRODUCER_TOOL_KEYS)
    if "parse.key" in tool and _true("parse.key", tool["parse.key"]) and key_separator is None:
        key_separator = tool.get("key.separator", "\t")
    elif "key.separator" in tool and "parse.key" not in tool:
        fail("--property key.separator: needs --property parse.key=true", EXIT_USAGE)
    if acks not in _ACKS:
        fail(f"--acks: expected 0, 1, all or -1, got {acks!r}", EXIT_USAGE)
    if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        fail(f"--compression: expected none, gzip, snappy, lz4 or zstd, got {compression!r}", EXIT_USAGE)
    headers = [(k, v.encode()) for k, v in parse_key_values(header, "--header").items()]
    sep = _unescape_separator(key_separator) if key_separator is not None else None
    if sep == "":
        fail("--key-separator: expected a non-empty separator", EXIT_USAGE)
    extra = {
        **librdkafka,
        **parse_key_values(client_property, "-X"),
        **parse_key_values(producer_property, "--producer-property"),
    }
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
    existed = _topic_exists(producer, topic, timeout)
    count = _topic_partitions(producer, topic, timeout)  # (a Metadata for the topic: auto-creates it)
    if existed is False:
        typer.echo(f"note: topic {topic!r} did not exist; the broker created it with {count} partition(s) "
                   "(auto.create.topics.enable)", err=True)
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


def _text(data: bytes | None, null: str = "null") -> str:
    return null if data is None else data.decode("utf-8", errors="replace")


def format_record(
    msg: Any,
    *,
    print_timestamp: bool = False,
    print_partition: bool = False,
    print_offset: bool = False,
    print_headers: bool = False,
    print_key: bool = False,
    print_value: bool = True,
    separator: str = "\t",
    headers_separator: str = ",",
    null_literal: str = "null",
) -> str:
    """One record in kafka-console-consumer.sh's DefaultMessageFormatter layout (without the line end)."""
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
        parts.append(
            headers_separator.join(f"{k}:{_text(v, null_literal)}" for k, v in hdrs) if hdrs else "NO_HEADERS"
        )
    if print_key:
        parts.append(_text(msg.key(), null_literal))
    if print_value:
        parts.append(_text(msg.value(), null_literal))
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


@dataclass(frozen=True)
class StartOffset:
    """Where `consume` starts in each partition it reads.

    kind: earliest | latest | absolute (offset `value`) | from-start (`value` past the log start, rpk +N)
    | tail (the last `value` records, kcat/rpk -N) | timestamp (first record at or after `value` ms)."""

    kind: str
    value: int = 0


OFFSET_HELP = (
    "earliest (beginning, start, oldest), latest (end, newest), N (that offset), -N (the last N records "
    "of each partition), +N (N past the log start), s@MS or @MS (the first record at or after that time, "
    "ms since the epoch, or @YYYY-MM-DD[THH:MM:SS] in UTC)"
)


def parse_offset(text: str) -> StartOffset:
    """`--offset`'s value: Kafka's earliest|latest|N and kcat/rpk's -N, +N, s@ts, @ts."""
    t = text.strip().lower()
    if t in ("earliest", "beginning", "start", "oldest"):
        return StartOffset("earliest")
    if t in ("latest", "end", "newest"):
        return StartOffset("latest")
    if t.isdigit():
        return StartOffset("absolute", int(t))
    if t[:1] in "+-" and t[1:].isdigit():
        return StartOffset("from-start" if t[0] == "+" else "tail", int(t[1:]))
    if t.startswith(("s@", "@")):
        stamp = t.split("@", 1)[1]
        if stamp.isdigit():
            return StartOffset("timestamp", int(stamp))
        try:
            when = datetime.datetime.fromisoformat(stamp.upper())
        except ValueError:
            pass
        else:
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.UTC)
            return StartOffset("timestamp", int(when.timestamp() * 1000))
    fail(f"--offset: expected {OFFSET_HELP}; got {text!r}", EXIT_USAGE)


def _start_offsets(consumer: Any, topic: str, ids: list[int], start: StartOffset, timeout: float) -> list[Any]:
    """TopicPartitions positioned at `start` (watermarks / offsets-for-times asked where needed)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    if start.kind == "earliest":
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in ids]
    if start.kind == "latest":
        return [TopicPartition(topic, p, OFFSET_END) for p in ids]
    if start.kind == "absolute":
        return [TopicPartition(topic, p, start.value) for p in ids]
    if start.kind == "timestamp":
        try:
            found = consumer.offsets_for_times([TopicPartition(topic, p, start.value) for p in ids], timeout)
        except Exception as err:
            fail(f"--offset: looking up offsets by time in {topic!r}: {describe_exception(err)}")
        # no record at or after the time: start at the end, as Kafka's ListOffsets answers (-1)
        return [TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END) for tp in found]
    out = []
    for p in ids:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
        except Exception as err:
            fail(f"--offset: reading the offsets of {topic}-{p}: {describe_exception(err)}")
        wanted = high - start.value if start.kind == "tail" else low + start.value
        out.append(TopicPartition(topic, p, min(max(wanted, low), high)))
    return out


# kafka-console-consumer.sh's DefaultMessageFormatter properties (--property KEY=VALUE).
FORMATTER_KEYS = frozenset(
    {
        "print.timestamp",
        "print.partition",
        "print.offset",
        "print.headers",
        "print.key",
        "print.value",
        "key.separator",
        "line.separator",
        "headers.separator",
        "null.literal",
    }
)


def _warn_without_coordinator(bootstrap: str) -> None:
    """A group with no possible coordinator gets nothing, silently (librdkafka retries forever): say why."""
    from confluent_kafka.admin import AdminClient

    from kaflite.cli.coordinator_check import coordinator_problem

    why = coordinator_problem(AdminClient(client_config(bootstrap)), 5.0)
    if why is not None:
        typer.echo(f"warning: {why}; the consumer waits until it is available", err=True)


@handle_errors
def consume(
    topic_arg: Annotated[str | None, typer.Argument(metavar="TOPIC", help="Topic to read.")] = None,
    topic_opt: TopicOption = None,
    from_beginning: Annotated[
        bool,
        typer.Option("--from-beginning", help="Start at the earliest offset (default: the end, as Kafka)."),
    ] = False,
    offset: Annotated[str | None, typer.Option("--offset", "-o", help=f"Where to start: {OFFSET_HELP}.")] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", min=0, help="Read only this partition.")
    ] = None,
    exit_at_end: Annotated[
        bool,
        typer.Option(
            "--exit-at-end", "-e", help="Exit once the end of every partition is reached (kcat -e)."
        ),
    ] = False,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep waiting for new records (the default).")
    ] = False,
    max_messages: Annotated[
        int | None,
        typer.Option("--max-messages", "-n", "-c", min=1, help="Exit after this many records."),
    ] = None,
    timeout_ms: Annotated[
        int | None,
        typer.Option("--timeout-ms", min=1, help="Exit when no record arrives for this many ms (Kafka's)."),
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
    separator: Annotated[
        str | None, typer.Option("--separator", help="Separator between printed fields (default: a tab).")
    ] = None,
    output_json: Annotated[bool, typer.Option("--json", help="One JSON object per record.")] = False,
    idle_timeout: Annotated[
        float | None,
        typer.Option(
            "--idle-timeout",
            min=0.1,
            help="Exit when no record arrives for this many seconds (with -e, the default is 15 s, as a "
            "bound on waiting for the end).",
        ),
    ] = None,
    tool_property: ToolProperty = None,
    client_property: ClientProperty = None,
    consumer_property: Annotated[
        list[str] | None,
        typer.Option("--consumer-property", metavar="KEY=VALUE", help="Same as -X.", hidden=True),
    ] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Print TOPIC's records to stdout, waiting for new ones (like kafka-console-consumer.sh) until Ctrl-C,
    --max-messages, --timeout-ms, or the end of the topic with -e.

    --property takes kafka-console-consumer.sh's formatter keys: print.key, print.value, print.timestamp,
    print.partition, print.offset, print.headers (true/false), key.separator, line.separator,
    headers.separator, null.literal; any other key goes to librdkafka."""
    from confluent_kafka import Consumer, KafkaError

    topic = one_topic(topic_arg, topic_opt)
    if follow and exit_at_end:
        fail("--follow and --exit-at-end contradict each other; give one", EXIT_USAGE)
    if offset is not None and from_beginning:
        fail("--offset and --from-beginning: give one (--from-beginning = --offset earliest)", EXIT_USAGE)
    if (offset is not None or partition is not None) and group is not None:
        fail(
            "--offset/--partition cannot be combined with --group (the group's committed offsets and its "
            "assignment decide), as kafka-console-consumer.sh",
            EXIT_USAGE,
        )
    if timeout_ms is not None and idle_timeout is not None:
        fail("--timeout-ms and --idle-timeout: give one", EXIT_USAGE)
    start = parse_offset(offset) if offset is not None else StartOffset("earliest" if from_beginning else "latest")
    tool, librdkafka = split_properties(parse_key_values(tool_property, "--property"), FORMATTER_KEYS)
    flags = {
        "print.timestamp": print_timestamp,
        "print.partition": print_partition,
        "print.offset": print_offset,
        "print.headers": print_headers,
        "print.key": print_key,
        "print.value": True,
    }
    for key in flags:
        if key in tool:
            flags[key] = _true(key, tool[key])
    sep = _unescape_separator(separator if separator is not None else tool.get("key.separator", "\\t"))
    line_end = _unescape_separator(tool.get("line.separator", "\\n"))
    headers_sep = _unescape_separator(tool.get("headers.separator", ","))
    null_literal = tool.get("null.literal", "null")
    extra = {
        **librdkafka,
        **parse_key_values(client_property, "-X"),
        **parse_key_values(consumer_property, "--consumer-property"),
    }
    check_reachable(bootstrap_server)
    if group is not None:
        _warn_without_coordinator(bootstrap_server)
    errors = ClientErrors()
    settings: dict[str, Any] = {
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest" if start.kind == "earliest" else "latest",
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
                ids = [partition] if partition is not None else list(range(count))
                consumer.assign(_start_offsets(consumer, topic, ids, start, 15.0))
                assigned.update((topic, p) for p in ids)
            else:

                def on_assign(c: Any, tps: list[Any]) -> None:
                    assigned.update((tp.topic, tp.partition) for tp in tps)

                def on_revoke(c: Any, tps: list[Any]) -> None:
                    for tp in tps:
                        assigned.discard((tp.topic, tp.partition))
                        at_end.discard((tp.topic, tp.partition))

                consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

            if timeout_ms is not None:
                idle: float | None = timeout_ms / 1000
            else:
                idle = idle_timeout if idle_timeout is not None else (15.0 if exit_at_end else None)
            last_progress = last_flush = time.monotonic()
            unflushed = False
            out = sys.stdout
            while (max_messages is None or received < max_messages) and not stop.requested:
                msg = consumer.poll(0.2)
                fatal = errors.fatal()
                if fatal:
                    fail(f"consuming {topic!r}: {fatal}")
                now = time.monotonic()
                if unflushed and (msg is None or now - last_flush > 0.2):
                    # a reader of a waiting consumer sees records within 0.2 s, without one write per record
                    try:
                        out.flush()
                    except BrokenPipeError:
                        break
                    unflushed, last_flush = False, now
                if msg is None:
                    if idle is not None and now - last_progress > idle:
                        if not exit_at_end or idle_timeout is not None or timeout_ms is not None:
                            break  # an explicit idle timeout ends the run normally (Kafka's --timeout-ms)
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
                        if exit_at_end and assigned and assigned <= at_end:
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
                        print_timestamp=flags["print.timestamp"],
                        print_partition=flags["print.partition"],
                        print_offset=flags["print.offset"],
                        print_headers=flags["print.headers"],
                        print_key=flags["print.key"],
                        print_value=flags["print.value"],
                        separator=sep,
                        headers_separator=headers_sep,
                        null_literal=null_literal,
                    )
                )
                try:
                    out.write(line + ("\n" if output_json else line_end))
                    unflushed = True
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
