"""A consumer-group member in its own process (so a test can SIGKILL it).

Usage: python member_proc.py BOOTSTRAP GROUP TOPIC COMMIT_EVERY

Prints, flushed, one line per event:  `R <partition> <offset>` for every record processed and
`C <partition> <next offset>` for every committed position. It processes slowly (20 ms a record) and
commits every COMMIT_EVERY records and on revocation, so a kill leaves an uncommitted tail.
"""

from __future__ import annotations

import sys
import time

import confluent_kafka as ck


def main() -> None:
    bootstrap, group, topic, commit_every = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    consumer = ck.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 3000, "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range",
    })

    def commit(c: ck.Consumer) -> None:
        try:
            done = c.commit(asynchronous=False)
        except ck.KafkaException:
            return  # nothing consumed yet
        for tp in done or []:
            if tp.offset >= 0 and tp.error is None:
                print(f"C {tp.partition} {tp.offset}", flush=True)

    def on_revoke(c: ck.Consumer, parts: list[ck.TopicPartition]) -> None:
        commit(c)

    consumer.subscribe([topic], on_revoke=on_revoke)
    print("READY", flush=True)
    processed = 0
    deadline = time.monotonic() + 120  # bounded even if nobody kills us
    while time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is None or msg.error():
            continue
        time.sleep(0.02)
        print(f"R {msg.partition()} {msg.offset()}", flush=True)
        processed += 1
        if processed % commit_every == 0:
            commit(consumer)
    consumer.close()


if __name__ == "__main__":
    main()
