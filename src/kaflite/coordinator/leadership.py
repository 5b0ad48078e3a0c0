"""Which partitions of a coordinator's internal topic (`__consumer_offsets`, `__transaction_state`,
`__share_group_state`) this broker started and stopped leading between two metadata images: what the
coordinator shells hand to their runtime as Kafka's onElection / onResignation. Pure: the images are read
through `.topics[name].partitions[i].leader / .leader_epoch` and `.num_partitions` only.

Rules (`leadership_changes(old, new, topic, me)`):
- nothing changes when the topic is not in `new`, or is the very same object in both images (an image
  change that did not touch the topic);
- `appeared` is the new image's topic when `old` did not have it (created since: its partition count
  decides, the shells adopt it), else None;
- a partition goes to `loads` with the new image's leader epoch when `me` leads it in `new` and did not
  lead it in `old` (or `old` had no such partition or no such topic), or led it at another leader epoch
  (a new election of this broker: the runtime decides whether its shard still holds the whole log);
- a partition goes to `unloads` when `me` led it in `old` and another broker (or none, -1) leads it in
  `new`, with the NEW image's leader epoch: the epoch at which this broker no longer leads, as Kafka's
  onResignation passes and as `CoordinatorRuntime.unload` expects (it ignores only an epoch older than
  the shard's own, a resignation an election since has superseded);
- a partition `old` had and `new` does not is neither (a topic's partitions only grow);
- both lists are in partition order; a partition is in at most one of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["LeadershipChanges", "leadership_changes"]


@dataclass(frozen=True, slots=True)
class LeadershipChanges:
    appeared: Any = None  # the topic's image when it is new in `new`
    loads: list[tuple[int, int]] = field(default_factory=list)  # (partition, leader epoch now led at)
    unloads: list[tuple[int, int]] = field(default_factory=list)  # (partition, epoch it stopped being led at)


def leadership_changes(old: Any, new: Any, topic: str, me: int) -> LeadershipChanges:
    """The partitions of `topic` broker `me` started / stopped leading from image `old` to image `new`."""
    before, after = old.topics.get(topic), new.topics.get(topic)
    if after is None or before is after:
        return LeadershipChanges()
    changes = LeadershipChanges(appeared=after if before is None else None)
    for partition, reg in enumerate(after.partitions):
        prev = before.partitions[partition] if before is not None and partition < before.num_partitions else None
        was_mine = prev is not None and prev.leader == me
        if reg.leader == me and (prev is None or not was_mine or prev.leader_epoch != reg.leader_epoch):
            changes.loads.append((partition, reg.leader_epoch))
        elif was_mine and reg.leader != me:
            changes.unloads.append((partition, reg.leader_epoch))
    return changes
