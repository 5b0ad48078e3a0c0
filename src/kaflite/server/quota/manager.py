"""Client quotas as Kafka's ClientQuotaManager: which quota applies to a (user, client id), the rate each
sensor measured, and the throttle time a request earns. Pure: the caller passes the time in ms.

Rules:
- an entity is a user, a client id, or both; either part may be the default (`DEFAULT`, Kafka's
  `<default>`); the quota of (user U, client C) is the first configured among, in this order,
  U/C, U/<default>, U, <default>/C, <default>/<default>, <default>, C, <default> client (Kafka's
  DefaultQuotaCallback.quotaLimit);
- clients share a sensor exactly as Kafka's metric tags say: a quota set on a user alone (or the default
  user) is shared by all the client ids of that user, one on client ids alone by all the users of that
  client id, one on both is per (user, client id);
- a sensor is a Kafka Rate over `window_num` samples of `window_size_ms` (quota.window.num=11,
  quota.window.size.seconds=1): the sum of the samples whose last event is younger than
  window_num * window_size_ms, divided by the elapsed time since the oldest sample, never less than
  window_num - 1 full windows (Rate.windowSize);
- a value is recorded before the quota is checked (Sensor.record); when the measured rate is above the
  quota the throttle is round((rate - quota) / quota * window size) ms (QuotaUtils.throttleTime); the
  request quota bounds it by one window (ClientRequestQuotaManager.maxThrottleTimeMs);
- with no quota configured nothing is recorded and every throttle is 0 (Kafka's quotasEnabled);
- a sensor nothing was recorded in for more than `SENSOR_EXPIRY_MS` (an hour, Kafka's
  ClientQuotaManager.InactiveSensorExpirationTimeSeconds) is forgotten: the sensors are kept in the order
  of their last record, and a record sweeps the idle ones off the front at most once per window, so a
  client inventing client ids under a default quota does not grow the broker's memory forever, and a
  sweep costs only the sensors it removes;
- a consumer's fetch is capped at quota * (window_num - 1) * window size bytes (getMaxValueInQuotaWindow):
  a throttled fetch answers nothing, so a larger one could never pass; and, unlike Kafka, at what the quota
  still allows in the current window, never below a tenth of one window's quota (`fetch_allowance`), so a
  consumer with a backlog is held to its quota rather than to about half of it;
- `controller_mutation_rate` (KIP-599, Kafka's ControllerMutationQuotaManager) is a token bucket per sensor,
  not a Rate: it refills at the quota per second up to a burst of quota * controller window_num * window
  size, starts full, and each partition created or deleted takes one token (it may go below zero);
  a strict quota (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) refuses a mutation while the
  bucket is below zero, before taking anything, so the mutation that overdraws it passes and the next
  ones are refused until it refilled to zero; a permissive one (older versions) takes every mutation; the
  throttle is the time to refill to zero, round(-tokens / quota * 1000) ms, from a refusal (strict) or
  an overdraft (permissive), less the time since; a change of the quota keeps each bucket's tokens (it
  reads the quota at each use, as Kafka's).
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from dataclasses import dataclass

__all__ = [
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "DEFAULT",
    "MutationQuota",
    "PRODUCER_BYTE_RATE",
    "QUOTA_KEYS",
    "REQUEST_PERCENTAGE",
    "SENSOR_EXPIRY_MS",
    "QuotaEntity",
    "QuotaManager",
    "Rate",
    "TokenBucket",
]

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
SENSOR_EXPIRY_MS = 3600 * 1000  # Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds


class _Default(enum.Enum):
    DEFAULT = "<default>"

    def __repr__(self) -> str:
        return "<default>"


DEFAULT = _Default.DEFAULT
Name = str | _Default | None  # None: the entity has no such part


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A quota's entity; `user` is the principal's name without its type (Kafka's principal.getName)."""

    user: Name = None
    client_id: Name = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity names a user, a client id or both")

    def zk_path(self) -> str:
        """Kafka's ZooKeeper path of the entity's config (names as Kafka's Sanitizer writes them)."""
        def part(name: str | _Default) -> str:
            return "<default>" if name is DEFAULT else sanitize(str(name))

        if self.user is not None and self.client_id is not None:
            return f"/config/users/{part(self.user)}/clients/{part(self.client_id)}"
        if self.user is not None:
            return f"/config/users/{part(self.user)}"
        assert self.client_id is not None
        return f"/config/clients/{part(self.client_id)}"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize (Java's URLEncoder, then `*` -> %2A and a space -> %20): the znode name of
    an entity, so `<default>` as a name is `%3Cdefault%3E`, never the default."""
    from urllib.parse import quote_plus

    encoded = quote_plus(name, safe="*")
    return encoded.replace("~", "%7E").replace("*", "%2A").replace("+", "%20")


def user_name(principal: str) -> str:
    """`User:alice` -> `alice` (Kafka keys user quotas by the principal's name)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class _Sample:
    __slots__ = ("value", "events", "start_ms", "last_ms")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.events = 0
        self.start_ms = now_ms
        self.last_ms = now_ms


class Rate:
    """Kafka's Rate over a SampledStat of sums (seconds as the unit): `window_num` samples plus one
    that may overlap the start of the window."""

    def __init__(self, window_num: int = 11, window_size_ms: int = 1000) -> None:
        self.window_num = window_num
        self.window_size_ms = window_size_ms
        self._samples: list[_Sample] = []
        self._current = 0
        self.last_record_ms = 0  # what the manager's expiry looks at (Kafka's Sensor.lastRecordTime)

    def record(self, value: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_size_ms:
            self._current = (self._current + 1) % (self.window_num + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.window_num * self.window_size_ms
        for s in self._samples:
            if now_ms - s.last_ms >= expire:
                s.reset(now_ms)

    def window_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        elapsed = now_ms - min(s.start_ms for s in self._samples)
        full = elapsed // self.window_size_ms
        if full < self.window_num - 1:
            elapsed += (self.window_num - 1 - full) * self.window_size_ms
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        """The sum of the samples still in the window."""
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def measure(self, now_ms: int) -> float:
        """Per second."""
        return self.total(now_ms) / (self.window_ms(now_ms) / 1000.0)


class TokenBucket:
    """Kafka's TokenBucket stat (seconds as the unit): tokens refilled at `quota` per second up to `burst`.
    Kafka's starts empty at time 0, so full at any real time; this one starts full."""

    def __init__(self) -> None:
        self._tokens: float | None = None  # None: never used, full
        self._last_ms = 0
        self.last_record_ms = 0

    def _refill(self, quota: float, burst: float, now_ms: int) -> None:
        if self._tokens is None:
            self._tokens = burst
        else:  # a clock going back refills nothing
            self._tokens = min(burst, self._tokens + quota * max(0, now_ms - self._last_ms) / 1000.0)
        self._last_ms = now_ms

    def measure(self, quota: float, burst: float, now_ms: int) -> float:
        self._refill(quota, burst, now_ms)
        assert self._tokens is not None
        return self._tokens

    def record(self, value: float, quota: float, burst: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        self._refill(quota, burst, now_ms)
        assert self._tokens is not None
        self._tokens = min(burst, self._tokens - value)


THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


class MutationQuota:
    """One request's controller mutation quota (Kafka's Strict-, Permissive- and
    UnboundedControllerMutationQuota): `record` each topic's partitions before changing them."""

    def __init__(self, manager: QuotaManager | None, tags: tuple[str, str, str], limit: float,
                 strict: bool) -> None:
        self._manager = manager  # None: no quota applies (unbounded)
        self._tags = tags
        self.limit = limit
        self.strict = strict
        self._throttle_ms = 0
        self._throttled_at_ms = 0

    @property
    def bounded(self) -> bool:
        return self._manager is not None

    def _throttle(self, tokens: float, now_ms: int) -> None:
        assert self._manager is not None
        if self.limit > 0:
            self._throttle_ms = round(-tokens / self.limit * 1000)
        else:  # Kafka divides by zero here; a whole burst window instead, as the Rate quotas do
            self._throttle_ms = self._manager.controller_window_num * self._manager.controller_window_size_ms
        self._throttled_at_ms = now_ms

    def record(self, permits: float, now_ms: int) -> bool:
        """Take `permits` tokens; False (nothing taken) when a strict quota is exhausted: the caller
        answers THROTTLING_QUOTA_EXCEEDED for that topic."""
        if self._manager is None:
            return True
        bucket, burst = self._manager._bucket(self._tags, self.limit, now_ms)
        if self.strict:
            tokens = bucket.measure(self.limit, burst, now_ms)
            if tokens < 0:
                self._throttle(tokens, now_ms)
                return False
            bucket.record(permits, self.limit, burst, now_ms)
            return True
        bucket.record(permits, self.limit, burst, now_ms)
        tokens = bucket.measure(self.limit, burst, now_ms)
        if tokens < 0:
            self._throttle(tokens, now_ms)
        return True

    def throttle_time_ms(self, now_ms: int) -> int:
        """The request's throttle: the last refusal's (or overdraft's) less the time since (a request may
        answer long after, waiting for its topics' leaders)."""
        return int(max(0, self._throttle_ms - (now_ms - self._throttled_at_ms)))


class QuotaManager:
    """The quotas of one broker: the configured entities and one Rate per (quota key, metric tags)."""

    def __init__(self, window_num: int = 11, window_size_s: int = 1, controller_window_num: int = 11,
                 controller_window_size_s: int = 1) -> None:
        self.window_num = window_num
        self.window_size_ms = window_size_s * 1000
        # controller_mutation_rate's own window (Kafka's controller.quota.window.*): its bucket's burst
        self.controller_window_num = controller_window_num
        self.controller_window_size_ms = controller_window_size_s * 1000
        self._configs: dict[QuotaEntity, dict[str, float]] = {}
        # key -> the entities with that key set (Kafka keeps one overriddenQuotas map per quota type)
        self._by_key: dict[str, dict[QuotaEntity, float]] = {k: {} for k in QUOTA_KEYS}
        # (key, user tag, client id tag) -> its sensor, least recently recorded first (`_expire`)
        self._sensors: OrderedDict[tuple[str, str, str], Rate | TokenBucket] = OrderedDict()
        self._swept_ms: int | None = None  # when `_expire` last looked

    # -- configuration ---------------------------------------------------------------------------------
    def entities(self) -> dict[QuotaEntity, dict[str, float]]:
        return {e: dict(v) for e, v in self._configs.items()}

    def set(self, entity: QuotaEntity, key: str, value: float | None) -> None:
        """Set (or with None remove) one quota of an entity."""
        if key not in self._by_key:
            raise ValueError(f"unknown quota key {key}")
        values = self._configs.setdefault(entity, {})
        if value is None:
            values.pop(key, None)
            self._by_key[key].pop(entity, None)
            if not values:
                del self._configs[entity]
        else:
            values[key] = float(value)
            self._by_key[key][entity] = float(value)
        # Kafka re-tags its sensors when the set of entities changes; a fresh start is the same for ours.
        # A token bucket reads its quota at each use and keeps its tokens, as Kafka's; one no longer in use
        # (its tags changed) expires.
        if key != CONTROLLER_MUTATION_RATE:
            self._sensors = OrderedDict((k, v) for k, v in self._sensors.items() if k[0] != key)

    def replace_all(self, configs: dict[QuotaEntity, dict[str, float]]) -> None:
        self._configs = {}
        self._by_key = {k: {} for k in QUOTA_KEYS}
        self._sensors = OrderedDict()
        for entity, values in configs.items():
            for key, value in values.items():
                self.set(entity, key, value)

    def replace_entity(self, entity: QuotaEntity, values: dict[str, float]) -> None:
        """Make `values` the entity's quotas (a key it lacks is removed); a key whose value is unchanged is
        left alone, so its sensors keep their measure (a notification of a user's SCRAM change, or a
        broker's own change coming back, re-reads the user's quotas unchanged)."""
        current = self._configs.get(entity, {})
        for key in QUOTA_KEYS:
            new = values.get(key)
            if new is None:
                if key in current:
                    self.set(entity, key, None)
            elif current.get(key) != float(new):
                self.set(entity, key, new)

    def apply(self, configs: dict[QuotaEntity, dict[str, float]], whole: bool) -> None:
        """A quota store's publication (server/quota/store.py): the whole table, or some entities'."""
        if whole:
            for entity in set(self._configs) - set(configs):
                self.replace_entity(entity, {})
        for entity, values in configs.items():
            self.replace_entity(entity, values)

    def enabled(self, key: str) -> bool:
        return bool(self._by_key[key])

    # -- which quota ------------------------------------------------------------------------------------
    def metric_tags(self, key: str, user: str, client_id: str) -> tuple[str, str]:
        """The (user, client id) tags of the sensor a request is recorded in (DefaultQuotaCallback)."""
        q = self._by_key[key]
        E = QuotaEntity
        if E(user, client_id) in q or E(user, DEFAULT) in q:
            return user, client_id
        if E(user, None) in q:
            return user, ""
        if E(DEFAULT, client_id) in q or E(DEFAULT, DEFAULT) in q:
            return user, client_id
        if E(DEFAULT, None) in q:
            return user, ""
        return "", client_id

    def quota_limit(self, key: str, user: str, client_id: str) -> float | None:
        """The quota of the sensor tagged (user, client id), as DefaultQuotaCallback.quotaLimit."""
        q = self._by_key[key]
        E = QuotaEntity
        if user and client_id:
            candidates = [E(user, client_id), E(user, DEFAULT), E(DEFAULT, client_id), E(DEFAULT, DEFAULT)]
        elif user:
            candidates = [E(user, None), E(DEFAULT, None)]
        elif client_id:
            candidates = [E(None, client_id), E(None, DEFAULT)]
        else:
            return None
        for c in candidates:
            if c in q:
                return q[c]
        return None

    def quota(self, key: str, principal: str, client_id: str) -> float | None:
        user = user_name(principal)
        return self.quota_limit(key, *self.metric_tags(key, user, client_id))

    def max_value_in_window(self, key: str, principal: str, client_id: str) -> float | None:
        """What the quota lets a client take in one go: quota * (window_num - 1) * window size (Kafka's
        getMaxValueInQuotaWindow, the cap on a consumer's fetch size, so a fetch can pass at all); None
        without a quota."""
        limit = self.quota(key, principal, client_id) if self._by_key[key] else None
        if limit is None:
            return None
        return limit * (self.window_num - 1) * self.window_size_ms / 1000.0

    def fetch_allowance(self, key: str, principal: str, client_id: str, now_ms: int) -> float | None:
        """The most a consumer's fetch may take now (None without a quota): what its quota still allows in
        the current window (quota * window - what the window holds), at least a tenth of a window's quota
        (so a fetch is never empty for want of room: it is throttled for about the shortfall instead), at
        most Kafka's getMaxValueInQuotaWindow. Kafka caps at that maximum only: a consumer with a backlog
        then takes a whole (window_num - 1) windows' worth in one fetch, every next fetch overshoots, is
        throttled and answered empty (its bytes taken back), and only a fetch into an emptied window
        passes: about half the quota (tests/quota/test_manager.py simulates both)."""
        cap = self.max_value_in_window(key, principal, client_id)
        if cap is None:
            return None
        user, client = self.metric_tags(key, user_name(principal), client_id)
        limit = self.quota_limit(key, user, client)
        sensor = self._sensors.get((key, user, client))
        if not isinstance(sensor, Rate) or limit is None:
            return cap
        room = limit * sensor.window_ms(now_ms) / 1000.0 - sensor.total(now_ms)
        floor = limit * self.window_size_ms / 1000.0 / 10
        return min(cap, max(room, floor))

    # -- recording -------------------------------------------------------------------------------------
    def record(self, key: str, principal: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` (bytes, or percent-seconds of loop time) and answer the throttle time in ms."""
        if key == CONTROLLER_MUTATION_RATE:
            raise ValueError("controller_mutation_rate is a token bucket: use mutation_quota")
        if not self._by_key[key]:
            return 0
        user, client = self.metric_tags(key, user_name(principal), client_id)
        limit = self.quota_limit(key, user, client)
        if limit is None:
            return 0
        sensor = self._sensor((key, user, client), now_ms)
        sensor.record(value, now_ms)
        observed = sensor.measure(now_ms)
        if observed <= limit:
            return 0
        throttle = round((observed - limit) / limit * sensor.window_ms(now_ms)) if limit > 0 else \
            self.window_num * self.window_size_ms
        if key == REQUEST_PERCENTAGE:
            throttle = min(throttle, self.window_size_ms)
        return int(throttle)

    def unrecord(self, key: str, principal: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (Kafka's unrecordQuotaSensor: a throttled fetch answers no data)."""
        if not self._by_key[key]:
            return
        user, client = self.metric_tags(key, user_name(principal), client_id)
        sensor = self._sensors.get((key, user, client))
        if isinstance(sensor, Rate):
            self._sensors.move_to_end((key, user, client))
            sensor.record(-value, now_ms)

    # -- sensors -----------------------------------------------------------------------------------------
    def _sensor(self, tags: tuple[str, str, str], now_ms: int) -> Rate:
        """The sensor of `tags`, created if need be, moved to the end of the order (about to be recorded)."""
        self._expire(now_ms)
        sensor = self._sensors.get(tags)
        if not isinstance(sensor, Rate):
            sensor = self._sensors[tags] = Rate(self.window_num, self.window_size_ms)
        else:
            self._sensors.move_to_end(tags)
        return sensor

    def _bucket(self, tags: tuple[str, str, str], limit: float, now_ms: int) -> tuple[TokenBucket, float]:
        """The token bucket of `tags` (created full if need be, moved to the end of the order) and its
        burst."""
        self._expire(now_ms)
        bucket = self._sensors.get(tags)
        if not isinstance(bucket, TokenBucket):
            bucket = self._sensors[tags] = TokenBucket()
        else:
            self._sensors.move_to_end(tags)
        return bucket, limit * self.controller_window_num * self.controller_window_size_ms / 1000.0

    def mutation_quota(self, principal: str, client_id: str, strict: bool) -> MutationQuota:
        """The controller mutation quota of one request (Kafka's newQuotaFor: strict from a version on):
        unbounded without a `controller_mutation_rate` quota for this principal and client id."""
        key = CONTROLLER_MUTATION_RATE
        user, client = self.metric_tags(key, user_name(principal), client_id) if self._by_key[key] else ("", "")
        limit = self.quota_limit(key, user, client) if self._by_key[key] else None
        if limit is None:
            return MutationQuota(None, (key, "", ""), 0.0, strict)
        return MutationQuota(self, (key, user, client), limit, strict)

    def _expire(self, now_ms: int) -> None:
        """Forget the sensors idle for more than SENSOR_EXPIRY_MS, at most once per window. The front of
        `_sensors` is the least recently recorded, so the sweep stops at the first one still in use."""
        if self._swept_ms is not None and 0 <= now_ms - self._swept_ms < self.window_size_ms:
            return
        self._swept_ms = now_ms
        while self._sensors:
            tags, sensor = next(iter(self._sensors.items()))
            if now_ms - sensor.last_record_ms <= SENSOR_EXPIRY_MS:
                break
            del self._sensors[tags]

    def sensor_count(self) -> int:
        """How many sensors the manager holds (each a few hundred bytes): what expiry bounds."""
        return len(self._sensors)
