"""Kafka's StickyAssignor and CooperativeStickyAssignor (SPEC S-16, S-17, S-18; E-4, E-5).

A faithful re-statement of AbstractStickyAssignor (Kafka 3.5+, rack-aware), because "exact" includes
the order inside each member's list, which falls out of the algorithm's data structures.

Rules:
- previous ownership: each member's MemberData (Sticky: decoded from user data; CooperativeSticky: the
  subscription's owned partitions and generation). A partition claimed by two members of the same
  generation is owned by neither; between generations the higher one wins.
- all subscriptions equal -> the constrained ("optimized") path: quotas min = P div C, max = ceil(P/C),
  exactly P mod C members get max. Members keep their owned partitions (sorted by partition, then topic)
  up to their quota, in Java HashMap order of member ids; the rest are revoked. With racks, partitions
  first go round robin to members on a replica's rack; then round robin over the sorted unfilled members.
- otherwise the general path: keep valid ownership, hand unassigned partitions (topics with fewest
  potential members first) to the least-loaded eligible member, then move partitions from loaded to
  less-loaded members while that improves balance, preferring to undo earlier moves (stickiness); keep
  the result only if its balance score improved.
- cooperative: any partition that changes owner is removed from its new owner's list for this round
  (the old owner revokes it; a follow-up rebalance hands it over), so no partition has two owners.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kaflite.assign.javautil import JavaHashMap, JavaHashSet
from kaflite.assign.types import (
    Assignment,
    PartitionAssignorError,
    PartitionRacks,
    Subscription,
    TopicPartition,
    string_hash,
    tp_hash,
    use_rack_aware_assignment,
)
from kaflite.assign.userdata import (
    DEFAULT_GENERATION,
    MemberData,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)


@dataclass(slots=True)
class StickyResult:
    assignment: Assignment
    #: partitions that change owner in this rebalance -> new owner (None: computed by the cooperative step)
    partitions_transferring_ownership: dict[TopicPartition, str] | None
    max_generation: int
    used_constrained_path: bool = field(default=False)


class _RackInfo:
    """Consumer racks and partition replica racks, when rack-aware assignment applies."""

    def __init__(self, partitions_per_topic: Mapping[str, int], racks: PartitionRacks,
                 subscriptions: Mapping[str, Subscription], prefer: bool) -> None:
        consumers_by_rack: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            if sub.rack_id:
                consumers_by_rack.setdefault(sub.rack_id, []).append(member)
        partition_racks: dict[TopicPartition, set[str]] = {}
        all_partition_racks: set[str] = set()
        if consumers_by_rack:
            for topic, n in partitions_per_topic.items():
                for p in range(n):
                    tp = TopicPartition(topic, p)
                    rs = {r for r in racks.get(tp, ()) if r is not None}
                    partition_racks[tp] = rs
                    all_partition_racks |= rs
        if use_rack_aware_assignment(set(consumers_by_rack), all_partition_racks, partition_racks, prefer):
            self.consumer_racks = {c: rack for rack, cs in consumers_by_rack.items() for c in cs}
            self.partition_racks = partition_racks
        else:
            self.consumer_racks = {}
            self.partition_racks = {}
        # Kafka computes this from all replica racks even when not rack-aware (same counts then: no effect).
        self.num_consumers_by_partition = {
            tp: sum(len(consumers_by_rack.get(r, ())) for r in rs) for tp, rs in partition_racks.items()
        }

    def racks_mismatch(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.consumer_racks.get(consumer)
        if rack is None:
            return False
        replica_racks = self.partition_racks.get(tp)
        return replica_racks is None or rack not in replica_racks

    def sort_by_rack_consumers(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        if not self.num_consumers_by_partition:
            return partitions
        counts = self.num_consumers_by_partition
        return sorted(partitions, key=lambda tp: counts.get(tp, 0))  # stable, like List.sort

    def next_rack_consumer(self, tp: TopicPartition, consumers: list[str], first: int) -> int:
        racks = self.partition_racks.get(tp)
        if not racks:
            return -1
        n = len(consumers)
        for i in range(n):
            index = (first + i) % n
            rack = self.consumer_racks.get(consumers[index])
            if rack is not None and rack in racks:
                return index
        return -1


def _unassigned_two_pointer(all_sorted: list[TopicPartition], assigned_sorted: list[TopicPartition]) -> list[TopicPartition]:
    """Kafka's two-pointer difference (it assumes `assigned_sorted` is a sorted subset; kept literally so
    that inputs breaking that assumption, e.g. a partition beyond the topic's count, behave alike)."""
    if not assigned_sorted:
        return list(all_sorted)
    out: list[TopicPartition] = []
    it = iter(assigned_sorted)
    nxt = next(it)
    add_directly = False
    for tp in all_sorted:
        if add_directly or tp != nxt:
            out.append(tp)
        else:
            try:
                nxt = next(it)
            except StopIteration:
                add_directly = True
    return out


