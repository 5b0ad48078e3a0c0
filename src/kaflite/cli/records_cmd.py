"""`kaflite delete-records`: move partitions' log start offsets forward, as kafka-delete-records.sh.

Either Kafka's JSON file (`--offset-json-file`):

    {"partitions": [{"topic": "orders", "partition": 0, "offset": 3}], "version": 1}

or one partition on the command line (`--topic T --partition P --offset O`). Offset -1 means the high
watermark (delete everything), as in Kafka. Goes through DeleteRecords (confluent-kafka's AdminClient), so
it works against any Kafka cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_USAGE,
    Bootstrap,
    admin_client,
    describe_exception,
    fail,
    handle_errors,
)

__all__ = ["parse_offset_json", "register"]


def register(app: typer.Typer) -> None:
    app.command("delete-records")(delete_records)


def parse_offset_json(text: str, source: str) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) triples from kafka-delete-records.sh's JSON; usage errors name the field."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        fail(f"{source}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno})", EXIT_USAGE)
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list) or not parts:
        fail(
            f'{source}: expected {{"partitions": [{{"topic": T, "partition": P, "offset": O}}, ...], '
            '"version": 1}',
            EXIT_USAGE,
        )
    if isinstance(doc, dict) and doc.get("version", 1) != 1:
        fail(f"{source}: version {doc.get('version')!r} is not supported; allowed: 1", EXIT_USAGE)
    out: list[tuple[str, int, int]] = []
    for i, p in enumerate(parts):
        ok = (
            isinstance(p, dict)
            and isinstance(p.get("topic"), str)
            and p["topic"]
            and isinstance(p.get("partition"), int)
            and p["partition"] >= 0
            and isinstance(p.get("offset"), int)
            and p["offset"] >= -1
        )
        if not ok:
            fail(
                f"{source}: partitions[{i}]: expected a topic name, a partition >= 0 and an offset >= -1 "
                f"(-1 = the high watermark), got {json.dumps(p)}",
                EXIT_USAGE,
            )
        out.append((p["topic"], p["partition"], p["offset"]))
    seen: set[tuple[str, int]] = set()
    for t, p, _ in out:
        if (t, p) in seen:
            fail(f"{source}: partition {t}-{p} is listed twice", EXIT_USAGE)
        seen.add((t, p))
    return out


@handle_errors
def delete_records(
    offset_json_file: Annotated[
        Path | None,
        typer.Option("--offset-json-file", help="Kafka's JSON: {\"partitions\": [{topic, partition, offset}], \"version\": 1}."),
    ] = None,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="With --partition and --offset.")] = None,
    partition: Annotated[int | None, typer.Option("--partition", "-p", min=0, help="The partition.")] = None,
    offset: Annotated[
        int | None,
        typer.Option("--offset", "-o", min=-1, help="Delete the records before this offset (-1: all of them)."),
    ] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds to wait for the broker.")] = 15.0,
) -> None:
    """Delete the records before an offset (the log start offset moves there), as kafka-delete-records.sh."""
    from confluent_kafka import TopicPartition

    simple = (topic, partition, offset)
    if offset_json_file is not None:
        if any(v is not None for v in simple):
            fail("give either --offset-json-file or --topic/--partition/--offset, not both", EXIT_USAGE)
        try:
            text = offset_json_file.read_text()
        except OSError as err:
            fail(f"--offset-json-file: cannot read {offset_json_file}: {err.strerror or err}", EXIT_USAGE)
        targets = parse_offset_json(text, str(offset_json_file))
    else:
        if topic is None or partition is None or offset is None:
            fail(
                "give --offset-json-file FILE, or all of --topic T --partition P --offset O "
                "(missing: " + ", ".join(n for n, v in zip(("--topic", "--partition", "--offset"), simple, strict=True)
                                         if v is None) + ")",
                EXIT_USAGE,
            )
        targets = [(topic, partition, offset)]
    admin = admin_client(bootstrap_server)
    metadata = admin.list_topics(timeout=timeout).topics
    for t, p, _ in targets:
        md = metadata.get(t)
        if md is None or (md.error is not None and not md.partitions):
            fail(f"Topic '{t}' does not exist as expected")
        if p not in md.partitions:
            fail(f"partition {t}-{p} does not exist; {t} has partitions 0..{len(md.partitions) - 1}")
    typer.echo("Executing records delete operation")
    futures: dict[Any, Any] = admin.delete_records(
        [TopicPartition(t, p, o) for t, p, o in targets], request_timeout=timeout
    )
    results: dict[tuple[str, int], str] = {}
    failed = 0
    for tp, future in futures.items():
        try:
            res = future.result(timeout=timeout + 1)
            results[(tp.topic, tp.partition)] = f"low_watermark: {res.low_watermark}"
        except Exception as err:
            failed += 1
            results[(tp.topic, tp.partition)] = f"error: {describe_exception(err)}"
    typer.echo("Records delete operation completed:")
    for (t, p), text in sorted(results.items()):
        typer.echo(f"partition: {t}-{p}\t{text}")
    if failed:
        fail(f"deleting records failed for {failed} of {len(targets)} partition(s)", EXIT_FAILURE)
