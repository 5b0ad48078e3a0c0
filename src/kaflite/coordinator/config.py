"""The broker settings the group coordinator obeys (Kafka's GroupCoordinatorConfig), with Kafka's names
and defaults; `from_properties` picks them out of a server.properties-style mapping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .offsets_topic import DEFAULT_OFFSETS_TOPIC_PARTITIONS
from .timeline import DEFAULT_HISTORY_SIZE


@dataclass(frozen=True)
class CoordinatorConfig:
    """The broker settings the coordinator obeys, with Kafka's names and defaults."""

    offsets_topic_num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    group_new_member_join_timeout_ms: int = 300_000  # Kafka's built-in constant, not a broker config
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = 2**31 - 1
    # group.consumer.assignors as server assignor names, the first the default
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.coordinator.rebalance.protocols: "consumer" enables KIP-848 groups
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    # group.consumer.migration.policy: online upgrade / downgrade between classic and consumer groups
    consumer_migration_policy: str = "bidirectional"
    # kaflite.group.rebalance.history.size: events of each group's rebalance timeline kept (and persisted)
    rebalance_history_size: int = DEFAULT_HISTORY_SIZE

    KEYS = {
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "group.min.session.timeout.ms": "group_min_session_timeout_ms",
        "group.max.session.timeout.ms": "group_max_session_timeout_ms",
        "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
        "group.max.size": "group_max_size",
        "offsets.retention.minutes": "offsets_retention_minutes",
        "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
        "offset.metadata.max.bytes": "offset_metadata_max_bytes",
        "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
        "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
        "group.consumer.max.size": "consumer_max_size",
        "kaflite.group.rebalance.history.size": "rebalance_history_size",
    }

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> CoordinatorConfig:
        """Pick the coordinator's keys out of a server.properties-style mapping (others are ignored)."""
        kwargs: dict[str, int] = {}
        for key, attr in cls.KEYS.items():
            if key in props and props[key] is not None:
                try:
                    kwargs[attr] = int(props[key])
                except (TypeError, ValueError):
                    raise ValueError(f"{key} must be an integer, got {props[key]!r}") from None
        lists: dict[str, tuple[str, ...]] = {}
        assignors = props.get("group.consumer.assignors") if "group.consumer.assignors" in props else None
        if assignors is not None:
            names = _as_list(assignors)
            unknown = [a for a in names if a not in ASSIGNOR_NAMES]
            if unknown or not names:
                raise ValueError(f"group.consumer.assignors: {', '.join(unknown) or 'empty'} is not an assignor "
                                 f"(allowed: {', '.join(ASSIGNOR_NAMES)})")
            lists["consumer_assignors"] = tuple(dict.fromkeys(ASSIGNOR_NAMES[a] for a in names))
        protocols = (props.get("group.coordinator.rebalance.protocols")
                     if "group.coordinator.rebalance.protocols" in props else None)
        if protocols is not None:
            names = _as_list(protocols)
            if "classic" not in names or any(p not in ("classic", "consumer") for p in names):
                raise ValueError("group.coordinator.rebalance.protocols must list classic, and may add consumer")
            lists["rebalance_protocols"] = tuple(names)
        strings: dict[str, str] = {}
        policy = props.get("group.consumer.migration.policy")
        if policy is not None:
            policy = str(policy).strip().lower()
            if policy not in ("disabled", "upgrade", "downgrade", "bidirectional"):
                raise ValueError(f"group.consumer.migration.policy: {props['group.consumer.migration.policy']!r} "
                                 "is not one of disabled, upgrade, downgrade, bidirectional")
            strings["consumer_migration_policy"] = policy
        config = cls(**kwargs, **lists, **strings)  # type: ignore[arg-type]
        if config.offsets_topic_num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be >= 1")
        if config.group_min_session_timeout_ms > config.group_max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must be <= group.max.session.timeout.ms")
        if config.group_max_size < 1:
            raise ValueError("group.max.size must be >= 1")
        if config.rebalance_history_size < 1:
            raise ValueError("kaflite.group.rebalance.history.size must be >= 1")
        return config


# Kafka's assignor class names (and the short names) -> kaflite's server assignor names
ASSIGNOR_NAMES = {
    "uniform": "uniform",
    "range": "range",
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _as_list(value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(v).strip() for v in items if str(v).strip()]
