"""Groups on a cluster of three `python -m kaflite.server` processes on a real ZooKeeper, with the
coordinators' internal topics replicated as Kafka replicates them (offsets.topic.replication.factor 3):

- `__consumer_offsets` / `__transaction_state` are created on the first FindCoordinator with their
  replication factor; while fewer brokers are alive than that, FindCoordinator answers
  COORDINATOR_NOT_AVAILABLE (the broker logs why) and nothing is created;
- a group's coordinator broker (the leader of its `__consumer_offsets` partition) killed with kill -9: the
  group re-forms on the new leader, which loaded it from its replica of the log; the offsets the group
  committed are kept, a consumer resumes from them, and no record is consumed twice beyond those read
  after the last commit;
- a group's `__consumer_offsets` partition moved A -> B -> A by preferred elections with a commit on B:
  A answers NOT_COORDINATOR once B leads, and B's offset once A leads again (issue 24); a librdkafka
  Consumer of the group (in a subprocess) reads B's offset and commits on A again.

The first test starts its brokers one by one (the internal topics must not exist yet); the other two share
the module's brokers 1-3 (`three_brokers`, THREE_BROKERS_OVERRIDES, brought back whole before each test),
each on a topic and a group of its own."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.conftest import BrokerProcesses
from helpers import wait_until
from kaflite.cluster.zk import KafkaZkClient
from kaflite.coordinator.offsets_topic import partition_for
from kaflite.protocol.errors import ErrorCode
from server.kwire import WireClient

RF3 = ("offsets.topic.replication.factor=3", "transaction.state.log.replication.factor=3")
FAST = ("replica.lag.time.max.ms=4000", "replica.fetch.backoff.ms=200")
N_OFFSETS = 10  # __consumer_offsets partitions of the shared brokers
# the shared brokers: no automatic preferred election moves a coordinator behind a test's back
THREE_BROKERS_OVERRIDES = (*RF3, *FAST, f"offsets.topic.num.partitions={N_OFFSETS}",
                           "auto.leader.rebalance.enable=false")


def _find(bootstrap: str, key_type: int, key: str) -> Any:
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.static.primitive import i8

    with WireClient(bootstrap) as c:
        return c.request(FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=(key,))).coordinators[0]


def test_internal_topics_wait_for_their_replication_factor(brokers: BrokerProcesses, zk_connect: str) -> None:
    small = ("offsets.topic.num.partitions=6", "transaction.state.log.num.partitions=3")
    zk = KafkaZkClient(zk_connect)
    zk.start()
    try:
        brokers.start(1, *RF3, *small)
        wait_until("broker 1 registered", lambda: zk.get_broker_ids() == [1])
        for key_type in (0, 1):  # a group, a transactional id: one broker alive, 3 replicas wanted
            got = _find(brokers.bootstrap(1), key_type, "k")
            assert (got.error_code, got.node_id) == (ErrorCode.coordinator_not_available, -1)
        assert zk.get_topic_assignment("__consumer_offsets") is None
        assert zk.get_topic_assignment("__transaction_state") is None
        # the creations run in the broker's admin thread, after the answers: their refusals are logged then
        wait_until("the refusals logged", lambda: "transaction.state.log.replication.factor=3" in brokers.log(1))
        assert ("cannot create internal topic __consumer_offsets yet: 1 broker(s) alive, "
                "offsets.topic.replication.factor=3") in brokers.log(1)
        for b in (2, 3):
            brokers.start(b, *RF3, *small)
        wait_until("3 registered brokers", lambda: zk.get_broker_ids() == [1, 2, 3])

        def found(key_type: int) -> Any:
            got = _find(brokers.bootstrap(1), key_type, "k")
            return got if got.error_code == ErrorCode.none else None

        for key_type, topic, n in ((0, "__consumer_offsets", 6), (1, "__transaction_state", 3)):
            got = wait_until(f"a coordinator for key type {key_type}", lambda kt=key_type: found(kt), interval=0.2)  # type: ignore[misc]
            assignment = zk.get_topic_assignment(topic)
            assert assignment is not None
            assert sorted(assignment[0].partitions) == list(range(n))
            assert all(sorted(r) == [1, 2, 3] for r in assignment[0].partitions.values())
            state = zk.get_partition_states([(topic, partition_for("k", n))])[(topic, partition_for("k", n))]
            assert state is not None and got.node_id == state.leader
            assert got.port == brokers.ports[state.leader]
    finally:
        zk.close()
        _kill_all(brokers)


def _kill_all(brokers: BrokerProcesses) -> None:
    """The end of a test: kill -9 (stopping three brokers together by SIGTERM makes each one's controlled
    shutdown wait for the others, ~15 s of teardown)."""
    for b in list(brokers.procs):
        brokers.kill(b)


def _log_dirs(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (size, offset_lag)} of the broker's local replicas of `topic` (DescribeLogDirs v4)."""
    from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic, DescribeLogDirsRequest

    with WireClient(bootstrap) as c:
        resp = c.request(DescribeLogDirsRequest(topics=(DescribableLogDirTopic(topic=topic, partitions=(0, 1, 2)),)))
    return {p.partition_index: (p.partition_size, p.offset_lag)
            for r in resp.results for t in r.topics if t.name == topic for p in t.partitions}


