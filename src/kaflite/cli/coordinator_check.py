"""Why a group command finds no coordinator: say it rather than wait in silence.

A group's coordinator is the leader of its `__consumer_offsets` partition. In a cluster that topic is
created on the first FindCoordinator, and refused (COORDINATOR_NOT_AVAILABLE, retried by every client
forever) while fewer brokers are registered than `offsets.topic.replication.factor`, as Kafka does; the
reason is then only in a broker's log.

Rules (tested in tests/cli/test_cluster_first_minute.py):
- `offsets_topic_verdict` is pure: a message when the topic is missing and fewer brokers are registered than
  its replication factor, or when partitions of it have no leader; None otherwise (also when the factor is
  unknown: nothing is claimed that was not read);
- `coordinator_problem` asks Metadata and, only when the topic is missing, the broker's
  offsets.topic.replication.factor (DescribeConfigs), claiming nothing for a single broker without
  zookeeper.connect (kaflite's single node creates the topic with one replica); any failure of those requests is None, never an error
  of its own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["coordinator_problem", "offsets_topic_verdict"]

OFFSETS_TOPIC = "__consumer_offsets"
RF_KEY = "offsets.topic.replication.factor"


def offsets_topic_verdict(registered: int, replication_factor: int | None, topic_exists: bool,
                          leaderless: list[int]) -> str | None:
    if topic_exists:
        if leaderless:
            shown = ", ".join(map(str, leaderless[:8])) + (", ..." if len(leaderless) > 8 else "")
            return (f"the group coordinator is unavailable: {len(leaderless)} partition(s) of {OFFSETS_TOPIC} "
                    f"have no leader ({shown}); their replicas' brokers are down")
        return None
    if replication_factor is not None and registered < replication_factor:
        return (f"the group coordinator is unavailable: {OFFSETS_TOPIC} needs {replication_factor} live brokers "
                f"({RF_KEY}), {registered} {'is' if registered == 1 else 'are'} registered")
    return None


def coordinator_problem(admin: Any, timeout: float = 5.0) -> str | None:
    """The verdict for the cluster behind `admin` (a confluent-kafka AdminClient), None when it looks fine."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    try:
        md = admin.list_topics(timeout=timeout)
        brokers = sorted(md.brokers)
        topic = md.topics.get(OFFSETS_TOPIC)
        if topic is not None and topic.error is None:
            leaderless = sorted(p for p, pm in topic.partitions.items() if pm.leader < 0)
            return offsets_topic_verdict(len(brokers), None, True, leaderless)
        if not brokers:
            return None
        resource = ConfigResource(ResourceType.BROKER, str(brokers[0]))
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout=timeout)
        entry = entries.get(RF_KEY)
        rf = int(entry.value) if entry is not None and entry.value is not None else None
        zk = entries.get("zookeeper.connect")
        if len(brokers) == 1 and not (zk is not None and zk.value):
            rf = None  # a single node (kaflite without zookeeper.connect) creates the topic with 1 replica
        return offsets_topic_verdict(len(brokers), rf, False, [])
    except Exception:  # noqa: BLE001 - a diagnosis must never be the error reported
        return None
