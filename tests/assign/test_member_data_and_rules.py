"""Member data (sticky user data), member ordering and the rack-aware switch, from Kafka's vectors."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assign._vectors import tp
from helpers import vectors_of_kind
from kaflite.assign.sticky import CooperativeStickyAssignor, StickyAssignor
from kaflite.assign.types import Subscription, TopicPartition, member_sort_key, use_rack_aware_assignment
from kaflite.assign.userdata import (
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)

MEMBER_DATA = {c["id"].split("/", 1)[1]: c for c in vectors_of_kind("assignor.client.member_data")}
USE_RACK = vectors_of_kind("assignor.client.use_rack_aware")
SORT = [c for c in vectors_of_kind("assignor.client.member_sort") if c["expected"]["pinned_by_test"] == "exact"]


def tps(names: list[str]) -> list[TopicPartition]:
    return [tp(n) for n in names]


def expected_md(case: dict[str, Any]) -> tuple[list[str], int | None]:
    md = case["expected"]["member_data"]
    return md["partitions"], md["generation"]


def as_tuple(md: Any) -> tuple[list[str], int | None]:
    return [str(p) for p in md.partitions], md.generation


def test_sticky_member_data_from_user_data_in_every_subscription_version() -> None:
    case = MEMBER_DATA["sticky/testMemberData"]
    parts, gen = expected_md(case)
    ud = encode_sticky_user_data(tps(parts), gen)
    variants = [
        Subscription(["topic1", "topic2"], [], None, user_data=ud),                 # V0
        Subscription(["topic1", "topic2"], tps(parts), None, user_data=ud),         # V1
        Subscription(["topic1", "topic2"], tps(parts), gen, user_data=ud),          # V2+
    ]
    for sub in variants:
        assert as_tuple(StickyAssignor().member_data(sub)) == (parts, gen)


def test_cooperative_member_data_in_every_subscription_version() -> None:
    case = MEMBER_DATA["cooperative/testMemberData"]
    parts, gen = expected_md(case)
    assert gen is not None
    v1 = Subscription(["topic1", "topic2"], tps(parts), None, user_data=encode_cooperative_user_data(gen))
    v2 = Subscription(["topic1", "topic2"], tps(parts), gen, user_data=encode_cooperative_user_data(-1))
    for sub in (v1, v2):
        assert as_tuple(CooperativeStickyAssignor().member_data(sub)) == (parts, gen)


def test_sticky_member_data_honors_user_data() -> None:
    case = MEMBER_DATA["sticky/testMemberDataWillHonorUserData"]
    inp = case["input"]
    ud = encode_sticky_user_data(tps(inp["user_data"]["partitions"]), inp["user_data"]["generation"])
    sub = Subscription(["topic1", "topic2"], tps(inp["owned_partitions"]), inp["generation_id"], user_data=ud)
    assert as_tuple(StickyAssignor().member_data(sub)) == expected_md(case)


def test_sticky_member_data_with_inconsistent_data() -> None:
    case = MEMBER_DATA["sticky/testMemberDataWithInconsistentData"]
    inp = case["input"]
    ud = encode_sticky_user_data(tps(inp["user_data_from_onAssignment"]["partitions"]),
                                 inp["user_data_from_onAssignment"]["generation"])
    sub = Subscription(["topic"], tps(inp["owned_partitions"]), inp["generation_id"], user_data=ud)
    assert as_tuple(StickyAssignor().member_data(sub)) == expected_md(case)


@pytest.mark.parametrize("name", [
    "cooperative/testMemberDataWithInconsistentData",
    "cooperative/testMemberDataWithEmptyPartitionsAndEqualGeneration",
    "cooperative/testMemberDataWithEmptyPartitionsAndHigherGeneration",
])
def test_cooperative_member_data_cases(name: str) -> None:
    case = MEMBER_DATA[name]
    inp = case["input"]
    ud_gen = inp.get("user_data_generation", inp.get("user_data_from_onAssignment", {}).get("generation"))
    sub = Subscription(["topic"], tps(inp["owned_partitions"]), inp["generation_id"],
                       user_data=encode_cooperative_user_data(ud_gen))
    assert as_tuple(CooperativeStickyAssignor().member_data(sub)) == expected_md(case)


def test_cooperative_generation_encoding() -> None:
    case = MEMBER_DATA["cooperative/testEncodeAndDecodeGeneration"]
    assert [decode_cooperative_user_data(encode_cooperative_user_data()),
            decode_cooperative_user_data(encode_cooperative_user_data(10))] == case["expected"]["decoded_generation"]
    case = MEMBER_DATA["cooperative/testDecodeGeneration"]
    assert decode_cooperative_user_data(None) is case["expected"]["decoded_generation"]
    sub = Subscription(["t"], [], None, user_data=None)
    assert CooperativeStickyAssignor().member_data(sub).generation is None


def test_sticky_user_data_bytes_match_kafka() -> None:
    """The vectors carry Kafka's own encoded user data next to its decoded form."""
    n = 0
    for c in vectors_of_kind("assignor.client.sticky"):
        for sub in c["input"].get("subscriptions", {}).values():
            if "user_data_hex" in sub and "member_data" in sub:
                md = decode_sticky_user_data(bytes.fromhex(sub["user_data_hex"]))
                assert [str(p) for p in md.partitions] == sub["member_data"]["partitions"]
                want_gen = sub["member_data"]["generation"]
                assert md.generation == want_gen or (want_gen is None and md.generation in (None, -1))
                n += 1
    assert n > 100


