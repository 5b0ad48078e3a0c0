"""`kaflite dump-log FILE...`: what kafka-dump-log.sh prints for a partition's segment files.

`.log`: one line per batch (baseOffset, lastOffset, count, producer id/epoch, sequences, leader epoch,
isTransactional, isControl, position, timestamp, size, magic, codec, the stored CRC and whether it matches
the batch's bytes); with `--print-data-log` one `| offset: ...` line per record with its key and payload.
Trailing bytes that are not a whole batch are reported as Kafka does. `.index` and `.timeindex`: one line
per entry, with absolute offsets. `.snapshot` (producer state): one line per producer with its last batch.

The files are read, never written (a running broker may own them). Batches are parsed by
`kaflite.protocol.record_batch` (the broker's own reader) and index entries with the storage's own
entry layouts (`OffsetIndex.entry`, `TimeIndex.entry`); there is no second parser here.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from kaflite.cli.common import EXIT_USAGE, fail, handle_errors

__all__ = ["dump_file", "register"]

SUFFIXES = (".log", ".index", ".timeindex", ".snapshot")


def register(app: typer.Typer) -> None:
    app.command("dump-log")(dump_log)


def _base_offset(path: Path) -> int:
    """A segment file is named after its base offset (20 digits); other names count from 0."""
    return int(path.stem) if path.stem.isdigit() else 0


def _text(data: bytes | memoryview | None) -> str:
    return "null" if data is None else bytes(data).decode("utf-8", errors="replace")


def _log_lines(data: memoryview, print_data: bool) -> Iterator[str]:
    from kaflite.protocol.errors import KafkaError
    from kaflite.protocol.record_batch import (
        BATCH_HEADER_SIZE,
        DELETE_HORIZON_MASK,
        LOG_OVERHEAD,
        RecordBatchView,
        decode_records,
    )

    pos = 0
    while pos < len(data):
        try:
            batch = RecordBatchView.parse(data, pos)
        except KafkaError:
            yield f"Found {len(data) - pos} invalid bytes at the end of the file"
            return
        ts_name = "LogAppendTime" if batch.timestamp_type == 1 else "CreateTime"
        horizon = (
            f"OptionalLong[{batch.first_timestamp}]"
            if batch.attributes & DELETE_HORIZON_MASK
            else "OptionalLong.empty"
        )
        valid = batch.crc_ok()
        yield (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {str(batch.is_transactional).lower()} isControl: {str(batch.is_control).lower()} "
            f"deleteHorizonMs: {horizon} position: {pos} {ts_name}: {batch.max_timestamp} "
            f"size: {batch.size} magic: {batch.magic} compresscodec: {batch.compression_type} "
            f"crc: {batch.crc & 0xFFFFFFFF} isvalid: {str(valid).lower()}"
        )
        if print_data:
            try:
                records = decode_records(batch)
            except KafkaError as err:
                yield f"| cannot decode the records of this batch: {err}"
            else:
                for r in records:
                    seq = (
                        batch.base_sequence + (r.offset - batch.base_offset) if batch.base_sequence >= 0 else -1
                    )
                    yield (
                        f"| offset: {r.offset} {ts_name}: {r.timestamp} "
                        f"keySize: {-1 if r.key is None else len(r.key)} "
                        f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {seq} "
                        f"headerKeys: [{','.join(k for k, _ in r.headers)}] "
                        f"key: {_text(r.key)} payload: {_text(r.value)}"
                    )
        pos += batch.batch_length + LOG_OVERHEAD
        if batch.batch_length + LOG_OVERHEAD < BATCH_HEADER_SIZE:  # pragma: no cover - parse() refuses these
            return


def _index_lines(path: Path, data: memoryview) -> Iterator[str]:
    from kaflite.storage.index import OffsetIndex, TimeIndex

    base = _base_offset(path)
    layout = OffsetIndex.entry if path.suffix == ".index" else TimeIndex.entry
    whole = len(data) - len(data) % layout.size
    for first, second in layout.iter_unpack(data[:whole]):
        if path.suffix == ".index":
            if first == 0 and second == 0 and whole > layout.size:
                # Kafka preallocates index files; zeroed entries past the first are unused space
                continue
            yield f"offset: {base + first} position: {second}"
        else:
            if first == 0 and second == 0:
                continue
            yield f"timestamp: {first} offset: {base + second}"
    if whole != len(data):
        yield f"Found {len(data) - whole} invalid bytes at the end of the file (not a whole entry)"


def _snapshot_lines(path: Path) -> Iterator[str]:
    """A producer-state snapshot: one line per producer with its last batch, in kafka-dump-log.sh's words
    (kaflite writes the snapshot as JSON, read with the storage's own `ProducerStateManager.from_json`)."""
    from kaflite.storage.producer_state import ProducerStateManager

    try:
        state = ProducerStateManager.from_json(path.read_text())
    except (ValueError, TypeError) as err:
        yield f"Not a kaflite producer snapshot: {err}"
        return
    for entry in sorted(state.producers.values(), key=lambda e: e.producer_id):
        if not entry.batches:
            continue
        last = entry.batches[-1]
        yield (
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} coordinatorEpoch: -1 "
            f"currentTxnFirstOffset: Optional.empty lastTimestamp: {last.timestamp} "
            f"firstSequence: {last.first_seq} lastSequence: {last.last_seq} lastOffset: {last.last_offset} "
            f"offsetDelta: {last.last_offset - last.first_offset} timestamp: {last.timestamp}"
        )


def dump_file(path: Path, print_data_log: bool = False) -> Iterator[str]:
    """kafka-dump-log.sh's lines for one segment file (raises OSError when it cannot be read)."""
    yield f"Dumping {path}"
    if path.suffix == ".snapshot":
        yield from _snapshot_lines(path)
        return
    with path.open("rb") as fh:
        size = path.stat().st_size
        # mapped, not read: a segment may be a GiB; the map lives as long as the views into it
        data = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)) if size else memoryview(b"")
    if path.suffix == ".log":
        yield f"Log starting offset: {_base_offset(path)}"
        yield from _log_lines(data, print_data_log)
    else:
        yield from _index_lines(path, data)


@handle_errors
def dump_log(
    files: Annotated[list[Path], typer.Argument(metavar="FILE...", help="Segment files: .log, .index, .timeindex.")],
    print_data_log: Annotated[
        bool, typer.Option("--print-data-log", help="Also print every record (offset, key, payload).")
    ] = False,
) -> None:
    """Print the batches (offsets, producer ids, CRC check, ...) of segment files, as kafka-dump-log.sh."""
    bad = [str(f) for f in files if f.suffix not in SUFFIXES]
    if bad:
        fail(f"{', '.join(bad)}: not a segment file; allowed: {', '.join('*' + s for s in SUFFIXES)}", EXIT_USAGE)
    for f in files:
        try:
            for line in dump_file(f, print_data_log):
                typer.echo(line)
        except OSError as err:
            fail(f"{f}: {err.strerror or err}")
