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
  every request but Produce) makes them (server/dispatcher.py);
- such a large frame's buffer may come from a `FrameBufferPool` (one per server, shared by its
  connections, one event loop): a buffer is handed out again only once nothing but the pool refers to it
  (no frame variable, no memoryview of it: a view holds a reference to its bytearray), so a frame still
  being handled or referred to is never overwritten. Why: `bytearray(n)` zero-fills n bytes, and at a
  producer's 0.1-1 MB per request the allocator hands back fresh pages each time (page faults, `brk`), about
  an eighth of the broker's CPU under a producer at linger.ms=5 (docs/performance.md). The pool is bounded
  (buffers and bytes) and emptied when unused for a whole `trim` period.
"""

from __future__ import annotations

import struct
import sys

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "Frame", "FrameBufferPool", "FrameDecoder", "FrameError", "frame"]

DEFAULT_MAX_FRAME_BYTES = 104_857_600
MIN_FRAME_BYTES = 8
_SIZE = struct.Struct(">i")
Frame = bytes | bytearray  # a request without its size prefix (module rules: bytearray for a large one)


class FrameError(Exception):
    """The byte stream is not a sequence of Kafka frames; the connection cannot continue."""


class FrameBufferPool:
    """The buffers of large frames, handed out again once free (module rules). One event loop only: taking a
    buffer is a check then a use, with no lock.

    A buffer is free when `sys.getrefcount(self.buffers[i])` is FREE_REFS: only the pool's list and the
    call's argument refer to it. A frame handed on to the dispatcher, the request's memoryviews of its
    records, a caller's variable: each one is one more, and the buffer is not handed out.
    """

    __slots__ = ("buffers", "max_buffers", "max_bytes", "max_buffer_bytes", "used", "reused")

    FREE_REFS = 2

    def __init__(self, max_buffers: int = 16, max_bytes: int = 32 << 20, max_buffer_bytes: int = 8 << 20) -> None:
        self.buffers: list[bytearray] = []
        self.max_buffers = max_buffers
        self.max_bytes = max_bytes  # of all the buffers kept together
        self.max_buffer_bytes = max_buffer_bytes  # a larger frame's buffer is never kept
        self.used = False  # a buffer was asked for since the last trim
        self.reused = 0  # buffers handed out again (tests, benches)

    def _free(self, i: int) -> bool:
        # no local name for the buffer here: it would be one more reference
        return sys.getrefcount(self.buffers[i]) == self.FREE_REFS

    def take(self, size: int) -> bytearray:
        """A bytearray of exactly `size` bytes, of unspecified content: a free kept buffer whose allocation
        holds `size` bytes without being given back (the smallest such), made that long, else a new one
        (kept if the bounds allow)."""
        self.used = True
        buffers = self.buffers
        best = -1
        best_alloc = 0
        for i in range(len(buffers)):
            # CPython's bytearray keeps its allocation for any length from half of it up to all of it but
            # its trailing NUL: in that range a length changes without a realloc (a copy) or a memset
            alloc = buffers[i].__alloc__()
            if alloc // 2 <= size < alloc and (best < 0 or alloc < best_alloc) and self._free(i):
                best, best_alloc = i, alloc
        if best >= 0:
            buf = buffers[best]
            have = len(buf)
            if have > size:
                del buf[size:]
            elif have < size:
                buf += bytes(size - have)  # within the allocation: only the difference is written
            self.reused += 1
            return buf
        buf = bytearray(size)
        if size <= self.max_buffer_bytes:
            self._keep(buf)
        return buf

    def _keep(self, buf: bytearray) -> None:
        buffers = self.buffers
        total = sum(len(b) for b in buffers) + len(buf)
        # room is made by letting go of free buffers, the shortest first (a long one serves more frames)
        while buffers and (len(buffers) >= self.max_buffers or total > self.max_bytes):
            free = [i for i in range(len(buffers)) if self._free(i)]
            if not free:
                return  # every kept buffer is in use: this one is not kept
            shortest = min(free, key=lambda i: len(buffers[i]))
            total -= len(buffers.pop(shortest))
        buffers.append(buf)

    def trim(self) -> None:
        """Called periodically (the server's idle-connection sweep): a pool not used since the last call
        lets go of every buffer, so an idle broker holds none."""
        if not self.used:
            self.buffers.clear()
        self.used = False

    @property
    def held(self) -> int:
        """Bytes of the buffers kept (in use or free)."""
        return sum(len(b) for b in self.buffers)


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

    __slots__ = ("_recv", "_view", "_size", "_start", "_end", "_big", "_big_view", "_filled", "max_frame_bytes",
                 "pool")

    RECEIVE_BYTES = 65_536  # the largest receive buffer
    MIN_RECEIVE_BYTES = 4_096

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, pool: FrameBufferPool | None = None) -> None:
        self._recv: bytearray | None = None  # None while nothing is pending (see the class comment)
        self._view: memoryview | None = None
        self._size = self.MIN_RECEIVE_BYTES  # of the next receive buffer
        self._start = 0  # the bytes received and not yet framed are _recv[_start:_end]
        self._end = 0
        self._big: bytearray | None = None  # a frame larger than the receive buffer, being filled
        self._big_view: memoryview | None = None
        self._filled = 0  # bytes of _big received so far
        self.max_frame_bytes = max_frame_bytes
        self.pool = pool  # where a large frame's buffer comes from (module rules); None: a new one each time

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
                self._big = bytearray(size) if self.pool is None else self.pool.take(size)
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
