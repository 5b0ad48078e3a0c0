"""kaflite.coordinator.leadership: the partitions of an internal topic a broker started / stopped leading
between two metadata images (the one diff the group, transaction and share-state shells all use), on
real MetadataImages, no broker."""

from __future__ import annotations

import uuid

from kaflite.cluster.metadata import MetadataImage, PartitionRegistration, TopicImage
from kaflite.coordinator.leadership import leadership_changes

TOPIC = "__consumer_offsets"
TOPIC_ID = uuid.uuid4()
ME = 1


def image(*leaders: tuple[int, int], topic: str = TOPIC, extra: dict[str, TopicImage] | None = None
          ) -> MetadataImage:
    """An image whose `topic` has one partition per (leader, leader epoch)."""
    parts = tuple(PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=leader, leader_epoch=epoch)
                  for leader, epoch in leaders)
    return MetadataImage(topics={topic: TopicImage(topic, TOPIC_ID, parts), **(extra or {})})


def test_nothing_without_the_topic_or_when_it_did_not_change() -> None:
    empty = MetadataImage()
    nothing = leadership_changes(empty, empty, TOPIC, ME)
    assert (nothing.appeared, nothing.loads, nothing.unloads) == (None, [], [])
    none = leadership_changes(image((ME, 0)), empty, TOPIC, ME)  # the topic gone from the new image
    assert (none.appeared, none.loads, none.unloads) == (None, [], [])
    old = image((ME, 0), (2, 0))
    # another topic changed: the internal topic is the same object in both images
    new = MetadataImage(topics={**old.topics, "orders": TopicImage("orders", uuid.uuid4(), ())})
    same = leadership_changes(old, new, TOPIC, ME)
    assert (same.appeared, same.loads, same.unloads) == (None, [], [])


def test_a_created_topic_appears_and_loads_the_partitions_led_here() -> None:
    new = image((ME, 0), (2, 0), (ME, 3))
    changes = leadership_changes(MetadataImage(), new, TOPIC, ME)
    assert changes.appeared is new.topics[TOPIC]
    assert changes.loads == [(0, 0), (2, 3)]
    assert changes.unloads == []


def test_elections_and_resignations_carry_the_new_images_epochs() -> None:
    old = image((ME, 4), (2, 1), (ME, 7), (ME, 2), (3, 5))
    new = image((2, 5), (ME, 2), (ME, 7), (ME, 3), (-1, 6))
    changes = leadership_changes(old, new, TOPIC, ME)
    assert changes.appeared is None
    # p1: elected here at epoch 2; p3: led here still, at a new epoch (a re-election: the runtime decides
    # whether the shard still holds the whole log); p2: unchanged
    assert changes.loads == [(1, 2), (3, 3)]
    # p0: another broker leads from epoch 5, the epoch at which this one stopped leading (the runtime
    # ignores only an unload older than its shard's epoch); p4 was never led here
    assert changes.unloads == [(0, 5)]


def test_losing_leadership_to_no_leader_unloads() -> None:
    changes = leadership_changes(image((ME, 3)), image((-1, 4)), TOPIC, ME)
    assert changes.loads == [] and changes.unloads == [(0, 4)]


def test_new_partitions_led_here_load_and_other_topics_are_ignored() -> None:
    other = "__transaction_state"
    old = image((ME, 0), extra={other: TopicImage(other, uuid.uuid4(), ())})
    new = image((ME, 0), (ME, 0), (2, 0))  # two partitions added
    changes = leadership_changes(old, new, TOPIC, ME)
    assert changes.loads == [(1, 0)] and changes.unloads == []
    assert leadership_changes(old, new, other, ME).loads == []  # gone from new: nothing
    # the same diff from another broker's point of view
    assert leadership_changes(old, new, TOPIC, 2).loads == [(2, 0)]