class AbstractStickyAssignor:
    name = "sticky-abstract"

    def __init__(self, prefer_rack_aware_logic: bool = False) -> None:
        # Kafka's test-only switch; production behaviour is False.
        self.prefer_rack_aware_logic = prefer_rack_aware_logic

    # -- member data -------------------------------------------------------------------------------
    def member_data(self, subscription: Subscription) -> MemberData:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- entry points ------------------------------------------------------------------------------
    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignment:
        """Kafka's `assign(Map<String,Integer>, ...)`: no rack information."""
        return self.assign_partitions(partitions_per_topic, subscriptions, None)

    def assign_partitions(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                          partition_racks: PartitionRacks | None = None) -> Assignment:
        return self.assign_with_details(partitions_per_topic, subscriptions, partition_racks).assignment

    def assign_with_details(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                            partition_racks: PartitionRacks | None = None) -> StickyResult:
        return self._sticky_assign(partitions_per_topic, subscriptions, partition_racks)

    def _sticky_assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                       partition_racks: PartitionRacks | None) -> StickyResult:
        rack_info = _RackInfo(partitions_per_topic, partition_racks or {}, subscriptions,
                              self.prefer_rack_aware_logic)
        owned: JavaHashMap[str, list[TopicPartition]] = JavaHashMap(string_hash)
        multi_owned: set[TopicPartition] = set()
        equal, max_generation = self._all_subscriptions_equal(partitions_per_topic, subscriptions, owned, multi_owned)
        if equal:
            transferring: dict[TopicPartition, str] = {}
            out = _Constrained(partitions_per_topic, rack_info, owned, multi_owned, transferring).build()
            return StickyResult(out, transferring, max_generation, True)
        general = _General(self, partitions_per_topic, rack_info, owned, subscriptions, max_generation)
        return StickyResult(general.build(), None, max_generation, False)

    def _all_subscriptions_equal(self, partitions_per_topic: Mapping[str, int],
                                 subscriptions: Mapping[str, Subscription],
                                 owned: JavaHashMap[str, list[TopicPartition]],
                                 multi_owned: set[TopicPartition]) -> tuple[bool, int]:
        equal = True
        first_topics: set[str] = set()
        max_generation = DEFAULT_GENERATION
        previous_owner: dict[TopicPartition, str] = {}
        for consumer, sub in subscriptions.items():
            if not first_topics:
                # Kafka takes the first non-empty subscription it meets as the reference, so members
                # with no topics before it do not make the group "unequal"
                first_topics = set(sub.topics)
            elif equal and not (len(sub.topics) == len(first_topics) and first_topics >= set(sub.topics)):
                equal = False
            md = self.member_data(sub)
            gen = DEFAULT_GENERATION if md.generation is None else md.generation
            max_generation = max(max_generation, gen)
            mine: list[TopicPartition] = []
            owned[consumer] = mine
            for tp in md.partitions:
                if tp.topic not in partitions_per_topic:
                    continue
                other = previous_owner.get(tp)
                if other is None:
                    mine.append(tp)
                    previous_owner[tp] = consumer
                    continue
                other_sub = subscriptions[other]
                other_gen = DEFAULT_GENERATION if other_sub.generation_id is None else other_sub.generation_id
                if gen == other_gen:
                    # two members of one generation claim it: nobody keeps it
                    multi_owned.add(tp)
                    _remove_first(owned[other], tp)
                    previous_owner[tp] = consumer
                elif gen > other_gen:
                    mine.append(tp)
                    _remove_first(owned[other], tp)
                    previous_owner[tp] = consumer
        return equal, max_generation


