"""LocalMetadata: the metadata writer of a single-node cluster (no ZooKeeper), persisted in the data dir.

Rules:
- it is the only writer of this broker's images (`MetadataPublisher`) and carries out topic admin
  (`TopicAdmin`); this broker is the only broker and the controller, and leads every partition with
  replicas = ISR = [this broker], leader epoch 0, partition epoch 0 (nothing ever moves leadership);
- a replication factor other than 1, or an assignment naming another broker, is refused with Kafka's
  INVALID_REPLICATION_FACTOR / INVALID_REPLICA_ASSIGNMENT;
- the topics are persisted as one JSON file in the data directory, written atomically (temp file, fsync,
  rename) BEFORE the new image is published (a deletion is published even when the write fails: its logs
  are already gone, see `Broker.delete_topic`), so the partition logs of a new topic are created after it is
  durable and a crash leaves either the old topics or the new ones; logs found on disk without an entry
  (older data dirs) are adopted on load;
- a new topic can be created in two steps so that its file work runs off the event loop
  (`Broker.create_topic_async`): `persist_topic` (any thread) writes the file with the topic added to the
  image of that moment, then `add_topic` (the loop) publishes it, writing the file again only when the
  image changed in between (the write then missed that change); writes of the file are serialised;
- subscribers are called with (old, new) after every change, in subscription order.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from kaflite.cluster.metadata import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    fsync_dir,
    new_cluster_id,
    validate_topic_name,
)
from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["IMAGE_FILE", "LocalMetadata"]

IMAGE_FILE = "kaflite-metadata.json"

Listener = Callable[[MetadataImage, MetadataImage], None]


class LocalMetadata:
    """Topics of the single-node cluster, persisted under `directory` (None keeps them in memory only)."""

    def __init__(self, directory: Path | None, node_id: int = 0) -> None:
        self.directory = directory
        self.node_id = node_id
        self._image = MetadataImage(version=0, controller_id=node_id)
        self._listeners: list[Listener] = []
        # `persist_topic` writes the file from a worker thread while the loop may write it too: one at a
        # time (they share the temp file)
        self._save_lock = threading.Lock()

    # -- MetadataPublisher -------------------------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        return self._image

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _publish(self, new: MetadataImage, *, persist: bool = True, even_unsaved: bool = False) -> MetadataImage:
        """Persist `new`, then make it the image and tell the subscribers. A failed write publishes
        nothing, unless `even_unsaved` (a deletion whose logs are already gone: the image follows the disk,
        and the OSError is raised after publishing)."""
        failure: OSError | None = None
        if persist:
            try:
                self._save(new)
            except OSError as e:
                if not even_unsaved:
                    raise
                failure = e
        old, self._image = self._image, new
        for listener in list(self._listeners):
            listener(old, new)
        if failure is not None:
            raise failure
        return new

    def _partitions(self, count: int, first: int = 0) -> tuple[PartitionRegistration, ...]:
        me = (self.node_id,)
        return tuple(PartitionRegistration(me, me, self.node_id, 0, 0) for _ in range(first, count))

    # -- persistence -------------------------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        return None if self.directory is None else self.directory / IMAGE_FILE

    def load(self, partitions_on_disk: Iterable[tuple[str, int]] = ()) -> MetadataImage:
        """Read the persisted topics, adopt partition logs the file does not know, publish the image."""
        path = self.path
        cluster_id = ""
        counts: dict[str, int] = {}
        ids: dict[str, uuid.UUID] = {}
        configs: dict[str, dict[str, str]] = {}
        if path is not None and path.exists():
            data = json.loads(path.read_text())
            cluster_id = data.get("cluster_id", "")
            for name, t in data.get("topics", {}).items():
                ids[name] = uuid.UUID(t["topic_id"])
                counts[name] = int(t["num_partitions"])
                configs[name] = dict(t.get("configs", {}))
        adopted = False
        for topic, partition in partitions_on_disk:
            if topic not in counts:
                ids[topic], counts[topic], configs[topic] = uuid.uuid4(), partition + 1, {}
                adopted = True
            elif partition >= counts[topic]:
                counts[topic] = partition + 1
                adopted = True
        if not cluster_id:
            cluster_id = new_cluster_id()
            adopted = True
        topics = {n: TopicImage(n, ids[n], self._partitions(c), configs[n]) for n, c in counts.items()}
        new = self._image.evolve(cluster_id=cluster_id, topics=topics)
        return self._publish(new, persist=adopted)

    def _save(self, image: MetadataImage) -> None:
        path = self.path
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "cluster_id": image.cluster_id,
            "topics": {
                name: {"topic_id": str(t.topic_id), "num_partitions": t.num_partitions, "configs": dict(t.configs)}
                for name, t in sorted(image.topics.items())
            },
        }
        tmp = path.with_suffix(".tmp")
        with self._save_lock:
            with open(tmp, "w") as f:
                json.dump(data, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            fsync_dir(path.parent)

    # -- cluster -----------------------------------------------------------------------------------
    def set_cluster_id(self, cluster_id: str) -> None:
        if cluster_id != self._image.cluster_id:
            self._publish(self._image.evolve(cluster_id=cluster_id))

    def register_broker(self, registration: BrokerRegistration) -> None:
        """This broker's registration (its advertised endpoints), once it is bound."""
        if registration.id != self.node_id:
            raise ValueError(f"a single-node cluster holds only broker {self.node_id}, not {registration.id}")
        brokers = dict(self._image.brokers)
        brokers[registration.id] = registration
        self._publish(self._image.evolve(brokers=brokers, controller_id=self.node_id), persist=False)

    # -- TopicAdmin --------------------------------------------------------------------------------
    def _check_placement(self, replication_factor: int, assignment: Sequence[Sequence[int]] | None) -> None:
        if assignment:
            for replicas in assignment:
                ids = tuple(replicas)
                if not ids or any(b != self.node_id for b in ids) or len(set(ids)) != len(ids):
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment,
                        f"Replica assignment {list(ids)} names brokers other than the only broker {self.node_id}",
                    )
            return
        if replication_factor < 1:
            raise KafkaError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
        if replication_factor > 1:
            raise KafkaError(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {replication_factor} time(s): The target replication factor "
                f"of {replication_factor} cannot be reached because only 1 broker(s) are registered.",
            )

    def create_topic(self, name: str, num_partitions: int, replication_factor: int | None,
                     configs: Mapping[str, str],
                     assignment: Sequence[Sequence[int]] | None = None, *, validate_only: bool = False) -> TopicImage:
        validate_topic_name(name)
        if name in self._image.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if assignment:
            num_partitions = len(assignment)
        if num_partitions < 1:
            raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        self._check_placement(1 if replication_factor is None else replication_factor, assignment)
        topic = TopicImage(name, uuid.uuid4(), self._partitions(num_partitions), dict(configs))
        if validate_only:
            return topic
        topics = dict(self._image.topics)
        topics[name] = topic
        self._publish(self._image.evolve(topics=topics))
        return topic

    def persist_topic(self, topic: TopicImage) -> MetadataImage:
        """The first half of creating `topic` (planned by `create_topic(..., validate_only=True)`), safe in a
        worker thread: write the file with `topic` added to the current image. Returns that image, for
        `add_topic`. Nothing is published."""
        base = self._image
        if topic.name in base.topics:  # created meanwhile by a path that does not wait its turn: keep its id
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.")
        self._save(base.evolve(topics={**base.topics, topic.name: topic}))
        return base

    def add_topic(self, topic: TopicImage, base: MetadataImage) -> TopicImage:
        """The second half, on the loop: publish the image with `topic`; the file is written again only
        when the image is no longer `base` (another change was published meanwhile, and one of the two
        writes missed the other's change)."""
        if topic.name in self._image.topics:  # created meanwhile by a path that does not wait its turn
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.")
        topics = dict(self._image.topics)
        topics[topic.name] = topic
        self._publish(self._image.evolve(topics=topics), persist=self._image is not base)
        return topic

    def delete_topic(self, name: str) -> TopicImage:
        topics = dict(self._image.topics)
        topic = topics.pop(name, None)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
        # published even when the file cannot be written (a full disk): the caller removed the logs first
        # and completes the deletion at the next start (raises the OSError after publishing)
        self._publish(self._image.evolve(topics=topics), even_unsaved=True)
        return topic

    def create_partitions(self, name: str, count: int,
                          assignment: Sequence[Sequence[int]] | None = None, *,
                          validate_only: bool = False) -> TopicImage:
        old = self._image.topics.get(name)
        if old is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
        if count <= old.num_partitions:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {old.num_partitions} partitions, which is higher than or equal to "
                f"the requested {count}.",
            )
        if assignment is not None:
            self._check_placement(1, assignment)
        topic = TopicImage(name, old.topic_id, old.partitions + self._partitions(count, old.num_partitions),
                           old.configs)
        if validate_only:
            return topic
        topics = dict(self._image.topics)
        topics[name] = topic
        self._publish(self._image.evolve(topics=topics))
        return topic

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicImage:
        old = self._image.topics.get(name)
        if old is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
        topic = TopicImage(name, old.topic_id, old.partitions, dict(configs))
        topics = dict(self._image.topics)
        topics[name] = topic
        self._publish(self._image.evolve(topics=topics))
        return topic
