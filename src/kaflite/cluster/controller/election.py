"""Partition leader election (Kafka's PartitionLeaderElectionAlgorithms): who leads, given the
assignment, the ISR and the live brokers.

Rules:
- `live` is what the controller passes: the registered brokers minus those in controlled shutdown (Kafka's
  liveBrokerIds), for every election here; `controlled_shutdown_election` also takes the shutting-down set;
- candidates are always taken in ASSIGNMENT order, so the preferred replica (the first of the assignment)
  leads whenever it is alive and in sync;
- offline election (the leader died, or a new partition): the first assigned replica that is alive and in
  the ISR; the new ISR is the old one without dead brokers. With unclean election allowed and no live ISR
  member: the first live assigned replica, alone in the ISR (records the old ISR had may be lost);
- reassignment election: the first TARGET replica that is alive and in the ISR;
- preferred election: the preferred replica, only if alive and in the ISR (never unclean);
- controlled shutdown election: the first assigned replica alive, in the ISR and not shutting down; the
  shutting-down brokers leave the ISR;
- no candidate: None (the partition stays or goes offline; nothing acknowledged is lost).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = [
    "Election",
    "controlled_shutdown_election",
    "offline_election",
    "preferred_election",
    "reassignment_election",
]


@dataclass(frozen=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def offline_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean_allowed: bool
) -> Election | None:
    for r in assignment:
        if r in live and r in isr:
            return Election(r, tuple(b for b in isr if b in live))
    if unclean_allowed:
        for r in assignment:
            if r in live:
                return Election(r, (r,), unclean=True)
    return None


def reassignment_election(
    target: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    for r in target:
        if r in live and r in isr:
            return Election(r, tuple(isr))
    return None


def preferred_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return Election(assignment[0], tuple(isr))
    return None


def controlled_shutdown_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], shutting_down: Collection[int]
) -> Election | None:
    for r in assignment:
        if r in live and r in isr and r not in shutting_down:
            return Election(r, tuple(b for b in isr if b not in shutting_down))
    return None
