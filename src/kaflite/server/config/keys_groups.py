"""Group coordinator and offsets keys (Kafka's GroupCoordinatorConfig).

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems.
"""

from __future__ import annotations

from kaflite.server.config.definitions import (
    INT_MAX,
    AtLeast,
    Between,
    ConfigKey,
    Custom,
    ListOf,
    _k,
)

__all__ = ["KEYS", "NOT_READ"]

# group.consumer.assignors: Kafka's class names and the short names its ConsumerGroupPartitionAssignor
# implementations answer to (kaflite.assign's server assignors)
_ASSIGNORS = ("uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
              "org.apache.kafka.coordinator.group.assignor.RangeAssignor")

_MIGRATION_POLICY = Custom(
    lambda v: v is None or str(v).strip().lower() in ("disabled", "upgrade", "downgrade", "bidirectional"),
    "one of disabled, upgrade, downgrade, bidirectional (case-insensitive)")

KEYS: list[ConfigKey] = [
    _k(
        "offsets.topic.num.partitions",
        "int",
        50,
        "Partitions of __consumer_offsets (fixes which "
        "partition a group lives in; do not change after first start).",
        AtLeast(1),
    ),
    _k(
        "offsets.topic.replication.factor",
        "short",
        3,
        "Replication factor of __consumer_offsets in a cluster (created on the first FindCoordinator; "
        "refused, COORDINATOR_NOT_AVAILABLE, while fewer brokers are alive). A single node "
        "(no zookeeper.connect) creates it with 1 replica whatever this says.",
        AtLeast(1),
        differs="single node: __consumer_offsets always has 1 replica (Kafka would refuse to create it "
        "until offsets.topic.replication.factor brokers are alive, so a 1-broker Kafka needs it set to 1).",
    ),
    _k("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", AtLeast(1)),
    _k(
        "offsets.topic.compression.codec",
        "int",
        0,
        "Compression codec of __consumer_offsets records: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.",
        Between(0, 4),
    ),
    _k(
        "offsets.retention.minutes",
        "int",
        10080,
        "Committed offsets of an empty group expire after this many minutes.",
        AtLeast(1),
    ),
    _k(
        "offsets.retention.check.interval.ms",
        "long",
        600000,
        "How often stale offsets are checked.",
        AtLeast(1),
    ),
    _k(
        "offsets.commit.timeout.ms", "int", 5000, "How long an offset commit waits to be written.", AtLeast(1)
    ),
    _k("offsets.load.buffer.size", "int", 5242880, "Read size when loading offsets at startup.", AtLeast(1)),
    _k(
        "offsets.commit.required.acks",
        "short",
        -1,
        "Acks needed for an offset commit (deprecated).",
        applies=False,
    ),
    _k(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        "How long the first rebalance of a new group waits for more members to join (100 in the dev profile).",
        AtLeast(0),
    ),
    _k(
        "group.min.session.timeout.ms",
        "int",
        6000,
        "Smallest session timeout a member may ask for.",
        AtLeast(0),
    ),
    _k(
        "group.max.session.timeout.ms",
        "int",
        1800000,
        "Largest session timeout a member may ask for.",
        AtLeast(0),
    ),
    _k("group.max.size", "int", INT_MAX, "Maximum members of one consumer group.", AtLeast(1)),
    _k(
        "offset.metadata.max.bytes",
        "int",
        4096,
        "Largest metadata string an OffsetCommit may attach to an offset (OFFSET_METADATA_TOO_LARGE above).",
        AtLeast(0),
    ),
    # KIP-848 groups (ConsumerGroupHeartbeat, `group.protocol=consumer` clients)
    _k(
        "group.consumer.session.timeout.ms",
        "int",
        45000,
        "Session timeout of members of KIP-848 consumer groups.",
        AtLeast(1),
    ),
    _k(
        "group.consumer.heartbeat.interval.ms",
        "int",
        5000,
        "Heartbeat interval given to members of KIP-848 consumer groups.",
        AtLeast(1),
    ),
    _k("group.consumer.max.size", "int", INT_MAX, "Maximum members of one KIP-848 consumer group.", AtLeast(1)),
    _k(
        "group.consumer.assignors",
        "list",
        ["uniform", "range"],
        "Server-side assignors of KIP-848 groups, the first being the default (Kafka's class names "
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor / RangeAssignor, or uniform / range); a "
        "member asking for another gets UNSUPPORTED_ASSIGNOR.",
        ListOf(_ASSIGNORS),
        kafka_default="org.apache.kafka.coordinator.group.assignor.UniformAssignor,"
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
        differs="the short names are the default here (Kafka 4.0 accepts them too); both spellings are accepted.",
    ),
    _k(
        "group.coordinator.rebalance.protocols",
        "list",
        ["classic", "consumer"],
        "Group protocols served: classic always; consumer enables KIP-848 groups (ConsumerGroupHeartbeat / "
        "ConsumerGroupDescribe, answered UNSUPPORTED_VERSION and not advertised without it).",
        ListOf(("classic", "consumer")),
        kafka_default="classic,consumer",
    ),
    _k(
        "group.consumer.migration.policy",
        "string",
        "bidirectional",
        "Online migration between classic and KIP-848 consumer groups: upgrade (a consumer-protocol member "
        "joining a classic group converts it), downgrade (the last consumer-protocol member leaving converts "
        "it back), bidirectional, or disabled (case-insensitive).",
        _MIGRATION_POLICY,
    ),
    # --- share groups (KIP-932; Kafka's ShareGroupConfig) -------------------------------------------
    _k(
        "group.share.enable",
        "boolean",
        True,
        "Serve share groups (ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge): false "
        "answers them UNSUPPORTED_VERSION and ApiVersions does not advertise them.",
        kafka_default=False,
        differs="Kafka 4.1+ switches share groups on with the share.version feature level (this key is an "
        "internal Kafka switch); kaflite has no feature levels for it, so this key is the switch, on by "
        "default.",
    ),
    _k(
        "group.share.record.lock.duration.ms",
        "int",
        30000,
        "How long a record acquired by a share-group member stays locked to it before it is released for "
        "redelivery.",
        AtLeast(1000),
        differs="Kafka also bounds it by group.share.min/max.record.lock.duration.ms (15000..60000 by "
        "default); kaflite has no such keys, so only Kafka's ConfigDef floor of 1000 applies.",
    ),
    _k(
        "group.share.delivery.count.limit",
        "int",
        5,
        "How many times a record may be delivered to share-group members; a record released at this "
        "count is archived, never delivered again.",
        Between(2, 10),
    ),
    _k(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        "How many records of one share partition may be in flight (between the share-partition start and "
        "end offsets) at a time.",
        AtLeast(1),
    ),
    _k(
        "group.share.session.timeout.ms",
        "int",
        45000,
        "A share-group member without a heartbeat for this long is removed and its acquired records "
        "released.",
        AtLeast(1),
        differs="Kafka also bounds it by group.share.min/max.session.timeout.ms (45000..60000 by default); "
        "kaflite has no such keys.",
    ),
    _k(
        "group.share.heartbeat.interval.ms",
        "int",
        5000,
        "Heartbeat interval given to share-group members.",
        AtLeast(1),
        differs="Kafka also bounds it by group.share.min/max.heartbeat.interval.ms (5000..15000 by "
        "default); kaflite has no such keys.",
    ),
    _k(
        "group.share.max.size",
        "int",
        200,
        "Maximum members of one share group; one more joining gets GROUP_MAX_SIZE_REACHED.",
        AtLeast(1),
    ),
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {}
