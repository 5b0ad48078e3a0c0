"""SPEC worked examples E-1..E-7 as named tests, and hypothesis properties over random groups."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.assign import assign_group, get_assignor, java_string_hashcode, utils_abs
from kaflite.assign.server import MemberSpec, ServerRangeAssignor, UniformAssignor
from kaflite.assign.sticky import CooperativeStickyAssignor, StickyAssignor
from kaflite.assign.types import Subscription, TopicPartition
from kaflite.assign.userdata import encode_sticky_user_data


def p(name: str) -> TopicPartition:
    """'t0p1' -> TopicPartition('t0', 1)."""
    topic, part = name.split("p")
    return TopicPartition(topic, int(part))


def names(assignment: dict[str, list[TopicPartition]]) -> dict[str, list[str]]:
    return {m: [f"{tp.topic}p{tp.partition}" for tp in v] for m, v in assignment.items()}


def subs(**members: list[str]) -> dict[str, Subscription]:
    return {m: Subscription(topics=t) for m, t in members.items()}


def rejoin_sticky(topics: dict[str, list[str]], prev: dict[str, list[TopicPartition]], generation: int = 1
                  ) -> dict[str, Subscription]:
    """Members rejoining a StickyAssignor group: their previous assignment travels in the user data."""
    return {m: Subscription(topics=t, owned_partitions=list(prev.get(m, [])), generation_id=generation,
                            user_data=encode_sticky_user_data(prev.get(m, []), generation))
            for m, t in topics.items()}


E3_TOPICS = {"t0": 1, "t1": 2, "t2": 3}
E3_SUBS = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}


def test_e1_range() -> None:
    out = get_assignor("range").assign({"t0": 3, "t1": 3}, subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert names(out) == {"C0": ["t0p0", "t0p1", "t1p0", "t1p1"], "C1": ["t0p2", "t1p2"]}


def test_e2_roundrobin() -> None:
    out = get_assignor("roundrobin").assign({"t0": 3, "t1": 3}, subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert names(out) == {"C0": ["t0p0", "t0p2", "t1p1"], "C1": ["t0p1", "t1p0", "t1p2"]}


def test_e3_roundrobin_unequal_subscriptions() -> None:
    out = get_assignor("roundrobin").assign(E3_TOPICS, subs(**E3_SUBS))
    assert names(out) == {"C0": ["t0p0"], "C1": ["t1p0"], "C2": ["t1p1", "t2p0", "t2p1", "t2p2"]}


def test_e4_sticky_then_c0_leaves() -> None:
    first = StickyAssignor().assign(E3_TOPICS, subs(**E3_SUBS))
    assert names(first) == {"C0": ["t0p0"], "C1": ["t1p0", "t1p1"], "C2": ["t2p0", "t2p1", "t2p2"]}
    left = {m: t for m, t in E3_SUBS.items() if m != "C0"}
    second = StickyAssignor().assign(E3_TOPICS, rejoin_sticky(left, first))
    assert names(second) == {"C1": ["t1p0", "t1p1", "t0p0"], "C2": ["t2p0", "t2p1", "t2p2"]}
    rr = get_assignor("roundrobin").assign(E3_TOPICS, subs(**left))
    assert names(rr) == {"C1": ["t0p0", "t1p1"], "C2": ["t1p0", "t2p0", "t2p1", "t2p2"]}


def test_e5_sticky_then_c1_leaves() -> None:
    topics = {f"t{i}": 2 for i in range(4)}
    all4 = list(topics)
    first = StickyAssignor().assign(topics, subs(C0=all4, C1=all4, C2=all4))
    assert names(first) == {"C0": ["t0p0", "t1p1", "t3p0"], "C1": ["t0p1", "t2p0", "t3p1"], "C2": ["t1p0", "t2p1"]}
    second = StickyAssignor().assign(topics, rejoin_sticky({"C0": all4, "C2": all4}, first))
    # Every surviving ownership is kept; only C1's partitions move. Which survivor receives which orphan is
    # decided as Java's constrained sticky path does (members filled in sorted order, orphans in (topic,
    # partition) order): C0 receives t0p1, C2 receives t2p0 and t3p1. (The seed's older text gives C0 t2p0.)
    assert names(second) == {"C0": ["t0p0", "t3p0", "t1p1", "t0p1"], "C2": ["t1p0", "t2p1", "t2p0", "t3p1"]}
    for m in ("C0", "C2"):
        assert set(first[m]) <= set(second[m])
    rr = get_assignor("roundrobin").assign(topics, subs(C0=all4, C2=all4))
    assert names(rr) == {"C0": ["t0p0", "t1p0", "t2p0", "t3p0"], "C2": ["t0p1", "t1p1", "t2p1", "t3p1"]}


def test_e6_range_one_topic() -> None:
    out = get_assignor("range").assign({"t": 7}, subs(C0=["t"], C1=["t"], C2=["t"]))
    assert [len(v) for v in out.values()] == [3, 2, 2]
    out = get_assignor("range").assign({"t": 10}, subs(**{"C1-0": ["t"], "C2-0": ["t"], "C3-0": ["t"]}))
    assert {m: [tp.partition for tp in v] for m, v in out.items()} == {
        "C1-0": [0, 1, 2, 3], "C2-0": [4, 5, 6], "C3-0": [7, 8, 9]}


def test_e7_offsets_topic_partition_of_group_test() -> None:
    assert utils_abs(java_string_hashcode("test")) % 50 == 48


def test_server_assignors_by_remote_assignor_name() -> None:
    from kaflite.assign import get_server_assignor

    assert isinstance(get_server_assignor("range"), ServerRangeAssignor)
    assert isinstance(get_server_assignor("uniform"), UniformAssignor)
    assert get_server_assignor("uniform") is not get_server_assignor("uniform")
    try:
        get_server_assignor("sticky")
    except ValueError as e:
        assert "uniform, range" in str(e)
    else:  # pragma: no cover
        raise AssertionError("client-only assignor accepted as server-side")


def test_registry_returns_fresh_instances_by_kafka_names() -> None:
    for name in ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "server-range"):
        a, b = get_assignor(name), get_assignor(name)
        assert a is not b
    assert get_assignor("org.apache.kafka.clients.consumer.CooperativeStickyAssignor").name == "cooperative-sticky"
    try:
        get_assignor("nope")
    except ValueError as e:
        assert "allowed" in str(e)
    else:  # pragma: no cover
        raise AssertionError("unknown assignor accepted")


# ---------------------------------------------------------------------------------------------------
# properties

TOPICS = st.dictionaries(st.sampled_from([f"t{i}" for i in range(6)]), st.integers(1, 12), min_size=1, max_size=6)


@st.composite
def groups(draw: st.DrawFn, equal: bool) -> tuple[dict[str, int], dict[str, list[str]]]:
    topics = draw(TOPICS)
    names_ = sorted(topics)
    n = draw(st.integers(1, 8))
    members = [f"m{i:02d}" for i in range(n)]
    if equal:
        return topics, {m: list(names_) for m in members}
    sub = {m: draw(st.lists(st.sampled_from(names_), min_size=1, unique=True)) for m in members}
    # a group leader hands the assignor only the topics its members subscribe to
    return {t: n for t, n in topics.items() if any(t in s for s in sub.values())}, sub


def owned_once(topics: dict[str, int], sub: dict[str, list[str]], out: dict[str, list[TopicPartition]]) -> None:
    seen: dict[TopicPartition, str] = {}
    for m, tps in out.items():
        for tp in tps:
            assert tp.topic in sub[m], f"{m} got {tp} outside its subscription"
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m}"
            seen[tp] = m
    wanted = {TopicPartition(t, i) for t, n in topics.items() if any(t in s for s in sub.values()) for i in range(n)}
    assert set(seen) == wanted


def kafka_balanced(sub: dict[str, list[str]], out: dict[str, list[TopicPartition]]) -> None:
    """Kafka's verifyValidityAndBalance: members whose counts differ by > 1 share no topic."""
    for a in out:
        for b in out:
            if len(out[a]) > len(out[b]) + 1:
                assert not [tp for tp in out[a] if tp.topic in sub[b]], f"{b} could take from {a}"


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(groups(equal=False))
def test_range_and_roundrobin_properties(group: tuple[dict[str, int], dict[str, list[str]]]) -> None:
    topics, sub = group
    s = {m: Subscription(t) for m, t in sub.items()}
    rng = assign_group(get_assignor("range"), topics, s)
    owned_once(topics, sub, rng)
    for t in topics:
        members = sorted(m for m in sub if t in sub[m])
        counts = [sum(1 for tp in rng[m] if tp.topic == t) for m in members]
        if members:
            assert counts == sorted(counts, reverse=True) and max(counts) - min(counts) <= 1
    rr = assign_group(get_assignor("roundrobin"), topics, s)
    owned_once(topics, sub, rr)
    if len({tuple(sorted(v)) for v in sub.values()}) == 1:
        sizes = [len(v) for v in rr.values()]
        assert max(sizes) - min(sizes) <= 1


