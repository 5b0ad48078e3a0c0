"""The request read-ahead budget shared by all connections (`queued.max.request.bytes`): when the frames
queued by every connection together reach it, the connection that crossed it stops reading, and every
connection paused for it resumes once the total is back under half; and whatever fails while a request
is handled or answered closes its connection, never leaving it silent. Pure: a fake transport, no socket."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kaflite.server.connection import ConnectionLimits, Connections, KafkaConnection


class FakeTransport:
    def __init__(self) -> None:
        self.paused = False
        self.closed = False
        self.written: list[bytes] = []

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1234) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def writelines(self, parts: list[bytes]) -> None:
        self.written += [bytes(p) for p in parts]

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True


class GateDispatcher:
    """Holds every request until `gate` is set (a busy broker)."""

    listener = None  # as a Dispatcher of no particular listener: sessions are PLAINTEXT, User:ANONYMOUS

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.handled = 0

    async def dispatch(self, frame: bytes, host: str = "", connection_id: int = 0, session: Any = None,
                       on_throttle: Any = None) -> list[bytes] | None:
        await self.gate.wait()
        self.handled += 1
        return None


def _frame(n: int) -> bytes:
    body = struct.pack(">hhih", 3, 12, 1, 0) + b"\x00" * (n - 10)
    return struct.pack(">i", len(body)) + body


async def _one_request(dispatcher: Any, turns: int) -> tuple[KafkaConnection, FakeTransport]:
    """A connection to `dispatcher` that has received one 100-byte request, after `turns` turns of the loop."""
    c = KafkaConnection(dispatcher, ConnectionLimits(), Connections())
    t = FakeTransport()
    c.connection_made(t)  # type: ignore[arg-type]
    c.data_received(_frame(100))
    for _ in range(turns):
        await asyncio.sleep(0)
    return c, t


def test_read_ahead_budget_is_shared_by_all_connections() -> None:
    async def scenario() -> None:
        shared = Connections()
        limits = ConnectionLimits(max_queued_request_bytes=10_000, max_queued_requests=500)
        dispatcher = GateDispatcher()
        conns, transports = [], []
        for _ in range(3):
            c = KafkaConnection(dispatcher, limits, shared)  # type: ignore[arg-type]
            t = FakeTransport()
            c.connection_made(t)  # type: ignore[arg-type]
            conns.append(c)
            transports.append(t)
        await asyncio.sleep(0)
        for c in conns[:2]:  # 2 x 4 KB: under the budget, nobody paused
            c.data_received(_frame(2000) + _frame(2000))
        assert not any(t.paused for t in transports)
        conns[2].data_received(_frame(2000) + _frame(2000))  # 12 KB in all: the third stops reading
        assert transports[2].paused and not transports[0].paused
        assert shared.queued_request_bytes >= 10_000
        dispatcher.gate.set()  # the broker catches up: the total falls under half, reading resumes
        for _ in range(50):
            await asyncio.sleep(0)
        assert dispatcher.handled == 6
        assert shared.queued_request_bytes == 0
        assert not transports[2].paused
        for c in conns:
            await c.shutdown()

    asyncio.run(scenario())


class BrokenSlice:
    """A FileSlice whose file cannot be read any more."""

    def __init__(self) -> None:
        self.closed = False

    def __len__(self) -> int:
        return 1000

    def read(self, offset: int, size: int) -> bytes:
        raise OSError(24, "Too many open files")

    def close(self) -> None:
        self.closed = True


def _answer_from_a_failing_slice(monkeypatch: Any, failing: type[BrokenSlice]) -> None:
    """One request answered with a header and a file slice of type `failing` (it raises when read): the
    connection and the slice both end up closed."""
    import kaflite.server.connection as connection

    monkeypatch.setattr(connection, "FileSlice", failing)

    async def scenario() -> None:
        part = failing()

        class OneAnswer(GateDispatcher):
            async def dispatch(self, frame: bytes, host: str = "", connection_id: int = 0, session: Any = None,
                               on_throttle: Any = None) -> list[Any] | None:
                return [b"head", part]

        c, t = await _one_request(OneAnswer(), 20)
        assert t.closed and part.closed
        await c.shutdown()

    asyncio.run(scenario())


def test_an_unreadable_slice_closes_only_its_connection(monkeypatch: Any) -> None:
    _answer_from_a_failing_slice(monkeypatch, BrokenSlice)


class ClosedFileSlice(BrokenSlice):
    """A FileSlice whose file object was closed under it (Python raises ValueError, not OSError)."""

    def read(self, offset: int, size: int) -> bytes:
        raise ValueError("I/O operation on closed file")


def test_any_failure_while_sending_closes_the_connection_never_silence(monkeypatch: Any, caplog: Any) -> None:
    """The worker used to die with the exception and leave the connection open: the client waited for
    this answer, and every later one, forever."""
    _answer_from_a_failing_slice(monkeypatch, ClosedFileSlice)
    assert any(r.levelname == "ERROR" and "ValueError: I/O operation on closed file" in r.getMessage()
               for r in caplog.records), caplog.text


def test_a_cancelled_wait_inside_a_handler_closes_the_connection(caplog: Any) -> None:
    """A future a handler awaits, cancelled by someone else (not the connection's shutdown), must not end
    the worker quietly with the connection still open."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        awaited: asyncio.Future[None] = loop.create_future()

        class Waits(GateDispatcher):
            async def dispatch(self, frame: bytes, host: str = "", connection_id: int = 0, session: Any = None,
                               on_throttle: Any = None) -> list[Any] | None:
                await awaited
                return [b"never"]

        c, t = await _one_request(Waits(), 5)
        assert not t.closed
        awaited.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert t.closed and not t.written
        await c.shutdown()

    asyncio.run(scenario())
    assert any(r.levelname == "ERROR" and "CancelledError" in r.getMessage() for r in caplog.records), caplog.text


def test_shutdown_cancels_a_waiting_request_quietly(caplog: Any) -> None:
    async def scenario() -> None:
        # a GateDispatcher holds the request: the worker waits inside dispatch
        c, t = await _one_request(GateDispatcher(), 5)
        await c.shutdown()
        assert t.closed and c._worker is not None and c._worker.cancelled()  # noqa: SLF001

    asyncio.run(scenario())
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


class SwallowingDispatcher:
    """A handler that swallows its first cancellation, as `asyncio.wait_for` can on Python 3.11 (gh-86296)."""

    listener = None

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def dispatch(self, frame: bytes, host: str = "", connection_id: int = 0, session: Any = None,
                       on_throttle: Any = None) -> list[bytes] | None:
        self.started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass
        await asyncio.sleep(3600)
        return None


def test_shutdown_returns_when_the_handler_swallowed_a_cancellation() -> None:
    async def run() -> None:
        dispatcher = SwallowingDispatcher()
        c, t = await _one_request(dispatcher, 0)
        await asyncio.wait_for(dispatcher.started.wait(), 5)
        loop = asyncio.get_running_loop()
        started = loop.time()
        # (wait_for's own timeout is no check here: on 3.11 it can return instead of raising, the same bug)
        await asyncio.wait_for(c.shutdown(), 5)
        assert loop.time() - started < 4, "shutdown waited for the handler (a single cancel-and-await)"
        assert c._worker is not None and c._worker.done()  # noqa: SLF001
        assert t.closed

    asyncio.run(run())
