import struct

import pytest
from hypothesis import given, settings
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


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([8, 100, 65_531, 65_532, 65_533, 65_536, 70_000, 200_000]), min_size=1,
                   max_size=5),
    reads=st.lists(st.integers(min_value=1, max_value=100_000), max_size=40),
)
def test_reading_into_the_decoder_frames_any_sizes_across_any_reads(sizes: list[int], reads: list[int]) -> None:
    """The BufferedProtocol way (get_buffer / buffer_updated) with frames around and above the 64 KiB receive
    buffer, the socket returning whatever it likes each time, never more than the room it was given."""
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    stream = memoryview(_framed(payloads))
    dec = FrameDecoder()
    out: list[bytes] = []
    pos = 0
    for r in [*reads, *([100_000] * 100)]:  # then big reads until the stream is through (1 MB at most)
        if pos == len(stream):
            break
        room = dec.get_buffer()
        assert len(room) > 0
        n = min(r, len(room), len(stream) - pos)
        room[:n] = stream[pos:pos + n]
        pos += n
        out += dec.buffer_updated(n)
    assert pos == len(stream) and out == payloads
    assert dec.buffered == 0
    # a frame that fits the receive buffer is sliced out as bytes; a larger one is its own buffer
    assert [type(f) for f in out] == [bytearray if len(f) + 4 > FrameDecoder.RECEIVE_BYTES else bytes for f in out]


def test_a_frame_larger_than_the_receive_buffer_is_read_into_its_own() -> None:
    dec = FrameDecoder()
    payload = b"p" * 300_000
    data = struct.pack(">i", len(payload)) + payload
    first = dec.get_buffer()
    first[:1000] = data[:1000]
    assert dec.buffer_updated(1000) == []
    room = dec.get_buffer()
    assert len(room) == len(payload) - 996  # the frame's own buffer, the rest of it exactly
    room[:] = data[1000:]
    out = dec.buffer_updated(len(room))
    assert out == [payload]
    assert dec.buffered == 0 and len(dec.get_buffer()) <= FrameDecoder.RECEIVE_BYTES


def test_a_frame_read_into_its_own_buffer_is_that_buffer_not_a_copy() -> None:
    """A producer's 1 MB request is handed on as the bytearray the socket filled (no copy in the broker), and
    the decoder never writes into it again: the next frames, large or small, go to buffers of their own."""
    dec = FrameDecoder()
    first, second = b"a" * 200_000, b"b" * 150_000
    data = memoryview(b"".join(struct.pack(">i", len(p)) + p for p in (first, second, b"small-frame")))
    pos, out = 0, []
    rooms = []
    while pos < len(data):
        room = dec.get_buffer()
        rooms.append(room.obj)
        n = min(len(room), len(data) - pos)
        room[:n] = data[pos:pos + n]
        pos += n
        out += dec.buffer_updated(n)
    assert out == [first, second, b"small-frame"]
    assert type(out[0]) is bytearray and type(out[1]) is bytearray and type(out[2]) is bytes
    assert any(obj is out[0] for obj in rooms) and any(obj is out[1] for obj in rooms), "the frames were copied"
    assert out[0] == first and out[1] == second  # untouched by what was read after them


def test_an_idle_connections_decoder_holds_no_buffer() -> None:
    """Once every byte received is framed the receive buffer is let go: 10,000 idle connections must not
    hold 64 KiB each."""
    dec = FrameDecoder()
    assert dec.held == 0
    payload = b"q" * 500
    data = struct.pack(">i", len(payload)) + payload
    room = dec.get_buffer()
    room[:10] = data[:10]
    assert dec.buffer_updated(10) == [] and dec.held > 0  # half a frame: kept
    room = dec.get_buffer()
    room[:len(data) - 10] = data[10:]
    assert dec.buffer_updated(len(data) - 10) == [payload]
    assert dec.held == 0