@SETTINGS
@given(groups(equal=True), st.data())
def test_sticky_and_uniform_balanced_and_move_only_what_balance_requires(
        group: tuple[dict[str, int], dict[str, list[str]]], data: st.DataObject) -> None:
    topics, sub = group
    first = assign_group(StickyAssignor(), topics, {m: Subscription(t) for m, t in sub.items()})
    owned_once(topics, sub, first)
    assert max(map(len, first.values())) - min(map(len, first.values())) <= 1
    # membership change: some members leave, some join
    leaving = data.draw(st.sets(st.sampled_from(sorted(sub)), max_size=len(sub) - 1))
    joining = data.draw(st.integers(0, 3))
    sub2 = {m: t for m, t in sub.items() if m not in leaving}
    sub2.update({f"n{i}": sorted(topics) for i in range(joining)})
    second = assign_group(StickyAssignor(), topics, rejoin_sticky(sub2, {m: first[m] for m in sub2 if m in first}))
    owned_once(topics, sub2, second)
    sizes = [len(v) for v in second.values()]
    assert max(sizes) - min(sizes) <= 1
    for m in sub2:
        if m in first:  # a survivor keeps as much as its new quota allows
            kept = set(first[m]) & set(second[m])
            assert len(kept) == min(len(first[m]), len(second[m]))
    # the server-side uniform assignor, same story
    specs = {m: MemberSpec(t) for m, t in sub.items()}
    u1 = UniformAssignor().assign(specs, topics)
    owned_once(topics, sub, {m: u1.get(m, []) for m in sub})
    specs2 = {m: MemberSpec(t, list(u1.get(m, []))) for m, t in sub2.items()}
    u2 = UniformAssignor().assign(specs2, topics)
    u2 = {m: u2.get(m, []) for m in sub2}
    owned_once(topics, sub2, u2)
    assert max(map(len, u2.values())) - min(map(len, u2.values())) <= 1
    for m in sub2:
        if m in u1:
            kept = set(u1[m]) & set(u2[m])
            assert len(kept) == min(len(u1[m]), len(u2[m]))


