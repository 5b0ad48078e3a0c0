"""Turn reference-vector inputs into kaflite.assign calls (shared by the assignor tests)."""

from __future__ import annotations

from typing import Any

from kaflite.assign.types import Subscription, TopicPartition


def tp(s: str) -> TopicPartition:
    return TopicPartition.parse(s)


def subscriptions_of(inp: dict[str, Any]) -> dict[str, Subscription]:
    subs: dict[str, Subscription] = {}
    for member, s in inp["subscriptions"].items():
        ud = s.get("user_data_hex")
        subs[member] = Subscription(
            topics=list(s["topics"]),
            owned_partitions=[tp(p) for p in s.get("owned_partitions", [])],
            generation_id=s.get("generation_id"),
            group_instance_id=s.get("group_instance_id"),
            rack_id=s.get("rack_id"),
            user_data=None if ud is None else bytes.fromhex(ud),
        )
    return subs


def racks_of(inp: dict[str, Any]) -> dict[TopicPartition, list[str | None]] | None:
    racks = inp.get("partition_replica_racks")
    if racks is None:
        return None
    return {tp(k): v for k, v in racks.items()}


def as_strings(assignment: dict[str, list[TopicPartition]]) -> dict[str, list[str]]:
    return {m: [str(p) for p in ps] for m, ps in assignment.items()}


def run_client_assignor(assignor: Any, inp: dict[str, Any]) -> dict[str, list[str]]:
    subs = subscriptions_of(inp)
    if inp.get("entry_point") == "assign":
        out = assignor.assign(dict(inp["partitions_per_topic"]), subs)
    else:
        out = assignor.assign_partitions(dict(inp["partitions_per_topic"]), subs, racks_of(inp))
    return as_strings(out)
