"""A broker's membership of a ZooKeeper cluster (the ZooKeeper half of Kafka's KafkaServer): register,
run for controller, learn partition leadership from the state znodes.

Rules:
- start: connect (the chroot is created when missing), Kafka's persistent paths, the cluster id (the
  first broker's proposal wins), the ephemeral /brokers/ids/<id> (refused while another live broker
  holds the id), then run for controller (`ControllerService`);
- the broker learns leadership by watching the state znode of every partition assigned to it; a state
  is passed on only when newer than the one it holds: a higher leader epoch, or the same leader epoch
  and a higher znode version (an ISR change). A state read late never rolls leadership back; the
  fencing of a deposed controller is ZooKeeper's (its writes never land, see cluster.zk);
- a topic whose znode vanishes is reported deleted, and its partitions forgotten (a topic created again
  starts from leader epoch 0);
- stop: the controller role ends and the session closes, so the registration and /controller vanish at
  once and the others elect without waiting for the session timeout.

`python -m kaflite.cluster.member` runs a member alone (no Kafka listener): the control plane as a
process, for tests and for trying an election by hand, until the broker embeds ClusterMember.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable

from kaflite.cluster.controller import ControllerConfig
from kaflite.cluster.zk import KafkaZkClient, PartitionStateChanged, TopicAssignmentChanged, ZkEvent
from kaflite.cluster.zkconfig import ZooKeeperSettings, zookeeper_settings
from kaflite.cluster.zkcontroller import ControllerService
from kaflite.cluster.zkdata import BrokerInfo, LeaderAndIsr, ZkEndpoint, kafka_uuid

__all__ = ["ClusterMember", "PartitionStateFilter", "main"]

log = logging.getLogger("kaflite.cluster.member")

TopicPartition = tuple[str, int]


class PartitionStateFilter:
    """Which partition states a broker applies: only ones newer than what it holds."""

    def __init__(self) -> None:
        self._held: dict[TopicPartition, LeaderAndIsr] = {}
        self._lock = threading.Lock()

    def accept(self, tp: TopicPartition, state: LeaderAndIsr) -> bool:
        with self._lock:
            held = self._held.get(tp)
            if held is not None and (state.leader_epoch, state.zk_version) <= (
                held.leader_epoch,
                held.zk_version,
            ):
                return False
            self._held[tp] = state
            return True

    def forget_topic(self, topic: str) -> None:
        with self._lock:
            self._held = {tp: s for tp, s in self._held.items() if tp[0] != topic}

    def held(self, tp: TopicPartition) -> LeaderAndIsr | None:
        with self._lock:
            return self._held.get(tp)


class ClusterMember:
    """One broker in a ZooKeeper cluster."""

    def __init__(
        self,
        settings: ZooKeeperSettings,
        info: BrokerInfo,
        controller_config: ControllerConfig | None = None,
        proposed_cluster_id: str | None = None,
        on_partition_state: Callable[[TopicPartition, LeaderAndIsr], None] | None = None,
        on_topic_deleted: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.info = info
        self.zk = KafkaZkClient(settings.connect, settings.session_timeout_ms, settings.connection_timeout_ms)
        self.controller = ControllerService(self.zk, info.id, controller_config)
        self.filter = PartitionStateFilter()
        self.cluster_id = ""
        self.broker_epoch = -1
        self._proposed_cluster_id = proposed_cluster_id or kafka_uuid(uuid.uuid4())
        self._on_partition_state = on_partition_state
        self._on_topic_deleted = on_topic_deleted
        self._watched: set[TopicPartition] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Connect, register and run for controller. ZkConnectionError / BrokerIdInUseError otherwise."""
        self.zk.start()
        try:
            self.zk.create_top_level_paths()
            self.cluster_id = self.zk.get_or_create_cluster_id(self._proposed_cluster_id)
            self.broker_epoch = self.zk.register_broker(self.info)
        except Exception:
            self.zk.close()
            raise
        log.info(
            "broker %d registered (broker epoch %d) in cluster %s",
            self.info.id,
            self.broker_epoch,
            self.cluster_id,
        )
        self.controller.start()
        self.zk.watch_topics(self._on_topics)

    def stop(self) -> None:
        self.controller.stop()
        self.zk.close()

    # --- partition leadership ------------------------------------------------------------------------------
    def _on_topics(self, event: ZkEvent) -> None:
        if not isinstance(event, TopicAssignmentChanged):
            return
        if event.assignment is None:
            self.filter.forget_topic(event.topic)
            if self._on_topic_deleted is not None:
                self._on_topic_deleted(event.topic)
            return
        a = event.assignment
        mine = [
            (a.topic, p)
            for p, replicas in a.partitions.items()
            if self.info.id in replicas or self.info.id in a.adding_replicas.get(p, ())
        ]
        with self._lock:
            new = [tp for tp in mine if tp not in self._watched]
            self._watched.update(new)
        self.zk.watch_partition_states(sorted(new), self._on_state)

    def _on_state(self, event: ZkEvent) -> None:
        if not isinstance(event, PartitionStateChanged) or event.state is None:
            return
        tp = (event.topic, event.partition)
        if not self.filter.accept(tp, event.state):
            return
        if self._on_partition_state is not None:
            self._on_partition_state(tp, event.state)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kaflite.cluster.member",
        description="A kaflite cluster member without a Kafka listener: registers, runs for controller.",
    )
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--zookeeper", required=True, help="zookeeper.connect")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9092, help="the port announced in the registration")
    parser.add_argument("--rack", default=None)
    parser.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable=true")
    parser.add_argument(
        "--leader-imbalance-check-interval-seconds", type=int, default=300, help="as the broker key"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    try:
        settings = zookeeper_settings(
            {"zookeeper.connect": args.zookeeper, "zookeeper.session.timeout.ms": args.session_timeout_ms}
        )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    assert settings is not None
    info = BrokerInfo(
        args.broker_id,
        (ZkEndpoint("PLAINTEXT", args.host, args.port),),
        rack=args.rack,
        timestamp_ms=int(time.time() * 1000),
    )
    member = ClusterMember(
        settings,
        info,
        ControllerConfig(
            unclean_leader_election_enable=args.unclean,
            leader_imbalance_check_interval_seconds=args.leader_imbalance_check_interval_seconds,
        ),
        on_partition_state=lambda tp, s: log.info(
            "%s-%d: leader %d epoch %d isr %s", tp[0], tp[1], s.leader, s.leader_epoch, list(s.isr)
        ),
    )
    try:
        member.start()
    except Exception as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    while not done.wait(1.0):
        pass
    member.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
