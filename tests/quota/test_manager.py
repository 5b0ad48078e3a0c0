"""The pure quota manager against Kafka's ClientQuotaManager / Rate / QuotaUtils arithmetic."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kaflite.server.quota import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    QuotaManager,
    Rate,
)

E = QuotaEntity
P = PRODUCER_BYTE_RATE

# Kafka's eight levels, most specific first (ClientQuotaManager's doc comment)
LEVELS = [
    E("alice", "A"), E("alice", DEFAULT), E("alice", None), E(DEFAULT, "A"),
    E(DEFAULT, DEFAULT), E(DEFAULT, None), E(None, "A"), E(None, DEFAULT),
]


def test_precedence_of_matches_and_defaults() -> None:
    q = QuotaManager()
    for i, entity in enumerate(LEVELS):
        q.set(entity, P, 1000.0 * (i + 1))
    # removing the most specific each time exposes the next level
    for i, entity in enumerate(LEVELS):
        assert q.quota(P, "User:alice", "A") == 1000.0 * (i + 1), entity
        q.set(entity, P, None)
    assert q.quota(P, "User:alice", "A") is None
    assert q.entities() == {}


def test_quota_of_other_principals_and_keys_are_separate() -> None:
    q = QuotaManager()
    q.set(E("alice", None), P, 100)
    q.set(E(None, DEFAULT), P, 7)
    assert q.quota(P, "User:alice", "x") == 100
    assert q.quota(P, "User:bob", "x") == 7
    assert q.quota(CONSUMER_BYTE_RATE, "User:alice", "x") is None
    assert q.record(CONSUMER_BYTE_RATE, "User:alice", "x", 10**9, 0) == 0


def test_sensor_sharing_follows_kafka_metric_tags() -> None:
    q = QuotaManager()
    q.set(E("alice", None), P, 1000)  # a user quota: all of alice's client ids share one sensor
    assert q.metric_tags(P, "alice", "A") == ("alice", "")
    assert q.metric_tags(P, "alice", "B") == ("alice", "")
    q.set(E(None, DEFAULT), P, 1000)  # default client quota: each client id on its own
    assert q.metric_tags(P, "bob", "A") == ("", "A")
    q.set(E(DEFAULT, DEFAULT), P, 1000)  # per (user, client id)
    assert q.metric_tags(P, "bob", "A") == ("bob", "A")
    # the shared sensor: two client ids of alice together exceed what each alone would not
    q2 = QuotaManager()
    q2.set(E("alice", None), P, 1000)
    assert q2.record(P, "User:alice", "A", 6000, 0) == 0  # 6000 B over 10 s = 600 B/s
    assert q2.record(P, "User:alice", "B", 6000, 0) > 0  # 1200 B/s together


def test_rate_window_assumes_n_minus_1_full_windows() -> None:
    r = Rate(11, 1000)
    r.record(5000, 0)
    assert r.window_ms(0) == 10_000  # no elapsed time: 10 full windows assumed
    assert r.measure(0) == 500.0
    assert r.window_ms(2500) == 10_500  # 2 full windows elapsed, 8 more assumed, plus 0.5 s
    r.record(0, 10_500)
    assert r.window_ms(10_500) == 10_500  # 10 full windows elapsed since the oldest sample
    assert r.measure(10_500) == pytest.approx(5000 / 10.5)
    # the first sample's last event is 11 windows old at 11_000: it is purged
    assert r.measure(11_000) == 0.0


def test_rate_keeps_window_num_plus_one_samples() -> None:
    r = Rate(3, 1000)
    for t in range(0, 5000, 1000):
        r.record(100, t)
    # 4 slots: the one of 0 was reused at 4000, the one of 1000 is 3 windows old (purged): 2000, 3000,
    # 4000 remain, 2 s elapsed = window_num - 1 full windows
    assert r.window_ms(4000) == 2000
    assert r.measure(4000) == pytest.approx(300 / 2.0)


def test_throttle_time_is_kafkas_formula() -> None:
    q = QuotaManager()
    q.set(E(None, "A"), P, 1000)
    assert q.record(P, "User:ANONYMOUS", "A", 9000, 0) == 0  # 900 B/s over the assumed 10 s
    # 20000 B over 10 s = 2000 B/s: (2000 - 1000) / 1000 * 10000 ms
    assert q.record(P, "User:ANONYMOUS", "A", 11000, 0) == 10_000
    # 5.5 s later: 5 full windows elapsed, 10 assumed, plus the current one's 0.5 s: 10.5 s
    assert q.record(P, "User:ANONYMOUS", "A", 0, 5500) == round((20000 / 10.5 - 1000) / 1000 * 10_500)
    # another client id is not throttled
    assert q.record(P, "User:ANONYMOUS", "B", 10**6, 5500) == 0


def test_throttle_rounds_and_window_grows() -> None:
    q = QuotaManager()
    q.set(E(None, DEFAULT), P, 300)
    q.record(P, "User:x", "c", 4001, 0)  # 400.1 B/s
    t = q.record(P, "User:x", "c", 0, 10_500)  # window 10.5 s: 4001/10.5 = 381.05 B/s
    assert t == round((4001 / 10.5 - 300) / 300 * 10_500)


def test_request_percentage_throttle_bounded_by_one_window() -> None:
    q = QuotaManager()
    q.set(E(None, "A"), REQUEST_PERCENTAGE, 10.0)
    assert q.record(REQUEST_PERCENTAGE, "User:u", "A", 10_000.0, 0) == 1000


def test_unknown_key_and_empty_entity_refused() -> None:
    q = QuotaManager()
    with pytest.raises(ValueError):
        q.set(E("a", None), "bytes", 1)
    with pytest.raises(ValueError):
        E(None, None)


def test_zk_paths_as_kafka() -> None:
    assert E("alice", None).zk_path() == "/config/users/alice"
    assert E(DEFAULT, DEFAULT).zk_path() == "/config/users/<default>/clients/<default>"
    assert E(None, "my client").zk_path() == "/config/clients/my%20client"
    assert E("CN=a,O=b", "c").zk_path() == "/config/users/CN%3Da%2CO%3Db/clients/c"
    # Kafka's Sanitizer: URLEncoder keeps . - _ and encodes ~; * is %2A
    assert E("a.b-c_d~e*f", None).zk_path() == "/config/users/a.b-c_d%7Ee%2Af"


def test_max_value_in_window_caps_a_fetch() -> None:
    q = QuotaManager(11, 1)
    assert q.max_value_in_window(CONSUMER_BYTE_RATE, "User:u", "c") is None
    q.set(E(None, DEFAULT), CONSUMER_BYTE_RATE, 1000)
    assert q.max_value_in_window(CONSUMER_BYTE_RATE, "User:u", "c") == 10_000
    assert QuotaManager(2, 3).max_value_in_window(CONSUMER_BYTE_RATE, "User:u", "c") is None


def test_a_published_table_replaces_entities_and_keeps_the_measure_of_unchanged_quotas() -> None:
    q = QuotaManager(window_num=2, window_size_s=1)
    q.apply({E(None, "A"): {P: 1000.0}, E("bob", None): {CONSUMER_BYTE_RATE: 50.0}}, whole=True)
    assert q.record(P, "User:x", "A", 3000.0, 0) > 0
    # a notification re-reading A unchanged (another key of its znode changed) keeps A's measure
    q.apply({E(None, "A"): {P: 1000.0}}, whole=False)
    assert q.record(P, "User:x", "A", 1.0, 10) > 0
    assert q.entities() == {E(None, "A"): {P: 1000.0}, E("bob", None): {CONSUMER_BYTE_RATE: 50.0}}
    # an entity published without values has no quota left; a whole table drops what it lacks
    q.apply({E("bob", None): {}}, whole=False)
    assert q.entities() == {E(None, "A"): {P: 1000.0}}
    q.apply({E(None, "B"): {P: 5.0}}, whole=True)
    assert q.entities() == {E(None, "B"): {P: 5.0}}
    assert q.record(P, "User:x", "A", 3000.0, 20) == 0


def _backlogged_consumer(q: QuotaManager, cap: Callable[[int], float], seconds: int) -> float:
    """A consumer with more records waiting than it may read, on an injected clock: each fetch takes whole
    16 KB batches up to `cap(now)` (at least one batch, as a broker answers), is recorded, and when
    throttled is answered empty (its bytes taken back) and the next one waits out the throttle; 2 ms
    between fetches otherwise. The bytes received from 5 s on, per second."""
    batch, now, got = 16384, 0, 0.0
    while now < seconds * 1000:
        n = max(batch, int(cap(now)) // batch * batch)
        throttle = q.record(CONSUMER_BYTE_RATE, "User:u", "c", n, now)
        if throttle > 0:
            q.unrecord(CONSUMER_BYTE_RATE, "User:u", "c", n, now)
            now += throttle + 2
        else:
            got += n if now >= 5000 else 0
            now += 2
    return got / (seconds - 5)


@pytest.mark.parametrize("window_num", [2, 11])
def test_a_backlogged_consumer_is_held_to_its_quota_not_to_half_of_it(window_num: int) -> None:
    quota = 200_000.0

    def manager() -> QuotaManager:
        q = QuotaManager(window_num=window_num, window_size_s=1)
        q.set(E(None, "c"), CONSUMER_BYTE_RATE, quota)
        return q

    # Kafka's cap alone (getMaxValueInQuotaWindow): each passing fetch takes (window_num - 1) windows' worth,
    # the next overshoots and is answered empty, and only a fetch into an emptied window passes
    kafka = manager()
    kafka_rate = _backlogged_consumer(
        kafka, lambda _now: kafka.max_value_in_window(CONSUMER_BYTE_RATE, "User:u", "c") or 0.0, 30)
    assert kafka_rate < 0.7 * quota, kafka_rate
    # capped at what the quota still allows now: within 20 % of the quota
    q = manager()
    rate = _backlogged_consumer(
        q, lambda now: q.fetch_allowance(CONSUMER_BYTE_RATE, "User:u", "c", now) or 0.0, 30)
    assert 0.8 * quota <= rate <= 1.05 * quota, rate


def test_fetch_allowance_is_the_room_left_between_a_floor_and_kafkas_cap() -> None:
    q = QuotaManager(window_num=2, window_size_s=1)
    assert q.fetch_allowance(CONSUMER_BYTE_RATE, "User:u", "c", 0) is None  # no quota
    q.set(E(None, "c"), CONSUMER_BYTE_RATE, 1000.0)
    assert q.fetch_allowance(CONSUMER_BYTE_RATE, "User:u", "c", 0) == 1000.0  # no sensor yet: Kafka's cap
    q.record(CONSUMER_BYTE_RATE, "User:u", "c", 600.0, 0)
    # the window is 1 s (window_num - 1 whole windows assumed): 1000 - 600 left
    assert q.fetch_allowance(CONSUMER_BYTE_RATE, "User:u", "c", 0) == 400.0
    q.record(CONSUMER_BYTE_RATE, "User:u", "c", 400.0, 0)
    assert q.fetch_allowance(CONSUMER_BYTE_RATE, "User:u", "c", 0) == 100.0  # a tenth of a window's quota
    # 500 ms on the window is 1.5 s: 1500 - 1000
    assert q.fetch_allowance(CONSUMER_BYTE_RATE, "User:u", "c", 500) == 500.0


def test_idle_sensors_expire_after_an_hour() -> None:
    """A default client quota gives every client id its own sensor: a client inventing client ids must not
    grow the broker's memory forever. Kafka expires a sensor nothing was recorded in for an hour
    (ClientQuotaManager.InactiveSensorExpirationTimeSeconds); so does the manager, swept on a record."""
    hour_ms = 3_600_000
    q = QuotaManager()
    q.set(E(None, DEFAULT), P, 1000)
    for i in range(1000):
        q.record(P, "User:ANONYMOUS", f"client-{i}", 10, i)
    assert q.sensor_count() == 1000
    # one client id keeps recording through the hour: its sensor stays, with what it measured
    for t in range(0, hour_ms + 2000, 60_000):
        q.record(P, "User:ANONYMOUS", "steady", 1, 1000 + t)
    now = 1000 + hour_ms + 2000
    q.record(P, "User:ANONYMOUS", "steady", 1, now)
    assert q.sensor_count() == 1
    # a sensor idle for exactly the hour is kept (Kafka's hasExpired is strictly more than)
    q.record(P, "User:ANONYMOUS", "late", 1, now)
    q.record(P, "User:ANONYMOUS", "steady", 1, now + hour_ms)
    assert q.sensor_count() == 2
    # the sweep runs at most once per window: a second record in the same window removes nothing
    q.record(P, "User:ANONYMOUS", "steady", 1, now + hour_ms + 1)
    assert q.sensor_count() == 2
    q.record(P, "User:ANONYMOUS", "steady", 1, now + hour_ms + 1000)
    assert q.sensor_count() == 1
    # an expired client id that comes back starts a new sensor, as Kafka's does
    assert q.record(P, "User:ANONYMOUS", "client-7", 10, now + hour_ms + 1000) == 0
    assert q.sensor_count() == 2
