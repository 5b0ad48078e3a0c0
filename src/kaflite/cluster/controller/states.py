"""The controller's two state machines' states and their legal transitions (Kafka's PartitionStateMachine
and ReplicaStateMachine).

Rules:
- a partition is NonExistent -> New (its assignment is known) -> Online (a leader and ISR are written in
  its state znode) <-> Offline (its leader is dead and no new one could be elected) -> NonExistent
  (deleted); Online -> Online is legal (a new leader: preferred election, reassignment, controlled
  shutdown);
- a replica is NonExistent -> New (assigned, not yet online) -> Online (its broker is alive) <-> Offline
  (its broker is dead or shutting down) -> ReplicaDeletionStarted -> ReplicaDeletionSuccessful ->
  NonExistent; a deletion that cannot proceed (the replica's broker is dead) is ReplicaDeletionIneligible
  until the broker comes back;
- any transition not listed is refused (`IllegalStateTransition`): a bug in the controller, never
  something an event from ZooKeeper can cause silently.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["IllegalStateTransition", "PartitionState", "ReplicaState", "check_partition", "check_replica"]


class PartitionState(Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaState(Enum):
    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


P, R = PartitionState, ReplicaState

# target state -> the states it may be entered from (Kafka's validPreviousStates)
PARTITION_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}

REPLICA_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}


class IllegalStateTransition(RuntimeError):
    pass


def check_partition(what: object, current: PartitionState, target: PartitionState) -> None:
    if current not in PARTITION_PREVIOUS[target]:
        raise IllegalStateTransition(
            f"partition {what}: {current.value} -> {target.value} is not a legal transition"
        )


def check_replica(what: object, current: ReplicaState, target: ReplicaState) -> None:
    if current not in REPLICA_PREVIOUS[target]:
        raise IllegalStateTransition(
            f"replica {what}: {current.value} -> {target.value} is not a legal transition"
        )
