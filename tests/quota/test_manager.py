"""The pure quota manager against Kafka's ClientQuotaManager / Rate / QuotaUtils arithmetic."""

from __future__ import annotations

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
