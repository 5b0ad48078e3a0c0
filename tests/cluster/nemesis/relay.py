"""Userspace TCP relays, the nemesis's hands on the wire where the kernel offers none (no netem, no
iptables or nft on this machine): every broker's Kafka listener and every broker's ZooKeeper link pass
through one, so a fault can add delay to one broker's traffic or cut one broker off from ZooKeeper only.

Rules:
- one asyncio loop in one daemon thread runs every relay; the harness changes a relay only through
  `RelayHub.call` (thread-safe), and `RelayHub.close` stops the loop and closes every socket it opened;
- bytes are relayed in order per direction: a chunk read at t leaves no earlier than t + delay, and never
  before the chunk read before it (the delay is looked up per chunk, so it can change mid-connection);
- the delay of a chunk is the larger of the relay's own and the one set for the connection's peer address
  (`RelayHub.delay_from`): a broker's outbound connections are delayed by address, its inbound by relay;
- a cut relay is a black hole: what arrives is dropped (nothing is answered, nothing is refused, as a
  partitioned network does), new connections are accepted and starved; on heal every connection that
  lived through the cut is aborted (its stream lost bytes) and new ones relay again;
- when either side closes or fails, both sides are closed (Kafka and ZooKeeper clients never half-close).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


class Relay:
    def __init__(self, hub: RelayHub, name: str, listen_host: str, upstream: tuple[str, int]) -> None:
        self.hub = hub
        self.name = name
        self.listen_host = listen_host
        self.upstream = upstream
        self.port = 0
        self.delay_s = 0.0
        self.cut = False
        self._server: asyncio.base_events.Server | None = None
        # every live connection: its two writers and whether it lived through a cut
        self._conns: dict[int, tuple[asyncio.StreamWriter, asyncio.StreamWriter | None, list[bool]]] = {}
        self._next = 0

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.listen_host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    def _delay(self, peer_ip: str) -> float:
        return max(self.delay_s, self.hub.delay_from.get(peer_ip, 0.0))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        key = self._next
        self._next += 1
        tainted = [self.cut]
        self._conns[key] = (writer, None, tainted)
        peer = writer.get_extra_info("peername")
        peer_ip = str(peer[0]) if peer else ""
        up_w: asyncio.StreamWriter | None = None
        try:
            while self.cut:  # starve it: read and drop until healed (then it is aborted)
                if not await reader.read(65536):
                    return
            try:
                up_r, up_w = await asyncio.wait_for(asyncio.open_connection(*self.upstream), 5.0)
            except (TimeoutError, OSError):
                return
            self._conns[key] = (writer, up_w, tainted)
            await asyncio.gather(
                self._pipe(reader, up_w, peer_ip, tainted), self._pipe(up_r, writer, peer_ip, tainted)
            )
        finally:
            self._conns.pop(key, None)
            for w in (writer, up_w):
                if w is not None:
                    w.transport.abort()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer_ip: str, tainted: list[bool]
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def send() -> None:
            while (item := await queue.get()) is not None:
                due, data = item
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
                if tainted[0]:
                    continue
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(send())
        last_due = 0.0
        try:
            while data := await reader.read(65536):
                if self.cut:
                    tainted[0] = True
                    continue  # dropped on the floor
                last_due = max(loop.time() + self._delay(peer_ip), last_due)
                queue.put_nowait((last_due, data))
        except OSError:
            pass
        finally:
            queue.put_nowait(None)
            with contextlib.suppress(OSError, ConnectionError):
                await sender
            # one side is done: end the other (the caller aborts both transports)
            writer.transport.abort()

    def _set_cut(self, cut: bool) -> None:
        self.cut = cut
        for _key, (w, up, tainted) in list(self._conns.items()):
            if cut:
                tainted[0] = True
            elif tainted[0]:
                for x in (w, up):
                    if x is not None:
                        x.transport.abort()

    def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w, up, _t in list(self._conns.values()):
            for x in (w, up):
                if x is not None:
                    x.transport.abort()


class RelayHub:
    """The relays' loop thread. `delay_from` maps a peer address to the delay its connections get."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.delay_from: dict[str, float] = {}
        self.relays: list[Relay] = []
        self._thread = threading.Thread(target=self._run, name="nemesis-relays", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the relays' loop and return its result (5 s at most)."""
        fut: Future[T] = Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as e:  # handed to the caller
                fut.set_exception(e)

        self.loop.call_soon_threadsafe(run)
        return fut.result(5)

    def add(self, name: str, listen_host: str, upstream: tuple[str, int]) -> Relay:
        relay = Relay(self, name, listen_host, upstream)
        asyncio.run_coroutine_threadsafe(relay._start(), self.loop).result(5)
        self.relays.append(relay)
        return relay

    def set_cut(self, relay: Relay, cut: bool) -> None:
        self.call(lambda: relay._set_cut(cut))

    def set_delay(self, relay: Relay | None, peer_ip: str | None, delay_s: float) -> None:
        def apply() -> None:
            if relay is not None:
                relay.delay_s = delay_s
            if peer_ip is not None:
                if delay_s:
                    self.delay_from[peer_ip] = delay_s
                else:
                    self.delay_from.pop(peer_ip, None)

        self.call(apply)

    def close(self) -> None:
        """Close every relay and connection, end every task, stop the loop (a second call does nothing)."""
        if self.loop.is_closed():
            return

        async def shutdown() -> None:
            for r in self.relays:
                r._close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
