"""A seeded fuzzer of the request path, seeded with frames captured from real clients
(data/client-frames.jsonl, see capture_frames.py) plus a minimal frame for every served (api, version)
the capture lacks. Shared by test_fuzz.py (CI tiers) and bench/hardening_bench.py (1,000,000 inputs).

Each input is a seed frame with 1-4 mutations (bit flips, boundary int16/int32 values, random bytes,
insertions, deletions, truncation, a range duplicated, the api version moved inside or outside the served
range, two frames spliced), sent over a pool of connections that never wait for answers (answers are
drained and discarded, connections are recycled). CreateTopics and CreatePartitions frames only get
structural mutations (header, truncation): a random partition count of 2^31 is an expensive but valid
request, not a malformed one.
"""

from __future__ import annotations

import json
import random
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "data" / "client-frames.jsonl"
VALUE_SENSITIVE = {19, 37}  # CreateTopics, CreatePartitions
_BOUNDARY16 = (0, 1, -1, 0x7FFF, -0x8000, 0x7FFE)
_BOUNDARY32 = (0, 1, -1, 0x7FFFFFFF, -0x80000000, 0x100, 0xFFFF)


def load_seeds(served: list[tuple[int, int, int]]) -> list[bytes]:
    seeds = [bytes.fromhex(json.loads(line)["frame"]) for line in CORPUS.read_text().splitlines() if line]
    have = {struct.unpack_from(">hh", f) for f in seeds}
    from kaflite.protocol.messages import request_schema

    for key, lo, hi in served:
        for v in {lo, hi}:
            if (key, v) in have:
                continue
            schema = request_schema(key, v)
            flexible = bool(schema is not None and schema.__flexible__)
            head = struct.pack(">hhih", key, v, 1, 4) + b"fuzz" + (b"\x00" if flexible else b"")
            seeds.append(head + b"\x00" * 24)
    return seeds


class Mutator:
    def __init__(self, seeds: list[bytes], served: dict[int, tuple[int, int]], seed: int) -> None:
        self.seeds = seeds
        self.served = served
        self.rng = random.Random(seed)

    def next(self) -> bytes:
        rng = self.rng
        base = bytearray(rng.choice(self.seeds))
        key = struct.unpack_from(">h", base)[0]
        structural_only = key in VALUE_SENSITIVE
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(9)
            n = len(base)
            if structural_only and op not in (6, 7) and n > 8:
                pos = rng.randrange(8)  # header bytes only
                base[pos] ^= 1 << rng.randrange(8)
                continue
            if op == 0 and n:
                pos = rng.randrange(n)
                base[pos] ^= 1 << rng.randrange(8)
            elif op == 1 and n:
                base[rng.randrange(n)] = rng.choice((0, 0xFF, 0x80, 0x7F, rng.randrange(256)))
            elif op == 2 and n >= 2:
                struct.pack_into(">h", base, rng.randrange(n - 1), rng.choice(_BOUNDARY16))
            elif op == 3 and n >= 4:
                struct.pack_into(">i", base, rng.randrange(n - 3), rng.choice(_BOUNDARY32))
            elif op == 4:
                pos = rng.randrange(n + 1)
                base[pos:pos] = rng.randbytes(rng.randint(1, 16))
            elif op == 5 and n > 8:
                pos = rng.randrange(8, n)
                del base[pos : pos + rng.randint(1, 16)]
            elif op == 6 and n > 8:
                del base[rng.randrange(8, n) :]
            elif op == 7 and n >= 4:
                k = struct.unpack_from(">h", base)[0]
                lo, hi = self.served.get(k, (0, 0))
                v = rng.choice((rng.randint(lo, hi), hi + 1, lo - 1, 0x7FFF, -1))
                struct.pack_into(">h", base, 2, max(-0x8000, min(0x7FFF, v)))
            elif op == 8 and n > 8:
                other = rng.choice(self.seeds)
                cut = rng.randrange(8, n)
                base = base[:cut] + other[rng.randrange(8, max(9, len(other))) :]
        if len(base) < 8:
            base += b"\x00" * (8 - len(base))
        return bytes(base)


@dataclass
class FuzzStats:
    inputs: int = 0
    answered: int = 0  # a response came back (the input was valid enough)
    closed: int = 0  # the broker closed the connection (a protocol violation)
    silent: int = 0  # neither within `answer_timeout_s` (acks=0, a long poll, a parked JoinGroup)
    probe_latencies_ms: list[float] = field(default_factory=list)
    probe_failures: int = 0
    seconds: float = 0.0


