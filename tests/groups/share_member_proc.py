"""A share-group member in its own process (so a test can SIGKILL it mid-batch).

Usage: python share_member_proc.py BOOTSTRAP GROUP TOPIC STOP_FILE [DELAY_MS]

A ShareConsumer in explicit mode: every record of a batch is processed (DELAY_MS of sleep, 5 by default:
the work on a record, so a kill can land mid-batch, and the group's work lasts long enough for every
kill of the test to find some), acknowledged ACCEPT, then the batch is committed (commit_sync). Prints, flushed, one line per
event:
  `D <count>`                   a batch arrived (its records are being worked on);
  `P <partition>:<offset> ...`  the acknowledgements about to be committed (before commit_sync);
  `A <partition>:<offset> ...`  those of them whose partition's commit succeeded (after commit_sync);
  `F <partition> <error>`       a partition whose commit failed (its records will come again);
  `X <error>`                   commit_sync raised: the records of the last `P` line are uncertain.
A kill between a `P` line and its `A` line leaves those records uncertain: the broker may have applied the
commit. It closes (committing nothing more) and exits when STOP_FILE exists, or after 300 s.
"""

from __future__ import annotations

import os
import sys
import time

import confluent_kafka as ck


def main() -> None:
    bootstrap, group, topic, stop_file = sys.argv[1:5]
    delay_s = float(sys.argv[5]) / 1000 if len(sys.argv) > 5 else 0.005
    consumer = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                 "share.acknowledgement.mode": "explicit", "max.poll.records": 20})
    consumer.subscribe([topic])
    print("READY", flush=True)
    deadline = time.monotonic() + 300  # bounded even if nobody stops it
    while time.monotonic() < deadline and not os.path.exists(stop_file):
        batch = list(consumer.poll(0.3))
        acked: dict[int, list[int]] = {}
        if batch:
            print(f"D {len(batch)}", flush=True)
        for m in batch:
            if m.error() is not None:
                continue
            time.sleep(delay_s)  # the work on a record: a kill can come between two of them
            consumer.acknowledge(m)
            partition, offset = m.partition(), m.offset()
            assert partition is not None and offset is not None  # a record, not an error event
            acked.setdefault(partition, []).append(offset)
        if not acked:
            continue
        print("P " + " ".join(f"{p}:{o}" for p, offs in acked.items() for o in offs), flush=True)
        try:
            result = consumer.commit_sync(10)
        except ck.KafkaException as e:  # no answer (a timeout): the broker may still have applied it
            print(f"X {e}".replace("\n", " "), flush=True)
            continue
        done = {tp.partition for tp, err in result.items() if err is None}
        for tp, err in result.items():
            if err is not None:
                print(f"F {tp.partition} {err}", flush=True)
        ok = [f"{p}:{o}" for p, offs in acked.items() if p in done for o in offs]
        if ok:
            print("A " + " ".join(ok), flush=True)
    consumer.close()
    print("CLOSED", flush=True)


if __name__ == "__main__":
    main()