def test_sticky_user_data_garbage_means_no_member_data() -> None:
    assert decode_sticky_user_data(b"\x00\x01") .partitions == []
    assert decode_sticky_user_data(None).generation is None
    # V0 (no generation) still decodes its partitions
    v0 = encode_sticky_user_data([TopicPartition("t", 3)], 5)[:-4]
    assert as_tuple(decode_sticky_user_data(v0)) == (["t-3"], None)


# "Aa" and "BB" have the same String.hashCode; "a" lands in bucket 1 of Java's 16-bucket table, "b-c" and
# "topic" (different hash codes) both in bucket 9,
# "Aa"/"BB" (hash 2112) in bucket 0 (2112 ^ (2112 >>> 16) = 2112, & 15 = 0).
_BUCKET_OF_16 = {"a": 1, "b-c": 9, "topic": 9, "Aa": 0, "BB": 0}


@given(st.lists(st.tuples(st.sampled_from(sorted(_BUCKET_OF_16)), st.integers(0, 2**31 - 1)), max_size=20),
       st.one_of(st.none(), st.integers(-1, 2**31 - 1)))
def test_sticky_user_data_round_trip(parts: list[tuple[str, int]], gen: int | None) -> None:
    """Kafka groups the partitions by topic with computeIfAbsent on a HashMap: topics in bucket order,
    topics sharing a bucket in reverse order of first appearance, partitions in list order."""
    tps_ = [TopicPartition(t, p) for t, p in parts]
    md = decode_sticky_user_data(encode_sticky_user_data(tps_, gen))
    first_seen = list(dict.fromkeys(t for t, _ in parts))
    topic_order = sorted(first_seen, key=lambda t: (_BUCKET_OF_16[t], -first_seen.index(t)))
    assert md.partitions == sorted(tps_, key=lambda x: topic_order.index(x.topic))
    assert md.generation == (-1 if gen is None else gen)


def test_sticky_user_data_colliding_topics_in_reverse_first_seen_order() -> None:
    """Pinned from Kafka (tools/assign-harness): "x.yAaBBAa" and "x.yAaBBBB" share a hash code."""
    tps_ = [TopicPartition("x.yAaBBAa", 0), TopicPartition("x.yAaBBBB", 1), TopicPartition("x.yAaBBAa", 2)]
    md = decode_sticky_user_data(encode_sticky_user_data(tps_, 1))
    assert as_tuple(md) == (["x.yAaBBBB-1", "x.yAaBBAa-0", "x.yAaBBAa-2"], 1)


@pytest.mark.parametrize("case", SORT, ids=[c["id"] for c in SORT])
def test_member_sort_vector(case: dict[str, Any]) -> None:
    members = case["input"]["members_member_id_instance_id"]
    got = [m for m, _ in sorted(members, key=lambda mi: member_sort_key(mi[0], mi[1]))]
    assert got == case["expected"]["sorted_member_ids"]


def test_member_sort_many_members_property() -> None:
    rnd = random.Random(7)
    ids = [str(i) for i in range(100, 200)]
    members = [(m, m if rnd.random() < 0.5 else None) for m in ids]
    rnd.shuffle(members)
    got = [m for m, _ in sorted(members, key=lambda mi: member_sort_key(mi[0], mi[1]))]
    static = sorted(m for m, i in members if i is not None)
    dynamic = sorted(m for m, i in members if i is None)
    assert got == static + dynamic


def _racks_per_partition(desc: str) -> dict[TopicPartition, set[str]]:
    if desc == "empty map":
        return {}
    if desc == "10 partitions each on {a,b,c}":
        return {TopicPartition("t", i): {"a", "b", "c"} for i in range(10)}
    assert desc == "partition i on {racks[i%3]}"
    return {TopicPartition("t", i): {"abc"[i % 3]} for i in range(10)}


@pytest.mark.parametrize("case", USE_RACK, ids=[c["id"] for c in USE_RACK])
def test_use_rack_aware_vector(case: dict[str, Any]) -> None:
    inp, exp = case["input"], case["expected"]
    args = (set(inp["consumer_racks"]), set(inp["partition_racks"]), _racks_per_partition(inp["racks_per_partition"]))
    assert use_rack_aware_assignment(*args, prefer_rack_aware_logic=False) == exp["prefer_rack_aware_logic_false"]
    if "prefer_rack_aware_logic_true" in exp:
        assert use_rack_aware_assignment(*args, prefer_rack_aware_logic=True) == exp["prefer_rack_aware_logic_true"]
