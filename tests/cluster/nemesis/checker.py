"""The nemesis's checker, run after every fault is healed. Each check returns violations (strings; empty
when it holds):

- `check_data`: every acknowledged record of both data topics is present exactly once, and each key's
  records are in the order its producer sent them (strictly increasing sequence numbers by offset). With
  unclean election enabled, acknowledged records missing from the min.insync 1 topic are reported as
  expected losses (Kafka's documented price of unclean election), not as violations;
- `check_transactions`: read_committed shows no record of an aborted transaction, every committed
  transaction whole, and any other transaction (outcome unknown) all or nothing;
- `check_offsets`: the group's committed offset of every partition is at or past the highest offset a
  commit that succeeded had stored;
- `check_replicas`: for every partition, each replica's log holds byte-identical batches below the
  partition's high watermark (read from the segment files of each broker's data dir with the broker's own
  batch parser, after the brokers stopped), and none lacks any of them.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kaflite.protocol.errors import KafkaError as BatchError
from kaflite.protocol.record_batch import RecordBatchView

from .workload import DATA_TOPICS, PARTITIONS, TXN_TOPIC, History

_SEGMENT = re.compile(r"^\d{20}\.log$")


def read_all(bootstrap: str, topics: list[str], isolation: str, timeout_s: float = 60.0
             ) -> tuple[dict[tuple[str, int], list[tuple[int, bytes, bytes]]], list[str]]:
    """Every record (offset, key, value) of `topics` up to each partition's end, and the partitions whose
    end was not reached within the bound."""
    c = Consumer({"bootstrap.servers": bootstrap, "log_level": 4, "group.id": f"nm-check-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "enable.partition.eof": True})
    tps = [TopicPartition(t, p, 0) for t in topics for p in range(PARTITIONS)]
    got: dict[tuple[str, int], list[tuple[int, bytes, bytes]]] = {(t.topic, t.partition): [] for t in tps}
    pending = set(got)
    try:
        c.assign(tps)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            tp = (m.topic(), m.partition())
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(tp)
                continue
            got[tp].append((m.offset(), m.key() or b"", m.value() or b""))
            pending.add(tp)  # more may follow
        return got, [f"{t}-{p}" for t, p in sorted(pending)]
    finally:
        c.close()


def high_watermarks(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    c = Consumer({"bootstrap.servers": bootstrap, "log_level": 4, "group.id": "nm-hw", "enable.auto.commit": False})
    try:
        return {(t, p): c.get_watermark_offsets(TopicPartition(t, p), 20, cached=False)[1]
                for t in topics for p in range(PARTITIONS)}
    finally:
        c.close()


def check_data(history: History, final: dict[tuple[str, int], list[tuple[int, bytes, bytes]]],
               unclean: bool) -> tuple[list[str], list[str]]:
    """(violations, expected losses)."""
    out: list[str] = []
    expected: list[str] = []
    present: dict[tuple[str, str], list[int]] = defaultdict(list)
    partition_of: dict[tuple[str, str], set[int]] = defaultdict(set)
    for (topic, p), records in final.items():
        if topic not in DATA_TOPICS:
            continue
        for offset, key, value in records:
            k, seq = value.decode().rsplit(":", 1)
            if k != key.decode():
                out.append(f"{topic}-{p}@{offset}: value {value!r} under key {key!r}")
            present[(topic, k)].append(int(seq))
            partition_of[(topic, k)].add(p)
    for tk, seqs in sorted(present.items()):
        if len(partition_of[tk]) > 1:
            out.append(f"{tk}: records in partitions {sorted(partition_of[tk])}")
        dups = sorted({s for s in seqs if seqs.count(s) > 1})
        if dups:
            out.append(f"{tk}: sequence numbers present more than once: {dups[:5]}")
        elif seqs != sorted(seqs):
            i = next(i for i in range(1, len(seqs)) if seqs[i] < seqs[i - 1])
            out.append(f"{tk}: out of order: {seqs[i - 1]} before {seqs[i]}")
    for tk, acked in sorted(history.acked.items()):
        missing = sorted(set(acked) - set(present.get(tk, [])))
        if missing:
            text = f"{tk}: {len(missing)} acknowledged records missing, e.g. sequence numbers {missing[:5]}"
            (expected if unclean and DATA_TOPICS[tk[0]] == 1 else out).append(text)
        if acked != sorted(acked):
            out.append(f"{tk}: acknowledged out of order")
    return out, expected


def check_transactions(history: History, final: dict[tuple[str, int], list[tuple[int, bytes, bytes]]]) -> list[str]:
    out: list[str] = []
    seen: dict[int, list[int]] = defaultdict(list)
    for (topic, _p), records in final.items():
        if topic != TXN_TOPIC:
            continue
        for _o, _k, value in records:
            head, rest = value.decode().split(":")
            seen[int(head[1:])].append(int(rest.split("/")[0]))
    for n, idx in sorted(seen.items()):
        if len(idx) != len(set(idx)):
            out.append(f"transaction {n}: a record visible twice ({sorted(idx)})")
    for n, (outcome, size) in sorted(history.txns.items()):
        visible = sorted(set(seen.get(n, [])))
        if outcome == "aborted" and visible:
            out.append(f"transaction {n} (aborted) visible to read_committed: records {visible}")
        elif outcome == "committed" and len(visible) != size:
            out.append(f"transaction {n} (committed, {size} records) shows {visible} to read_committed")
        elif outcome == "unknown" and visible and len(visible) != size:
            out.append(f"transaction {n} (outcome unknown, {size} records) partly visible: {visible}")
    unknown = set(seen) - set(history.txns)
    if unknown:
        out.append(f"records of transactions never begun: {sorted(unknown)[:5]}")
    return out


def check_offsets(history: History, committed: dict[tuple[str, int], int]) -> list[str]:
    best: dict[tuple[str, int], int] = {}
    for _t, topic, p, offset in history.commits:
        best[(topic, p)] = max(best.get((topic, p), -1), offset)
    return [f"group offset of {t}-{p} is {committed.get((t, p))}, behind a commit of {o} that succeeded"
            for (t, p), o in sorted(best.items()) if committed.get((t, p), -1) < o]


def _batches(partition_dir: Path, below: int) -> tuple[list[tuple[int, bytes]], int]:
    """(base offset, bytes) of every batch wholly below `below`, and the next offset after the last batch."""
    out: list[tuple[int, bytes]] = []
    end = 0
    for seg in sorted(p for p in partition_dir.iterdir() if _SEGMENT.match(p.name)):
        data = seg.read_bytes()
        pos = 0
        while pos < len(data):
            try:
                b = RecordBatchView.parse(data, pos)
            except BatchError:
                break  # a torn tail (or preallocated zeros): nothing beyond it counts
            if b.last_offset < below:
                out.append((b.base_offset, bytes(b.buffer)))
            end = max(end, b.next_offset)
            pos += b.size
    return out, end


def check_replicas(directory: Path, brokers: tuple[int, ...], hws: dict[tuple[str, int], int]) -> list[str]:
    out: list[str] = []
    for (topic, p), hw in sorted(hws.items()):
        logs = {}
        for b in brokers:
            d = directory / f"broker-{b}" / f"{topic}-{p}"
            if d.is_dir():
                logs[b] = _batches(d, hw)
        if len(logs) != len(brokers):
            out.append(f"{topic}-{p}: replicas only on brokers {sorted(logs)}")
            continue
        ref_b = brokers[0]
        ref, _ = logs[ref_b]
        for b, (batches, end) in logs.items():
            if end < hw:
                out.append(f"{topic}-{p}: broker {b}'s log ends at {end}, below the high watermark {hw}")
            if b == ref_b:
                continue
            if [o for o, _ in batches] != [o for o, _ in ref]:
                out.append(f"{topic}-{p}: batch boundaries below HW {hw} differ between brokers {ref_b} and {b}")
                continue
            for (o, x), (_o, y) in zip(ref, batches, strict=True):
                if x != y:
                    out.append(f"{topic}-{p}: batch at offset {o} differs between brokers {ref_b} and {b}")
                    break
    return out
