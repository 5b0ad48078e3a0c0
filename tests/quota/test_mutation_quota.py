"""controller_mutation_rate (KIP-599) as Kafka's ControllerMutationQuotaManager: a token bucket per sensor,
strict (refuse once exhausted) or permissive (take all, throttle); the figures are those of Kafka's own
ControllerMutationQuotaManagerTest."""

from __future__ import annotations

from kaflite.server.quota import CONTROLLER_MUTATION_RATE, DEFAULT, QuotaEntity, QuotaManager, TokenBucket

E = QuotaEntity
M = CONTROLLER_MUTATION_RATE
T = 1_700_000_000_000  # any time: a bucket starts full
CLIENT = E("ANONYMOUS", "test-client")


def _manager(quota: float = 10, entity: QuotaEntity = CLIENT) -> QuotaManager:
    q = QuotaManager(controller_window_num=10, controller_window_size_s=1)  # burst 10 * 1 s * quota
    q.set(entity, M, quota)
    return q


def test_token_bucket_refills_at_the_quota_up_to_the_burst() -> None:
    b = TokenBucket()
    assert b.measure(10, 100, T) == 100  # full at first
    b.record(150, 10, 100, T)
    assert b.measure(10, 100, T) == -50  # may go below zero
    assert b.measure(10, 100, T + 2500) == -25  # 10 per second
    assert b.measure(10, 100, T + 60_000) == 100  # never above the burst
    assert b.measure(10, 100, T + 59_000) == 100  # a clock going back refills nothing


def test_strict_quota_lets_the_overdraft_pass_then_refuses() -> None:
    q = _manager()
    quota = q.mutation_quota("User:ANONYMOUS", "test-client", strict=True)
    assert quota.bounded
    assert quota.record(90, T) and quota.throttle_time_ms(T) == 0  # tokens 10
    assert quota.record(90, T) and quota.throttle_time_ms(T) == 0  # tokens -80: accepted, not throttled
    assert not quota.record(90, T)  # refused before taking anything
    assert quota.throttle_time_ms(T) == 8000  # 80 tokens at 10 per second
    assert quota.throttle_time_ms(T + 5000) == 3000  # adjusted by the time since
    # the next request of the same client: still refused until the bucket is back at zero
    again = q.mutation_quota("User:ANONYMOUS", "test-client", strict=True)
    assert not again.record(1, T + 7999) and again.throttle_time_ms(T + 7999) == 1
    assert again.record(1, T + 8001) and again.throttle_time_ms(T + 8001) == 0  # the refusal's, 2 ms ago


def test_permissive_quota_takes_everything_and_throttles() -> None:
    q = _manager()
    quota = q.mutation_quota("User:ANONYMOUS", "test-client", strict=False)
    assert quota.record(90, T) and quota.throttle_time_ms(T) == 0
    assert quota.record(90, T) and quota.throttle_time_ms(T) == 8000
    assert quota.record(90, T) and quota.throttle_time_ms(T) == 17000  # never refused
    assert quota.throttle_time_ms(T + 5000) == 12000


def test_manager_spikes_as_kafkas_test() -> None:
    q = _manager()
    now = T
    for _ in range(10):  # at the quota: never throttled
        quota = q.mutation_quota("User:ANONYMOUS", "test-client", strict=True)
        assert quota.record(10, now) and quota.throttle_time_ms(now) == 0
        now += 1000
    spike = q.mutation_quota("User:ANONYMOUS", "test-client", strict=True)
    assert spike.record(110, now) and spike.throttle_time_ms(now) == 0  # 100 tokens: passes, to -10
    second = q.mutation_quota("User:ANONYMOUS", "test-client", strict=True)
    assert not second.record(110, now) and second.throttle_time_ms(now) == 1000
    now += 1000
    third = q.mutation_quota("User:ANONYMOUS", "test-client", strict=True)
    assert third.record(110, now) and third.throttle_time_ms(now) == 0  # back at 0: passes


def test_unbounded_without_a_quota_and_entities_as_other_quotas() -> None:
    q = QuotaManager()
    free = q.mutation_quota("User:alice", "app", strict=True)
    assert not free.bounded
    assert all(free.record(10_000, T) for _ in range(10)) and free.throttle_time_ms(T) == 0
    assert q.sensor_count() == 0
    # a user quota is shared by the user's client ids; another user is not held to it
    q.set(E("alice", None), M, 1)  # burst 11
    assert q.mutation_quota("User:alice", "a", strict=True).record(20, T)
    assert not q.mutation_quota("User:alice", "b", strict=True).record(1, T)
    assert not q.mutation_quota("User:bob", "a", strict=True).bounded
    # a default client quota: each client id its own bucket
    q.set(E(None, DEFAULT), M, 1)
    assert q.mutation_quota("User:bob", "x", strict=True).record(20, T)
    assert q.mutation_quota("User:bob", "y", strict=True).record(20, T)
    assert not q.mutation_quota("User:bob", "x", strict=True).record(0, T)


def test_a_quota_change_keeps_the_tokens_and_idle_buckets_expire() -> None:
    q = _manager(entity=E(None, DEFAULT))
    assert q.mutation_quota("User:u", "c", strict=True).record(150, T)  # -50
    q.set(E(None, DEFAULT), M, 100)  # Kafka keeps the bucket, read with the new quota: 50 ms to zero
    refused = q.mutation_quota("User:u", "c", strict=True)
    assert not refused.record(1, T) and refused.throttle_time_ms(T) == 500
    assert q.mutation_quota("User:u", "c", strict=True).record(1, T + 500)
    for i in range(100):
        q.mutation_quota("User:u", f"c{i}", strict=True).record(1, T + 1000)
    assert q.sensor_count() == 101
    q.mutation_quota("User:u", "c", strict=True).record(1, T + 1000 + 3_600_001)
    assert q.sensor_count() == 1


def test_a_quota_of_zero_refuses_after_the_first_mutation() -> None:
    q = _manager(quota=0)
    quota = q.mutation_quota("User:ANONYMOUS", "test-client", strict=True)
    assert quota.record(1, T)  # the empty bucket is not below zero yet
    assert not quota.record(1, T)
    assert quota.throttle_time_ms(T) == 10_000  # a whole burst window (Kafka divides by zero)
