"""Sans-IO Kafka framing: every request and response is a big-endian int32 size followed by that many bytes.

Rules:
- a size below the smallest possible request header (8 bytes: api key, version, correlation id) or above
  `max_frame_bytes` (Kafka's `socket.request.max.bytes`, 100 MiB) is a protocol violation: the decoder
  raises `FrameError` and the shell closes the connection (what Kafka does) instead of allocating it;
- bytes may arrive split anywhere: the decoder buffers until a frame is whole, and hands back every
  complete frame in arrival order;
- a frame is `bytes`, except one larger than the receive buffer: that one was read into a `bytearray` of
  its own, and is handed back as that very buffer, not copied (a producer's 1 MB requests are most of the
  bytes a broker receives); the decoder never touches it again. Whoever needs `bytes` (kio's readers:
  every request but Produce) makes them (server/dispatcher.py).
"""

from __future__ import annotations

import struct

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "Frame", "FrameDecoder", "FrameError", "frame"]

DEFAULT_MAX_FRAME_BYTES = 104_857_600
MIN_FRAME_BYTES = 8
_SIZE = struct.Struct(">i")
Frame = bytes | bytearray  # a request without its size prefix (module rules: bytearray for a large one)


class FrameError(Exception):
    """The byte stream is not a sequence of Kafka frames; the connection cannot continue."""


class FrameDecoder:
    """Turns a byte stream into complete frames (each without its size prefix; `Frame`, module rules).

    Two ways in: `feed(data)` for bytes already read, and the pair `get_buffer()` / `buffer_updated(n)` for
    a socket that reads straight into the decoder (asyncio's BufferedProtocol). The second copies a small
    frame once: the socket fills a receive buffer and every whole frame in it is sliced out as its own
    `bytes`; a frame larger than that buffer gets a `bytearray` of its own size once its prefix is read,
    the socket fills that directly, and that buffer is the frame handed back: never copied in this process.

    The receive buffer is let go when a read that did not fill its room leaves nothing to frame (the socket
    had no more for now), so an idle connection holds none (10,000 idle connections must not cost 64 KiB
    each); the next read gets a new one, 4 KiB to 64 KiB: a read that filled its room asks for twice as
    much next time, a short one for half. A stream in full flow keeps its 64 KiB buffer.
    """

    __slots__ = ("_recv", "_view", "_size", "_start", "_end", "_big", "_big_view", "_filled", "max_frame_bytes")

    RECEIVE_BYTES = 65_536  # the largest receive buffer
    MIN_RECEIVE_BYTES = 4_096

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._recv: bytearray | None = None  # None while nothing is pending (see the class comment)
        self._view: memoryview | None = None
        self._size = self.MIN_RECEIVE_BYTES  # of the next receive buffer
        self._start = 0  # the bytes received and not yet framed are _recv[_start:_end]
        self._end = 0
        self._big: bytearray | None = None  # a frame larger than the receive buffer, being filled
        self._big_view: memoryview | None = None
        self._filled = 0  # bytes of _big received so far
        self.max_frame_bytes = max_frame_bytes

    @property
    def buffered(self) -> int:
        """Bytes received that are not part of a frame handed back yet."""
        return (self._end - self._start) + (self._filled + 4 if self._big is not None else 0)

    @property
    def held(self) -> int:
        """Bytes of buffer this decoder holds now (0 once a read that did not fill its room left nothing to
        frame: the socket had no more for now)."""
        return len(self._recv or b"") + len(self._big or b"")

    def get_buffer(self) -> memoryview:
        """Where the next bytes read should go (never empty)."""
        if self._big_view is not None:
            return self._big_view[self._filled:]
        if self._view is None:
            self._recv = bytearray(self._size)
            self._view = memoryview(self._recv)
        elif self._end == len(self._view):  # full: keep the incomplete frame's bytes, in a larger buffer if need be
            pending = bytes(self._view[self._start:self._end])
            self._size = min(self.RECEIVE_BYTES, max(self._size, 2 * len(pending)))
            if self._size > len(self._view):
                self._recv = bytearray(self._size)
                self._view = memoryview(self._recv)
            self._view[:len(pending)] = pending
            self._start, self._end = 0, len(pending)
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """`nbytes` were written at the start of the last `get_buffer()`: the frames now complete."""
        frames: list[Frame] = []
        if self._big is not None:
            self._filled += nbytes
            if self._filled < len(self._big):
                return frames
            frames.append(self._big)  # the buffer itself (module rules): let go of below, never written again
            self._big = self._big_view = None
            self._filled = 0
            return frames
        view = self._view
        assert view is not None, "buffer_updated without get_buffer"
        filled = self._end + nbytes == len(view)  # the read filled its room: more is likely waiting
        if filled:
            self._size = min(self.RECEIVE_BYTES, 2 * self._size)
        self._end += nbytes
        pos, end = self._start, self._end
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(view, pos)
            if size < MIN_FRAME_BYTES or size > self.max_frame_bytes:
                raise FrameError(f"frame size {size} outside [{MIN_FRAME_BYTES}, {self.max_frame_bytes}]")
            if end - pos - 4 >= size:
                frames.append(bytes(view[pos + 4:pos + 4 + size]))
                pos += 4 + size
                continue
            if size + 4 > self.RECEIVE_BYTES:  # it cannot fit: a buffer of its own, filled from here on
                have = end - pos - 4
                self._big = bytearray(size)
                self._big[:have] = view[pos + 4:end]
                self._big_view = memoryview(self._big)
                self._filled = have
                pos = end
            break
        self._start = pos
        if pos == end:
            self._start = self._end = 0
            if filled and len(view) == self._size:
                pass  # a stream in full flow keeps its buffer, from its start again
            else:  # the socket had no more for now: let the buffer go (an idle connection holds none)
                self._recv = self._view = None
                if nbytes < self._size // 4:
                    self._size = max(self.MIN_RECEIVE_BYTES, self._size // 2)
        return frames

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """The frames completed by `data` (bytes read elsewhere), in order."""
        frames: list[Frame] = []
        src = memoryview(data)
        while src:
            room = self.get_buffer()
            n = min(len(room), len(src))
            room[:n] = src[:n]
            src = src[n:]
            frames += self.buffer_updated(n)
        return frames


def frame(payload_parts: list[bytes | memoryview]) -> list[bytes | memoryview]:
    """Prefix a response made of several buffers with its total size (no copy of the parts)."""
    size = sum(len(p) for p in payload_parts)
    return [_SIZE.pack(size), *payload_parts]
