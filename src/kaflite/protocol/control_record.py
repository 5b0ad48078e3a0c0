"""Control records: the transaction markers (Kafka's EndTransactionMarker / ControlRecordType).

A marker is a record batch with the control and transactional attribute bits set, the producer id and
epoch of the transaction it ends, base sequence -1, and exactly one record whose
- key   = version int16 (0) + type int16 (0 ABORT, 1 COMMIT), and whose
- value = version int16 (0) + coordinator epoch int32.
Readers skip control batches (a client never hands them to the application); read_committed consumers
use them, with the aborted-transaction list of a fetch, to drop aborted records.
"""

from __future__ import annotations

import struct

from kaflite.protocol.record_batch import (
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    RecordBatchView,
    decode_records,
    encode_batch,
)

__all__ = ["ABORT", "COMMIT", "ControlMarker", "build_marker_batch", "parse_marker"]

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0


class ControlMarker:
    __slots__ = ("type", "coordinator_epoch")

    def __init__(self, type: int, coordinator_epoch: int) -> None:  # noqa: A002 - Kafka's name
        self.type = type
        self.coordinator_epoch = coordinator_epoch

    @property
    def is_commit(self) -> bool:
        return self.type == COMMIT


def build_marker_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int,
    base_offset: int = 0, partition_leader_epoch: int = -1,
) -> bytes:
    key = _KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)
    return encode_batch(
        [(0, 0, key, value, ())],
        base_offset=base_offset,
        first_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        attributes=CONTROL_MASK | TRANSACTIONAL_MASK,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_marker(view: RecordBatchView) -> ControlMarker | None:
    """The marker a control batch carries; None when it is not a transaction marker (another control
    type, or a malformed record: Kafka ignores unknown control types)."""
    if not view.is_control:
        return None
    records = decode_records(view)
    if len(records) != 1:
        return None
    rec = records[0]
    if rec.key is None or len(rec.key) < 4:
        return None
    _version, ctype = _KEY.unpack_from(rec.key, 0)
    if ctype not in (ABORT, COMMIT):
        return None
    epoch = -1
    if rec.value is not None and len(rec.value) >= 6:
        epoch = _VALUE.unpack_from(rec.value, 0)[1]
    return ControlMarker(ctype, epoch)
