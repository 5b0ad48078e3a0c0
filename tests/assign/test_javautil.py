"""The Java HashMap/HashSet iteration-order model (kaflite.assign.javautil) against orders printed by
JDK 17's java.util.HashMap (pinned below; produced with a ten-line Java program, see the harness README)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaflite.assign.javautil import (
    JavaHashMap,
    JavaHashSet,
    bucket_index,
    hashmap_order,
    java_string_hashcode,
)
from kaflite.assign.types import string_hash

THIRTEEN = ["ta0", "th1", "to2", "tv3", "tc4", "tj5", "tq6", "tx7", "te8", "tl9", "ts10", "tz11", "tg12"]
COLLIDING = ["xAaAa", "xBBBB", "xAaBB", "xBBAa", "y"]  # the four x... share one String.hashCode


def _cia_order(keys: list[str]) -> list[str]:
    m: JavaHashMap[str, int] = JavaHashMap(string_hash)
    for k in keys:
        m.compute_if_absent(k, int)
    return m.keys()


def test_put_with_a_resize_matches_java() -> None:
    # 13 keys: the 13th put makes size > 12 = 0.75 x 16, so the table has 32 buckets when iterated
    assert hashmap_order(THIRTEEN, string_hash) == [
        "tl9", "ta0", "tg12", "tc4", "te8", "ts10", "tv3", "tz11", "tx7", "to2", "tq6", "th1", "tj5"]


def test_compute_if_absent_links_at_the_head_and_grows_late() -> None:
    # computeIfAbsent resizes *before* an insertion, so 13 keys still sit in 16 buckets, and keys
    # sharing a bucket come out newest first
    assert _cia_order(THIRTEEN) == [
        "tz11", "tl9", "tv3", "tg12", "tx7", "ta0", "tc4", "te8", "to2", "ts10", "tq6", "th1", "tj5"]


def test_compute_if_absent_of_a_present_key_still_grows_a_full_table() -> None:
    # Java checks "size > threshold" at every computeIfAbsent call: the 14th call (a key already there)
    # doubles the table the 13th left too full
    m: JavaHashMap[str, int] = JavaHashMap(string_hash)
    for k in THIRTEEN:
        m.compute_if_absent(k, int)
    assert m.capacity == 16 and m.needs_resize()
    m.compute_if_absent("ta0", int)
    assert m.capacity == 32 and m.keys() == [
        "tl9", "tg12", "ta0", "tc4", "te8", "ts10", "tz11", "tv3", "tx7", "to2", "tq6", "th1", "tj5"]


def test_equal_hash_codes_keep_insertion_order_with_put_and_reverse_it_with_compute_if_absent() -> None:
    assert len({java_string_hashcode(k) for k in COLLIDING[:4]}) == 1
    assert hashmap_order(COLLIDING, string_hash) == ["xAaAa", "xBBBB", "xAaBB", "xBBAa", "y"]
    assert _cia_order(COLLIDING) == ["xBBAa", "xAaBB", "xBBBB", "xAaAa", "y"]


def test_ninth_key_in_a_bucket_doubles_a_small_table() -> None:
    nine = ["k18", "k29", "k90", "k140", "k151", "k162", "k173", "k184", "k195"]
    assert {bucket_index(java_string_hashcode(k), 16) for k in nine} == {3}
    m: JavaHashMap[str, int] = JavaHashMap(string_hash)
    for k in nine:
        m[k] = 0
    assert m.capacity == 32 and not m.treeified  # 9 keys would not resize for the load factor alone
    assert m.keys() == ["k90", "k18", "k29", "k140", "k151", "k162", "k173", "k184", "k195"]


def test_removed_and_put_again_goes_to_the_tail_of_its_bucket() -> None:
    m: JavaHashMap[str, int] = JavaHashMap(string_hash)
    for k in COLLIDING:
        m[k] = 0
    del m["xAaAa"]
    m["xAaAa"] = 1
    assert m.keys() == ["xBBBB", "xAaBB", "xBBAa", "xAaAa", "y"]


@given(st.lists(st.text(alphabet="ABab01", min_size=1, max_size=4), max_size=60, unique=True))
def test_iteration_is_bucket_order_then_link_order(keys: list[str]) -> None:
    """Properties of the model: every key once; bucket indexes ascend; inside a bucket put keeps
    insertion order and computeIfAbsent reverses it (equal-hash names abound in this alphabet)."""
    for order, reverse in ((hashmap_order(keys, string_hash), False), (_cia_order(keys), True)):
        assert sorted(order) == sorted(keys)
        m: JavaHashMap[str, int] = JavaHashMap(string_hash)
        for k in keys:
            m[k] = 0
        cap = m.capacity
        buckets = [bucket_index(java_string_hashcode(k), cap) for k in order]
        if not reverse and not m.treeified:
            assert buckets == sorted(buckets)
            for b in set(buckets):
                inside = [k for k in order if bucket_index(java_string_hashcode(k), cap) == b]
                assert inside == [k for k in keys if k in inside]


def test_hash_set_is_a_hash_map() -> None:
    s = JavaHashSet.of(string_hash, COLLIDING)
    assert list(s) == hashmap_order(COLLIDING, string_hash) and s.first() == "xAaAa" and not s.treeified
