"""kill -9 of the broker mid-transaction, restart on the same data directory: an open transaction is
aborted by the restarted coordinator once its timeout passes, a committed one is whole — never half
visible to read_committed consumers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from helpers import free_port, read_to_end, start_broker_process, stop_process, wait_until


def _start(data_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "kaflite.server",
           "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"log.dirs={data_dir}",
           "--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"]
    return start_broker_process(cmd, port, log_path, 30)


def _stable(bootstrap: str, topic: str, partitions: int) -> bool:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "w", "isolation.level": "read_committed"})
    u = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "w", "isolation.level": "read_uncommitted"})
    try:
        return all(c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1]
                   == u.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        c.close()
        u.close()


def test_kill_9_mid_transaction(tmp_path: Path) -> None:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    log_path = tmp_path / "broker.log"
    proc = _start(tmp_path / "data", port, log_path)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its handle must outlive the future
        admin.create_topics([NewTopic("t", 3, 1)])["t"].result(15)
        committed = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "done"})
        committed.init_transactions(30)
        committed.begin_transaction()
        for i in range(30):
            committed.produce("t", b"c-%d" % i, partition=i % 3)
        committed.commit_transaction(30)
        open_txn = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "open",
                                "transaction.timeout.ms": 3000})
        open_txn.init_transactions(30)
        open_txn.begin_transaction()
        for i in range(30):
            open_txn.produce("t", b"o-%d" % i, partition=i % 3)
        open_txn.flush(10)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc = _start(tmp_path / "data", port, log_path)
        wait_until("the open transaction aborted after the restart", lambda: _stable(bootstrap, "t", 3), 30, 0.5)
        got = read_to_end(bootstrap, "t", 3)
        assert sorted(got) == sorted(b"c-%d" % i for i in range(30))
        # the restarted coordinator serves the id again: a new incarnation commits
        again = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "open"})
        again.init_transactions(30)
        again.begin_transaction()
        again.produce("t", b"after", partition=0)
        again.commit_transaction(30)
        # 31: the markers of a commit are written after its answer
        assert b"after" in read_to_end(bootstrap, "t", 3, at_least=31)
    finally:
        stop_process(proc)


def _committed(bootstrap: str, group: str, topic: str) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return int(c.committed([ck.TopicPartition(topic, 0)], timeout=20)[0].offset)
    finally:
        c.close()


def test_kill_9_after_send_offsets_keeps_them_pending(tmp_path: Path) -> None:
    """TxnOffsetCommit's offsets are in `__consumer_offsets` (transactional records of the producer), not
    in memory: after a kill -9 and restart between send_offsets_to_transaction and the end of the
    transaction, a commit makes them visible and an abort does not."""
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    log_path = tmp_path / "broker.log"
    proc = _start(tmp_path / "data", port, log_path)
    group = "g-offsets"
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("out", 1, 1), NewTopic("in", 1, 1)])["out"].result(15)
        member = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        metadata = member.consumer_group_metadata()
        for offset, commit in ((5, True), (9, False)):
            p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "offsets"})
            p.init_transactions(30)
            p.begin_transaction()
            p.produce("out", b"x-%d" % offset, partition=0)
            p.send_offsets_to_transaction([ck.TopicPartition("in", 0, offset)], metadata, 30)
            p.flush(10)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            proc = _start(tmp_path / "data", port, log_path)
            if commit:
                p.commit_transaction(60)
            else:
                p.abort_transaction(60)
            assert _committed(bootstrap, group, "in") == 5, f"after {'commit' if commit else 'abort'} of {offset}"
        member.close()
    finally:
        stop_process(proc)
