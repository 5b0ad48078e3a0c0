"""The metadata image of a single-node cluster: which topics exist, their ids, partition counts, configs.

Rules:
- a topic name is 1..249 characters of [a-zA-Z0-9._-], and neither "." nor ".." (Kafka's `Topic.validate`);
- partitions are numbered 0..n-1 and a topic never shrinks (CreatePartitions only adds);
- every partition of this node is led by this node with leader epoch 0; replicas = ISR = [node_id]
  (replica placement for more nodes lives in `cluster.placement`);
- the image is persisted as one JSON file in the data directory, written atomically (temp file, fsync,
  rename) BEFORE the partition logs are created, so a crash leaves either the old image or the new one;
  logs found on disk without an entry (older data dirs) are adopted on load.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "INTERNAL_TOPICS",
    "MetadataImage",
    "TopicImage",
    "read_meta_properties",
    "validate_topic_name",
    "write_meta_properties",
]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
IMAGE_FILE = "kaflite-metadata.json"
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


@dataclass
class TopicImage:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, object]:
        return {
            "topic_id": str(self.topic_id),
            "num_partitions": self.num_partitions,
            "configs": dict(self.configs),
        }


class MetadataImage:
    """Topics of the cluster, persisted under `directory` (None keeps them in memory only)."""

    def __init__(self, directory: Path | None, node_id: int = 0) -> None:
        self.directory = directory
        self.node_id = node_id
        self.cluster_id = ""
        self.topics: dict[str, TopicImage] = {}
        self.version = 0  # bumped on every change, so callers can cache encodings per version

    # -- persistence -------------------------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        return None if self.directory is None else self.directory / IMAGE_FILE

    def load(self, partitions_on_disk: Iterable[tuple[str, int]] = ()) -> None:
        path = self.path
        if path is not None and path.exists():
            data = json.loads(path.read_text())
            self.cluster_id = data.get("cluster_id", "")
            for name, t in data.get("topics", {}).items():
                self.topics[name] = TopicImage(
                    name, uuid.UUID(t["topic_id"]), int(t["num_partitions"]), dict(t.get("configs", {}))
                )
        adopted = False
        for topic, partition in partitions_on_disk:
            known = self.topics.get(topic)
            if known is None:
                self.topics[topic] = TopicImage(topic, uuid.uuid4(), partition + 1)
                adopted = True
            elif partition >= known.num_partitions:
                known.num_partitions = partition + 1
                adopted = True
        if not self.cluster_id:
            self.cluster_id = _new_cluster_id()
            adopted = True
        if adopted:
            self.save()
        self.version += 1

    def save(self) -> None:
        path = self.path
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "cluster_id": self.cluster_id,
            "topics": {name: t.to_json() for name, t in sorted(self.topics.items())},
        }
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)

    # -- changes -----------------------------------------------------------------------------------
    def add_topic(self, name: str, num_partitions: int, configs: dict[str, str] | None = None) -> TopicImage:
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if num_partitions < 1:
            raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        topic = TopicImage(name, uuid.uuid4(), num_partitions, dict(configs or {}))
        self.topics[name] = topic
        self._changed()
        return topic

    def remove_topic(self, name: str) -> TopicImage:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
        self._changed()
        return topic

    def set_partition_count(self, name: str, count: int) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
        if count <= topic.num_partitions:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {topic.num_partitions} partitions, which is higher than or equal to "
                f"the requested {count}.",
            )
        topic.num_partitions = count
        self._changed()

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics[name]
        topic.configs = dict(configs)
        self._changed()

    def _changed(self) -> None:
        self.version += 1
        self.save()

    # -- queries -----------------------------------------------------------------------------------
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None

    def has_partition(self, topic: str, partition: int) -> bool:
        t = self.topics.get(topic)
        return t is not None and 0 <= partition < t.num_partitions


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
    _fsync_dir(directory)


def _new_cluster_id() -> str:
    # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding (22 characters).
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _fsync_dir(directory: Path) -> None:
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
