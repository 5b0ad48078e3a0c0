"""Sans-IO Kafka framing: every request and response is a big-endian int32 size followed by that many bytes.

Rules:
- a size below the smallest possible request header (8 bytes: api key, version, correlation id) or above
  `max_frame_bytes` (Kafka's `socket.request.max.bytes`, 100 MiB) is a protocol violation: the decoder
  raises `FrameError` and the shell closes the connection (what Kafka does) instead of allocating it;
- bytes may arrive split anywhere: the decoder buffers until a frame is whole, and hands back every
  complete frame in arrival order.
"""

from __future__ import annotations

import struct

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "FrameDecoder", "FrameError", "frame"]

DEFAULT_MAX_FRAME_BYTES = 104_857_600
MIN_FRAME_BYTES = 8
_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream is not a sequence of Kafka frames; the connection cannot continue."""


class FrameDecoder:
    """Turns a byte stream into complete frames (each a `bytes`, without its size prefix)."""

    __slots__ = ("_buf", "_need", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._need = -1  # size of the frame being assembled, -1 while its prefix is incomplete
        self.max_frame_bytes = max_frame_bytes

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while True:
            if self._need < 0:
                if end - pos < 4:
                    break
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < MIN_FRAME_BYTES or size > self.max_frame_bytes:
                    raise FrameError(
                        f"frame size {size} outside [{MIN_FRAME_BYTES}, {self.max_frame_bytes}]"
                    )
                pos += 4
                self._need = size
            if end - pos < self._need:
                break
            frames.append(bytes(buf[pos : pos + self._need]))
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames


def frame(payload_parts: list[bytes | memoryview]) -> list[bytes | memoryview]:
    """Prefix a response made of several buffers with its total size (no copy of the parts)."""
    size = sum(len(p) for p in payload_parts)
    return [_SIZE.pack(size), *payload_parts]
