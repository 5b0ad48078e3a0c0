"""The cluster metadata image: immutable snapshots of what the cluster looks like, and the interfaces
through which it changes.

Rules:
- a `MetadataImage` is a frozen snapshot (brokers with endpoints and rack, the controller id, topics with
  their ids, configs and per partition replicas, ISR, leader, leader epoch, partition epoch) and never
  changes; a change produces a new image with `version` + 1, so a reader holding an image sees one
  consistent cluster, and a cache keyed on the version (the Metadata response) is exact;
- a topic whose partitions and configs did not change is the SAME `TopicImage` object in the next image,
  so a consumer of images (ReplicaManager, the Metadata encoding cache) can skip it by identity;
- exactly one writer per broker publishes images (`MetadataPublisher`): the local writer
  (`cluster.local_metadata.LocalMetadata`, single node) or, with `zookeeper.connect`, the ZooKeeper-backed
  one; topic changes requested by clients go through `TopicAdmin`, whose implementation is that same writer;
- a topic name is 1..249 characters of [a-zA-Z0-9._-], and neither "." nor ".." (Kafka's `Topic.validate`);
- partitions are numbered 0..n-1 and a topic never shrinks (CreatePartitions only adds).
"""

from __future__ import annotations

import dataclasses
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "INTERNAL_TOPICS",
    "BrokerRegistration",
    "Endpoint",
    "MetadataImage",
    "MetadataPublisher",
    "PartitionRegistration",
    "TopicAdmin",
    "TopicImage",
    "read_meta_properties",
    "validate_topic_name",
    "write_meta_properties",
]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
META_PROPERTIES = "meta.properties"  # Kafka's own file naming the cluster and node of a data directory


def validate_topic_name(name: str | None) -> None:
    """Raise KafkaError(INVALID_TOPIC_EXCEPTION) when `name` is not a legal Kafka topic name."""
    if not name:
        raise KafkaError(ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters",
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener a broker announces (Kafka's `EndPoint`)."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker: its id, the endpoints clients and brokers reach it on, its rack."""

    id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint of `listener` (None: the first one), or None when the broker has no such listener."""
        for e in self.endpoints:
            if listener is None or e.listener == listener:
                return e
        return None


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """Placement and leadership of one partition (Kafka's `PartitionRegistration` / the state znode)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding: tuple[int, ...] = ()  # replicas a reassignment is adding (in `replicas` already)
    removing: tuple[int, ...] = ()  # replicas a reassignment is removing (still in `replicas`)

    def offline_replicas(self, live_brokers: Mapping[int, object]) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in live_brokers)


@dataclass(frozen=True, eq=False)
class TopicImage:
    """One topic: name, id, partitions (index = partition number) and its config overrides."""

    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionRegistration, ...]
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.configs, MappingProxyType):
            object.__setattr__(self, "configs", MappingProxyType(dict(self.configs)))

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(frozen=True, eq=False)
class MetadataImage:
    """One immutable snapshot of the cluster (see the rules)."""

    version: int = 0
    cluster_id: str = ""
    controller_id: int = -1
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: MappingProxyType({}))
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    _by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: MappingProxyType({}), repr=False)

    def __post_init__(self) -> None:
        for name in ("brokers", "topics"):
            value = getattr(self, name)
            if not isinstance(value, MappingProxyType):
                object.__setattr__(self, name, MappingProxyType(dict(value)))
        object.__setattr__(self, "_by_id", MappingProxyType({t.topic_id: t for t in self.topics.values()}))

    def evolve(self, **changes: Any) -> MetadataImage:
        """The next image: these fields changed, the version one higher."""
        return dataclasses.replace(self, version=self.version + 1, **changes)

    # -- queries -----------------------------------------------------------------------------------
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self._by_id.get(topic_id)

    def has_partition(self, topic: str, partition: int) -> bool:
        t = self.topics.get(topic)
        return t is not None and 0 <= partition < len(t.partitions)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition]


class MetadataPublisher(Protocol):
    """The one writer of a broker's images, as its readers see it."""

    @property
    def image(self) -> MetadataImage:
        """The current image."""
        ...

    def subscribe(self, listener: Callable[[MetadataImage, MetadataImage], None]) -> None:
        """Call `listener(old, new)` after every published change, on the broker's event loop."""
        ...


class TopicAdmin(Protocol):
    """Topic administration (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs), whichever writer
    carries it out. Arguments are already validated by the caller (names, counts, config keys and values);
    each method raises KafkaError with Kafka's code for what only the writer can know (TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR / INVALID_REPLICA_ASSIGNMENT
    for placements the live brokers cannot hold). Each returns once the change is durable in the writer's
    store; the image showing it is published when the writer applies it (the local writer: before it
    returns)."""

    def create_topic(self, name: str, num_partitions: int, replication_factor: int | None,
                     configs: Mapping[str, str],
                     assignment: Sequence[Sequence[int]] | None = None, *, validate_only: bool = False) -> TopicImage:
        """`assignment[p]` = the replicas of partition p, when the client gave them (else placed with
        `replication_factor`; None: the writer's default, Kafka's `default.replication.factor`).
        `validate_only`: check everything, change nothing, return the topic as it would be."""
        ...

    def delete_topic(self, name: str) -> TopicImage:
        ...

    def create_partitions(self, name: str, count: int,
                          assignment: Sequence[Sequence[int]] | None = None, *,
                          validate_only: bool = False) -> TopicImage:
        """Grow to `count` partitions; `assignment` places the new ones only."""
        ...

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicImage:
        """Replace the topic's config overrides."""
        ...


def read_meta_properties(directory: Path) -> dict[str, str]:
    """Kafka's `meta.properties` of a data directory (empty when absent)."""
    path = directory / META_PROPERTIES
    if not path.exists():
        return {}
    out: dict[str, str] = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def write_meta_properties(directory: Path, cluster_id: str, node_id: int) -> None:
    path = directory / META_PROPERTIES
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"#kaflite\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n", encoding="latin-1")
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)


def new_cluster_id() -> str:
    # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding (22 characters).
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
