"""Fault injection on a running broker, for tests: injected error answers, added latency, dropped and
half-closed connections, injected throttle times, per API key, optionally per topic or client id, n times
or at a seeded rate.

    broker.faults.fail(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3)
    broker.faults.delay(api="Fetch", ms=500, times=2)
    broker.faults.drop_connections(api="Metadata", rate=0.5, seed=7)
    broker.faults.throttle(api="Produce", ms=200, times=1)
    broker.faults.half_close(api="Fetch", times=1)

Rules (tests/server/test_faults.py):
- off unless the broker key `kaflite.faults.enable=true`: then `broker.faults` is a FaultInjector and the
  dispatcher consults it for every decoded request; otherwise `broker.faults` is None and nothing is asked;
- a rule matches a request when its api key is the request's, and (when given) its topic is one of the
  topics the request names and its client id is the request's; the first matching rule that fires wins;
- a rule with `times=n` fires on its first n matching requests and is then removed; with `rate=r` it fires
  on each matching request with probability r, drawn from its own `random.Random(seed)`, so the same
  requests in the same order get the same faults (with neither: every matching request, until cleared);
- an `error` rule answers the request, without running its handler, with a well-formed response of the
  request's api key and version carrying the error code in every partition, group or resource the request
  names and at the top level (`faults_response.error_response`); an api whose answer kaflite cannot build
  that way is refused when the rule is added (ValueError), never at request time;
- a `delay` rule sleeps `ms` on the event loop's timer (the connection's later requests wait behind it, as
  behind any slow request), then the request is handled normally; a `drop` rule closes the connection
  without an answer;
- a `throttle` rule handles the request normally and answers it with `throttle_time_ms` at least `ms`
  (a quota's larger throttle wins), and the connection is then muted for that long (KIP-219), exactly
  as after a real quota throttle: the dispatcher sets the request context's throttle time;
- a `half_close` rule answers nothing and shuts down the write side of the connection (TCP FIN) once the
  request is read: the client reads EOF while the broker keeps its socket open (reading, discarding
  requests) until the client closes it; on a TLS listener, where a write-side shutdown alone does not
  exist, the connection is closed instead;
- every fault that fires is logged (one WARNING line naming the rule, the api and the client) and counted
  (`counts`, by kind, api and error; served as `kaflite_faults_injected_total` on /metrics);
- the rules may be changed from any thread (a test's thread beside the broker's loop): one lock guards
  them, held only for a lookup or a change, never across an await.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from kaflite.protocol.errors import ErrorCode

__all__ = ["FaultInjector", "FaultRule", "api_key_of", "request_topics"]

log = logging.getLogger("kaflite.faults")

KINDS = ("error", "delay", "drop", "throttle", "half_close")


def api_key_of(api: int | str) -> int:
    """An api key from its number or its name (Produce, "produce", "OffsetCommit", ...)."""
    if isinstance(api, int):
        return api
    from kio.schema.index import api_key_map

    wanted = api.replace("_", "").replace("-", "").lower()
    for key, name in api_key_map.items():
        if str(name).replace("_", "").lower() == wanted:
            return int(key)
    if api.isdigit():
        return int(api)
    raise ValueError(f"unknown api {api!r} (an api key number or a name such as Produce, Fetch, Metadata)")


def api_name(api_key: int) -> str:
    from kaflite.server.metrics import api_name as name

    return name(api_key)


def error_of(error: int | str | ErrorCode) -> ErrorCode:
    if isinstance(error, ErrorCode):
        return error
    if isinstance(error, int):
        return ErrorCode(error)
    try:
        return ErrorCode[error.strip().lower()]
    except KeyError:
        if error.strip().lstrip("-").isdigit():
            return ErrorCode(int(error))
        raise ValueError(f"unknown error {error!r} (a Kafka error name such as NOT_LEADER_OR_FOLLOWER, "
                         "or its code)") from None


@dataclass
class FaultRule:
    id: int
    kind: str  # one of KINDS
    api_key: int
    error: ErrorCode | None = None
    ms: int = 0
    times: int | None = None  # fires this many more times, then is removed; None: no limit
    rate: float | None = None  # probability of firing on each matching request; None: always
    seed: int | None = None
    topic: str | None = None
    client_id: str | None = None
    fired: int = 0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "api": api_name(self.api_key)}
        if self.error is not None:
            out["error"] = self.error.name.upper()
        if self.kind in ("delay", "throttle"):
            out["ms"] = self.ms
        for key in ("times", "rate", "seed", "topic", "client_id"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["fired"] = self.fired
        return out


def request_topics(request: Any) -> set[str]:
    """The topic names a request names at its top level (Produce's topic_data, Fetch's topics, ...): what a
    rule's `topic` is compared with."""
    out: set[str] = set()
    for name in ("topic_data", "topics", "v3_and_below_topics"):
        items = getattr(request, name, None)
        if not items:
            continue
        for item in items:
            for attr in ("name", "topic"):
                value = getattr(item, attr, None)
                if isinstance(value, str):
                    out.add(value)
    return out


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._ids = itertools.count(1)
        self.counts: dict[tuple[str, str, str], int] = {}  # (kind, api, error or "") -> faults fired

    # --- adding and removing rules ------------------------------------------------------------------
    def fail(self, api: int | str, error: int | str | ErrorCode, times: int | None = None,
             rate: float | None = None, seed: int | None = None, topic: str | None = None,
             client_id: str | None = None) -> FaultRule:
        """Answer matching requests with `error` in every partition/resource (without handling them)."""
        from kaflite.server.faults_response import check_supported

        key = api_key_of(api)
        check_supported(key)
        return self._add("error", key, error=error_of(error), times=times, rate=rate, seed=seed, topic=topic,
                         client_id=client_id)

    def delay(self, api: int | str, ms: int, times: int | None = None, rate: float | None = None,
              seed: int | None = None, topic: str | None = None, client_id: str | None = None) -> FaultRule:
        """Hold matching requests `ms` milliseconds before handling them."""
        if ms < 0:
            raise ValueError(f"ms must be >= 0, got {ms}")
        return self._add("delay", api_key_of(api), ms=ms, times=times, rate=rate, seed=seed, topic=topic,
                         client_id=client_id)

    def drop_connections(self, api: int | str, times: int | None = None, rate: float | None = None,
                         seed: int | None = None, topic: str | None = None,
                         client_id: str | None = None) -> FaultRule:
        """Close the connection of matching requests, unanswered."""
        return self._add("drop", api_key_of(api), times=times, rate=rate, seed=seed, topic=topic,
                         client_id=client_id)

    def throttle(self, api: int | str, ms: int, times: int | None = None, rate: float | None = None,
                 seed: int | None = None, topic: str | None = None, client_id: str | None = None) -> FaultRule:
        """Handle matching requests normally, but answer them with `throttle_time_ms` = `ms` and mute the
        connection that long afterwards (KIP-219), as a quota throttle does."""
        if ms < 1:
            raise ValueError(f"ms must be >= 1, got {ms}")
        return self._add("throttle", api_key_of(api), ms=ms, times=times, rate=rate, seed=seed, topic=topic,
                         client_id=client_id)

    def half_close(self, api: int | str, times: int | None = None, rate: float | None = None,
                   seed: int | None = None, topic: str | None = None, client_id: str | None = None) -> FaultRule:
        """Leave matching requests unanswered and shut down the connection's write side: the client sees
        EOF while the broker's end of the socket stays open."""
        return self._add("half_close", api_key_of(api), times=times, rate=rate, seed=seed, topic=topic,
                         client_id=client_id)

    def add(self, spec: dict[str, Any]) -> FaultRule:
        """A rule from its description (what `kaflite faults add` sends): {"kind": "error", "api": ...}."""
        spec = dict(spec)
        kind = spec.pop("kind", None)
        common = {k: spec.pop(k) for k in ("times", "rate", "seed", "topic", "client_id") if k in spec}
        api = spec.pop("api", None)
        if api is None:
            raise ValueError("a fault needs an api")
        if kind == "error":
            rule = self.fail(api, spec.pop("error", "NOT_LEADER_OR_FOLLOWER"), **common)
        elif kind == "delay":
            rule = self.delay(api, int(spec.pop("ms", 0)), **common)
        elif kind == "drop":
            rule = self.drop_connections(api, **common)
        elif kind == "throttle":
            rule = self.throttle(api, int(spec.pop("ms", 0)), **common)
        elif kind == "half_close":
            rule = self.half_close(api, **common)
        else:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if spec:
            self.remove(rule.id)
            raise ValueError(f"unknown fault field(s): {', '.join(sorted(spec))}")
        return rule

    def _add(self, kind: str, api_key: int, error: ErrorCode | None = None, ms: int = 0, times: int | None = None,
             rate: float | None = None, seed: int | None = None, topic: str | None = None,
             client_id: str | None = None) -> FaultRule:
        if times is not None and times < 1:
            raise ValueError(f"times must be >= 1, got {times}")
        if rate is not None and not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1], got {rate}")
        with self._lock:
            rule = FaultRule(next(self._ids), kind, api_key, error=error, ms=ms, times=times, rate=rate,
                             seed=seed, topic=topic, client_id=client_id, rng=random.Random(seed))
            self._rules.append(rule)
        log.info("fault added: %s", rule.describe())
        return rule

    def remove(self, rule_id: int) -> bool:
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if r.id != rule_id]
            return len(self._rules) < before

    def clear(self) -> int:
        """Remove every rule; returns how many there were."""
        with self._lock:
            n = len(self._rules)
            self._rules = []
        return n

    def rules(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.describe() for r in self._rules]

    def total(self, kind: str | None = None) -> int:
        """Faults fired so far (of one kind, or all)."""
        with self._lock:
            return sum(n for (k, _a, _e), n in self.counts.items() if kind is None or k == kind)

    # --- the dispatcher's question ----------------------------------------------------------------------
    def match(self, api_key: int, client_id: str | None, request: Any) -> FaultRule | None:
        """The rule that fires for this request, if any (its count and `times` already updated)."""
        with self._lock:
            if not self._rules:
                return None
            topics: set[str] | None = None
            for rule in self._rules:
                if rule.api_key != api_key:
                    continue
                if rule.client_id is not None and rule.client_id != (client_id or ""):
                    continue
                if rule.topic is not None:
                    if topics is None:
                        topics = request_topics(request)
                    if rule.topic not in topics:
                        continue
                if rule.rate is not None and rule.rng.random() >= rule.rate:
                    continue
                rule.fired += 1
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times == 0:
                        self._rules.remove(rule)
                counted = (rule.kind, api_name(api_key), rule.error.name.upper() if rule.error is not None else "")
                self.counts[counted] = self.counts.get(counted, 0) + 1
                fired = rule
                break
            else:
                return None
        log.warning("fault injected (rule %d): %s %s%s to client %r", fired.id, fired.kind, api_name(api_key),
                    f" {fired.error.name.upper()}" if fired.error is not None else
                    f" {fired.ms} ms" if fired.kind in ("delay", "throttle") else "", client_id)
        return fired
