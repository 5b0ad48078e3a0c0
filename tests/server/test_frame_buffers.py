"""Large request frames read into buffers used before (protocol/framing.py's FrameBufferPool, one per
server): the connection lets go of a frame once it is answered, so the next large frame of any connection
is read into that buffer; a frame something still holds is never overwritten. Pure: a fake transport and
dispatcher, no socket."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kaflite.server.connection import ConnectionLimits, Connections, KafkaConnection


class Transport:
    def __init__(self) -> None:
        self.answers = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1234) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def writelines(self, parts: list[bytes]) -> None:
        self.answers += 1

    def close(self) -> None:
        pass


class Recorder:
    """Answers every request; notes the first byte of its body and, when `keep`, keeps the frame itself."""

    listener = None

    def __init__(self, keep: bool = False) -> None:
        self.keep = keep
        self.kept: list[Any] = []
        self.seen: list[bytes] = []

    async def dispatch(
        self, frame: Any, host: str = "", connection_id: int = 0, session: Any = None, on_throttle: Any = None
    ) -> list[bytes]:
        self.seen.append(bytes(frame[10:11]))
        if self.keep:
            self.kept.append(frame)
        return [b"\x00\x00\x00\x04", b"\x00\x00\x00\x01"]


def _frame(fill: bytes, n: int) -> bytes:
    body = struct.pack(">hhih", 0, 9, 1, 0) + fill * (n - 10)
    return struct.pack(">i", len(body)) + body


def _read(conn: KafkaConnection, data: bytes) -> None:
    pos = 0
    while pos < len(data):  # as a socket hands it over: at most 64 KiB a read
        room = conn.get_buffer(-1)
        n = min(len(room), len(data) - pos, 65_536)
        room[:n] = data[pos : pos + n]
        conn.buffer_updated(n)
        pos += n


async def _answered(transport: Transport, n: int) -> None:
    for _ in range(200):
        if transport.answers >= n:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{transport.answers} answers, {n} expected")


def test_an_answered_large_frames_buffer_takes_the_next_large_frame() -> None:
    async def scenario() -> None:
        shared = Connections()
        dispatcher = Recorder()
        conns, transports = [], []
        for _ in range(2):
            c = KafkaConnection(dispatcher, ConnectionLimits(), shared)  # type: ignore[arg-type]
            t = Transport()
            c.connection_made(t)  # type: ignore[arg-type]
            conns.append(c)
            transports.append(t)
        _read(conns[0], _frame(b"a", 300_000))
        await _answered(transports[0], 1)
        _read(conns[0], _frame(b"b", 250_000))
        await _answered(transports[0], 2)
        _read(conns[1], _frame(b"c", 200_000))  # another connection of the same server: the same pool
        await _answered(transports[1], 1)
        assert dispatcher.seen == [b"a", b"b", b"c"]
        assert shared.frame_buffers.reused == 2 and len(shared.frame_buffers.buffers) == 1
        for c in conns:
            await c.shutdown()

    asyncio.run(scenario())


def test_a_frame_still_held_after_its_answer_is_not_overwritten() -> None:
    async def scenario() -> None:
        shared = Connections()
        dispatcher = Recorder(keep=True)  # e.g. a handler that parks the request's records somewhere
        c = KafkaConnection(dispatcher, ConnectionLimits(), shared)  # type: ignore[arg-type]
        t = Transport()
        c.connection_made(t)  # type: ignore[arg-type]
        for i, fill in enumerate((b"a", b"b", b"c")):
            _read(c, _frame(fill, 300_000))
            await _answered(t, i + 1)
        assert [bytes(f[10:]) for f in dispatcher.kept] == [fill * 299_990 for fill in (b"a", b"b", b"c")]
        assert shared.frame_buffers.reused == 0
        await c.shutdown()

    asyncio.run(scenario())