def every_known_version() -> list[bytes]:
    """A minimal frame (header, then zeros) for every (api key, version) kio has a schema for, served or
    not: sent before a memory baseline, they make the broker load every schema a mutated frame could make
    it load (a bounded cache, protocol/messages.py), so what grows afterwards is not schema loading."""
    from kio.schema.index import api_key_map, schema_name_map

    from kaflite.protocol.messages import request_schema

    frames = []
    for key, name in sorted(api_key_map.items()):
        for v in sorted(schema_name_map[name]):
            schema = request_schema(key, v)
            flexible = bool(schema is not None and schema.__flexible__)
            frames.append(struct.pack(">hhih", key, v, 1, 4) + b"warm" + (b"\x00" if flexible else b"") + b"\x00" * 24)
    return frames


def run(port: int, inputs: int, seed: int, served: list[tuple[int, int, int]],
        probe: Callable[[], float] | None = None, probe_every_s: float = 1.0,
        connections: int = 16, answer_timeout_s: float = 0.2, frames: list[bytes] | None = None) -> FuzzStats:
    """Send `inputs` mutated frames (or, given `frames`, those frames once each), each on a connection with
    no other request in flight, and wait for its answer or the connection's close (or `answer_timeout_s`,
    after which the connection is replaced), so every input is actually processed by the broker."""
    seeds = load_seeds(served)
    mut = Mutator(seeds, {k: (lo, hi) for k, lo, hi in served}, seed)
    fixed = iter(frames) if frames is not None else None
    if frames is not None:
        inputs = len(frames)
    stats = FuzzStats()
    sel = selectors.DefaultSelector()
    pending: dict[socket.socket, float] = {}
    idle: list[socket.socket] = []

    def connect() -> socket.socket:
        s = socket.create_connection(("127.0.0.1", port), 5)
        s.setblocking(False)
        return s

    def drop(s: socket.socket) -> None:
        pending.pop(s, None)
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    start = time.monotonic()
    next_probe = start + probe_every_s
    sent = 0
    while stats.inputs < inputs:
        while sent < inputs and len(pending) < connections:
            s = idle.pop() if idle else connect()
            frame = next(fixed) if fixed is not None else mut.next()
            try:
                s.sendall(struct.pack(">i", len(frame)) + frame)
            except (BlockingIOError, OSError):
                drop(s)
                stats.inputs += 1
                stats.closed += 1
                sent += 1
                continue
            sent += 1
            pending[s] = time.monotonic()
            sel.register(s, selectors.EVENT_READ)
        for key, _ev in sel.select(0.02):
            s = key.fileobj  # type: ignore[assignment]
            try:
                data = s.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            stats.inputs += 1
            if data:
                stats.answered += 1
                pending.pop(s)
                sel.unregister(s)
                idle.append(s)  # the answer may come in pieces: stray bytes are drained on reuse
                try:
                    while s.recv(1 << 16):
                        pass
                except (BlockingIOError, OSError):
                    pass
            else:
                stats.closed += 1
                drop(s)
        now = time.monotonic()
        for s, t in list(pending.items()):
            if now - t > answer_timeout_s:
                stats.inputs += 1
                stats.silent += 1
                drop(s)
        if probe is not None and now >= next_probe:
            try:
                stats.probe_latencies_ms.append(probe())
            except Exception:  # noqa: BLE001 - a failed probe is counted, the run goes on
                stats.probe_failures += 1
            next_probe = time.monotonic() + probe_every_s
    for s in list(pending) + idle:
        drop(s)
    stats.seconds = time.monotonic() - start
    return stats


class MetadataProbe:
    """A healthy client: one Metadata v12 request for a topic on its own connection, timed (ms)."""

    def __init__(self, port: int, topic: str) -> None:
        self.port = port
        name = topic.encode()
        body = struct.pack(">hhih", 3, 12, 7, 5) + b"probe" + b"\x00"
        body += b"\x02" + b"\x00" * 16 + bytes([len(name) + 1]) + name + b"\x00"  # 1 topic: id, name, tags
        body += b"\x00\x00" + b"\x00"  # allow auto create, include authorized ops, tags
        self.frame = struct.pack(">i", len(body)) + body
        self.sock: socket.socket | None = None

    def __call__(self) -> float:
        t = time.monotonic()
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), 5)
            self.sock.settimeout(5)
        try:
            self.sock.sendall(self.frame)
            size = struct.unpack(">i", _exactly(self.sock, 4))[0]
            payload = _exactly(self.sock, size)
            assert struct.unpack_from(">i", payload)[0] == 7
        except BaseException:
            self.sock.close()
            self.sock = None
            raise
        return (time.monotonic() - t) * 1000

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


def _exactly(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)
