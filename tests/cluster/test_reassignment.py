"""Partition reassignment on a real cluster: three `python -m kaflite.server` processes on a real ZooKeeper.

- AlterPartitionReassignments / ListPartitionReassignments on the wire with kafka-python's admin client
  (confluent-kafka 2.16 has no reassignment API): Kafka's per-partition errors, NOT_CONTROLLER from a
  broker that is not the controller (raw kio request), a move listed while its new replica is frozen
  (SIGSTOP, shorter than the session), seen by `kaflite reassign-partitions --list / --verify` and
  `kaflite topics describe` (Adding / Removing Replicas), refused
  to `--execute` another, and cancelled back to the original replicas by `--cancel`;
- a move with data while an idempotent acks=all producer writes: t-0 [1,2] -> [2,3] through the API (the
  leader 1 is removed: 2 leads) and t-1 [1,2] -> [1,3] through the legacy /admin/reassign_partitions
  znode; afterwards the new replica's log is byte-identical to the other's (same batches at the same
  offsets), the removed replica's log directory is gone from its broker, and every acknowledged record is
  read back exactly once, in order.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.admin import NewTopic
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from cluster.conftest import BrokerProcesses
from helpers import wait_until
from kaflite.cluster.zk import KafkaZkClient


def _segments(log_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(log_dir.glob("*.log")))


def _assignment(zk: KafkaZkClient, topic: str) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
    got = zk.get_topic_assignment(topic)
    assert got is not None
    return dict(got[0].partitions), dict(got[0].adding_replicas)


def test_reassignment_moves_data_and_the_apis_answer_as_kafka(
    brokers: BrokerProcesses, zk_connect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zk = KafkaZkClient(zk_connect)
    zk.start()
    admin = None
    try:
        # a session long enough for the frozen broker below to keep its registration
        brokers.start_registered(zk, 1, 2, 3, overrides=("replica.fetch.wait.max.ms=100",
                                                          "zookeeper.session.timeout.ms=9000"))
        admin = KafkaAdminClient(bootstrap_servers=brokers.bootstrap(), request_timeout_ms=30000)
        admin.create_topics([NewTopic("t", num_partitions=-1, replication_factor=-1,
                                      replica_assignments={0: [1, 2], 1: [1, 2]})])

        def in_sync() -> bool:
            states = zk.get_partition_states([("t", 0), ("t", 1)])
            return all(s is not None and s.leader == 1 and s.isr == (1, 2) for s in states.values())

        wait_until("t led by 1 with ISR [1, 2]", in_sync)
        tp0, tp1 = KTopicPartition("t", 0), KTopicPartition("t", 1)

        # --- the wire: Kafka's errors, per partition ----------------------------------------------------
        got = admin.alter_partition_reassignments({
            tp0: [1, 9], KTopicPartition("t", 7): [1, 2], KTopicPartition("nope", 0): None, tp1: None,
        })
        assert got[tp0] is InvalidReplicationAssignmentError  # broker 9 is not alive
        assert got[KTopicPartition("t", 7)] is UnknownTopicOrPartitionError
        assert got[KTopicPartition("nope", 0)] is NoReassignmentInProgressError
        assert got[tp1] is NoReassignmentInProgressError
        assert admin.list_partition_reassignments() == {}
        _not_controller_answers(brokers, zk)

        # --- a move listed while its new replica is frozen, then cancelled -------------------------------
        b3 = brokers.procs[3]
        monkeypatch.setenv("NO_COLOR", "1")
        os.kill(b3.pid, signal.SIGSTOP)  # briefly: less than its 9 s session
        try:
            assert admin.alter_partition_reassignments({tp1: [1, 3]}) == {tp1: None}
            listed = admin.list_partition_reassignments()
            assert listed == {tp1: {"replicas": [1, 3, 2], "adding_replicas": [3], "removing_replicas": [2]}}
            assert admin.list_partition_reassignments([tp0]) == {}
            # the CLI sees the move under way (kafka-reassign-partitions.sh's lines) and cancels it
            bootstrap = brokers.bootstrap()
            move = tmp_path / "move.json"
            move.write_text('{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[1,3]}]}')
            other = tmp_path / "other.json"
            other.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,1]}]}')
            assert _cli(capsys, "reassign-partitions", "--list", "-b", bootstrap) == (
                0, "Current partition reassignments:\nt-1: replicas: 1,3,2. adding: 3. removing: 2.\n", "")
            code, out, _ = _cli(capsys, "topics", "describe", "t", "-b", bootstrap)
            assert code == 0 and "\tTopic: t\tPartition: 1\tLeader: 1\tReplicas: 1,3,2\tIsr: 1,2\t" \
                "Adding Replicas: 3\tRemoving Replicas: 2\n" in out and "ReplicationFactor: 2\t" in out
            rp, file = "reassign-partitions", "--reassignment-json-file"
            code, out, err = _cli(capsys, rp, "--execute", file, str(other), "-b", bootstrap)
            assert code == 1 and err.startswith("error: Cannot execute because there is an existing partition")
            assert _cli(capsys, rp, "--verify", file, str(move), "-b", bootstrap) == (
                0, "Status of partition reassignment:\nReassignment of partition t-1 is still in progress.\n", "")
            assert _cli(capsys, rp, "--cancel", file, str(move), "-b", bootstrap) == (
                0, "Successfully cancelled partition reassignment for: t-1\n"
                   "None of the specified partition moves are active.\n", "")
            assert admin.list_partition_reassignments() == {}
            assert admin.alter_partition_reassignments({tp1: None}) == {tp1: NoReassignmentInProgressError}
        finally:
            os.kill(b3.pid, signal.SIGCONT)
        assert _assignment(zk, "t") == ({0: (1, 2), 1: (1, 2)}, {})
        wait_until("broker 3 drops the cancelled replica", lambda: not (brokers.directory / "broker-3" / "t-1").exists())

        # --- moves with data under an acks=all producer -------------------------------------------------
        acked: dict[int, list[int]] = {0: [], 1: []}
        errors: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": brokers.bootstrap(), "acks": "all", "enable.idempotence": True,
                          "linger.ms": 5, "message.timeout.ms": 60000})

            def on_delivery(err: object, msg: object) -> None:
                if err is not None:
                    errors.append(str(err))
                else:
                    acked[msg.partition()].append(int(msg.value()))  # type: ignore[attr-defined]

            i = 0
            while not stop.is_set() or i < 600:
                p.produce("t", value=str(i).encode(), partition=i % 2, on_delivery=on_delivery)
                p.poll(0)
                i += 1
                time.sleep(0.002)
            assert p.flush(60) == 0

        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        wait_until("some records acknowledged", lambda: len(acked[0]) > 100 and len(acked[1]) > 100)
        started = time.monotonic()
        assert admin.alter_partition_reassignments({tp0: [2, 3]}) == {tp0: None}  # the API path
        zk.create_reassignment({("t", 1): [1, 3]})  # the legacy path
        wait_until("both moves done", lambda: _assignment(zk, "t") == ({0: (2, 3), 1: (1, 3)}, {}), timeout=60)
        took = time.monotonic() - started
        wait_until("the znode removed", lambda: zk.get_data("/admin/reassign_partitions") is None)
        states = zk.get_partition_states([("t", 0), ("t", 1)])
        assert states[("t", 0)] is not None and states[("t", 0)].leader == 2  # 1 was removed: 2 leads
        assert states[("t", 0)].isr in ((2, 3), (3, 2))
        assert states[("t", 1)] is not None and states[("t", 1)].leader == 1
        assert admin.list_partition_reassignments() == {}
        time.sleep(0.5)  # a few more acknowledged records after the switch
        stop.set()
        writer.join(90)
        assert not writer.is_alive() and not errors, errors[:3]

        # the removed replicas' logs are deleted on their brokers
        root = brokers.directory
        wait_until("t-0 gone from broker 1", lambda: not (root / "broker-1" / "t-0").exists())
        wait_until("t-1 gone from broker 2", lambda: not (root / "broker-2" / "t-1").exists())
        # what is left is Kafka's `<topic>-<partition>.<id>-delete` directory, removed by the housekeeping
        # thread once file.delete.delay.ms has passed (60 s by default), never another copy of the log
        left = [*(root / "broker-1").glob("t-0.*"), *(root / "broker-2").glob("t-1.*")]
        assert all(d.name.endswith("-delete") for d in left), left
        # the new replicas hold the very same batches at the same offsets as the replicas they joined
        for p, kept, new in ((0, 2, 3), (1, 1, 3)):
            def same(p: int = p, kept: int = kept, new: int = new) -> bool:
                a = _segments(root / f"broker-{kept}" / f"t-{p}")
                return bool(a) and a == _segments(root / f"broker-{new}" / f"t-{p}")

            wait_until(f"t-{p} byte-identical on brokers {kept} and {new}", same)

        # every acknowledged record is there once, in order, read from the new leaders
        consumer = Consumer({"bootstrap.servers": brokers.bootstrap(), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            consumer.assign([CTopicPartition("t", 0, 0), CTopicPartition("t", 1, 0)])
            seen: dict[int, list[int]] = {0: [], 1: []}
            offsets: dict[int, list[int]] = {0: [], 1: []}
            deadline = time.monotonic() + 30
            while sum(map(len, seen.values())) < sum(map(len, acked.values())) and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    seen[m.partition()].append(int(m.value()))
                    offsets[m.partition()].append(m.offset())
        finally:
            consumer.close()
        for p in (0, 1):
            assert seen[p] == acked[p], f"t-{p}: {len(seen[p])} read, {len(acked[p])} acknowledged"
            assert offsets[p] == list(range(len(seen[p])))
        print(f"moves with {len(acked[0]) + len(acked[1])} acknowledged records done in {took:.2f} s")
    finally:
        if admin is not None:
            admin.close()
        zk.close()


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`kaflite ARGS` in this process (no interpreter start-up while a broker is
    frozen): exit code, stdout, stderr."""
    from kaflite.cli.main import app

    capsys.readouterr()
    try:
        app(list(args), prog_name="kaflite")
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _not_controller_answers(brokers: BrokerProcesses, zk: KafkaZkClient) -> None:
    """Both APIs sent to a broker that is not the controller: NOT_CONTROLLER at the top (kafka's admin
    client sends them to the controller Metadata names, and retries there on this error)."""
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )
    from kio.schema.alter_partition_reassignments.v0.response import AlterPartitionReassignmentsResponse
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
    from kio.schema.list_partition_reassignments.v0.response import ListPartitionReassignmentsResponse
    from kio.static.primitive import i32

    from kaflite.console.wire import request
    from kaflite.protocol.errors import ErrorCode

    controller = zk.get_controller_id()
    other = next(b for b in (1, 2, 3) if b != controller)
    port = brokers.ports[other]
    alter = AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(
        name="t", partitions=(ReassignablePartition(partition_index=i32(0), replicas=None),)),))
    resp = request("127.0.0.1", port, alter, AlterPartitionReassignmentsResponse, 10)
    assert int(resp.error_code) == ErrorCode.not_controller.value and resp.responses == ()
    assert resp.error_message == "This is not the correct controller for this cluster."
    resp = request("127.0.0.1", port, ListPartitionReassignmentsRequest(topics=None),
                   ListPartitionReassignmentsResponse, 10)
    assert int(resp.error_code) == ErrorCode.not_controller.value
