"""What each API asks the authorizer: Kafka's KafkaApis checks, one table (`API_CHECKS`) the handlers
use and docs/security.md lists (tests/acl/test_rules.py checks both).

Rules:
- every check a handler makes is one of the `Check` constants below, asked through
  `RequestContext.allowed(check, name)`; a handler module uses only the checks of the API keys it serves,
  and uses every one of them (tests/acl/test_rules.py reads the handler modules);
- a refused check answers `check.error` (Kafka's TOPIC_ / GROUP_ / CLUSTER_ / TRANSACTIONAL_ID_
  AUTHORIZATION_FAILED) where Kafka answers it: per topic or partition for topic checks, per group, or
  for the whole request;
- `when` says when Kafka asks (every request, a follower, a transactional produce, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from kaflite.protocol.errors import ErrorCode
from kaflite.server.authorizer import AclOperation, ResourceType

__all__ = ["API_CHECKS", "API_NAMES", "Check", "error_for"]

Op, R = AclOperation, ResourceType

_ERRORS = {
    R.TOPIC: ErrorCode.topic_authorization_failed,
    R.GROUP: ErrorCode.group_authorization_failed,
    R.CLUSTER: ErrorCode.cluster_authorization_failed,
    R.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
}


def error_for(resource_type: ResourceType) -> ErrorCode:
    return _ERRORS.get(resource_type, ErrorCode.cluster_authorization_failed)


@dataclass(frozen=True, slots=True)
class Check:
    operation: AclOperation
    resource_type: ResourceType
    when: str

    @property
    def error(self) -> ErrorCode:
        return error_for(self.resource_type)


def _c(op: AclOperation, rt: ResourceType, when: str) -> Check:
    return Check(op, rt, when)


# --- the checks, named as the handlers use them --------------------------------------------------------
PRODUCE_TOPIC = _c(Op.WRITE, R.TOPIC, "each topic")
PRODUCE_TXN = _c(Op.WRITE, R.TRANSACTIONAL_ID, "a transactional produce")
FETCH_FOLLOWER = _c(Op.CLUSTER_ACTION, R.CLUSTER, "a follower's fetch (replica id set)")
FETCH_TOPIC = _c(Op.READ, R.TOPIC, "each topic of a consumer's fetch")
LIST_OFFSETS_TOPIC = _c(Op.DESCRIBE, R.TOPIC, "each topic")
METADATA_TOPIC = _c(Op.DESCRIBE, R.TOPIC, "each topic (hidden from an all-topics answer when refused)")
METADATA_CREATE_CLUSTER = _c(Op.CREATE, R.CLUSTER, "auto-creating a topic (else CREATE on the topic)")
METADATA_CREATE_TOPIC = _c(Op.CREATE, R.TOPIC, "auto-creating a topic without CREATE on the cluster")
METADATA_CLUSTER_OPS = _c(Op.DESCRIBE, R.CLUSTER, "cluster_authorized_operations requested (v8-v10)")
OFFSET_COMMIT_GROUP = _c(Op.READ, R.GROUP, "every request")
OFFSET_COMMIT_TOPIC = _c(Op.READ, R.TOPIC, "each topic")
OFFSET_FETCH_GROUP = _c(Op.DESCRIBE, R.GROUP, "each group")
OFFSET_FETCH_TOPIC = _c(Op.DESCRIBE, R.TOPIC, "each topic (refused topics are left out of an all-topics answer)")
FIND_COORDINATOR_GROUP = _c(Op.DESCRIBE, R.GROUP, "key type GROUP")
FIND_COORDINATOR_TXN = _c(Op.DESCRIBE, R.TRANSACTIONAL_ID, "key type TRANSACTION")
FIND_COORDINATOR_SHARE = _c(Op.CLUSTER_ACTION, R.CLUSTER, "key type SHARE")
JOIN_GROUP = _c(Op.READ, R.GROUP, "every request")
HEARTBEAT = _c(Op.READ, R.GROUP, "every request")
LEAVE_GROUP = _c(Op.READ, R.GROUP, "every request")
SYNC_GROUP = _c(Op.READ, R.GROUP, "every request")
DESCRIBE_GROUPS = _c(Op.DESCRIBE, R.GROUP, "each group")
LIST_GROUPS_CLUSTER = _c(Op.DESCRIBE, R.CLUSTER, "every request (else only the groups it may DESCRIBE)")
LIST_GROUPS_GROUP = _c(Op.DESCRIBE, R.GROUP, "each group, without DESCRIBE on the cluster")
DELETE_GROUPS = _c(Op.DELETE, R.GROUP, "each group")
CONSUMER_GROUP_HEARTBEAT = _c(Op.READ, R.GROUP, "every request")
CONSUMER_GROUP_DESCRIBE = _c(Op.DESCRIBE, R.GROUP, "each group")
SHARE_GROUP_HEARTBEAT = _c(Op.READ, R.GROUP, "every request")
SHARE_GROUP_DESCRIBE = _c(Op.DESCRIBE, R.GROUP, "each group")
SHARE_FETCH_GROUP = _c(Op.READ, R.GROUP, "every request")
SHARE_FETCH_TOPIC = _c(Op.READ, R.TOPIC, "each topic")
SHARE_ACKNOWLEDGE_GROUP = _c(Op.READ, R.GROUP, "every request")
SHARE_ACKNOWLEDGE_TOPIC = _c(Op.READ, R.TOPIC, "each topic")
OFFSET_DELETE_GROUP = _c(Op.DELETE, R.GROUP, "every request")
OFFSET_DELETE_TOPIC = _c(Op.READ, R.TOPIC, "each topic")
CREATE_TOPICS_CLUSTER = _c(Op.CREATE, R.CLUSTER, "every request (else CREATE on each topic)")
CREATE_TOPICS_TOPIC = _c(Op.CREATE, R.TOPIC, "each topic, without CREATE on the cluster")
DELETE_TOPICS = _c(Op.DELETE, R.TOPIC, "each topic")
CREATE_PARTITIONS = _c(Op.ALTER, R.TOPIC, "each topic")
DELETE_RECORDS = _c(Op.DELETE, R.TOPIC, "each topic")
DESCRIBE_CONFIGS_TOPIC = _c(Op.DESCRIBE_CONFIGS, R.TOPIC, "each topic resource")
DESCRIBE_CONFIGS_CLUSTER = _c(Op.DESCRIBE_CONFIGS, R.CLUSTER, "each broker resource")
DESCRIBE_CONFIGS_GROUP_HISTORY = _c(Op.DESCRIBE, R.GROUP, "each kaflite.group-history:GROUP and "
                                    "kaflite.share-group:GROUP resource (kaflite's rebalance timeline, a share "
                                    "group's records in flight; as DescribeGroups)")
ALTER_CONFIGS_TOPIC = _c(Op.ALTER_CONFIGS, R.TOPIC, "each topic resource")
ALTER_CONFIGS_CLUSTER = _c(Op.ALTER_CONFIGS, R.CLUSTER, "each broker resource")
INCREMENTAL_ALTER_CONFIGS_TOPIC = _c(Op.ALTER_CONFIGS, R.TOPIC, "each topic resource")
INCREMENTAL_ALTER_CONFIGS_CLUSTER = _c(Op.ALTER_CONFIGS, R.CLUSTER, "each broker resource")
INCREMENTAL_ALTER_CONFIGS_GROUP = _c(Op.ALTER_CONFIGS, R.GROUP, "each group resource (share groups' keys)")
DESCRIBE_LOG_DIRS = _c(Op.DESCRIBE, R.CLUSTER, "every request (refused: no directories, CLUSTER_AUTHORIZATION_FAILED)")
DESCRIBE_CLUSTER_OPS = _c(Op.DESCRIBE, R.CLUSTER, "cluster_authorized_operations requested")
ELECT_LEADERS = _c(Op.ALTER, R.CLUSTER, "every request")
ALTER_REASSIGNMENTS = _c(Op.ALTER, R.CLUSTER, "every request")
LIST_REASSIGNMENTS = _c(Op.DESCRIBE, R.CLUSTER, "every request")
ALTER_PARTITION = _c(Op.CLUSTER_ACTION, R.CLUSTER, "every request (broker to controller)")
SHARE_STATE = _c(Op.CLUSTER_ACTION, R.CLUSTER, "every request (broker to share coordinator)")
DESCRIBE_SHARE_OFFSETS_GROUP = _c(Op.DESCRIBE, R.GROUP, "each group")
DESCRIBE_SHARE_OFFSETS_TOPIC = _c(Op.DESCRIBE, R.TOPIC, "each topic (left out when all are asked)")
ALTER_SHARE_OFFSETS_GROUP = _c(Op.READ, R.GROUP, "every request")
ALTER_SHARE_OFFSETS_TOPIC = _c(Op.READ, R.TOPIC, "each topic")
DELETE_SHARE_OFFSETS_GROUP = _c(Op.DELETE, R.GROUP, "every request")
DELETE_SHARE_OFFSETS_TOPIC = _c(Op.READ, R.TOPIC, "each topic")
INIT_PRODUCER_ID_TXN = _c(Op.WRITE, R.TRANSACTIONAL_ID, "a transactional id given")
INIT_PRODUCER_ID_IDEMPOTENT = _c(Op.IDEMPOTENT_WRITE, R.CLUSTER,
                                 "no transactional id (else WRITE on any topic, KIP-679)")
ADD_PARTITIONS_TXN = _c(Op.WRITE, R.TRANSACTIONAL_ID, "v0-3 (a client)")
ADD_PARTITIONS_TOPIC = _c(Op.WRITE, R.TOPIC, "each topic, v0-3")
ADD_PARTITIONS_BROKER = _c(Op.CLUSTER_ACTION, R.CLUSTER, "v4+ (a broker verifying)")
ADD_OFFSETS_TXN = _c(Op.WRITE, R.TRANSACTIONAL_ID, "every request")
ADD_OFFSETS_GROUP = _c(Op.READ, R.GROUP, "every request")
END_TXN = _c(Op.WRITE, R.TRANSACTIONAL_ID, "every request")
WRITE_TXN_MARKERS = _c(Op.CLUSTER_ACTION, R.CLUSTER, "every request (broker to broker)")
TXN_OFFSET_COMMIT_TXN = _c(Op.WRITE, R.TRANSACTIONAL_ID, "every request")
TXN_OFFSET_COMMIT_GROUP = _c(Op.READ, R.GROUP, "every request")
TXN_OFFSET_COMMIT_TOPIC = _c(Op.READ, R.TOPIC, "each topic")
DESCRIBE_PRODUCERS = _c(Op.READ, R.TOPIC, "each topic")
DESCRIBE_TRANSACTIONS = _c(Op.DESCRIBE, R.TRANSACTIONAL_ID, "each transactional id")
DESCRIBE_TRANSACTIONS_TOPIC = _c(Op.DESCRIBE, R.TOPIC, "each topic of a transaction (others left out)")
LIST_TRANSACTIONS = _c(Op.DESCRIBE, R.TRANSACTIONAL_ID, "each transaction (others left out)")
DESCRIBE_ACLS = _c(Op.DESCRIBE, R.CLUSTER, "every request")
CREATE_ACLS = _c(Op.ALTER, R.CLUSTER, "every request")
DELETE_ACLS = _c(Op.ALTER, R.CLUSTER, "every request")
DESCRIBE_SCRAM = _c(Op.DESCRIBE, R.CLUSTER, "every request")
ALTER_SCRAM = _c(Op.ALTER, R.CLUSTER, "every request")
DESCRIBE_CLIENT_QUOTAS = _c(Op.DESCRIBE_CONFIGS, R.CLUSTER, "every request")
ALTER_CLIENT_QUOTAS = _c(Op.ALTER_CONFIGS, R.CLUSTER, "every request")

# api key -> the checks Kafka's KafkaApis makes for it (ApiVersions, SaslHandshake and SaslAuthenticate
# make none)
API_CHECKS: dict[int, tuple[Check, ...]] = {
    0: (PRODUCE_TXN, PRODUCE_TOPIC),
    1: (FETCH_FOLLOWER, FETCH_TOPIC),
    2: (LIST_OFFSETS_TOPIC,),
    3: (METADATA_TOPIC, METADATA_CREATE_CLUSTER, METADATA_CREATE_TOPIC, METADATA_CLUSTER_OPS),
    8: (OFFSET_COMMIT_GROUP, OFFSET_COMMIT_TOPIC),
    9: (OFFSET_FETCH_GROUP, OFFSET_FETCH_TOPIC),
    10: (FIND_COORDINATOR_GROUP, FIND_COORDINATOR_TXN, FIND_COORDINATOR_SHARE),
    11: (JOIN_GROUP,),
    12: (HEARTBEAT,),
    13: (LEAVE_GROUP,),
    14: (SYNC_GROUP,),
    15: (DESCRIBE_GROUPS,),
    16: (LIST_GROUPS_CLUSTER, LIST_GROUPS_GROUP),
    19: (CREATE_TOPICS_CLUSTER, CREATE_TOPICS_TOPIC),
    20: (DELETE_TOPICS,),
    21: (DELETE_RECORDS,),
    22: (INIT_PRODUCER_ID_TXN, INIT_PRODUCER_ID_IDEMPOTENT),
    23: (FETCH_FOLLOWER, LIST_OFFSETS_TOPIC),  # OffsetForLeaderEpoch: CLUSTER_ACTION, else DESCRIBE each topic
    24: (ADD_PARTITIONS_BROKER, ADD_PARTITIONS_TXN, ADD_PARTITIONS_TOPIC),
    25: (ADD_OFFSETS_TXN, ADD_OFFSETS_GROUP),
    26: (END_TXN,),
    27: (WRITE_TXN_MARKERS,),
    28: (TXN_OFFSET_COMMIT_TXN, TXN_OFFSET_COMMIT_GROUP, TXN_OFFSET_COMMIT_TOPIC),
    29: (DESCRIBE_ACLS,),
    30: (CREATE_ACLS,),
    31: (DELETE_ACLS,),
    32: (DESCRIBE_CONFIGS_TOPIC, DESCRIBE_CONFIGS_CLUSTER, DESCRIBE_CONFIGS_GROUP_HISTORY),
    33: (ALTER_CONFIGS_TOPIC, ALTER_CONFIGS_CLUSTER),
    35: (DESCRIBE_LOG_DIRS,),
    37: (CREATE_PARTITIONS,),
    42: (DELETE_GROUPS,),
    43: (ELECT_LEADERS,),
    44: (INCREMENTAL_ALTER_CONFIGS_TOPIC, INCREMENTAL_ALTER_CONFIGS_CLUSTER, INCREMENTAL_ALTER_CONFIGS_GROUP),
    45: (ALTER_REASSIGNMENTS,),
    46: (LIST_REASSIGNMENTS,),
    47: (OFFSET_DELETE_GROUP, OFFSET_DELETE_TOPIC),
    48: (DESCRIBE_CLIENT_QUOTAS,),
    49: (ALTER_CLIENT_QUOTAS,),
    50: (DESCRIBE_SCRAM,),
    51: (ALTER_SCRAM,),
    56: (ALTER_PARTITION,),
    60: (DESCRIBE_CLUSTER_OPS,),
    61: (DESCRIBE_PRODUCERS,),
    65: (DESCRIBE_TRANSACTIONS, DESCRIBE_TRANSACTIONS_TOPIC),
    66: (LIST_TRANSACTIONS,),
    68: (CONSUMER_GROUP_HEARTBEAT,),
    69: (CONSUMER_GROUP_DESCRIBE,),
    76: (SHARE_GROUP_HEARTBEAT,),
    77: (SHARE_GROUP_DESCRIBE,),
    78: (SHARE_FETCH_GROUP, SHARE_FETCH_TOPIC),
    79: (SHARE_ACKNOWLEDGE_GROUP, SHARE_ACKNOWLEDGE_TOPIC),
    83: (SHARE_STATE,),
    84: (SHARE_STATE,),
    85: (SHARE_STATE,),
    86: (SHARE_STATE,),
    87: (SHARE_STATE,),
    90: (DESCRIBE_SHARE_OFFSETS_GROUP, DESCRIBE_SHARE_OFFSETS_TOPIC),
    91: (ALTER_SHARE_OFFSETS_GROUP, ALTER_SHARE_OFFSETS_TOPIC),
    92: (DELETE_SHARE_OFFSETS_GROUP, DELETE_SHARE_OFFSETS_TOPIC),
}

API_NAMES: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords",
    22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn",
    26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls",
    31: "DeleteAcls", 32: "DescribeConfigs", 33: "AlterConfigs", 35: "DescribeLogDirs", 37: "CreatePartitions",
    42: "DeleteGroups", 43: "ElectLeaders", 44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 56: "AlterPartition", 60: "DescribeCluster", 61: "DescribeProducers",
    65: "DescribeTransactions", 66: "ListTransactions", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe",
    76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge",
    83: "InitializeShareGroupState", 84: "ReadShareGroupState", 85: "WriteShareGroupState",
    86: "DeleteShareGroupState", 87: "ReadShareGroupStateSummary", 90: "DescribeShareGroupOffsets",
    91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets",
}


def markdown_table() -> str:
    """The per-API table of docs/security.md (tests/acl/test_rules.py compares them)."""
    lines = ["| API | Operation | Resource | When |", "|---|---|---|---|"]
    for key, checks in API_CHECKS.items():
        for c in checks:
            lines.append(f"| {key} {API_NAMES[key]} | {c.operation.name} | {c.resource_type.name} | {c.when} |")
    return "\n".join(lines)
