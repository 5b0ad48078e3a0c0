"""Online migration between a classic group and a KIP-848 consumer group (KIP-848 "Online Upgrade"):
the pure conversions and when they are allowed. GroupMetadataManager carries them out (records, timers,
parked requests), as Kafka's GroupMetadataManager does with ConsumerGroup.fromClassicGroup and
ClassicGroup.fromConsumerGroup.

Rules (Kafka 3.9 / 4.x, group-coordinator's GroupMetadataManager):
- `group.consumer.migration.policy`: `upgrade`, `downgrade`, `bidirectional` (Kafka 4.x's default) or
  `disabled`, case-insensitive;
- upgrade: a ConsumerGroupHeartbeat joining (member epoch 0) a non-empty classic group converts it when
  the policy allows upgrades, the classic group's protocol type is `consumer` and it has at most
  `group.consumer.max.size` members; otherwise the heartbeat gets GROUP_ID_NOT_FOUND. An empty classic
  group is simply deleted (tombstone) and replaced. The conversion answers every parked JoinGroup /
  SyncGroup REBALANCE_IN_PROGRESS, writes the classic group's tombstone, then the consumer group's
  records: group epoch = target assignment epoch = the classic generation; every classic member becomes
  a member with member epoch = previous epoch = the generation, state STABLE, its subscription and rack
  from its protocol metadata (the group's selected protocol's, else its first), its assigned partitions
  and its target = its last classic assignment, and its session timeout and protocols kept (it keeps
  speaking the classic protocol, see kaflite.coordinator.consumer_group). Malformed protocol metadata
  refuses the upgrade (GROUP_ID_NOT_FOUND). The joining member then bumps the group epoch as any join,
  the target is recomputed, and the classic members learn it at their next Heartbeat
  (REBALANCE_IN_PROGRESS) and rejoin; a partition is handed over only once its previous owner gave it up;
- downgrade: when a consumer-protocol member leaves or is fenced (session, rebalance, join or sync
  timeout) and every other member uses the classic protocol, the group becomes a classic group if there
  is at least one such member, the policy allows downgrades and they are at most `group.max.size`:
  the consumer group's tombstones, then a GroupMetadata record of a Stable classic group of protocol type
  `consumer` with generation = the group epoch, the remaining members with their session timeouts and
  protocols, the protocol voted as usual, each member's assignment = its target assignment (encoded in
  its subscription's version), and then a rebalance (PreparingRebalance) so the members rejoin and their
  leader assigns; a classic member leaving (LeaveGroup) never downgrades (as Kafka);
- a static classic member restarting (JoinGroup without member id, same group.instance.id) in place of the
  group's last consumer-protocol member takes its place, epoch and partitions, and then -- every member
  now classic, policy and `group.max.size` permitting -- the group is downgraded the same way but stays
  Stable without a rebalance (the newcomer's assignment is its predecessor's target; Kafka's
  validateOnlineDowngradeWithReplacedMemberId). Its JoinGroup answer is the consumer group's (generation =
  its member epoch), so a SyncGroup at that generation gets the assignment, or ILLEGAL_GENERATION and a
  rejoin when the epochs differed.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaflite.protocol.consumer_protocol import (
    ConsumerProtocolError,
    assignment_partitions,
    decode_subscription,
)

from .consumer_group import CONSUMER_PROTOCOL_TYPE, classic_assignment
from .consumer_group_state import STABLE, ClassicMemberMetadata, ConsumerGroup, ConsumerMember
from .group import ClassicGroup, ClassicGroupMember
from .messages import Protocol
from .state import GroupState

__all__ = [
    "MIGRATION_POLICIES",
    "MigrationError",
    "can_downgrade",
    "can_downgrade_after_replacement",
    "can_upgrade",
    "classic_group_from_consumer",
    "consumer_group_from_classic",
]

MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


class MigrationError(ValueError):
    """A classic member's protocol metadata is not a consumer-protocol Subscription / Assignment."""


