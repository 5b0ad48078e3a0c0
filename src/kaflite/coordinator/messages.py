"""Version-independent requests and responses of the group APIs, as the pure coordinator sees them.

The server's handlers translate kio's per-version messages to and from these, so the coordinator's
rules are written once for every version. `token` identifies a request whose answer may come later
(JoinGroup and SyncGroup park until the rebalance moves on); the coordinator answers with
`(token, response)` pairs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from kaflite.protocol.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str | None
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1  # v0 has none: the session timeout is used
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 7
    reason: str | None = None
    token: Hashable = None


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    token: Hashable = None


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[MemberIdentity, ...]


@dataclass(frozen=True, slots=True)
class LeaveMemberResponse:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: ErrorCode
    members: tuple[LeaveMemberResponse, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetCommitPartition:
    partition: int
    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1
    commit_timestamp: int = -1  # v1 only; -1 = the broker's clock


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[OffsetCommitPartition, ...]], ...]
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # v2-v4; -1 = offsets.retention.minutes
    version: int = 8


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None  # None = every committed partition
    require_stable: bool = False
    member_id: str | None = None
    member_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    group_id: str
    error: ErrorCode
    topics: tuple[tuple[str, tuple[FetchedOffset, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error: ErrorCode
    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    members: tuple[DescribedMember, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"
