"""`EmbeddedCluster`: a real ZooKeeper-mode kaflite cluster (a ZooKeeper and N broker processes) for tests.

    with EmbeddedCluster(brokers=3) as cluster:          # or: async with EmbeddedCluster(3) as cluster
        Producer(cluster.confluent_config())
        cluster.kill(1); cluster.restart(1)
        cluster.freeze(2); cluster.thaw(2)
        cluster.move_leader("orders", 0, to=2)
        cluster.expire_member("billing", member_id)      # with overrides={"kaflite.faults.enable": "true"}

Rules (tests/embedded/test_embedded_cluster.py):
- it is `kaflite cluster up`'s `LocalCluster` (server/local_cluster.py), not a second launcher: the same
  ZooKeeper (`cluster/zkserver.py`), the same broker command line (`python -m kaflite.server --dev`), the
  same replication factor of the internal topics (3, or N below 3 brokers), the same stopping order;
- brokers are processes, not threads: `kill` is a SIGKILL (no controlled shutdown, the ZooKeeper session
  expires as for a crashed JVM), `freeze` a SIGSTOP (the broker stops answering and heartbeating, sockets
  stay open, as in a long GC pause); neither can be done to a thread of the test's own process;
- the internal topics `__consumer_offsets` and `__transaction_state` have 5 partitions each unless
  `overrides` sets `offsets.topic.num.partitions` / `transaction.state.log.num.partitions` (Kafka's own
  test harness, TestUtils.createBrokerConfig, uses 5 for the offsets topic; 50, Kafka's default, is 300
  replica logs for three brokers to open before the cluster is ready);
- `start()` returns once every broker is registered in the metadata and `__consumer_offsets` and
  `__transaction_state` exist (cluster up's `create_internal_topics`), so a group or a transaction can run
  at once; `start_seconds` says how long that took;
- `restart(i)` starts broker i again on the same port and data directory and returns once it is registered;
- `stop()` thaws frozen brokers, stops brokers (SIGTERM, controlled shutdown) then ZooKeeper, each by its
  pid, and removes the data directory it created; it is idempotent.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["TEST_DEFAULTS", "EmbeddedCluster"]

# A test cluster's defaults under the caller's overrides (module rules)
TEST_DEFAULTS: dict[str, str] = {
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
}


class EmbeddedCluster:
    """A ZooKeeper and `brokers` kaflite broker processes on 127.0.0.1, for tests.

    Arguments:
        brokers: how many brokers (ids 0..brokers-1).
        data_dir: where ZooKeeper's and the brokers' data and logs live; None: a temporary directory,
            removed by `stop()`.
        overrides: broker keys for every broker (e.g. {"kaflite.faults.enable": "true"}), over
            `TEST_DEFAULTS`.
    """

    def __init__(self, brokers: int = 3, data_dir: Path | None = None,
                 overrides: dict[str, str] | None = None) -> None:
        from kaflite.server.local_cluster import LocalCluster

        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, got {brokers}")
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kaflite-cluster-"))
        self.overrides = {**TEST_DEFAULTS, **(overrides or {})}
        self._cluster = LocalCluster(self.data_dir, brokers, None, self.overrides)
        self._frozen: set[int] = set()
        self._started = False
        self.start_seconds: float | None = None

    # --- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> EmbeddedCluster:
        from kaflite.cluster.zkserver import missing_reason
        from kaflite.server.local_cluster import create_internal_topics

        if self._started:
            return self
        reason = missing_reason()
        if reason is not None:
            raise RuntimeError(f"EmbeddedCluster needs ZooKeeper: {reason}")
        began = time.monotonic()
        self._started = True
        try:
            self._cluster.start(say=_quiet)
            problems: list[str] = []
            create_internal_topics(self._cluster, problems.append)
            if not any(p.startswith("internal topics __consumer_offsets") for p in problems):
                raise RuntimeError(f"cluster started but not ready: {'; '.join(problems)}")
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        for broker_id in list(self._frozen):
            self.thaw(broker_id)
        self._cluster.stop(say=_quiet)
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedCluster:
        await asyncio.get_running_loop().run_in_executor(None, self.start)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.stop)

    # --- addresses and client configurations ------------------------------------------------------------
    @property
    def broker_ids(self) -> list[int]:
        return [b.broker_id for b in self._cluster.brokers]

    @property
    def bootstrap(self) -> str:
        """Every broker's address, comma-separated (clients need one live one)."""
        return self._cluster.bootstrap

    def address(self, broker_id: int) -> str:
        return f"127.0.0.1:{self._broker(broker_id).port}"

    @property
    def zookeeper_connect(self) -> str:
        return str(self._cluster.zookeeper.connect)

    def confluent_config(self) -> dict[str, Any]:
        """confluent-kafka's configuration: `Producer({**cluster.confluent_config(), "acks": "all"})`."""
        return {"bootstrap.servers": self.bootstrap}

    def kafka_python_config(self) -> dict[str, Any]:
        """kafka-python's keyword arguments: `KafkaConsumer(**cluster.kafka_python_config())`."""
        return {"bootstrap_servers": self.bootstrap}

    def aiokafka_config(self) -> dict[str, Any]:
        """aiokafka's keyword arguments: `AIOKafkaProducer(**cluster.aiokafka_config())`."""
        return {"bootstrap_servers": self.bootstrap}

    def pid(self, broker_id: int) -> int:
        return int(self._broker(broker_id).proc.pid)

    def log(self, broker_id: int) -> str:
        """Broker `broker_id`'s log so far (to print when a test fails)."""
        return self._broker(broker_id).log.read_text(errors="replace")

    # --- faults ------------------------------------------------------------------------------------------
    def kill(self, broker_id: int) -> None:
        """SIGKILL broker `broker_id` (a crash: no controlled shutdown; its ZooKeeper session expires after
        `zookeeper.session.timeout.ms`, then the controller moves its leaderships)."""
        b = self._broker(broker_id)
        self._frozen.discard(broker_id)
        if b.proc.poll() is None:
            b.proc.kill()
        b.proc.wait(10)

    def stop_broker(self, broker_id: int) -> None:
        """SIGTERM broker `broker_id`: a controlled shutdown (its leaderships move before it exits)."""
        b = self._broker(broker_id)
        if broker_id in self._frozen:
            self.thaw(broker_id)
        if b.proc.poll() is None:
            b.proc.terminate()
        b.proc.wait(30)

    def restart(self, broker_id: int, timeout: float = 60.0) -> None:
        """Start broker `broker_id` again (killed or stopped, or running: stopped first) on its port and
        data directory; returns once the cluster's metadata lists it again."""
        b = self._broker(broker_id)
        if b.proc.poll() is None:
            self.stop_broker(broker_id)
        fresh = self._cluster._start_broker(broker_id, b.port)
        self._cluster.brokers[self._cluster.brokers.index(b)] = fresh
        self._cluster._wait_listening(fresh)
        self._wait_registered(broker_id, timeout)

    def freeze(self, broker_id: int) -> None:
        """SIGSTOP broker `broker_id`: it answers nothing and heartbeats nothing until `thaw`."""
        os.kill(self.pid(broker_id), signal.SIGSTOP)
        self._frozen.add(broker_id)

    def thaw(self, broker_id: int) -> None:
        """SIGCONT a frozen broker."""
        try:
            os.kill(self.pid(broker_id), signal.SIGCONT)
        except ProcessLookupError:
            pass
        self._frozen.discard(broker_id)

    # --- groups ----------------------------------------------------------------------------------------
    def expire_member(self, group: str, member_id: str, timeout: float = 30.0) -> None:
        """Expire `member_id` of `group` now on the group's coordinator, as its session timeout would (the
        group rebalances; a KIP-848 group's member is fenced). Needs the cluster started with
        overrides={"kaflite.faults.enable": "true"} (server/faults_admin.py); KafkaError otherwise, or with
        the coordinator's answer (UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND)."""
        from kaflite.server.faults_client import group_fault

        group_fault(self.bootstrap, group, member_id, timeout)

    def force_rebalance(self, group: str, timeout: float = 30.0) -> None:
        """Make `group` rebalance now on its coordinator (a classic group's members rejoin at their next
        heartbeat; a KIP-848 group's epoch goes up). Needs kaflite.faults.enable, as `expire_member`."""
        from kaflite.server.faults_client import group_fault

        group_fault(self.bootstrap, group, None, timeout)

    # --- topics and leadership ------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     config: dict[str, str] | None = None, timeout: float = 30.0) -> None:
        """Create a topic and return once every running broker's own metadata (asked of each with Metadata)
        names a leader for each partition: a client bootstrapped from any of them finds the topic led."""
        from confluent_kafka.admin import NewTopic

        futures = self._admin().create_topics([NewTopic(name, partitions, replication_factor, config=config or {})])
        futures[name].result(timeout)
        self._await_every_broker(
            name, lambda leaders: all(leaders.get(p, -1) >= 0 for p in range(partitions)),
            time.monotonic() + timeout, f"have no leader for each of its {partitions} partition(s)")

    def leader(self, topic: str, partition: int, timeout: float = 5.0) -> int:
        """The current leader of `topic`-`partition` in the metadata (-1 when it has none)."""
        md = self._admin().list_topics(topic, timeout=timeout)
        tm = md.topics.get(topic)
        if tm is None or tm.error is not None or partition not in tm.partitions:
            raise KeyError(f"no partition {topic}-{partition} in the metadata")
        return int(tm.partitions[partition].leader)

    def move_leader(self, topic: str, partition: int, to: int, timeout: float = 30.0) -> None:
        """Make broker `to` lead `topic`-`partition`: a reassignment (AlterPartitionReassignments to the
        controller) that puts `to` first in the replica list (in place of the last replica when it is not
        one yet, keeping the replication factor), then a preferred leader election (ElectLeaders); returns
        once every running broker's metadata names `to` as the leader."""
        from confluent_kafka import ElectionType, TopicPartition

        if to not in self.broker_ids:
            raise KeyError(f"no broker {to} in this cluster (brokers: {self.broker_ids})")
        replicas = self._replicas(topic, partition)
        deadline = time.monotonic() + timeout
        if replicas[0] != to:
            wanted = [to, *[r for r in replicas if r != to]][: len(replicas)]
            self._reassign(topic, partition, wanted, timeout)
            while self._replicas(topic, partition) != wanted:  # the new replica caught up, the move done
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reassignment of {topic}-{partition} to {wanted} did not complete")
                time.sleep(0.1)
        while True:
            if self.leader(topic, partition) == to:
                break
            futures = self._admin().elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, partition)])
            try:
                futures.result(timeout=max(0.1, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - ELECTION_NOT_NEEDED, or `to` not in the ISR yet: asked again
                pass
            if self.leader(topic, partition) == to:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {to} did not become the leader of {topic}-{partition} "
                                   f"(leader: {self.leader(topic, partition)})")
            time.sleep(0.1)
        # every running broker's metadata names it (a `leader()` right after may ask any of them)
        self._await_every_broker(topic, lambda leaders: leaders.get(partition) == to, deadline,
                                 f"do not name {to} as the leader of partition {partition}")

    def _running(self) -> list[int]:
        return [b.broker_id for b in self._cluster.brokers
                if b.proc.poll() is None and b.broker_id not in self._frozen]

    def _await_every_broker(self, topic: str, ready: Callable[[dict[int, int]], bool], deadline: float,
                            lag: str) -> None:
        """Return once `ready(leaders)` holds for every running broker's own metadata of `topic` (partition
        -> leader id, as `_leaders_on`); TimeoutError naming the brokers still lagging (`lag`) at `deadline`."""
        while True:
            lagging = [b for b in self._running() if not ready(self._leaders_on(b, topic))]
            if not lagging:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: the metadata of brokers {lagging} {lag} yet")
            time.sleep(0.1)

    def _leaders_on(self, broker_id: int, topic: str) -> dict[int, int]:
        """Partition -> leader (-1: none) of `topic` in broker `broker_id`'s own metadata; empty when it
        does not have the topic or did not answer."""
        from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
        from kio.schema.metadata.v12.response import MetadataResponse
        from kio.schema.types import TopicName

        from kaflite.cluster.wire import request

        try:
            resp = request("127.0.0.1", self._broker(broker_id).port, MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),), allow_auto_topic_creation=False,
                include_topic_authorized_operations=False), MetadataResponse, 5.0)
        except (OSError, ConnectionError):
            return {}
        return {int(p.partition_index): int(p.leader_id)
                for t in resp.topics if t.name == topic and t.error_code == 0 for p in t.partitions}

    def _replicas(self, topic: str, partition: int) -> list[int]:
        tm = self._admin().list_topics(topic, timeout=10).topics.get(topic)
        if tm is None or tm.error is not None or partition not in tm.partitions:
            raise KeyError(f"no partition {topic}-{partition} in the metadata")
        return [int(r) for r in tm.partitions[partition].replicas]

    def _reassign(self, topic: str, partition: int, replicas: list[int], timeout: float) -> None:
        """AlterPartitionReassignments to the controller (retried while the one asked is not it)."""
        from kio.schema.alter_partition_reassignments.v0.request import (
            AlterPartitionReassignmentsRequest,
            ReassignablePartition,
            ReassignableTopic,
        )
        from kio.schema.alter_partition_reassignments.v0.response import AlterPartitionReassignmentsResponse
        from kio.schema.types import BrokerId, TopicName
        from kio.static.primitive import i32

        from kaflite.cluster.wire import request
        from kaflite.protocol.errors import ErrorCode

        req = AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(name=TopicName(topic), partitions=(
            ReassignablePartition(partition_index=i32(partition), replicas=tuple(BrokerId(r) for r in replicas)),)),))
        deadline = time.monotonic() + timeout
        while True:
            md = self._admin().list_topics(timeout=10)
            controller = md.brokers.get(md.controller_id)
            if controller is not None:
                resp = request(controller.host, controller.port, req, AlterPartitionReassignmentsResponse, timeout)
                code = int(resp.error_code)
                if code == 0:
                    code = int(resp.responses[0].partitions[0].error_code)
                    if code != 0:
                        raise RuntimeError(f"reassigning {topic}-{partition} to {replicas}: "
                                           f"{ErrorCode(code).name.upper()} {resp.responses[0].partitions[0].error_message}")
                    return
                if code != ErrorCode.not_controller.value:
                    raise RuntimeError(f"reassigning {topic}-{partition}: {ErrorCode(code).name.upper()}")
            if time.monotonic() > deadline:
                raise TimeoutError("no controller answered the reassignment")
            time.sleep(0.2)

    # --- helpers -----------------------------------------------------------------------------------------
    def _broker(self, broker_id: int) -> Any:
        for b in self._cluster.brokers:
            if b.broker_id == broker_id:
                return b
        raise KeyError(f"no broker {broker_id} in this cluster (brokers: {self.broker_ids})")

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        admin = getattr(self, "_admin_client", None)
        if admin is None:
            admin = self._admin_client = AdminClient({"bootstrap.servers": self.bootstrap})
        return admin

    def _wait_registered(self, broker_id: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if broker_id in self._admin().list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: BLE001 - no broker answering yet
                pass
            time.sleep(0.1)
        raise TimeoutError(f"broker {broker_id} not registered within {timeout:g} s (see {self._broker(broker_id).log})")


def _quiet(line: str) -> None:
    """LocalCluster's progress lines: cluster up prints them; a test has its own output."""
