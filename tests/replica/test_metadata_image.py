"""The cluster metadata image (immutable snapshots, one writer) and the local writer's topic admin."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kaflite.cluster.local_metadata import LocalMetadata
from kaflite.cluster.metadata import BrokerRegistration, Endpoint, MetadataImage
from kaflite.protocol.errors import ErrorCode, KafkaError


def test_images_are_immutable_and_versioned(tmp_path: Path) -> None:
    w = LocalMetadata(tmp_path, node_id=3)
    seen: list[tuple[int, int]] = []
    w.subscribe(lambda old, new: seen.append((old.version, new.version)))
    w.load()
    first = w.image
    w.register_broker(BrokerRegistration(3, (Endpoint("PLAINTEXT", "h", 9092),), "r1"))
    a = w.create_topic("a", 2, 1, {"retention.ms": "5"})
    after_a = w.image
    w.create_topic("b", 1, None, {})
    assert w.image.version > after_a.version > first.version
    assert [v for v in seen] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert "a" not in first.topics and "b" not in after_a.topics  # old snapshots never change
    assert w.image.topics["a"] is a  # an unchanged topic is the same object
    assert w.image.controller_id == 3 and w.image.brokers[3].rack == "r1"
    p = a.partitions[1]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((3,), (3,), 3, 0, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.configs["retention.ms"] = "6"  # type: ignore[index]
    with pytest.raises(TypeError):
        w.image.topics["c"] = a  # type: ignore[index]
    assert w.image.topic_by_id(a.topic_id) is a and w.image.has_partition("a", 1)
    assert not w.image.has_partition("a", 2)


def test_topic_admin_refusals(tmp_path: Path) -> None:
    w = LocalMetadata(tmp_path, node_id=0)
    w.load()
    w.create_topic("t", 1, 1, {})

    def code(fn, *args, **kw) -> ErrorCode:  # type: ignore[no-untyped-def]
        try:
            fn(*args, **kw)
        except KafkaError as e:
            return e.code
        return ErrorCode.none

    assert code(w.create_topic, "t", 1, 1, {}) == ErrorCode.topic_already_exists
    assert code(w.create_topic, "u", 1, 3, {}) == ErrorCode.invalid_replication_factor
    assert code(w.create_topic, "u", 1, 1, {}, [[0], [1]]) == ErrorCode.invalid_replica_assignment
    assert code(w.create_topic, "u", 0, 1, {}) == ErrorCode.invalid_partitions
    assert code(w.create_topic, "bad/name", 1, 1, {}) == ErrorCode.invalid_topic_exception
    assert code(w.create_partitions, "t", 1) == ErrorCode.invalid_partitions
    assert code(w.create_partitions, "zz", 3) == ErrorCode.unknown_topic_or_partition
    assert code(w.delete_topic, "zz") == ErrorCode.unknown_topic_or_partition
    version = w.image.version
    w.create_topic("v", 2, 1, {}, validate_only=True)
    w.create_partitions("t", 4, validate_only=True)
    assert w.image.version == version and "v" not in w.image.topics  # validate_only changes nothing


def test_persisted_before_published_and_reloaded(tmp_path: Path) -> None:
    w = LocalMetadata(tmp_path, node_id=0)
    w.load()
    on_disk: list[bool] = []
    w.subscribe(lambda old, new: on_disk.append("k" in (tmp_path / "kaflite-metadata.json").read_text()))
    k = w.create_topic("k", 2, 1, {"cleanup.policy": "compact"})
    w.create_partitions("k", 3)
    w.alter_topic_configs("k", {"retention.ms": "1"})
    assert on_disk == [True, True, True]
    again = LocalMetadata(tmp_path, node_id=0)
    image: MetadataImage = again.load([("k", 4), ("adopted", 0)])  # logs found on disk are adopted
    assert image.cluster_id == w.image.cluster_id
    assert image.topics["k"].topic_id == k.topic_id and image.topics["k"].num_partitions == 5
    assert dict(image.topics["k"].configs) == {"retention.ms": "1"}
    assert image.topics["adopted"].num_partitions == 1
