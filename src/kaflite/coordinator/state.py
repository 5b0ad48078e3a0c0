"""The classic group's states and the legal transitions between them (Kafka's ClassicGroupState).

Rules (a transition `A -> B` is legal iff A is in VALID_PREVIOUS_STATES[B]):

    Empty               -> PreparingRebalance (a member joins), Dead (deleted / offsets expired)
    PreparingRebalance  -> CompletingRebalance (join phase done), Empty (every member left), Dead
    CompletingRebalance -> Stable (leader's SyncGroup stored), PreparingRebalance (join/leave/expiry), Dead
    Stable              -> PreparingRebalance (join/leave/expiry/leader rejoin), Dead
    Dead                -> Dead (idempotent: removing a removed group is not an error)

`canRebalance` is "PreparingRebalance may follow this state": Empty, CompletingRebalance and Stable.
An illegal transition is a bug in the coordinator, never a client error: it raises IllegalStateError.
"""

from __future__ import annotations

from enum import Enum


class IllegalStateError(RuntimeError):
    """Kafka's IllegalStateException: the coordinator tried something its own rules forbid."""


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, name: str) -> GroupState:
        """Kafka's state name, case-insensitively (ListGroups' states filter is case-insensitive)."""
        for state in cls:
            if state.value.lower() == name.lower():
                return state
        allowed = ", ".join(s.value for s in cls)
        raise ValueError(f"unknown group state {name!r}; allowed: {allowed}")


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.COMPLETING_REBALANCE, GroupState.STABLE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.EMPTY,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
            GroupState.DEAD,
        }
    ),
}


def is_valid_transition(src: GroupState, dst: GroupState) -> bool:
    return src in VALID_PREVIOUS_STATES[dst]


def check_transition(src: GroupState, dst: GroupState, group_id: str = "") -> None:
    if not is_valid_transition(src, dst):
        raise IllegalStateError(f"group {group_id!r} should be in one of "
                                f"{sorted(s.value for s in VALID_PREVIOUS_STATES[dst])} before moving to "
                                f"{dst.value}; current state is {src.value}")


def can_rebalance(state: GroupState) -> bool:
    return is_valid_transition(state, GroupState.PREPARING_REBALANCE)
