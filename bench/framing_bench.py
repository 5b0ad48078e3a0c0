"""CPU cost of turning the bytes a socket reads into request frames, two ways measured in the same run:

- read-then-feed (the baseline, kaflite before this bench): every read makes a new `bytes` (asyncio's
  Protocol.data_received), which is appended to a buffer, and each whole frame is sliced out of it and made
  `bytes` again;
- read-into (`FrameDecoder.get_buffer` / `buffer_updated`, asyncio's BufferedProtocol, what the broker's
  connections use): the socket fills the decoder's buffer and each frame is copied out once.

Both read from a real socket pair (`recv` vs `recv_into`, 64 KiB at most per read), so the kernel's copy
counts on both sides; a writer thread keeps the socket full. The table shows the median of --repeat rounds
of the reader's CPU (time.thread_time) per MB of frames and per frame, for a few frame sizes.

    PYTHONPATH=src .venv/bin/python bench/framing_bench.py [--mb 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import sys
import threading
import time

from kaflite.protocol.framing import DEFAULT_MAX_FRAME_BYTES, MIN_FRAME_BYTES, FrameDecoder

_SIZE = struct.Struct(">i")
READ = 65_536


class ReadThenFeed:
    """The decoder as it was: bytes appended to a bytearray, each frame sliced and copied into bytes."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.need = -1

    def feed(self, data: bytes) -> list[bytes]:
        buf = self.buf
        buf += data
        frames: list[bytes] = []
        pos, end = 0, len(buf)
        while True:
            if self.need < 0:
                if end - pos < 4:
                    break
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < MIN_FRAME_BYTES or size > DEFAULT_MAX_FRAME_BYTES:
                    raise ValueError(size)
                pos += 4
                self.need = size
            if end - pos < self.need:
                break
            frames.append(bytes(buf[pos:pos + self.need]))
            pos += self.need
            self.need = -1
        if pos:
            del buf[:pos]
        return frames


def one_round(frame_size: int, total: int, way: str) -> float:
    """CPU seconds of the reading thread to frame `total` bytes of `frame_size` frames."""
    frame = _SIZE.pack(frame_size) + b"r" * frame_size
    count = max(1, total // len(frame))
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)

    def write() -> None:
        for _ in range(count):
            a.sendall(frame)
        a.shutdown(socket.SHUT_WR)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    got = 0
    t = time.thread_time()
    if way == "read-then-feed":
        old = ReadThenFeed()
        while data := b.recv(READ):
            got += len(old.feed(data))
    else:
        dec = FrameDecoder()
        while True:
            room = dec.get_buffer()
            n = b.recv_into(room, min(len(room), READ))
            if n == 0:
                break
            got += len(dec.buffer_updated(n))
    cpu = time.thread_time() - t
    writer.join(30)
    a.close()
    b.close()
    if got != count:
        raise RuntimeError(f"{way}: {got} frames of {count}")
    return cpu / (count * frame_size / 1e6)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=64, help="MB of frames per size and way and round")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.mb < 1 or args.repeat < 1:
        ap.error("--mb and --repeat must be at least 1")
    rows = []
    for size in (1_000, 16_000, 100_000, 1_000_000):
        cpu: dict[str, list[float]] = {"read-then-feed": [], "read-into": []}
        for _ in range(args.repeat):
            for way in cpu:  # alternating: a change of machine load hits both alike
                cpu[way].append(one_round(size, args.mb * 1_000_000, way))
        before, after = statistics.median(cpu["read-then-feed"]), statistics.median(cpu["read-into"])
        rows.append((size, before, after))
    print(f"framing {args.mb} MB per frame size and way, reader CPU, median of {args.repeat}")
    print("| frame size | read-then-feed (ms/MB) | read-into (ms/MB) | µs per frame, before -> after | CPU ratio |")
    print("|---|---|---|---|---|")
    for size, before, after in rows:
        print(f"| {size:,} B | {before * 1e3:.3f} | {after * 1e3:.3f} | {before * size:.1f} -> {after * size:.1f} "
              f"| {after / before:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
