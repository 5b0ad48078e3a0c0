"""The length guard accepts every well-formed request exactly (it ends where kio's encoding ends) and
refuses the absurd lengths that would make kio's native reader abort the process."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.static.primitive import Records

from helpers import kio_served_versions
from kaflite.protocol.guard import check_request_lengths
from kaflite.protocol.messages import ProtocolError, request_schema
from kaflite.server.handlers import load_registry

st.register_type_strategy(Records, st.binary(max_size=40).map(Records))
SERVED = kio_served_versions(load_registry().ranges())


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_well_formed_requests_pass_and_end_exactly(data) -> None:
    api_key, version = data.draw(st.sampled_from(SERVED))
    schema = request_schema(api_key, version)
    request = data.draw(st.from_type(schema))
    buf = io.BytesIO()
    entity_writer(schema)(buf, request)
    body = b"pre" + buf.getvalue() + b"\x00\x00\x00"  # offset and librdkafka-style trailing bytes
    assert check_request_lengths(schema, body, 3) == len(body) - 3


@pytest.mark.parametrize(
    "api_key, version, body",
    [
        (32, 4, b"\xf2\xad\xe3\xe1\x24"),  # compact array count near 2^32 (made kio abort)
        (3, 12, b"\xff\xff\xff\xff\x0f"),
        (3, 1, struct.pack(">i", 2**31 - 1)),
        (19, 7, b"\x02\xff\xff\xff\xff\x0f"),  # compact string length beyond the frame
        (0, 3, b"\xff\xff" + struct.pack(">hi", 1, 1000) + struct.pack(">i", 1)),
    ],
)
def test_absurd_lengths_are_refused(api_key: int, version: int, body: bytes) -> None:
    with pytest.raises(ProtocolError):
        check_request_lengths(request_schema(api_key, version), body, 0)
