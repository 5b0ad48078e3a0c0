"""Writer process of the crash test: appends batches forever, printing `ACK <base> <last>` after each
append returned and, with flush.messages=1, `flush_up_to` fsync'd it (what the produce handler does
before acknowledging). The test SIGKILLs it at random moments.

Every record's value is `rec-<offset>`, so a reader can check offsets are dense and nothing moved.
With flush mode "none" (Kafka's default policy) nothing is fsync'd by the writer: an acknowledged batch
is then only in the page cache, which a process kill does not lose.
Usage: python crash_writer.py <log dir> <seed> [1|none]
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import LogConfig, LogManager


def main() -> None:
    log_dir, seed = Path(sys.argv[1]), int(sys.argv[2])
    fsync_each = len(sys.argv) < 4 or sys.argv[3] == "1"
    rng = random.Random(seed)
    cfg = LogConfig(segment_bytes=256 * 1024, index_interval_bytes=1024)
    if fsync_each:
        cfg = cfg.replace(flush_interval_messages=1)
    manager = LogManager([log_dir], cfg)
    manager.load()
    log = manager.get_or_create("crash", 0)
    out = sys.stdout
    out.write(f"START {log.log_end_offset}\n")
    out.flush()
    for i in range(1_000_000):
        n = rng.choice((1, 1, 5, 50))
        pad = b"x" * rng.choice((0, 10, 1000, 30_000 if n < 50 else 3000))  # stay under max.message.bytes
        start = log.log_end_offset
        raw = build_record_batch([(b"k", b"rec-%d|" % (start + j) + pad, []) for j in range(n)])
        r = log.append(raw)
        if log.flush_needed(r.last_offset + 1):
            log.flush_up_to(r.last_offset + 1)
        log.update_high_watermark(log.log_end_offset)
        out.write(f"ACK {r.base_offset} {r.last_offset}\n")
        out.flush()
        if i % 50 == 0:
            manager.flush_due()


if __name__ == "__main__":
    main()
