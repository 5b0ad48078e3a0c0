"""A long-lived confluent_kafka process (`OffsetsClient` starts it): one AdminClient and one Consumer (group.id
set, partition 0 of the topic assigned, never subscribed), driven by stdin lines and answering one stdout
line each, so a librdkafka crash ends that process instead of pytest (tests/groups/test_rdkafka_not_coordinator.py,
tests/cluster/test_group_failover.py).

    python rdkafka_offsets_client.py <bootstrap> <group> <topic>
    commit N    -> "ok [[N, <error or None>]]" | "error <code>"   Consumer.commit(offset N), synchronous
    committed   -> "ok [[offset, <error or None>]]" | "error <code>"   Consumer.committed()
    list        -> "ok [[topic, partition, offset], ...]" | "error <code>"   AdminClient.list_consumer_group_offsets
"""

from __future__ import annotations

import faulthandler
import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient


class OffsetsClient:
    """This script in a subprocess: `ask` sends one command and returns its answer line, "" once the
    process died; `close` ends it and returns its exit status (-11: SIGSEGV)."""

    def __init__(self, bootstrap: str, group: str, topic: str, stderr: Path) -> None:
        self.stderr = stderr
        self.proc = subprocess.Popen([sys.executable, __file__, bootstrap, group, topic], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr.open("w"))

    def ask(self, command: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> int:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except BrokenPipeError:  # it died
            pass
        try:
            return self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def main() -> None:
    faulthandler.enable()  # a segfault prints the Python stack on stderr
    bootstrap, group, topic = sys.argv[1:4]
    conf = {"bootstrap.servers": bootstrap}
    admin = AdminClient(dict(conf))
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0)])
    for line in sys.stdin:
        cmd = line.split()
        try:
            if cmd[0] == "commit":
                got = consumer.commit(offsets=[TopicPartition(topic, 0, int(cmd[1]))], asynchronous=False)
                out: list[list[object]] = [[tp.offset, tp.error and str(tp.error)] for tp in got or []]
            elif cmd[0] == "committed":
                got = consumer.committed([TopicPartition(topic, 0)], timeout=10)
                out = [[tp.offset, tp.error and str(tp.error)] for tp in got]
            elif cmd[0] == "list":
                res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
                out = [[tp.topic, tp.partition, tp.offset] for tp in res.topic_partitions]
            else:
                raise ValueError(f"unknown command {line!r}")
            print("ok", json.dumps(out), flush=True)
        except KafkaException as e:
            print("error", e.args[0].code(), flush=True)
    consumer.close()


if __name__ == "__main__":
    main()
