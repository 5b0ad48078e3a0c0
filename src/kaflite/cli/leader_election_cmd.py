"""`kaflite leader-election`: kafka-leader-election.sh through ElectLeaders (API 43).

Rules (Kafka's LeaderElectionCommand):
- exactly one way to name partitions: `--topic T --partition P`, `--all-topic-partitions`, or
  `--path-to-json-file F` with `{"partitions": [{"topic": "t", "partition": 0}, ...]}`;
- `--election-type` is PREFERRED or UNCLEAN (any case);
- the answer is printed in Kafka's three lines: the partitions elected, those whose valid replica already
  leads (ELECTION_NOT_NEEDED), and one line per partition that failed; any failure exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    Bootstrap,
    admin_client,
    admin_result,
    describe_exception,
    fail,
    handle_errors,
)

__all__ = ["parse_partitions_json", "register"]


def register(app: typer.Typer) -> None:
    app.command("leader-election")(leader_election)


def parse_partitions_json(text: str, source: str) -> list[tuple[str, int]]:
    """The partitions of kafka-leader-election.sh's JSON file, in order, without repeats."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        fail(f"--path-to-json-file {source}: not JSON ({err.msg} at line {err.lineno} column {err.colno})", EXIT_USAGE)
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        fail(f'--path-to-json-file {source}: expected {{"partitions": [{{"topic": ..., "partition": ...}}]}}',
             EXIT_USAGE)
    out: list[tuple[str, int]] = []
    for i, e in enumerate(entries):
        topic = e.get("topic") if isinstance(e, dict) else None
        partition = e.get("partition") if isinstance(e, dict) else None
        if not isinstance(topic, str) or not topic or isinstance(partition, bool) or not isinstance(partition, int) \
                or partition < 0:
            fail(f"--path-to-json-file {source}: partitions[{i}] needs a topic (string) and a partition "
                 f"(integer >= 0), got {json.dumps(e)}", EXIT_USAGE)
        if (topic, partition) in out:
            fail(f"--path-to-json-file {source}: duplicate partition {topic}-{partition}", EXIT_USAGE)
        out.append((topic, partition))
    if not out:
        fail(f"--path-to-json-file {source}: the partition list is empty", EXIT_USAGE)
    return out


@handle_errors
def leader_election(
    election_type: Annotated[
        str, typer.Option("--election-type", help="PREFERRED or UNCLEAN.", show_default=False)
    ] = "",
    topic: Annotated[str | None, typer.Option("--topic", help="The topic (with --partition).")] = None,
    partition: Annotated[int | None, typer.Option("--partition", min=0, help="The partition (with --topic).")] = None,
    all_topic_partitions: Annotated[
        bool, typer.Option("--all-topic-partitions", help="Every partition of every topic.")
    ] = False,
    path_to_json_file: Annotated[
        Path | None,
        typer.Option("--path-to-json-file", dir_okay=False, help='JSON: {"partitions": [{"topic": t, "partition": p}]}.'),
    ] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds to wait for the answer.")] = 30.0,
) -> None:
    """Elect the preferred (or, unclean, any live) replica as leader (kafka-leader-election.sh)."""
    from confluent_kafka import ElectionType, TopicPartition

    kinds = {"PREFERRED": ElectionType.PREFERRED, "UNCLEAN": ElectionType.UNCLEAN}
    if not election_type:
        fail("missing --election-type (allowed: PREFERRED, UNCLEAN)", EXIT_USAGE)
    kind = kinds.get(election_type.upper())
    if kind is None:
        fail(f"--election-type: expected PREFERRED or UNCLEAN, got {election_type!r}", EXIT_USAGE)
    ways = sum([topic is not None or partition is not None, all_topic_partitions, path_to_json_file is not None])
    if ways != 1:
        fail("give exactly one of --topic with --partition, --all-topic-partitions, --path-to-json-file",
             EXIT_USAGE)
    partitions: list[tuple[str, int]] | None
    if topic is not None or partition is not None:
        if topic is None or partition is None:
            fail("--topic and --partition go together", EXIT_USAGE)
        partitions = [(topic, partition)]
    elif path_to_json_file is not None:
        try:
            text = path_to_json_file.read_text()
        except OSError as err:
            fail(f"--path-to-json-file: cannot read {path_to_json_file}: {err.strerror or err}", EXIT_USAGE)
        partitions = parse_partitions_json(text, str(path_to_json_file))
    else:
        partitions = None
    name = election_type.upper()
    admin = admin_client(bootstrap_server)
    tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    # confluent-kafka 2.16 refuses elect_leaders' own request_timeout / operation_timeout keywords
    # (a bug in its argument parsing): the wait is bounded by the future instead
    results: dict[Any, Any] = admin_result(admin.elect_leaders(kind, tps), timeout, "electing leaders")
    elected, noop, failed = [], [], []
    for tp in sorted(results, key=lambda tp: (tp.topic, tp.partition)):
        outcome = results[tp]
        label = f"{tp.topic}-{tp.partition}"
        if outcome is None:
            elected.append(label)
            continue
        # a KafkaError (confluent-kafka 2.16) or a KafkaException wrapping one
        inner = outcome.args[0] if isinstance(outcome, BaseException) and outcome.args else outcome
        if hasattr(inner, "name") and inner.name() == "ELECTION_NOT_NEEDED":
            noop.append(label)
        elif hasattr(inner, "str") and hasattr(inner, "name"):
            failed.append((label, f"{inner.str()} ({inner.name()})"))
        else:
            failed.append((label, describe_exception(outcome)))
    if elected:
        typer.echo(f"Successfully completed leader election ({name}) for partitions {', '.join(elected)}")
    if noop:
        typer.echo(f"Valid replica already elected for partitions {', '.join(noop)}")
    if not results and partitions is None:
        typer.echo(f"No partition needed a leader election ({name})")
    for label, reason in failed:
        typer.echo(f"Error completing leader election ({name}) for partition: {label}: {reason}")
    if failed:
        fail(f"{len(failed)} replica(s) could not be elected")
