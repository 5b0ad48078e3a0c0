"""Confluent's compatibility levels, shared by the Avro, JSON Schema and Protobuf checkers: which registered
schemas a new one is compared with, and in which direction.

Rules (checked by tests/schema_registry/test_avro_compat.py, test_json_compat.py, test_protobuf_compat.py):
- BACKWARD: the new schema reads data written with the latest registered one; BACKWARD_TRANSITIVE: with
  every registered one. FORWARD(_TRANSITIVE): the latest (every) registered schema reads data written with
  the new one. FULL(_TRANSITIVE): both. NONE: no check, nor is there one when nothing is registered yet.
- Levels are case-insensitive; any other level is a ValueError.
- Problems are prefixed "BACKWARD: " / "FORWARD: " and listed newest registered schema first.

Pure: the format's own "can this reader read this writer" function is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE")
DEFAULT_LEVEL = "BACKWARD"

S = TypeVar("S")


def check_at_level(level: str, new: S, previous: Sequence[S], can_read: Callable[[S, S], list[str]]) -> list[str]:
    """Confluent's verdict for registering `new` after `previous` (oldest first) at `level`: the list of
    incompatibilities, empty when compatible. `can_read(reader, writer)` says why `reader` cannot read
    what `writer` wrote. Non-transitive levels look at the latest only."""
    level = level.upper()
    if level not in LEVELS:
        raise ValueError(f"unknown compatibility level {level}")
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    problems: list[str] = []
    for old in reversed(list(against)):
        if backward:
            problems += [f"BACKWARD: {p}" for p in can_read(new, old)]
        if forward:
            problems += [f"FORWARD: {p}" for p in can_read(old, new)]
    return problems
