"""Does sendfile(2) help kaflite's fetch path? Serves one file of --mib MiB to a reader over loopback, three ways:

- uvloop + chunks: what kaflite does (os.pread of 256 KiB, transport.write, wait below the high-water mark);
- asyncio + chunks: the same on asyncio's own loop;
- asyncio + loop.sendfile: the kernel copies file -> socket (uvloop has no loop.sendfile: it would fall
  back to reading into memory).

Prints MiB/s and the server's CPU seconds per GiB (getrusage of this process, the reader runs in a thread
that only recv()s into one buffer). Run: .venv/bin/python bench/sendfile_bench.py --mib 512
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import tempfile
import threading
import time

CHUNK = 256 * 1024


class Sink(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=CHUNK)  # type: ignore[attr-defined]
        self.ready.set_result(None)

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()


async def serve(path: str, size: int, mode: str) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    proto: list[Sink] = []
    server = await loop.create_server(lambda: proto.append(Sink()) or proto[-1], "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    done = threading.Event()

    def reader() -> None:
        s = socket.create_connection(("127.0.0.1", port))
        buf = bytearray(1 << 20)
        got = 0
        while got < size:
            n = s.recv_into(buf)
            if not n:
                break
            got += n
        s.close()
        done.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    while not proto:
        await asyncio.sleep(0.001)
    p = proto[0]
    await p.ready
    assert p.transport is not None
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    fd = os.open(path, os.O_RDONLY)
    if mode == "sendfile":
        with os.fdopen(fd, "rb") as f:
            await loop.sendfile(p.transport, f, 0, size)
    else:
        pos = 0
        while pos < size:
            await p.writable.wait()
            chunk = os.pread(fd, CHUNK, pos)
            p.transport.write(chunk)
            pos += len(chunk)
        os.close(fd)
    while not done.is_set():
        await asyncio.sleep(0.001)
    elapsed = time.monotonic() - start
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    server.close()
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return size / (1 << 20) / elapsed, cpu / (size / (1 << 30))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    size = args.mib << 20
    with tempfile.NamedTemporaryFile(delete=False) as f:
        block = os.urandom(1 << 20)
        for _ in range(args.mib):
            f.write(block)
        path = f.name
    import uvloop

    try:
        for _ in range(args.runs):
            for name, factory, mode in (("uvloop + chunks", uvloop.new_event_loop, "chunks"),
                                        ("asyncio + chunks", asyncio.new_event_loop, "chunks"),
                                        ("asyncio + sendfile", asyncio.new_event_loop, "sendfile")):
                loop = factory()
                try:
                    rate, cpu = loop.run_until_complete(serve(path, size, mode))
                finally:
                    loop.close()
                print(f"{name:20} {rate:8.0f} MiB/s  {cpu:6.2f} CPU-s/GiB (server and reader threads)")
    finally:
        os.unlink(path)
    print("(the machine was shared with other work while this ran)")


if __name__ == "__main__":
    main()