def _replicas_in_sync(brokers: BrokerProcesses, topic: str, n: int) -> bool:
    per_broker = [_log_dirs(brokers.bootstrap(b), topic) for b in sorted(brokers.procs)]
    return all(sorted(d) == list(range(n)) for d in per_broker) and all(
        len({d[p] for d in per_broker}) == 1 and per_broker[0][p][0] > 0 and per_broker[0][p][1] == 0
        for p in range(n))


def _offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    return {tp.partition: tp.offset for tp in got.topic_partitions if tp.topic == topic and tp.offset >= 0}


def test_group_survives_the_kill_of_its_coordinator(
    three_brokers: BrokerProcesses, three_brokers_zk: KafkaZkClient
) -> None:
    brokers, zk, events = three_brokers, three_brokers_zk, f"events-{uuid.uuid4().hex[:6]}"
    n_offsets = N_OFFSETS
    consumer: Consumer | None = None
    try:
        admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
        admin.create_topics([NewTopic(events, 3, 3)])[events].result(30)
        wait_until("events led",
                   lambda: all(zk.get_partition_states([(events, p) for p in range(3)]).values()))
        producer = Producer({"bootstrap.servers": brokers.bootstrap(), "acks": "all"})
        for i in range(300):
            producer.produce(events, value=f"e{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        # DescribeLogDirs on each broker: its replica of every partition, the same size everywhere once
        # the followers have caught up, no offset lag
        wait_until("three equal replicas without lag", lambda: _replicas_in_sync(brokers, events, 3),
                   interval=0.2)

        group = f"g-{uuid.uuid4().hex[:6]}"
        conf = {"bootstrap.servers": brokers.bootstrap(), "group.id": group, "group.protocol": "classic",
                "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500, "enable.partition.eof": False}
        consumer = Consumer(conf)
        consumer.subscribe([events])
        seen: list[bytes] = []
        where: list[tuple[int, int]] = []  # (partition, offset) of each record in `seen`

        def poll_until(count: int, timeout: float = 60.0, distinct: bool = False) -> None:
            assert consumer is not None
            deadline = time.monotonic() + timeout
            while len(set(seen) if distinct else seen) < count and time.monotonic() < deadline:
                m = consumer.poll(0.2)
                if m is not None and m.error() is None:
                    seen.append(m.value())
                    where.append((m.partition(), m.offset()))

        poll_until(180)
        # commit what the first 150 records reached (per partition they are a prefix: offsets 0..n-1); the
        # 30 read after them stay uncommitted and may be read again
        committed: dict[int, int] = {}
        for part, offset in where[:150]:
            committed[part] = max(committed.get(part, 0), offset + 1)
        assert sum(committed.values()) == 150
        read_uncommitted = len(seen) - 150

        # the coordinator is the leader of the group's __consumer_offsets partition
        p = partition_for(group, n_offsets)

        def offsets_partition() -> Any:
            return zk.get_partition_states([("__consumer_offsets", p)])[("__consumer_offsets", p)]

        # on the shared brokers, one restarted for this test may still be catching up on it
        wait_until("the group's offsets partition in sync on all three",
                   lambda: (s := offsets_partition()) is not None and sorted(s.isr) == [1, 2, 3])
        old = offsets_partition()
        assert old is not None and sorted(old.isr) == [1, 2, 3]
        desc = admin.describe_consumer_groups([group])[group].result(30)
        assert desc.coordinator.id == old.leader
        killed = old.leader
        consumer.commit(offsets=[TopicPartition(events, part, o) for part, o in committed.items()],
                        asynchronous=False)
        # killed as soon as the commit is acknowledged: only a commit answered after replication survives
        brokers.kill(killed)
        t_kill = time.monotonic()

        survivors = AdminClient({"bootstrap.servers": brokers.bootstrap()})

        def new_leader() -> int | None:
            s = zk.get_partition_states([("__consumer_offsets", p)])[("__consumer_offsets", p)]
            return s.leader if s is not None and s.leader not in (-1, killed) else None

        leader = wait_until("a new leader of the group's offsets partition", new_leader)

        # the new coordinator loaded the group: its committed offsets are there (nothing acknowledged lost)
        def kept() -> dict[int, int] | None:
            try:
                got = _offsets(survivors, group, events)
            except KafkaException:
                return None  # COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR while it moves
            return got if got == committed else None

        wait_until("the committed offsets on the new coordinator", kept, interval=0.2)

        # the live consumer re-forms the group there and reads on
        def stable_on_new() -> bool:
            assert consumer is not None
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                seen.append(m.value())
            try:
                d = survivors.describe_consumer_groups([group])[group].result(5)
            except KafkaException:
                return False
            return d.coordinator.id == leader and d.state.name == "STABLE" and len(d.members) == 1

        wait_until("the group stable on the new coordinator", stable_on_new, timeout=45)
        reformed_s = time.monotonic() - t_kill
        poll_until(300, distinct=True)
        # every record read; the only ones read twice are those read after the last commit
        missing = sorted({f"e{i}".encode() for i in range(300)} - set(seen))
        assert not missing, (missing, len(seen), read_uncommitted, committed)
        assert len(seen) - 300 <= read_uncommitted, (len(seen), read_uncommitted)
        for _ in range(50):  # the commit to the new coordinator (retriable errors while it settles)
            try:
                consumer.commit(asynchronous=False)
                break
            except KafkaException:
                time.sleep(0.2)
        assert _offsets(survivors, group, events) == {0: 100, 1: 100, 2: 100}
        consumer.close()
        consumer = None

        # a new consumer in the group resumes from the committed offsets: only the records produced since
        for i in range(300, 330):
            producer.produce(events, value=f"e{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        consumer = Consumer(conf)
        consumer.subscribe([events])
        seen = []
        poll_until(30)
        end = time.monotonic() + 2
        while time.monotonic() < end:  # nothing more arrives
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                seen.append(m.value())
        assert sorted(seen) == sorted(f"e{i}".encode() for i in range(300, 330))
        print(f"group stable on the new coordinator {reformed_s:.1f} s after kill -9 of broker {killed}")
    finally:
        if consumer is not None:
            consumer.close()


def test_offsets_committed_on_b_survive_leadership_returning_to_a(
    three_brokers: BrokerProcesses, three_brokers_zk: KafkaZkClient, tmp_path: Path
) -> None:
    """Issue 24: the group's `__consumer_offsets` partition moves A -> B -> A by preferred elections (the
    replica order changed by a reassignment of the same replicas, then ElectLeaders), with a commit on B in
    between. Back on A the group's offsets are B's: A dropped its shard when it resigned and replayed the
    log when elected again (before, A kept answering from its shard and read back what it last saw).
    Commits and fetches go to a chosen broker over the wire; a librdkafka Consumer of the group (assign, no
    subscription) in a subprocess follows the moves: it reads B's commit and commits on A. (librdkafka's
    AdminClient.list_consumer_group_offsets dies of SIGSEGV on the NOT_COORDINATOR answer A gives after
    the move, as on Kafka's: a librdkafka bug, docs/compatibility.md, tests/groups/test_rdkafka_not_coordinator.py.)"""
    from confluent_kafka import ElectionType

    from groups.coord_wire import commit, fetch
    from groups.rdkafka_offsets_client import OffsetsClient

    brokers, zk, events = three_brokers, three_brokers_zk, f"events-{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    tp = ("__consumer_offsets", partition_for(group, N_OFFSETS))  # the group's partition, moved by this test
    consumer: OffsetsClient | None = None
    try:
        admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
        admin.create_topics([NewTopic(events, 1, 3)])[events].result(30)
        consumer = OffsetsClient(brokers.bootstrap(), group, events, tmp_path / "consumer.err")

        def consumer_says(command: str, answer: str) -> bool:
            """`command` answered `answer` (a NOT_COORDINATOR while the consumer finds the coordinator: retried)."""
            got = consumer.ask(command)  # type: ignore[union-attr]
            assert got, f"the consumer died: {consumer.close()}"  # type: ignore[union-attr]
            return got == answer

        def state() -> Any:
            return zk.get_partition_states([tp])[tp]

        def on(broker: int, offset: int | None = None) -> int | None:
            """Commit `offset` (an empty group's commit) on `broker`, or read the group's offset there;
            None while it does not answer as the coordinator."""
            with WireClient(brokers.bootstrap(broker)) as c:
                if offset is not None and commit(c, group, events, "", -1, offset) is not ErrorCode.none:
                    return None
                code, got = fetch(c, group, events)
            return got if code is ErrorCode.none else None

        def moved_to(leader: int) -> None:
            """Make `leader` the preferred replica (same replicas, reordered), then a preferred election."""
            others = [b for b in (1, 2, 3) if b != leader]
            zk.create_reassignment({tp: [leader, *others]})
            wait_until("the reassignment done", lambda: zk.get_data("/admin/reassign_partitions") is None)
            wait_until("all in sync", lambda: sorted(state().isr) == [1, 2, 3])
            admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(*tp)]).result(30)
            wait_until(f"{tp} led by {leader}", lambda: state().leader == leader)

        wait_until("the offsets topic", lambda: _find(brokers.bootstrap(1), 0, group).error_code == ErrorCode.none)
        wait_until("all in sync", lambda: (s := state()) is not None and sorted(s.isr) == [1, 2, 3])
        a = state().leader
        b = next(x for x in (1, 2, 3) if x != a)
        assert wait_until("the commit on A", lambda: on(a, 5), interval=0.2) == 5
        wait_until("the consumer reads 5", lambda: consumer_says("committed", "ok [[5, null]]"))
        moved_to(b)
        wait_until("A resigned: NOT_COORDINATOR there", lambda: on(a) is None, timeout=10)
        assert wait_until("the commit on B", lambda: on(b, 9), interval=0.2) == 9
        wait_until("the consumer reads B's 9", lambda: consumer_says("committed", "ok [[9, null]]"))
        moved_to(a)
        assert wait_until("the offsets on A", lambda: on(a), interval=0.2) == 9
        wait_until("the consumer commits 12", lambda: consumer_says("commit 12", "ok [[12, null]]"))
        assert on(a) == 12
        assert consumer.close() == 0, consumer.stderr.read_text()[-2000:]
    finally:
        if consumer is not None:
            consumer.close()
