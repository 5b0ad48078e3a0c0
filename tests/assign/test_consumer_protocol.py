"""Consumer protocol bytes: round trips, and byte-for-byte agreement with kio's generated schemas."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.consumer_protocol_assignment.v3 import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v3.data import TopicPartition as KioAssignedTP
from kio.schema.consumer_protocol_subscription.v3 import ConsumerProtocolSubscription
from kio.schema.consumer_protocol_subscription.v3.data import TopicPartition as KioOwnedTP
from kio.serial import entity_writer
from kio.static.primitive import i32

from kaflite.assign.types import TopicPartition
from kaflite.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerProtocolError,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

TOPIC = st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=12)
TPS = st.lists(st.tuples(TOPIC, st.integers(0, 2**31 - 1)), max_size=8).map(
    lambda xs: sorted({TopicPartition(t, p) for t, p in xs}))


def grouped(tps: list[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


@given(st.lists(TOPIC, max_size=5), st.one_of(st.none(), st.binary(max_size=20)), TPS,
       st.integers(-1, 2**31 - 1), st.one_of(st.none(), TOPIC))
def test_subscription_v3_bytes_equal_kio(topics: list[str], ud: bytes | None, owned: list[TopicPartition],
                                         gen: int, rack: str | None) -> None:
    ours = encode_subscription(ConsumerSubscription(topics, ud, owned, gen, rack), 3)
    kio_entity = ConsumerProtocolSubscription(
        topics=tuple(topics), user_data=ud,
        owned_partitions=tuple(KioOwnedTP(topic=t, partitions=tuple(i32(p) for p in ps))
                               for t, ps in grouped(owned).items()),
        generation_id=i32(gen), rack_id=rack)
    buf = io.BytesIO()
    entity_writer(ConsumerProtocolSubscription)(buf, kio_entity)
    assert ours == b"\x00\x03" + buf.getvalue()
    back = decode_subscription(ours)
    assert (back.topics, back.user_data, back.owned_partitions, back.generation_id, back.rack_id) == (
        topics, ud, owned, gen, rack)


@given(TPS, st.one_of(st.none(), st.binary(max_size=20)))
def test_assignment_bytes_equal_kio(parts: list[TopicPartition], ud: bytes | None) -> None:
    ours = encode_assignment(ConsumerAssignment(parts, ud), 3)
    kio_entity = ConsumerProtocolAssignment(
        assigned_partitions=tuple(KioAssignedTP(topic=t, partitions=tuple(i32(p) for p in ps))
                                  for t, ps in grouped(parts).items()), user_data=ud)
    buf = io.BytesIO()
    entity_writer(ConsumerProtocolAssignment)(buf, kio_entity)
    assert ours == b"\x00\x03" + buf.getvalue()
    back = decode_assignment(ours)
    assert (back.partitions, back.user_data) == (parts, ud)


def test_older_and_newer_versions() -> None:
    sub = ConsumerSubscription(["a", "b"], b"x", [TopicPartition("a", 1)], 7, "r1")
    v0 = decode_subscription(encode_subscription(sub, 0))
    assert (v0.topics, v0.user_data, v0.owned_partitions, v0.generation_id, v0.rack_id) == (["a", "b"], b"x", [], -1, None)
    assert v0.for_assignor().generation_id is None
    v2 = decode_subscription(encode_subscription(sub, 2))
    assert v2.for_assignor("inst").generation_id == 7 and v2.rack_id is None
    # a future v4 with extra trailing fields is read with the v3 schema
    future = b"\x00\x04" + encode_subscription(sub, 3)[2:] + b"\x00\x00\x00\x01"
    assert decode_subscription(future).rack_id == "r1"


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff", b"\x00\x00\x00\x00\x00\x05\x00"])
def test_malformed_bytes_are_a_clear_error(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(data)