def _remove_first(lst: list[TopicPartition], tp: TopicPartition) -> None:
    try:
        lst.remove(tp)
    except ValueError:
        pass


class _Constrained:
    """All members subscribe to the same topics (Kafka's ConstrainedAssignmentBuilder)."""

    def __init__(self, partitions_per_topic: Mapping[str, int], rack_info: _RackInfo,
                 current: JavaHashMap[str, list[TopicPartition]], multi_owned: set[TopicPartition],
                 transferring: dict[TopicPartition, str]) -> None:
        self.ppt = partitions_per_topic
        self.rack = rack_info
        self.current = current
        self.multi_owned = multi_owned
        self.transferring = transferring
        # Kafka's maybeRevokedPartitions: partition -> the member that gave it up. A map, not a set: a
        # partition handed back to the member that gave it up is not a transfer (else a member alone on
        # its rack would revoke and regain its off-rack partitions in every cooperative round).
        self.maybe_revoked: dict[TopicPartition, str] = {}
        self.under_min: list[str] = []
        self.exactly_min: list[str] = []
        total = sum(partitions_per_topic.values())
        n = len(current)
        self.min_quota = total // n if n else 0
        self.max_quota = -(-total // n) if n else 0
        self.expected_over_min = total % n if n else 0
        self.current_over_min = 0
        self.assignment: Assignment = {c: [] for c in current.keys()}
        self.assigned: list[TopicPartition] = []

    def build(self) -> Assignment:
        if not self.current:
            return {}
        self._assign_owned()
        all_sorted = [TopicPartition(t, p) for t in sorted(self.ppt) for p in range(self.ppt[t])]
        self.assigned.sort()
        unassigned = _unassigned_two_pointer(all_sorted, self.assigned)
        self.under_min.sort()
        self.exactly_min.sort()
        unassigned = self.rack.sort_by_rack_consumers(unassigned)
        unassigned = self._assign_rack_aware_round_robin(unassigned)
        self._assign_round_robin(unassigned)
        self._verify_unfilled()
        return self.assignment

    def _assign_owned(self) -> None:
        for consumer, owned in self.current.items():
            mine: list[TopicPartition] = []
            for tp in owned:
                if self.rack.racks_mismatch(consumer, tp):
                    # owned on the wrong rack: given up, so a new owner must wait for its revocation
                    self.maybe_revoked[tp] = consumer
                else:
                    mine.append(tp)
            mine.sort(key=lambda tp: (tp.partition, tp.topic))
            if self.multi_owned:
                mine = [tp for tp in mine if tp not in self.multi_owned]
            target = self.assignment[consumer]
            if len(mine) < self.min_quota:
                target.extend(mine)
                self.assigned.extend(mine)
                self.under_min.append(consumer)
            elif len(mine) >= self.max_quota and self.current_over_min < self.expected_over_min:
                self.current_over_min += 1
                if self.current_over_min == self.expected_over_min:
                    self.exactly_min.clear()
                target.extend(mine[:self.max_quota])
                self.assigned.extend(mine[:self.max_quota])
                for tp in mine[self.max_quota:]:
                    self.maybe_revoked[tp] = consumer
            else:
                target.extend(mine[:self.min_quota])
                self.assigned.extend(mine[:self.min_quota])
                for tp in mine[self.min_quota:]:
                    self.maybe_revoked[tp] = consumer
                if self.current_over_min < self.expected_over_min:
                    self.exactly_min.append(consumer)

    def _assign_new(self, tp: TopicPartition, consumer: str) -> int:
        lst = self.assignment[consumer]
        lst.append(tp)
        previous = self.maybe_revoked.get(tp)
        if (previous is not None and previous != consumer) or tp in self.multi_owned:
            self.transferring[tp] = consumer
        return len(lst)

    def _assign_rack_aware_round_robin(self, unassigned: list[TopicPartition]) -> list[TopicPartition]:
        if not self.rack.consumer_racks:
            return unassigned
        left: list[TopicPartition] = []
        next_index_start = 0
        for tp in unassigned:
            consumer: str | None = None
            idx = self.rack.next_rack_consumer(tp, self.under_min, next_index_start)
            if idx >= 0:
                consumer = self.under_min[idx]
                count = len(self.assignment[consumer]) + 1
                if count >= self.min_quota:
                    self.under_min.remove(consumer)
                    # at minQuota it is "unfilled" only while more members may still reach maxQuota
                    if count < self.max_quota and self.current_over_min < self.expected_over_min:
                        self.exactly_min.append(consumer)
                else:
                    idx += 1
                next_index_start = 0 if not self.under_min else idx % len(self.under_min)
            elif self.exactly_min:
                first = self.rack.next_rack_consumer(tp, self.exactly_min, 0)
                if first >= 0:
                    consumer = self.exactly_min[first]
                    if len(self.assignment[consumer]) + 1 == self.max_quota:
                        del self.exactly_min[first]
                        self.current_over_min += 1
                        if self.current_over_min == self.expected_over_min:
                            # every member at minQuota is now filled
                            self.exactly_min.clear()
            if consumer is not None:
                self._assign_new(tp, consumer)
            else:
                left.append(tp)
        return left

    def _assign_round_robin(self, unassigned: list[TopicPartition]) -> None:
        under = self.under_min
        pos = 0  # a java.util.Iterator over `under`: next() -> under[pos]; remove() deletes under[pos-1]
        for tp in unassigned:
            if pos < len(under):
                consumer = under[pos]
                pos += 1
            elif not under and not self.exactly_min:
                raise PartitionAssignorError("No more unfilled consumers to be assigned.")
            elif not under:
                consumer = self.exactly_min.pop(0)
            else:
                pos = 0
                consumer = under[pos]
                pos += 1
            count = self._assign_new(tp, consumer)
            if count == self.min_quota:
                del under[pos - 1]
                pos -= 1
                self.exactly_min.append(consumer)
            elif count == self.max_quota:
                self.current_over_min += 1

    def _verify_unfilled(self) -> None:
        if not self.under_min:
            return
        if self.current_over_min != self.expected_over_min:
            raise PartitionAssignorError("We haven't reached the expected number of members with more than the "
                                         "minQuota partitions, but no more partitions to be assigned")
        for member in self.under_min:
            if len(self.assignment[member]) != self.min_quota:
                raise PartitionAssignorError(
                    f"Consumer: [{member}] doesn't reach minQuota partitions, and no more partitions to be assigned")


class _SortedMembers:
    """Kafka's TreeSet of members ordered by (current assignment size, member id).

    Also kept per subscription class (members with the same topics), so that "the least-loaded member
    subscribed to topic t" is the smallest head among the classes containing t — the same member
    Kafka's scan of the whole TreeSet finds, without walking past members of other topics."""

    __slots__ = ("_keys", "_assignment", "_class_of", "_class_keys", "_classes_by_topic")

    def __init__(self, assignment: dict[str, list[TopicPartition]],
                 topics_of: Mapping[str, set[str]] | None = None) -> None:
        self._assignment = assignment
        self._keys: list[tuple[int, str]] = []
        self._class_of: dict[str, frozenset[str]] = {}
        self._class_keys: dict[frozenset[str], list[tuple[int, str]]] = {}
        self._classes_by_topic: dict[str, list[frozenset[str]]] = {}
        for member, topics in (topics_of or {}).items():
            cls = frozenset(topics)
            self._class_of[member] = cls
            if cls not in self._class_keys:
                self._class_keys[cls] = []
                for t in cls:
                    self._classes_by_topic.setdefault(t, []).append(cls)

    @staticmethod
    def _insert(keys: list[tuple[int, str]], key: tuple[int, str]) -> bool:
        i = bisect.bisect_left(keys, key)
        if i == len(keys) or keys[i] != key:
            keys.insert(i, key)
            return True
        return False

    @staticmethod
    def _delete(keys: list[tuple[int, str]], key: tuple[int, str]) -> bool:
        i = bisect.bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            del keys[i]
            return True
        return False

    def add(self, member: str) -> None:
        key = (len(self._assignment[member]), member)
        if self._insert(self._keys, key) and member in self._class_of:
            self._insert(self._class_keys[self._class_of[member]], key)

    def remove(self, member: str) -> None:
        # like TreeSet.remove, the lookup uses the member's size *now*
        key = (len(self._assignment[member]), member)
        if self._delete(self._keys, key) and member in self._class_of:
            self._delete(self._class_keys[self._class_of[member]], key)

    def first(self) -> str:
        return self._keys[0][1]

    def last(self) -> str:
        return self._keys[-1][1]

    def members(self) -> list[str]:
        return [k[1] for k in self._keys]

    def first_matching(self, wanted: Callable[[str], bool]) -> str | None:
        """The least-loaded member satisfying `wanted` (a scan in TreeSet order)."""
        for _size, member in self._keys:
            if wanted(member):
                return member
        return None

    def first_subscribed(self, topic: str) -> str | None:
        """The least-loaded member subscribed to `topic`."""
        best: tuple[int, str] | None = None
        for cls in self._classes_by_topic.get(topic, ()):
            keys = self._class_keys[cls]
            if keys and (best is None or keys[0] < best):
                best = keys[0]
        return None if best is None else best[1]


class _PartitionMovements:
    """Kafka's PartitionMovements: where each moved partition came from, by topic and member pair."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashSet[TopicPartition]]] = {}
        self.movements: dict[TopicPartition, tuple[str, str]] = {}

    def _remove_record(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.movements.pop(tp)
        per_topic = self.by_topic[tp.topic]
        per_topic[pair].discard(tp)
        if not len(per_topic[pair]):
            del per_topic[pair]
        if not per_topic:
            del self.by_topic[tp.topic]
        return pair

    def _add_record(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.movements[tp] = pair
        per_topic = self.by_topic.setdefault(tp.topic, {})
        s = per_topic.get(pair)
        if s is None:
            s = per_topic[pair] = JavaHashSet(tp_hash)
        s.add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.movements:
            existing = self._remove_record(tp)
            if existing[0] != new:
                self._add_record(tp, (existing[0], new))
        else:
            self._add_record(tp, (old, new))

    def actual_partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        per_topic = self.by_topic.get(tp.topic)
        if per_topic is None:
            return tp
        if tp in self.movements:
            old = self.movements[tp][0]
        reverse = per_topic.get((new, old))
        if reverse is None:
            return tp
        return reverse.first()


class _General:
    """Members with different subscriptions (Kafka's GeneralAssignmentBuilder)."""

    def __init__(self, assignor: AbstractStickyAssignor, partitions_per_topic: Mapping[str, int],
                 rack_info: _RackInfo, current: JavaHashMap[str, list[TopicPartition]],
                 subscriptions: Mapping[str, Subscription], max_generation: int) -> None:
        self.assignor = assignor
        self.ppt = partitions_per_topic
        self.rack = rack_info
        self.subscriptions = subscriptions
        self.max_generation = max_generation
        self.total = sum(partitions_per_topic.values())
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in partitions_per_topic}
        self.consumer_topics: dict[str, list[str]] = {}
        self.consumer_topic_sets: dict[str, set[str]] = {}
        for consumer, sub in subscriptions.items():
            mine = [t for t in sub.topics if t in partitions_per_topic]
            self.consumer_topics[consumer] = mine
            self.consumer_topic_sets[consumer] = set(mine)
            for t in mine:
                self.topic_consumers[t].append(consumer)
            if consumer not in current:
                current[consumer] = []
        # plain dicts from here on: only the lists' contents and order matter to the result
        self.current: dict[str, list[TopicPartition]] = dict(current.items())
        self.partition_consumer: dict[TopicPartition, str] = {
            tp: c for c, tps in self.current.items() for tp in tps}
        sorted_topics = sorted(self.topic_consumers, key=lambda t: (len(self.topic_consumers[t]), t))
        self.sorted_all_partitions = [TopicPartition(t, p) for t in sorted_topics for p in range(self.ppt[t])]
        self.sorted_members = _SortedMembers(self.current, self.consumer_topic_sets)
        self.revocation_required = False
        self.movements = _PartitionMovements()

    def build(self) -> Assignment:
        prev = self._prepopulate_prev_assignment()
        assigned = self._assign_owned()
        unassigned = self._unassigned(assigned)
        for c in self.current:
            self.sorted_members.add(c)
        self._balance(prev, unassigned)
        return self.current

    def _prepopulate_prev_assignment(self) -> dict[TopicPartition, tuple[str, int]]:
        prev: dict[TopicPartition, tuple[str, int]] = {}

        def update(parts: list[TopicPartition], consumer: str, generation: int) -> None:
            for tp in parts:
                hit = prev.get(tp)
                if hit is None or generation > hit[1]:
                    prev[tp] = (consumer, generation)

        for consumer, sub in self.subscriptions.items():
            md = self.assignor.member_data(sub)
            if md.generation is not None and md.generation < self.max_generation:
                update(md.partitions, consumer, md.generation)
            elif md.generation is None and self.max_generation > DEFAULT_GENERATION:
                update(md.partitions, consumer, DEFAULT_GENERATION)
        return prev

    def _assign_owned(self) -> list[TopicPartition]:
        assigned: list[TopicPartition] = []
        for consumer in list(self.current):
            sub = self.subscriptions.get(consumer)
            tps = self.current[consumer]
            if sub is None:
                for tp in tps:
                    self.partition_consumer.pop(tp, None)
                del self.current[consumer]
                continue
            topics = set(sub.topics)
            keep: list[TopicPartition] = []
            for tp in tps:
                if tp.topic not in self.topic_consumers:
                    self.partition_consumer.pop(tp, None)
                elif tp.topic not in topics or self.rack.racks_mismatch(consumer, tp):
                    self.revocation_required = True
                else:
                    keep.append(tp)
                    assigned.append(tp)
            tps[:] = keep
        return assigned

    def _unassigned(self, assigned: list[TopicPartition]) -> list[TopicPartition]:
        if not assigned:
            return self.sorted_all_partitions  # the same list object, as in Kafka
        counts = self.topic_consumers
        assigned.sort(key=lambda tp: (len(counts[tp.topic]), tp.topic, tp.partition))
        return _unassigned_two_pointer(self.sorted_all_partitions, assigned)

    def _max_assignment_size(self, consumer: str) -> int:
        topics = self.consumer_topics[consumer]
        if len(topics) == len(self.ppt):
            return self.total
        return sum(self.ppt[t] for t in topics)

    def _is_balanced(self) -> bool:
        """Kafka's isBalanced: sizes within one, or no member could take a partition of one of its topics
        from a member holding more than one partition more. Same answer as Kafka's partition-by-partition
        scan, computed from each topic's two largest owners (O(partitions + members x topics))."""
        cur = self.current
        lo = len(cur[self.sorted_members.first()])
        hi = len(cur[self.sorted_members.last()])
        if lo >= hi - 1:
            return True
        top2: dict[str, list[tuple[int, str]]] = {}
        for owner, tps in cur.items():
            size = len(tps)
            for topic in {tp.topic for tp in tps}:
                best = top2.get(topic)
                if best is None:
                    top2[topic] = [(size, owner)]
                else:
                    best.append((size, owner))
                    best.sort(reverse=True)
                    del best[2:]
        for consumer in self.sorted_members.members():
            count = len(cur[consumer])
            if count == self._max_assignment_size(consumer):
                continue
            for topic in self.consumer_topics[consumer]:
                for size, owner in top2.get(topic, ()):
                    if owner != consumer and count + 1 < size:
                        return False
        return True

    @staticmethod
    def _balance_score(assignment: dict[str, list[TopicPartition]]) -> int:
        sizes = sorted(len(v) for v in assignment.values())
        # sum over pairs of |a - b| with sorted sizes: each size contributes (2i - n + 1) * size
        n = len(sizes)
        return sum((2 * i - n + 1) * s for i, s in enumerate(sizes))

    def _maybe_assign_partition(self, tp: TopicPartition, rack_info: _RackInfo | None) -> bool:
        if rack_info is None:
            consumer = self.sorted_members.first_subscribed(tp.topic)
        else:
            topics = self.consumer_topic_sets
            consumer = self.sorted_members.first_matching(
                lambda c: tp.topic in topics[c] and not rack_info.racks_mismatch(c, tp))
        if consumer is None:
            return False
        self.sorted_members.remove(consumer)
        self.current[consumer].append(tp)
        self.partition_consumer[tp] = consumer
        self.sorted_members.add(consumer)
        return True

    def _maybe_assign(self, partitions: list[TopicPartition], rack_info: _RackInfo | None,
                      remove_assigned: bool) -> list[TopicPartition]:
        left: list[TopicPartition] = []
        for tp in partitions:
            if not self.topic_consumers[tp.topic]:
                left.append(tp)
                continue
            if not (self._maybe_assign_partition(tp, rack_info) and remove_assigned):
                left.append(tp)
        return left

    def _can_consumer_participate(self, consumer: str) -> bool:
        mine = self.current[consumer]
        if len(mine) < self._max_assignment_size(consumer):
            return True
        return any(len(self.topic_consumers[tp.topic]) >= 2 for tp in mine)

    def _balance(self, prev: dict[TopicPartition, tuple[str, int]], unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self.sorted_members.last()] if self.current else True
        to_assign = unassigned
        if self.rack.consumer_racks:
            to_assign = self._maybe_assign(list(unassigned), self.rack, True)
        self._maybe_assign(to_assign, None, False)

        fixed_topics = {t for t, cs in self.topic_consumers.items() if len(cs) < 2}
        if fixed_topics:
            self.sorted_all_partitions[:] = [tp for tp in self.sorted_all_partitions if tp.topic not in fixed_topics]
            if unassigned is not self.sorted_all_partitions:
                unassigned[:] = [tp for tp in unassigned if tp.topic not in fixed_topics]

        fixed_assignments: dict[str, list[TopicPartition]] = {}
        for consumer in self.consumer_topics:
            if not self._can_consumer_participate(consumer):
                self.sorted_members.remove(consumer)
                fixed_assignments[consumer] = self.current.pop(consumer)

        pre_balance = {c: list(v) for c, v in self.current.items()}
        pre_balance_owner = dict(self.partition_consumer)

        if not self.revocation_required:
            self._perform_reassignments(unassigned, prev)
        performed = self._perform_reassignments(self.sorted_all_partitions, prev)

        if not initializing and performed and self._balance_score(self.current) >= self._balance_score(pre_balance):
            self.current.clear()
            self.current.update({c: list(v) for c, v in pre_balance.items()})
            self.partition_consumer = pre_balance_owner

        for consumer, tps in fixed_assignments.items():
            self.current[consumer] = tps

    def _perform_reassignments(self, partitions: list[TopicPartition],
                               prev: dict[TopicPartition, tuple[str, int]]) -> bool:
        performed = False
        cur = self.current
        while True:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = self.partition_consumer.get(tp)
                if consumer is None:
                    continue  # Kafka logs an error and would fail below; nothing sensible to move
                hit = prev.get(tp)
                if hit is not None and hit[0] in cur and len(cur[consumer]) > len(cur[hit[0]]) + 1:
                    self._reassign(tp, hit[0])
                    performed = modified = True
                    continue
                rack = self.rack.consumer_racks.get(consumer)
                tp_racks = self.rack.partition_racks.get(tp)
                found_rack_consumer = False
                if rack is not None and tp_racks and rack in tp_racks:
                    for other in self.topic_consumers[tp.topic]:
                        other_rack = self.rack.consumer_racks.get(other)
                        if other_rack is None or other_rack not in tp_racks or other not in cur:
                            continue
                        if len(cur[consumer]) > len(cur[other]) + 1:
                            self._reassign_to_best(tp)
                            performed = modified = found_rack_consumer = True
                            break
                if not found_rack_consumer:
                    for other in self.topic_consumers[tp.topic]:
                        if other in cur and len(cur[consumer]) > len(cur[other]) + 1:
                            self._reassign_to_best(tp)
                            performed = modified = True
                            break
            if not modified:
                return performed

    def _reassign_to_best(self, tp: TopicPartition) -> None:
        candidate = self.sorted_members.first_subscribed(tp.topic)
        if candidate is None:
            raise PartitionAssignorError(f"no member can take {tp}")
        self._reassign(tp, candidate)

    def _reassign(self, tp: TopicPartition, new_consumer: str) -> None:
        consumer = self.partition_consumer[tp]
        actual = self.movements.actual_partition_to_move(tp, consumer, new_consumer)
        self._process_movement(actual, new_consumer)

    def _process_movement(self, tp: TopicPartition, new_consumer: str) -> None:
        old = self.partition_consumer[tp]
        self.sorted_members.remove(old)
        self.sorted_members.remove(new_consumer)
        self.movements.move(tp, old, new_consumer)
        self.current[old].remove(tp)
        self.current[new_consumer].append(tp)
        self.partition_consumer[tp] = new_consumer
        self.sorted_members.add(new_consumer)
        self.sorted_members.add(old)


class StickyAssignor(AbstractStickyAssignor):
    """Eager sticky assignor: previous assignment and generation travel in the user data."""

    name = "sticky"

    def member_data(self, subscription: Subscription) -> MemberData:
        return decode_sticky_user_data(subscription.user_data)

    @staticmethod
    def subscription_user_data(partitions: list[TopicPartition], generation: int | None) -> bytes:
        return encode_sticky_user_data(partitions, generation)


class CooperativeStickyAssignor(AbstractStickyAssignor):
    """Cooperative sticky assignor (KIP-429): never hands a partition to a new owner in the same round."""

    name = "cooperative-sticky"

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.generation_id is not None:
            return MemberData(list(subscription.owned_partitions), subscription.generation_id)
        return MemberData(list(subscription.owned_partitions), decode_cooperative_user_data(subscription.user_data))

    @staticmethod
    def subscription_user_data(generation: int = DEFAULT_GENERATION) -> bytes:
        return encode_cooperative_user_data(generation)

    def assign_with_details(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                            partition_racks: PartitionRacks | None = None) -> StickyResult:
        result = self._sticky_assign(partitions_per_topic, subscriptions, partition_racks)
        transferring = result.partitions_transferring_ownership
        if transferring is None:
            transferring = self._compute_transferring(subscriptions, result.assignment)
        for tp, consumer in transferring.items():
            _remove_first(result.assignment[consumer], tp)
        result.partitions_transferring_ownership = transferring
        return result

    @staticmethod
    def _compute_transferring(subscriptions: Mapping[str, Subscription],
                              assignment: Assignment) -> dict[TopicPartition, str]:
        added: dict[TopicPartition, str] = {}
        revoked: set[TopicPartition] = set()
        for consumer, tps in assignment.items():
            owned = subscriptions[consumer].owned_partitions
            owned_set = set(owned)
            for tp in tps:
                if tp not in owned_set:
                    added[tp] = consumer
            tps_set = set(tps)
            revoked.update(tp for tp in owned if tp not in tps_set)
        return {tp: c for tp, c in added.items() if tp in revoked}
