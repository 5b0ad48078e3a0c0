"""Consumer lag over time: what the console remembers between page loads (pure, injected clock).

The console samples the cluster every few seconds (log end offsets of every partition, each group's
committed offsets) and keeps a bounded history here. From it: produce and consume rates, a lag chart,
and the time to drain the lag at the current rates.

Rules:
- lag of a partition = log end offset - committed offset (Kafka's definition; a partition without a
  committed offset has no lag figure, as kafka-consumer-groups.sh prints "-");
- a rate is (last - first) / (t_last - t_first) over the samples of the last `window_s` seconds;
  fewer than two samples give no rate;
- time to drain = lag / (consume rate - produce rate) when that is positive; 0 when there is no lag;
  None ("not draining") otherwise;
- lag in seconds = the age of the oldest unconsumed record (now - timestamp of the record at the
  committed offset), as Burrow and kminion report it; 0 without lag.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["LagHistory", "PartitionLag", "rate", "drain_seconds", "partition_lag"]

Tp = tuple[str, int]


def rate(points: list[tuple[float, int]], window_s: float) -> float | None:
    """Per-second rate over the samples of the last `window_s` seconds (None with < 2 samples)."""
    if len(points) < 2:
        return None
    t_end = points[-1][0]
    inside = [p for p in points if p[0] >= t_end - window_s]
    if len(inside) < 2:
        inside = points[-2:]
    (t0, v0), (t1, v1) = inside[0], inside[-1]
    if t1 <= t0:
        return None
    return max(0.0, (v1 - v0) / (t1 - t0))


def drain_seconds(lag: int, consume_rate: float | None, produce_rate: float | None) -> float | None:
    """Seconds until the lag reaches 0 at the current rates; None when it is not shrinking."""
    if lag <= 0:
        return 0.0
    if consume_rate is None:
        return None
    net = consume_rate - (produce_rate or 0.0)
    if net <= 0:
        return None
    return lag / net


@dataclass(slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    log_end: int
    lag: int | None
    lag_seconds: float | None = None
    consume_rate: float | None = None
    produce_rate: float | None = None
    drain_seconds: float | None = None
    member: str = ""
    host: str = ""
    client_id: str = ""


def partition_lag(topic: str, partition: int, committed: int | None, log_end: int) -> PartitionLag:
    lag = None if committed is None or committed < 0 else max(0, log_end - committed)
    return PartitionLag(topic, partition, committed if committed is not None and committed >= 0 else None,
                        log_end, lag)


@dataclass(slots=True)
class _Series:
    points: deque[tuple[float, int]] = field(default_factory=deque)


class LagHistory:
    """Bounded samples: log end offsets per partition and committed offsets per (group, partition)."""

    def __init__(self, max_samples: int = 360, window_s: float = 60.0) -> None:
        self.max_samples = max_samples
        self.window_s = window_s
        self._ends: dict[Tp, deque[tuple[float, int]]] = {}
        self._partitions_of: dict[str, set[int]] = {}  # topic -> sampled partitions (topic rates)
        self._committed: dict[str, dict[Tp, deque[tuple[float, int]]]] = {}
        self._group_lag: dict[str, deque[tuple[float, dict[Tp, int]]]] = {}
        self.last_sample: float | None = None

    def _push(self, d: deque[tuple[float, int]], t: float, v: int) -> None:
        d.append((t, v))
        while len(d) > self.max_samples:
            d.popleft()

    def record_ends(self, now: float, ends: Mapping[Tp, int]) -> None:
        for tp, v in ends.items():
            d = self._ends.get(tp)
            if d is None:
                d = self._ends[tp] = deque()
                self._partitions_of.setdefault(tp[0], set()).add(tp[1])
            self._push(d, now, v)
        self.last_sample = now

    def record_group(self, now: float, group: str, committed: Mapping[Tp, int], ends: Mapping[Tp, int]) -> None:
        per = self._committed.setdefault(group, {})
        lags: dict[Tp, int] = {}
        for tp, c in committed.items():
            if c is None or c < 0:
                continue
            self._push(per.setdefault(tp, deque()), now, c)
            if tp in ends:
                lags[tp] = max(0, ends[tp] - c)
        hist = self._group_lag.setdefault(group, deque())
        hist.append((now, lags))
        while len(hist) > self.max_samples:
            hist.popleft()

    def forget_group(self, group: str) -> None:
        self._committed.pop(group, None)
        self._group_lag.pop(group, None)

    def produce_rate(self, tp: Tp) -> float | None:
        return rate(list(self._ends.get(tp, ())), self.window_s)

    def consume_rate(self, group: str, tp: Tp) -> float | None:
        return rate(list(self._committed.get(group, {}).get(tp, ())), self.window_s)

    def topic_rate(self, topic: str) -> float | None:
        rates = [self.produce_rate((topic, p)) for p in self._partitions_of.get(topic, ())]
        known = [r for r in rates if r is not None]
        return sum(known) if known else None

    def latest_end(self, tp: Tp) -> int | None:
        d = self._ends.get(tp)
        return d[-1][1] if d else None

    def group_total_lag(self, group: str) -> int | None:
        hist = self._group_lag.get(group)
        if not hist:
            return None
        return sum(hist[-1][1].values())

    def group_series(self, group: str, per_partition: bool = True, max_series: int = 8
                     ) -> dict[str, list[tuple[float, float]]]:
        """{"total": [(t, lag)], "topic-p": [...]} for the lag chart (the partitions with most lag)."""
        hist = list(self._group_lag.get(group, ()))
        out: dict[str, list[tuple[float, float]]] = {"total": [(t, float(sum(v.values()))) for t, v in hist]}
        if per_partition and hist:
            last = hist[-1][1]
            top = sorted(last, key=lambda tp: (-last[tp], tp))[:max_series - 1]
            for tp in top:
                out[f"{tp[0]}-{tp[1]}"] = [(t, float(v[tp])) for t, v in hist if tp in v]
        return out

    def enrich(self, group: str, rows: list[PartitionLag]) -> None:
        """Rates and time to drain for each row, from the history."""
        for r in rows:
            tp = (r.topic, r.partition)
            r.produce_rate = self.produce_rate(tp)
            r.consume_rate = self.consume_rate(group, tp)
            r.drain_seconds = drain_seconds(r.lag, r.consume_rate, r.produce_rate) if r.lag is not None else None
