"""kaflite brokers as a cluster: three `python -m kaflite.server` processes with zookeeper.connect on a
real ZooKeeper. Clients see every broker, the controller and each partition's leader; produce and consume
follow the leaders; kill -9 of the controller elects another within the session timeout + 2 s, and the
clients see it."""

from __future__ import annotations

import datetime
import random
import subprocess
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.conftest import BrokerProcesses
from helpers import poll_values, wait_until
from kaflite.cluster.zk import KafkaZkClient


def test_clients_see_the_cluster_and_follow_leaders(three_brokers: BrokerProcesses) -> None:
    zk = KafkaZkClient(three_brokers.connect)
    zk.start()
    try:
        admin = AdminClient({"bootstrap.servers": three_brokers.bootstrap(1)})
        # CreateTopics on broker 1 places the partitions over the three brokers (RF 1: replication is
        # the next issue), the controller elects, every broker learns the leaders
        admin.create_topics([NewTopic("orders", 6, 1)])["orders"].result(30)

        def led() -> dict[int, int] | None:
            md = admin.list_topics("orders", timeout=10)
            t = md.topics.get("orders")
            if t is None or t.error is not None or len(t.partitions) != 6:
                return None
            leaders = {p: t.partitions[p].leader for p in range(6)}
            return leaders if all(v in (1, 2, 3) for v in leaders.values()) else None

        leaders = wait_until("leaders in Metadata", led)
        assert set(leaders.values()) == {1, 2, 3}  # spread over the cluster
        md = admin.list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 2, 3]
        assert {b.port for b in md.brokers.values()} == {three_brokers.ports[b] for b in (1, 2, 3)}
        controller = zk.get_controller_id()
        assert md.controller_id == controller
        got = zk.get_topic_assignment("orders")
        assert got is not None and {p: r[0] for p, r in got[0].partitions.items()} == leaders

        # produce through broker 1 only: the client follows each partition's leader
        producer = Producer({"bootstrap.servers": three_brokers.bootstrap(1), "acks": "all"})
        errors: list[object] = []
        for i in range(60):
            producer.produce("orders", value=f"v{i}".encode(), partition=i % 6,
                             on_delivery=lambda err, msg: errors.append(err) if err else None)  # fmt: skip
        assert producer.flush(30) == 0 and not errors
        consumer = Consumer({"bootstrap.servers": three_brokers.bootstrap(2), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
        consumer.assign([TopicPartition("orders", p, 0) for p in range(6)])
        seen = poll_values(consumer, 60)
        consumer.close()
        assert sorted(seen) == sorted(f"v{i}".encode() for i in range(60))
        # each partition's records live only on its leader's disk
        for p, leader in leaders.items():
            assert (three_brokers.directory / f"broker-{leader}" / f"orders-{p}").is_dir()
            for other in {1, 2, 3} - {leader}:
                assert not (three_brokers.directory / f"broker-{other}" / f"orders-{p}").exists()
    finally:
        zk.close()


def test_kill_9_of_the_controller_broker(three_brokers: BrokerProcesses) -> None:
    zk = KafkaZkClient(three_brokers.connect)
    zk.start()
    try:
        controller = wait_until("a controller", zk.get_controller_id)
        epoch = zk.get_controller_epoch()
        assert epoch is not None
        survivor = next(b for b in (1, 2, 3) if b != controller)
        admin = AdminClient({"bootstrap.servers": three_brokers.bootstrap(survivor)})
        t0 = time.monotonic()
        three_brokers.kill(controller)
        new = wait_until("a new controller", lambda: (c := zk.get_controller_id()) not in (None, controller) and c)
        elapsed = time.monotonic() - t0
        assert elapsed <= 3 + 2, f"controller failover took {elapsed:.2f}s"
        now = zk.get_controller_epoch()
        assert now is not None and now.epoch == epoch.epoch + 1
        print(f"controller failover after kill -9 of a broker: {elapsed:.2f}s")
        # clients see it: Metadata from a survivor names the new controller and two brokers
        md = wait_until(
            "Metadata with the new controller",
            lambda: (
                (m := admin.list_topics(timeout=10)).controller_id == new
                and sorted(m.brokers) != [1, 2, 3]
                and m
            ),
        )
        assert sorted(md.brokers) == sorted({1, 2, 3} - {controller})
    finally:
        zk.close()


def test_duplicate_broker_id_is_refused_with_one_line(three_brokers: BrokerProcesses) -> None:
    zk = KafkaZkClient(three_brokers.connect)
    zk.start()
    try:
        wait_until("broker 1", lambda: 1 in zk.get_broker_ids())  # live: the fixture started it
        proc = three_brokers.start(11, "broker.id=1", wait=False)
        assert proc.wait(60) == 2
        out = three_brokers.log(11)
        assert "error: broker.id 1 is already registered in ZooKeeper by a live broker" in out
        assert "Traceback" not in out
    finally:
        zk.close()


def test_producer_ids_are_unique_across_brokers(brokers: BrokerProcesses, zk_connect: str) -> None:
    import datetime
    import json

    from kio.schema.errors import ErrorCode
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    from server.kwire import WireClient

    zk = KafkaZkClient(zk_connect)
    zk.start()
    try:
        brokers.start_registered(zk, 1, 2)
        request = InitProducerIdRequest(
            transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60)
        )
        ids: dict[int, list[int]] = {1: [], 2: []}
        with WireClient(brokers.bootstrap(1)) as c1, WireClient(brokers.bootstrap(2)) as c2:
            for _ in range(5):
                for b, c in ((1, c1), (2, c2)):
                    r = c.request(request)
                    assert r.error_code == ErrorCode.none and r.producer_epoch == 0
                    ids[b].append(r.producer_id)
        # each broker counts up in its own block of 1000; blocks never overlap
        for b in (1, 2):
            assert ids[b] == list(range(ids[b][0], ids[b][0] + 5))
        assert {ids[1][0] // 1000, ids[2][0] // 1000} == {0, 1}
        got = zk.get_data("/latest_producer_id_block")
        assert got is not None
        block = json.loads(got[0])
        assert block["block_start"] == "1000" and block["block_end"] == "1999" and block["version"] == 1
        # a restarted broker never hands out an id it gave before: it claims a fresh block
        first = ids[1][0]
        brokers.kill(1)
        wait_until("1 gone", lambda: zk.get_broker_ids() == [2], timeout=20)
        brokers.start(1)
        wait_until("1 back", lambda: zk.get_broker_ids() == [1, 2])
        with WireClient(brokers.bootstrap(1)) as c1:
            again = c1.request(request).producer_id
        assert again >= 2000 and again // 1000 != first // 1000
    finally:
        zk.close()


def test_consumer_group_on_the_cluster(three_brokers: BrokerProcesses) -> None:
    from confluent_kafka.admin import ConsumerGroupDescription

    from kaflite.coordinator.offsets_topic import partition_for

    zk = KafkaZkClient(three_brokers.connect)
    zk.start()
    try:
        admin = AdminClient({"bootstrap.servers": three_brokers.bootstrap(1)})
        admin.create_topics([NewTopic("events", 3, 1)])["events"].result(30)
        wait_until("events led", lambda: all(zk.get_partition_states([("events", p) for p in range(3)]).values()))
        producer = Producer({"bootstrap.servers": three_brokers.bootstrap(1)})
        for i in range(30):
            producer.produce("events", value=f"e{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        group = f"g-{uuid.uuid4().hex[:6]}"
        consumer = Consumer({"bootstrap.servers": three_brokers.bootstrap(3), "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
        consumer.subscribe(["events"])
        seen = poll_values(consumer, 30, 60)
        assert sorted(seen) == sorted(f"e{i}".encode() for i in range(30))
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("events", p) for p in range(3)], timeout=20)
        assert sorted(tp.offset for tp in committed) == [10, 10, 10]
        # the coordinator is the leader of the group's __consumer_offsets partition
        p = partition_for(group, 50)
        state = zk.get_partition_states([("__consumer_offsets", p)])[("__consumer_offsets", p)]
        assert state is not None
        desc: ConsumerGroupDescription = admin.describe_consumer_groups([group])[group].result(30)
        assert desc.coordinator.id == state.leader
        consumer.close()
    finally:
        zk.close()


def test_elect_leaders_preferred_and_unclean(three_brokers: BrokerProcesses) -> None:
    from confluent_kafka import ElectionType

    from kaflite.cluster.admin import ZkAdmin

    zk = KafkaZkClient(three_brokers.connect)
    zk.start()
    try:
        # "p" on [1, 2] and "u" on [2, 3] (explicit placements; replication factor 2, no data needed)
        ZkAdmin(zk).create_topic("p", -1, -1, {}, assignment=[[1, 2]])
        ZkAdmin(zk).create_topic("u", -1, -1, {}, assignment=[[2, 3]])

        def state(t: str) -> tuple[int, tuple[int, ...]] | None:
            s = zk.get_partition_states([(t, 0)])[(t, 0)]
            return (s.leader, s.isr) if s is not None else None

        wait_until("leaders", lambda: state("p") == (1, (1, 2)) and state("u") == (2, (2, 3)))
        three_brokers.kill(1)  # p-0 moves to 2, the only one left in sync
        wait_until("p led by 2", lambda: state("p") == (2, (2,)))

        def elect(kind: ElectionType, tps: list[TopicPartition]) -> dict[tuple[str, int], int]:
            controller = wait_until("a controller", zk.get_controller_id)
            admin = AdminClient({"bootstrap.servers": three_brokers.bootstrap(controller)})
            got = admin.elect_leaders(kind, tps).result(30)
            return {
                (tp.topic, tp.partition): (
                    0 if e is None else e.code() if hasattr(e, "code") else e.args[0].code()
                )
                for tp, e in got.items()
            }

        # preferred: 1 is dead (so not in sync) -> refused; u-0 is led by its preferred replica already
        codes = elect(ElectionType.PREFERRED, [TopicPartition("p", 0), TopicPartition("u", 0)])
        assert codes == {("p", 0): 80, ("u", 0): 84}  # PREFERRED_LEADER_NOT_AVAILABLE, ELECTION_NOT_NEEDED
        assert state("p") == (2, (2,))
        # 1 comes back, catches up from 2 and rejoins the ISR (replication); then the election gives p back
        three_brokers.start(1)
        wait_until("1 back", lambda: zk.get_broker_ids() == [1, 2, 3])
        wait_until("1 in sync again", lambda: (st := state("p")) is not None and sorted(st[1]) == [1, 2])
        assert elect(ElectionType.PREFERRED, [TopicPartition("p", 0)]) == {("p", 0): 0}
        assert wait_until("p led by 1", lambda: (st := state("p")) is not None and st[0] == 1)
        # unclean: u-0 loses both replicas (3 last), then 2 comes back out of sync
        three_brokers.kill(2)
        wait_until("u led by 3", lambda: state("u") == (3, (3,)))
        three_brokers.kill(3)
        wait_until("u offline", lambda: state("u") == (-1, (3,)))
        three_brokers.start(2)
        wait_until("2 back", lambda: 2 in zk.get_broker_ids())
        assert state("u") == (-1, (3,))  # unclean election is off: it stays offline
        codes = elect(ElectionType.UNCLEAN, [TopicPartition("u", 0)])
        assert codes == {("u", 0): 0}
        assert wait_until("u led by 2", lambda: state("u") == (2, (2,)))
    finally:
        zk.close()


def test_alter_partition_on_the_wire(three_brokers: BrokerProcesses) -> None:
    from kio.schema.alter_partition.v3.request import (
        AlterPartitionRequest,
        BrokerState,
        PartitionData,
        TopicData,
    )
    from kio.schema.errors import ErrorCode

    from kaflite.cluster.admin import ZkAdmin
    from server.kwire import WireClient

    zk = KafkaZkClient(three_brokers.connect)
    zk.start()
    try:
        created = ZkAdmin(zk).create_topic("a", -1, -1, {}, assignment=[[1, 2, 3]])
        wait_until("a-0 led", lambda: zk.get_partition_states([("a", 0)])[("a", 0)])
        controller = wait_until("a controller", zk.get_controller_id)
        other = next(b for b in (1, 2, 3) if b != controller)
        _, epochs = zk.get_all_brokers_with_epochs()

        def request(isr: tuple[int, ...], partition_epoch: int, broker_epoch: int) -> AlterPartitionRequest:
            part = PartitionData(partition_index=0, leader_epoch=0, partition_epoch=partition_epoch,
                                 new_isr_with_epochs=tuple(BrokerState(broker_id=b, broker_epoch=-1) for b in isr))  # fmt: skip
            return AlterPartitionRequest(broker_id=1, broker_epoch=broker_epoch,
                                         topics=(TopicData(topic_id=created.topic_id, partitions=(part,)),))  # fmt: skip

        with WireClient(three_brokers.bootstrap(other)) as c:
            assert c.request(request((1, 2), 0, epochs[1])).error_code == ErrorCode.not_controller
        with WireClient(three_brokers.bootstrap(controller)) as c:
            assert c.request(request((1, 2), 0, epochs[1] + 999)).error_code == ErrorCode.stale_broker_epoch
            ok = c.request(request((1, 2), 0, epochs[1]))
            assert ok.error_code == ErrorCode.none
            p = ok.topics[0].partitions[0]
            assert (p.error_code, p.leader_id, p.leader_epoch, tuple(p.isr), p.partition_epoch) == (
                ErrorCode.none, 1, 0, (1, 2), 1,
            )  # fmt: skip
            stale = c.request(request((1,), 0, epochs[1])).topics[0].partitions[0]
            assert stale.error_code == ErrorCode.invalid_update_version
            bad = c.request(request((1, 9), 1, epochs[1])).topics[0].partitions[0]
            assert bad.error_code == ErrorCode.ineligible_replica
        s = zk.get_partition_states([("a", 0)])[("a", 0)]
        assert s is not None and (s.leader, s.leader_epoch, s.isr, s.zk_version) == (1, 0, (1, 2), 1)
        # every broker's Metadata shows the new ISR
        admin = AdminClient({"bootstrap.servers": three_brokers.bootstrap(3)})
        wait_until(
            "ISR in Metadata",
            lambda: admin.list_topics("a", timeout=10).topics["a"].partitions[0].isrs == [1, 2],
        )
    finally:
        zk.close()


def test_sigterm_moves_leadership_first(brokers: BrokerProcesses, zk_connect: str) -> None:
    from kaflite.cluster.admin import ZkAdmin

    zk = KafkaZkClient(zk_connect)
    zk.start()
    try:
        brokers.start_registered(zk, 1, 2, 3)
        ZkAdmin(zk).create_topic("c", -1, -1, {}, assignment=[[1, 2], [1, 3]])
        wait_until(
            "c led by 1",
            lambda: all(
                s is not None and s.leader == 1
                for s in zk.get_partition_states([("c", 0), ("c", 1)]).values()
            ),
        )
        proc = brokers.procs.pop(1)
        proc.terminate()  # SIGTERM: controlled shutdown
        assert proc.wait(30) == 0
        states = zk.get_partition_states([("c", 0), ("c", 1)])
        s0, s1 = states[("c", 0)], states[("c", 1)]
        assert s0 is not None and (s0.leader, s0.isr, s0.leader_epoch) == (2, (2,), 1)
        assert s1 is not None and (s1.leader, s1.isr, s1.leader_epoch) == (3, (3,), 1)
        log = brokers.log(1)
        assert "controlled shutdown: leadership moved off broker 1" in log
        logs = log + brokers.log(2) + brokers.log(3)
        assert "controlled shutdown of broker 1: 0 partition(s) left led there" in logs
    finally:
        zk.close()


def test_sigterm_still_answers_while_leadership_moves(brokers: BrokerProcesses, zk_connect: str) -> None:
    """Controlled shutdown comes before the listener closes (Kafka's order) and does not block the event
    loop: while the controller has not moved leadership yet (frozen here), the stopping broker answers."""
    import os
    import signal

    from kaflite.cluster.admin import ZkAdmin

    brokers.session_timeout_ms = 10000  # the frozen controller keeps its session through the test
    zk = KafkaZkClient(zk_connect)
    zk.start()
    try:
        brokers.start_registered(zk, 1, 2, 3)
        ctl = wait_until("a controller", zk.get_controller_id)
        victim, other = [b for b in (1, 2, 3) if b != ctl]
        ZkAdmin(zk).create_topic("d", -1, -1, {}, assignment=[[victim, other]])

        def state() -> object:
            return zk.get_partition_states([("d", 0)])[("d", 0)]

        wait_until("d led by the victim, both in sync", lambda: (s := state()) and s.leader == victim and len(s.isr) == 2)
        frozen = brokers.procs[ctl]
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            proc = brokers.procs.pop(victim)
            proc.terminate()  # SIGTERM: controlled shutdown, which waits for the (frozen) controller
            wait_until("controlled shutdown started", lambda: "asking the controller to move leadership" in brokers.log(victim))
            admin = AdminClient({"bootstrap.servers": brokers.bootstrap(victim)})
            md = admin.list_topics("d", timeout=5)  # answered: the listener is open, the loop not blocked
            assert md.topics["d"].partitions[0].leader == victim
            assert proc.poll() is None  # still waiting for leadership to move
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        assert proc.wait(30) == 0
        s = state()
        assert s is not None and s.leader == other and victim not in s.isr
        assert "controlled shutdown: leadership moved off broker" in brokers.log(victim)
    finally:
        zk.close()


def test_frozen_leader_resumes_as_follower(three_brokers: BrokerProcesses) -> None:
    """A leader frozen (SIGSTOP) past its ZooKeeper session loses its partition to the in-sync follower;
    resumed, it never acknowledges a write at its old leadership: not the produce already waiting on its
    socket when it resumes (the first thing it reads), nor any sent to it directly after, until it has
    registered again and follows the new leader."""
    import os
    import signal

    from kio.schema.errors import ErrorCode
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

    from kaflite.cluster.admin import ZkAdmin
    from kaflite.protocol.record_batch import build_record_batch
    from server.kwire import WireClient, decode_response

    zk = KafkaZkClient(three_brokers.connect)
    zk.start()
    try:
        ZkAdmin(zk).create_topic("f", -1, -1, {}, assignment=[[1, 2]])

        def state() -> Any:
            return zk.get_partition_states([("f", 0)])[("f", 0)]

        wait_until("f led by 1, 2 in sync", lambda: (s := state()) is not None and s.leader == 1 and len(s.isr) == 2)
        produce = ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=5),
            topic_data=(TopicProduceData(name="f", partition_data=(
                PartitionProduceData(index=0, records=build_record_batch([(None, b"x", [])])),)),),
        )  # fmt: skip

        def code_of(frame: bytes, corr: int) -> ErrorCode:
            return decode_response(0, 9, frame, corr).responses[0].partition_responses[0].error_code

        proc = three_brokers.procs[1]
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            wait_until("2 leads f-0", lambda: (s := state()) and s.leader == 2, timeout=20)
            # the kernel accepts it; broker 1 reads it on resuming
            early = WireClient(three_brokers.bootstrap(1))
            corr = early.send(produce)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        with early:
            answers = [code_of(early.read_frame(), corr)]
        # one produce after the other, straight after the resume, until broker 1 has registered again and
        # answered for a second after that (bounded: 20 s, 2,000 requests)
        deadline, registered_at = time.monotonic() + 20, None
        with WireClient(three_brokers.bootstrap(1)) as c:
            for _ in range(2000):
                now = time.monotonic()
                if now > deadline or (registered_at is not None and now - registered_at > 1):
                    break
                corr = c.send(produce)
                answers.append(code_of(c.read_frame(), corr))
                if registered_at is None and 1 in zk.get_broker_ids():
                    registered_at = now
                time.sleep(0.005)
        assert registered_at is not None, "broker 1 did not register again within 20 s"
        accepted = sum(1 for a in answers if a == ErrorCode.none)
        assert accepted == 0, f"the deposed leader acknowledged {accepted} of {len(answers)} writes"
        assert set(answers) == {ErrorCode.not_leader_or_follower}, set(answers)
        s = state()  # broker 2 still leads (its epoch may have grown since: ISR changes of the controller)
        assert s is not None and s.leader == 2 and s.leader_epoch >= 1
    finally:
        zk.close()

class _Draws(random.Random):
    """A Random whose randrange answers the given draws in turn: the placement's start index, then its
    replica shift (the broker draws both unseeded, so the test tries every pair)."""

    def __init__(self, *draws: int) -> None:
        super().__init__(0)
        self.draws = list(draws)

    def randrange(self, *args: Any, **kwargs: Any) -> int:  # type: ignore[override]
        return self.draws.pop(0)


@pytest.mark.parametrize("racks", [None, {1: "a", 2: "a", 3: "b"}], ids=["no-racks", "racks-a-a-b"])
def test_create_topics_places_as_kafka(
    brokers: BrokerProcesses, zk: KafkaZkClient, racks: dict[int, str] | None
) -> None:
    """CreateTopics on broker processes places replicas with Kafka's algorithm (rack-unaware without
    broker.rack, rack-aware with it): the assignment in /brokers/topics/<t> is what
    kaflite.cluster.placement gives for one of the n x n (start index, replica shift) draws."""
    from kaflite.cluster.placement import assign_replicas_round_robin, assign_replicas_to_brokers

    ids = (1, 2, 3)
    for b in ids:
        brokers.start(b, *([f"broker.rack={racks[b]}"] if racks else []))
    wait_until("brokers registered", lambda: zk.get_broker_ids() == list(ids))
    rack_of: dict[int, str | None] = {b: racks[b] if racks else None for b in ids}

    def kafka_placements(n: int, rf: int) -> list[dict[int, list[int]]]:
        return [assign_replicas_to_brokers(n, rf, rack_of, rng=_Draws(start, shift))
                for start in range(len(ids)) for shift in range(len(ids))]  # fmt: skip

    # the check tells Kafka's structure from "every partition on rf brokers": the textbook round robin
    # puts 12 partitions on the same brokers, and it is not one of Kafka's placements here
    assert assign_replicas_round_robin(12, 3, ids) not in kafka_placements(12, 3)
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap(2)})
    topics = {"p12r3": (12, 3), "p12r2": (12, 2), "p7r1": (7, 1)}
    for f in admin.create_topics([NewTopic(t, n, rf) for t, (n, rf) in topics.items()]).values():
        f.result(30)
    for t, (n, rf) in topics.items():
        got = zk.get_topic_assignment(t)
        assert got is not None
        placed = {p: list(r) for p, r in got[0].partitions.items()}
        assert placed in kafka_placements(n, rf), f"{t}: {placed}"
        if racks:  # rack-aware: every partition spans as many racks as it can
            assert all(len({racks[b] for b in r}) == min(rf, 2) for r in placed.values()), placed
    # the whole cluster stops at once, as `kill` of every broker does: each follows its leaders, and each
    # exits by itself, promptly (a replica fetcher whose cancellation Python 3.11's wait_for swallowed, as
    # its leader closed the connection, kept one broker in ten running here until the fixture's SIGKILL 15 s
    # later; tests/replica/test_fetcher_stop.py is the deterministic test)
    exits = exit_times_on_sigterm(brokers)
    late = [b for b in ids if exits[b] != (0, True)]
    assert not late, (exits, [brokers.log(b)[-2000:] for b in late])


def exit_times_on_sigterm(brokers: BrokerProcesses, bound_s: float = 10.0) -> dict[int, tuple[int | None, bool]]:
    """SIGTERM to every broker at once; broker -> (its exit code, whether it exited within `bound_s`). A broker
    still running is left to the fixture's SIGKILL."""
    procs = dict(brokers.procs)
    for proc in procs.values():
        proc.terminate()
    deadline = time.monotonic() + bound_s
    out: dict[int, tuple[int | None, bool]] = {}
    for b, proc in procs.items():
        try:
            out[b] = (proc.wait(max(0.0, deadline - time.monotonic())), True)
        except subprocess.TimeoutExpired:
            out[b] = (None, False)
    return out
