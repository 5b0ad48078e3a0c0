"""Records as the message browser shows and exports them (pure).

Rules:
- a body is shown as text (UTF-8, invalid bytes replaced), JSON (pretty-printed when it parses, else
  text), or hex; `auto` picks JSON when it parses, text when it decodes, hex otherwise;
- with hidden values, bodies and header values are never shown nor exported, only their size;
- a search matches when the needle (UTF-8) occurs in the key, the value, or a header name or value;
  a key search is an exact key match (the key decides the partition, see `kaflite.assign`);
- exports hold what the page shows (the rows after search), in JSON, CSV or Parquet; bytes are written
  as the chosen display text, except in Parquet where key and value stay binary.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = ["Record", "FORMATS", "show", "matches", "export", "EXPORTS", "parse_time"]

FORMATS = ("auto", "text", "json", "hex")
EXPORTS = ("json", "csv", "parquet")


@dataclass(slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)

    @property
    def time_iso(self) -> str:
        return datetime.fromtimestamp(self.timestamp / 1000, UTC).isoformat(timespec="milliseconds")


def show(data: bytes | None, fmt: str, hidden: bool = False) -> str:
    if data is None:
        return "(null)"
    if hidden:
        return f"(hidden, {len(data)} bytes)"
    if fmt == "hex":
        return data.hex(" ")
    if fmt in ("json", "auto"):
        try:
            return json.dumps(json.loads(data), indent=2, ensure_ascii=False) if fmt == "json" else \
                json.dumps(json.loads(data), ensure_ascii=False)
        except (ValueError, UnicodeDecodeError):
            if fmt == "auto":
                try:
                    return data.decode("utf-8")
                except UnicodeDecodeError:
                    return data.hex(" ")
    return data.decode("utf-8", "replace")


def matches(r: Record, needle: bytes, where: str, hidden: bool = False) -> bool:
    """where: key (exact), value / header (substring), any (substring anywhere)."""
    if where == "key":
        return r.key == needle
    in_value = not hidden and r.value is not None and needle in r.value
    in_header = any(needle in h.encode() or (not hidden and v is not None and needle in v) for h, v in r.headers)
    if where == "value":
        return in_value
    if where == "header":
        return in_header
    return in_value or in_header or (r.key is not None and needle in r.key)


def parse_time(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time (UTC when no zone is given) -> epoch milliseconds."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"timestamp: expected epoch milliseconds or ISO-8601 (2026-01-31T12:00:00), got {text!r}"
                         ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _row(r: Record, fmt: str, hidden: bool) -> dict[str, object]:
    return {"topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
            "key": None if r.key is None else show(r.key, fmt),
            "value": None if r.value is None else show(r.value, fmt, hidden),
            "headers": {h: (None if v is None else show(v, fmt, hidden)) for h, v in r.headers}}


def export(records: list[Record], kind: str, fmt: str = "text", hidden: bool = False) -> tuple[bytes, str]:
    """(body, media type) of the shown records as JSON, CSV or Parquet."""
    if kind == "json":
        return (json.dumps([_row(r, fmt, hidden) for r in records], indent=2, ensure_ascii=False).encode(),
                "application/json")
    if kind == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["topic", "partition", "offset", "timestamp", "key", "value", "headers"])
        for r in records:
            row = _row(r, fmt, hidden)
            w.writerow([r.topic, r.partition, r.offset, r.timestamp, row["key"] or "", row["value"] or "",
                        json.dumps(row["headers"], ensure_ascii=False) if r.headers else ""])
        return buf.getvalue().encode(), "text/csv"
    if kind == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ValueError("Parquet export needs pyarrow (pip install 'kaflite[console]')") from None
        table = pa.table({
            "topic": pa.array([r.topic for r in records], pa.string()),
            "partition": pa.array([r.partition for r in records], pa.int32()),
            "offset": pa.array([r.offset for r in records], pa.int64()),
            "timestamp": pa.array([r.timestamp for r in records], pa.timestamp("ms", tz="UTC")),
            "key": pa.array([r.key for r in records], pa.binary()),
            "value": pa.array([None if hidden else r.value for r in records], pa.binary()),
            "headers": pa.array([[(h, None if hidden else v) for h, v in r.headers] for r in records],
                                pa.map_(pa.string(), pa.binary())),
        })
        out = io.BytesIO()
        pq.write_table(table, out)
        return out.getvalue(), "application/vnd.apache.parquet"
    raise ValueError(f"export: unknown format {kind!r}; allowed: {', '.join(EXPORTS)}")