@SETTINGS
@given(groups(equal=False), st.data())
def test_sticky_general_path_valid_and_balanced(group: tuple[dict[str, int], dict[str, list[str]]],
                                                data: st.DataObject) -> None:
    topics, sub = group
    first = assign_group(StickyAssignor(), topics, {m: Subscription(t) for m, t in sub.items()})
    owned_once(topics, sub, first)
    kafka_balanced(sub, first)
    # a subscription change, then rebalance with the previous assignment
    m = data.draw(st.sampled_from(sorted(sub)))
    sub2 = dict(sub)
    sub2[m] = data.draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, unique=True))
    second = assign_group(StickyAssignor(), topics, rejoin_sticky(sub2, first))
    owned_once(topics, sub2, second)
    kafka_balanced(sub2, second)
    u = UniformAssignor().assign({k: MemberSpec(t) for k, t in sub.items()}, topics)
    owned_once(topics, sub, {k: u.get(k, []) for k in sub})
    r = ServerRangeAssignor().assign({k: MemberSpec(t) for k, t in sub.items()}, topics)
    owned_once(topics, sub, r)


@SETTINGS
@given(groups(equal=False), st.data())
def test_cooperative_sticky_never_two_owners(group: tuple[dict[str, int], dict[str, list[str]]],
                                             data: st.DataObject) -> None:
    topics, sub = group
    owned: dict[str, list[TopicPartition]] = {m: [] for m in sub}
    generation = 0
    for _round in range(3):
        # membership change between rounds
        if _round:
            if data.draw(st.booleans()) and len(sub) > 1:
                gone = data.draw(st.sampled_from(sorted(sub)))
                sub = {m: t for m, t in sub.items() if m != gone}
                owned.pop(gone)
            else:
                new = f"j{_round}"
                sub = {**sub, new: data.draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, unique=True))}
                owned[new] = []
        for _followup in range(6):
            generation += 1
            s = {m: Subscription(t, owned_partitions=list(owned[m]), generation_id=generation - 1 if owned[m] else None)
                 for m, t in sub.items()}
            out = assign_group(CooperativeStickyAssignor(), topics, s)
            still_owned = {tp: m for m, tps in owned.items() for tp in tps}
            for m, tps in out.items():
                for tp in tps:
                    assert still_owned.get(tp, m) == m, f"{tp} given to {m} while {still_owned[tp]} still owns it"
            revoked = any(set(owned[m]) - set(out[m]) for m in sub)
            owned = {m: list(out[m]) for m in sub}
            if not revoked:
                break
        else:  # pragma: no cover
            raise AssertionError("cooperative rebalancing did not settle")
        owned_once(topics, sub, owned)
        kafka_balanced(sub, owned)
