"""`kaflite transactions list | describe | abort` on three `python -m kaflite.server` processes on a real
ZooKeeper, the CLI given broker 1 alone as its bootstrap server (kafka-transactions.sh's routing):

- list: ListTransactions goes to every broker, so the open transactions of three transactional ids whose
  coordinators are brokers 1, 2 and 3 are all listed, each once, with its coordinator's id;
- describe: FindCoordinator (key type 1) then DescribeTransactions at the coordinator, broker 2 or 3;
- abort: hanging transactions on partitions led by brokers 2 and 3 are aborted at those leaders (by
  --start-offset through DescribeProducers, and by --producer-id/--producer-epoch/--coordinator-epoch):
  the last stable offset of each partition reaches its end, and the other transactions stay open."""

from __future__ import annotations

import subprocess
import sys
import uuid

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.conftest import BrokerProcesses
from helpers import wait_until
from kaflite.cluster.zk import KafkaZkClient
from kaflite.coordinator.transaction import TRANSACTION_STATE_TOPIC, partition_for

TOPIC = "hang"
TXN_PARTITIONS = 50  # transaction.state.log.num.partitions (default)


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kaflite", "transactions", *args, "-b", bootstrap,
                           "--timeout", "20"], capture_output=True, text=True, timeout=90, check=False)


def _leaders(zk: KafkaZkClient, topic: str, partitions: int) -> dict[int, int]:
    states = zk.get_partition_states([(topic, p) for p in range(partitions)])
    return {p: (s.leader if s is not None else -1) for (_t, p), s in states.items()}


def _producer(bootstrap: str, tid: str) -> ck.Producer:
    # a long transaction timeout: the coordinator must not abort the open transactions during the test
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0,
                     "transaction.timeout.ms": 300000})
    p.init_transactions(60)
    return p


def _open(p: ck.Producer, partition: int) -> None:
    """Begin a transaction, write one record to `partition` and leave the transaction open (hanging)."""
    p.begin_transaction()
    p.produce(TOPIC, b"hanging", partition=partition)
    assert p.flush(30) == 0


def _stable_end(bootstrap: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) of the partition."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "w", "isolation.level": "read_committed"})
    u = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "w", "isolation.level": "read_uncommitted"})
    try:
        tp = ck.TopicPartition(TOPIC, partition)
        return c.get_watermark_offsets(tp, timeout=10)[1], u.get_watermark_offsets(tp, timeout=10)[1]
    finally:
        c.close()
        u.close()


def test_list_describe_abort_across_brokers(brokers: BrokerProcesses, zk: KafkaZkClient) -> None:
    brokers.start_registered(zk, 1, 2, 3)
    everyone, bootstrap = brokers.bootstrap(), brokers.bootstrap(1)
    admin = AdminClient({"bootstrap.servers": everyone})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
    leaders = wait_until("a leader for every partition", lambda: (
        lambda ls: ls if sorted(ls.values()) == [1, 2, 3] else None)(_leaders(zk, TOPIC, 3)))
    partition_of = {leader: p for p, leader in leaders.items()}
    first = _producer(everyone, f"first-{uuid.uuid4().hex[:6]}")  # creates __transaction_state
    txn_leaders = wait_until("a leader for every __transaction_state partition", lambda: (
        lambda ls: ls if min(ls.values()) > 0 else None)(_leaders(zk, TRANSACTION_STATE_TOPIC, TXN_PARTITIONS)))
    assert set(txn_leaders.values()) == {1, 2, 3}
    # one transactional id coordinated by each broker
    tids = {b: next(t for t in (f"cli-{b}-{i}" for i in range(1000))
                    if txn_leaders[partition_for(t, TXN_PARTITIONS)] == b) for b in (1, 2, 3)}
    producers = {b: _producer(everyone, tid) for b, tid in tids.items()}
    try:
        # the transaction coordinated by 2 hangs on the partition led by 3, the one coordinated by 3 on
        # the partition led by 2, the one coordinated by 1 on its own broker's partition
        targets = {1: partition_of[1], 2: partition_of[3], 3: partition_of[2]}
        for b, p in producers.items():
            _open(p, targets[b])
        for p in (partition_of[2], partition_of[3]):
            lso, hw = _stable_end(everyone, p)
            assert (lso, hw) == (0, 1), f"partition {p}: the open transaction holds the LSO"

        listed = _cli(bootstrap, "list")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert lines[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        rows = [ln.split() for ln in lines[1:]]
        for b, tid in tids.items():  # listed once, by its coordinator
            assert [(r[1], r[3]) for r in rows if r[0] == tid] == [(str(b), "Ongoing")], (tid, listed.stdout)
        assert {r[1] for r in rows} == {"1", "2", "3"}

        for b in (2, 3):  # coordinated by a broker other than the bootstrap one
            described = _cli(bootstrap, "describe", "--transactional-id", tids[b])
            assert described.returncode == 0, described.stderr
            header, row = described.stdout.splitlines()
            assert header.split()[:5] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                                          "TransactionState"]
            cells = row.split()
            assert (cells[0], cells[1], cells[4], cells[-1]) == (str(b), tids[b], "Ongoing", f"{TOPIC}-{targets[b]}")
        missing = _cli(bootstrap, "describe", "--transactional-id", "no-such-id")
        assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr

        # abort by start offset: DescribeProducers and WriteTxnMarkers at broker 3, the partition's leader
        on3 = partition_of[3]
        aborted = _cli(bootstrap, "abort", "--topic", TOPIC, "--partition", str(on3), "--start-offset", "0")
        assert aborted.returncode == 0, aborted.stderr
        assert "(leader: broker 3)" in aborted.stdout
        assert wait_until("the LSO at the end of the partition led by 3",
                          lambda: _stable_end(everyone, on3) == (2, 2), timeout=20)  # the record and the marker
        # abort by producer id and epoch (coordinator epoch -1: no marker yet, sent as 0) at broker 2
        on2 = partition_of[2]
        described = _cli(bootstrap, "describe", "--transactional-id", tids[3]).stdout.splitlines()[1].split()
        pid, epoch = described[2], described[3]
        usage = _cli(bootstrap, "abort", "--topic", TOPIC, "--partition", str(on2), "--producer-id", pid,
                     "--producer-epoch", epoch)
        assert usage.returncode == 2 and "--coordinator-epoch" in usage.stderr
        aborted = _cli(bootstrap, "abort", "--topic", TOPIC, "--partition", str(on2), "--producer-id", pid,
                       "--producer-epoch", epoch, "--coordinator-epoch", "-1")
        assert aborted.returncode == 0, aborted.stderr
        assert "(leader: broker 2)" in aborted.stdout
        assert wait_until("the LSO at the end of the partition led by 2",
                          lambda: _stable_end(everyone, on2) == (2, 2), timeout=20)
        assert _stable_end(everyone, partition_of[1]) == (0, 1)  # the third transaction is still open
        for b in (1, 2, 3):
            assert "Traceback" not in brokers.log(b), brokers.log(b)[-3000:]
    finally:
        for p in [first, *producers.values()]:  # destroyed with the test; the fixture stops the brokers
            p.flush(5)
