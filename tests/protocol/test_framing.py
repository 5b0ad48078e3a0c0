import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaflite.protocol.framing import FrameDecoder, FrameError, frame


def _framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@given(
    payloads=st.lists(st.binary(min_size=8, max_size=300), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=1, max_value=50), max_size=30),
)
def test_frames_survive_any_split(payloads: list[bytes], cuts: list[int]) -> None:
    stream = _framed(payloads)
    dec = FrameDecoder()
    out: list[bytes] = []
    pos = 0
    for c in cuts:
        out += dec.feed(stream[pos : pos + c])
        pos += c
    out += dec.feed(stream[pos:])
    assert out == payloads
    assert dec.buffered == 0


@pytest.mark.parametrize("size", [-1, 0, 7, 2**31 - 1, 104_857_601])
def test_bad_sizes_are_refused_before_allocation(size: int) -> None:
    dec = FrameDecoder()
    with pytest.raises(FrameError):
        dec.feed(struct.pack(">i", size) + b"x" * 8)


def test_frame_prefixes_total_size() -> None:
    parts = frame([b"abc", memoryview(b"defgh")])
    assert b"".join(bytes(p) for p in parts) == struct.pack(">i", 8) + b"abcdefgh"