def can_upgrade(policy: str, group: ClassicGroup, consumer_max_size: int) -> bool:
    return (policy in ("upgrade", "bidirectional") and group.protocol_type == CONSUMER_PROTOCOL_TYPE
            and len(group.members) <= consumer_max_size)


def can_downgrade(policy: str, group: ConsumerGroup, leaving_member_id: str, classic_max_size: int) -> bool:
    leaving = group.members.get(leaving_member_id)
    others = [mb for mid, mb in group.members.items() if mid != leaving_member_id]
    return (leaving is not None and leaving.classic is None and bool(others)
            and all(mb.classic is not None for mb in others)
            and policy in ("downgrade", "bidirectional") and len(others) <= classic_max_size)


def can_downgrade_after_replacement(policy: str, group: ConsumerGroup, classic_max_size: int) -> bool:
    return (bool(group.members) and all(mb.classic is not None for mb in group.members.values())
            and policy in ("downgrade", "bidirectional") and len(group.members) <= classic_max_size)


def consumer_group_from_classic(classic: ClassicGroup, topics: Mapping[str, int], assignor: str) -> ConsumerGroup:
    """The consumer group a non-empty classic group becomes (Kafka's ConsumerGroup.fromClassicGroup)."""
    generation = classic.generation_id
    group = ConsumerGroup(classic.group_id, group_epoch=generation, assignment_epoch=generation, assignor=assignor)
    owners: dict[tuple[str, int], str] = {}
    for mid, cm in classic.members.items():
        metadata = cm.metadata(classic.protocol_name) if classic.protocol_name else b""
        if not metadata and cm.protocols:
            metadata = cm.protocols[0].metadata
        try:
            sub = decode_subscription(metadata)
        except (ConsumerProtocolError, UnicodeDecodeError) as e:
            raise MigrationError(f"member {mid}: {e}") from None
        raw = assignment_partitions(cm.assignment)
        if raw is None:
            raise MigrationError(f"member {mid}: malformed assignment")
        assigned: dict[str, frozenset[int]] = {}
        for t, ps in raw.items():
            # only partitions that exist, and never one another member already holds
            mine = frozenset(p for p in ps if t in topics and 0 <= p < topics[t] and (t, p) not in owners)
            if mine:
                assigned[t] = mine
                owners.update({(t, p): mid for p in mine})
        member = ConsumerMember(mid, cm.group_instance_id, cm.client_id, cm.client_host, cm.rebalance_timeout_ms,
                                tuple(sub.topics), sub.rack_id, member_epoch=generation, previous_epoch=generation,
                                state=STABLE, assigned=assigned,
                                classic=ClassicMemberMetadata(cm.session_timeout_ms,
                                                              tuple((p.name, p.metadata) for p in cm.protocols)))
        group.members[mid] = member
        group.target[mid] = dict(assigned)
    group.topic_snapshot = {t: topics[t] for mb in group.members.values() for t in mb.subscribed if t in topics}
    return group


def classic_group_from_consumer(group: ConsumerGroup, leaving_member_id: str, now_ms: int) -> ClassicGroup:
    """The Stable classic group the remaining (classic) members form (Kafka's ClassicGroup.fromConsumerGroup);
    the caller then starts a rebalance."""
    classic = ClassicGroup(group.group_id, state_timestamp_ms=now_ms, generation_id=group.group_epoch,
                           protocol_type=CONSUMER_PROTOCOL_TYPE)
    remaining = [mb for mid, mb in group.members.items() if mid != leaving_member_id]
    for mb in remaining:
        assert mb.classic is not None
        classic.add(ClassicGroupMember(mb.member_id, mb.instance_id, mb.client_id, mb.client_host,
                                       mb.rebalance_timeout_ms, mb.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                                       tuple(Protocol(n, md) for n, md in mb.classic.protocols)), awaiting=False)
    classic.state = GroupState.STABLE
    classic.previous_state = GroupState.COMPLETING_REBALANCE
    classic.protocol_name = classic.select_protocol()
    for mb in remaining:
        classic.members[mb.member_id].assignment = classic_assignment(mb, group.target.get(mb.member_id, {}))
    return classic
