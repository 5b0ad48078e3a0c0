"""Cooperative rebalances settle: the rack-aware constrained path records a transfer only when a
partition goes to a different member (Kafka's maybeRevokedPartitions is a map of previous owners)."""

from __future__ import annotations

from kaflite.assign.sticky import CooperativeStickyAssignor, StickyAssignor
from kaflite.assign.types import Subscription, TopicPartition


def _one_member_on_rack_b() -> tuple[dict[str, int], dict[TopicPartition, list[str | None]], list[TopicPartition]]:
    # 22 partitions, 10 of them (p0..p9) with replicas on rack a only, the rest on a and b
    racks: dict[TopicPartition, list[str | None]] = {
        TopicPartition("t", p): (["a"] if p < 10 else ["a", "b"]) for p in range(22)}
    return {"t": 22}, racks, [TopicPartition("t", p) for p in range(22)]


def test_one_member_on_another_rack_keeps_everything_in_the_first_round() -> None:
    ppt, racks, owned = _one_member_on_rack_b()
    sub = Subscription(["t"], owned_partitions=list(owned), generation_id=1, rack_id="b")
    res = CooperativeStickyAssignor().assign_with_details(ppt, {"m": sub}, racks)
    assert res.used_constrained_path
    assert res.partitions_transferring_ownership == {}
    got = res.assignment["m"]
    assert sorted(got) == owned
    # on-rack partitions first (kept, sorted by partition), then the off-rack ones handed back in order
    assert got == owned[10:] + owned[:10]
    # and the follow-up round changes nothing
    again = CooperativeStickyAssignor().assign_partitions(
        ppt, {"m": Subscription(["t"], owned_partitions=got, generation_id=2, rack_id="b")}, racks)
    assert again["m"] == got


def test_partition_given_up_and_handed_to_another_member_is_still_a_transfer() -> None:
    # m1 (rack b) owns everything; m2 (rack a) joins: off-rack partitions go to m2 only via revocation
    ppt, racks, owned = _one_member_on_rack_b()
    subs = {"m1": Subscription(["t"], owned_partitions=list(owned), generation_id=1, rack_id="b"),
            "m2": Subscription(["t"], generation_id=1, rack_id="a")}
    res = CooperativeStickyAssignor().assign_with_details(ppt, subs, racks)
    transferring = res.partitions_transferring_ownership or {}
    assert transferring and set(transferring.values()) == {"m2"}
    assert not set(res.assignment["m2"]) & set(owned)  # nothing m1 owned reaches m2 in this round


def test_eager_sticky_one_member_on_another_rack_keeps_everything() -> None:
    ppt, racks, owned = _one_member_on_rack_b()
    ud = StickyAssignor.subscription_user_data(owned, 1)
    out = StickyAssignor().assign_partitions(ppt, {"m": Subscription(["t"], user_data=ud, rack_id="b")}, racks)
    assert sorted(out["m"]) == owned
