"""Writer process of the idempotent kill -9 test: one idempotent producer (id 42, epoch 0) appending
batches of consecutive sequences to one Log forever, on the hot path, printing `ACK <first seq> <records>
<base offset> <last offset>` after each append returned. Small segments (64 KiB), so that rolls write producer
snapshots (without fsync) all along. The test SIGKILLs it at a random moment.

It starts from the producer state the Log recovered: `START <log end> <next sequence>`.
Usage: python idempotent_crash_writer.py <log dir> <seed>
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import Log, LogConfig

PID = 42
CONFIG = LogConfig(segment_bytes=64 * 1024)


def main() -> None:
    log_dir, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    log = Log(log_dir, CONFIG)  # not a clean shutdown: recovery, then the snapshot + the tail replayed
    entry = log.producer_state.producers.get(PID)
    seq = (entry.last_seq + 1) & 0x7FFFFFFF if entry is not None and entry.retained else 0
    out = sys.stdout
    out.write(f"START {log.log_end_offset} {seq}\n")
    out.flush()
    for i in range(1_000_000):
        n = rng.choice((1, 3, 20))
        raw = build_record_batch([(b"k", b"v" * rng.choice((1, 100)), [])] * n, producer_id=PID, producer_epoch=0,
                                 base_sequence=seq)
        r = log.append(raw)
        out.write(f"ACK {seq} {n} {r.base_offset} {r.last_offset}\n")
        out.flush()
        seq = (seq + n) & 0x7FFFFFFF
        if i % 10 == 9:  # a few MB per second: enough rolls and a kill anywhere, little for the test to reopen
            time.sleep(0.001)


if __name__ == "__main__":
    main()
