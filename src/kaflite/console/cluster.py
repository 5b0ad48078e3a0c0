"""What the console reads from a cluster, over the Kafka wire protocol only (confluent-kafka's AdminClient,
Consumer and Producer, plus DescribeLogDirs and group subscriptions in `wire`): it never imports the broker, so it works
against Apache Kafka, Redpanda or any other Kafka-compatible cluster.

All calls block (librdkafka); the web app runs them on worker threads. Every wait is bounded by
`timeout`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

from kaflite.assign.murmur2 import partition_for_key
from kaflite.console.access import AclRow, QuotaEntry, acl_row
from kaflite.console.records import Record, matches
from kaflite.console.wire import (
    MemberSubscription,
    describe_acls,
    describe_client_quotas,
    describe_log_dirs,
    group_subscriptions,
)

__all__ = ["ClusterView", "Broker", "TopicInfo", "PartitionInfo", "GroupInfo", "MemberInfo", "ConsoleError"]

Tp = tuple[str, int]
_SECURITY_DISABLED, _CLUSTER_AUTHORIZATION_FAILED = 54, 31  # Kafka's error codes


class ConsoleError(Exception):
    """A failure the page shows as one line (cluster unreachable, unknown topic, bad input)."""


@dataclass(slots=True)
class Broker:
    id: int
    host: str
    port: int
    rack: str | None = None
    controller: bool = False


@dataclass(slots=True)
class PartitionInfo:
    id: int
    leader: int
    replicas: list[int]
    isr: list[int]
    earliest: int | None = None
    latest: int | None = None
    size: int | None = None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def records(self) -> int | None:
        if self.earliest is None or self.latest is None:
            return None
        return max(0, self.latest - self.earliest)


@dataclass(slots=True)
class TopicInfo:
    name: str
    partitions: list[PartitionInfo]
    internal: bool = False
    error: str = ""

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @property
    def size(self) -> int | None:
        sizes = [p.size for p in self.partitions]
        return None if not sizes or any(s is None for s in sizes) else sum(s or 0 for s in sizes)

    @property
    def records(self) -> int | None:
        counts = [p.records for p in self.partitions]
        return None if not counts or any(c is None for c in counts) else sum(c or 0 for c in counts)

    @property
    def under_replicated(self) -> int:
        return sum(p.under_replicated for p in self.partitions)

    @property
    def offline(self) -> int:
        return sum(p.offline for p in self.partitions)


@dataclass(slots=True)
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    assignment: list[Tp]
    target: list[Tp] | None = None


@dataclass(slots=True)
class GroupInfo:
    group_id: str
    type: str  # "classic" | "consumer" | "unknown"
    state: str
    protocol_type: str = ""
    assignor: str = ""
    coordinator: int | None = None
    members: list[MemberInfo] = field(default_factory=list)
    simple: bool = False
    coordinator_address: tuple[str, int] | None = None


def _enum_name(v: Any) -> str:
    name = getattr(v, "name", None)
    return str(name if name is not None else v).lower()


def config_source_name(source: Any) -> str:
    """A DescribeConfigs source as the page shows it (`default`, `dynamic_topic`, `static_broker`, ...):
    confluent-kafka gives a ConfigSource on some versions and its int code on others (2.16)."""
    from confluent_kafka.admin import ConfigSource

    if getattr(source, "name", None) is None:
        try:
            source = ConfigSource(int(source))
        except (TypeError, ValueError):
            return str(source).lower()
    return _enum_name(source).replace("_config", "")


def _ctp_key(tp: Any) -> Tp:
    return (str(tp.topic), int(tp.partition))


class ClusterView:
    """One cluster, reached through `bootstrap` (host:port[,host:port...])."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, client_config: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.extra = dict(client_config or {})
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None

    # -- clients -----------------------------------------------------------------------------------

    def _config(self, **more: Any) -> dict[str, Any]:
        # librdkafka logs its own connection errors to stderr; the console shows them on the page instead
        return {"bootstrap.servers": self.bootstrap, "client.id": "kaflite-console", "logger": _SilentLogger(),
                **self.extra, **more}

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self._config())
        return self._admin

    def _result(self, future: Any, what: str) -> Any:
        try:
            return future.result(timeout=self.timeout)
        except KafkaException as err:
            raise ConsoleError(f"{what}: {err.args[0].str() if err.args else err}") from None
        except TimeoutError:
            raise ConsoleError(f"{what}: no answer from {self.bootstrap} within {self.timeout:g} s") from None

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout)
        self._admin = None
        self._producer = None

    # -- cluster and topics ------------------------------------------------------------------------

    def metadata(self) -> Any:
        try:
            return self.admin.list_topics(timeout=self.timeout)
        except KafkaException as err:
            raise ConsoleError(f"cannot reach the cluster at {self.bootstrap}: {err.args[0].str()}") from None

    def cluster(self) -> tuple[str | None, list[Broker]]:
        """(cluster id, brokers with the controller marked)."""
        desc = self._result(self.admin.describe_cluster(request_timeout=self.timeout), "DescribeCluster")
        controller = desc.controller.id if desc.controller is not None else None
        brokers = [Broker(n.id, n.host, n.port, n.rack, n.id == controller) for n in desc.nodes]
        return desc.cluster_id, sorted(brokers, key=lambda b: b.id)

    def topics(self, md: Any = None, with_internal: bool = True) -> list[TopicInfo]:
        md = md if md is not None else self.metadata()
        out = []
        for name, t in sorted(md.topics.items()):
            internal = name.startswith("__")
            if internal and not with_internal:
                continue
            parts = [PartitionInfo(p.id, p.leader, list(p.replicas), list(p.isrs))
                     for p in sorted(t.partitions.values(), key=lambda p: p.id)]
            out.append(TopicInfo(name, parts, internal, t.error.str() if t.error is not None else ""))
        return out

    def topic(self, name: str) -> TopicInfo:
        """One topic (DescribeTopics: a Metadata request that never auto-creates, unlike naming the topic
        in list_topics on a cluster with auto.create.topics.enable)."""
        from confluent_kafka import TopicCollection

        futures = self.admin.describe_topics(TopicCollection([name]), request_timeout=self.timeout)
        try:
            d = futures[name].result(timeout=self.timeout)
        except KafkaException as err:
            kerr = err.args[0] if err.args else None
            if kerr is not None and kerr.code() in (3, -188):  # UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC
                raise ConsoleError(f"topic {name!r} does not exist") from None
            raise ConsoleError(f"topic {name}: {kerr.str() if kerr is not None else err}") from None
        except TimeoutError:
            raise ConsoleError(f"topic {name}: no answer from {self.bootstrap} within {self.timeout:g} s") from None
        parts = [PartitionInfo(p.id, p.leader.id if p.leader is not None else -1, [n.id for n in p.replicas],
                               [n.id for n in p.isr]) for p in sorted(d.partitions, key=lambda p: p.id)]
        return TopicInfo(name, parts, bool(d.is_internal) or name.startswith("__"))

    def fill_offsets(self, topics: Iterable[TopicInfo], cached: tuple[Mapping[Tp, int], Mapping[Tp, int]] | None = None
                     ) -> None:
        """Earliest and latest offsets of every partition (two ListOffsets rounds, or the sampler's cache)."""
        topics = list(topics)
        tps = [(t.name, p.id) for t in topics for p in t.partitions if not p.offline]
        earliest, latest = cached if cached is not None else (self.offsets(tps, "earliest"), self.offsets(tps, "latest"))
        for t in topics:
            for p in t.partitions:
                p.earliest = earliest.get((t.name, p.id))
                p.latest = latest.get((t.name, p.id))

    def latest_offsets(self, tps: Iterable[Tp]) -> dict[Tp, int]:
        return self.offsets(tps, "latest")

    def log_dir_sizes(self, brokers: Iterable[Broker], topics: Iterable[TopicInfo] | None = None
                      ) -> dict[tuple[int, str, int], int] | None:
        """{(broker id, topic, partition): bytes} from DescribeLogDirs on each broker (for `topics`, or
        every partition); None if no broker answers."""
        sizes: dict[tuple[int, str, int], int] = {}
        answered = False
        wanted = None if topics is None else {t.name: [p.id for p in t.partitions] for t in topics}
        for b in brokers:
            try:
                for (tname, pid), size in describe_log_dirs(b.host, b.port, timeout=min(3.0, self.timeout),
                                                            topics=wanted).items():
                    sizes[(b.id, tname, pid)] = size
                answered = True
            except (OSError, ValueError, ConnectionError, EOFError):
                continue
        return sizes if answered else None

    # -- access: ACLs and client quotas --------------------------------------------------------------

    def _bootstrap_servers(self) -> list[tuple[str, int]]:
        out = []
        for server in (s.strip() for s in self.bootstrap.split(",") if s.strip()):
            host, _, port = server.rpartition(":")
            if port.isdigit():
                out.append((host.strip("[]"), int(port)))
        return out

    def acls(self) -> tuple[list[AclRow] | None, str]:
        """(every ACL binding, "") from DescribeAcls with a filter matching any, sent to the first bootstrap
        server that answers; (None, why) when the cluster does not list them: no authorizer
        (SECURITY_DISABLED), the console's principal may not (CLUSTER_AUTHORIZATION_FAILED), no answer."""
        reasons = []
        for host, port in self._bootstrap_servers():
            try:
                code, message, found = describe_acls(host, port, timeout=min(3.0, self.timeout))
            except (OSError, ConnectionError, EOFError, ValueError) as err:
                reasons.append(f"{host}:{port} ({err})")
                continue
            if code == _SECURITY_DISABLED:
                return None, ("ACLs are not enabled on this cluster: the broker has no authorizer (DescribeAcls "
                              f"answered SECURITY_DISABLED: {message}), so every client may do everything")
            if code == _CLUSTER_AUTHORIZATION_FAILED:
                return None, ("the console's principal may not list ACLs (DescribeAcls answered "
                              "CLUSTER_AUTHORIZATION_FAILED: it needs DESCRIBE on the cluster)")
            if code:
                return None, f"DescribeAcls answered error {code}: {message}"
            return sorted(acl_row(*b) for b in found), ""
        return None, f"DescribeAcls: no answer from {', '.join(reasons) or self.bootstrap}"

    def client_quotas(self) -> tuple[list[QuotaEntry] | None, str]:
        """(every client quota entity with its values, "") from DescribeClientQuotas sent to the first
        bootstrap server that answers (confluent-kafka has no client quota API); (None, why) otherwise."""
        reasons = []
        for host, port in self._bootstrap_servers():
            try:
                found = describe_client_quotas(host, port, timeout=min(3.0, self.timeout))
            except ValueError as err:
                if "DescribeClientQuotas" in str(err):
                    return None, str(err)
                reasons.append(f"{host}:{port} ({err})")
                continue
            except (OSError, ConnectionError, EOFError) as err:
                reasons.append(f"{host}:{port} ({err})")
                continue
            return [QuotaEntry(entity, values) for entity, values in found], ""
        return None, f"DescribeClientQuotas: no answer from {', '.join(reasons) or self.bootstrap}"

    @staticmethod
    def apply_sizes(topics: Iterable[TopicInfo], sizes: Mapping[tuple[int, str, int], int]) -> None:
        """Each partition's size as its leader's copy."""
        for t in topics:
            for p in t.partitions:
                p.size = sizes.get((p.leader, t.name, p.id))

    def fill_sizes(self, topics: Iterable[TopicInfo], brokers: Iterable[Broker]) -> bool:
        """Partition sizes from DescribeLogDirs (the leader's copy); False if the cluster does not serve it."""
        topics = list(topics)
        sizes = self.log_dir_sizes(brokers, topics)
        if sizes is None:
            return False
        self.apply_sizes(topics, sizes)
        return True

    def offsets(self, tps: Iterable[Tp], spec: str) -> dict[Tp, int]:
        """Earliest or latest offset of each partition (one ListOffsets round)."""
        tps = list(tps)
        if not tps:
            return {}
        which = OffsetSpec.earliest() if spec == "earliest" else OffsetSpec.latest()
        out: dict[Tp, int] = {}
        futures = self.admin.list_offsets({CTP(t, p): which for t, p in tps}, request_timeout=self.timeout)
        for ctp, fut in futures.items():
            try:
                out[_ctp_key(ctp)] = fut.result(timeout=self.timeout).offset
            except Exception:  # one bad partition leaves only its own cell empty
                pass
        return out

    def topic_configs(self, name: str) -> list[tuple[str, str | None, str, bool]]:
        """(name, value, source, is default) of every topic config, sorted by name."""
        res = ConfigResource(ResourceType.TOPIC, name)
        futures = self.admin.describe_configs([res], request_timeout=self.timeout)
        entries = self._result(futures[res], f"DescribeConfigs {name}")
        return sorted((e.name, None if e.is_sensitive else e.value, config_source_name(e.source),
                       bool(e.is_default)) for e in entries.values())

    # -- records -----------------------------------------------------------------------------------

    def _consumer(self) -> Consumer:
        return Consumer(self._config(**{
            "group.id": f"kaflite-console-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50,
            "fetch.queue.backoff.ms": 10}))

    def offsets_for_time(self, topic: str, partitions: Iterable[int], ts_ms: int) -> dict[int, int]:
        """The first offset at or after `ts_ms` in each partition (log end when none)."""
        futures = self.admin.list_offsets({CTP(topic, p): OffsetSpec.for_timestamp(ts_ms) for p in partitions},
                                          request_timeout=self.timeout)
        out: dict[int, int] = {}
        for ctp, fut in futures.items():
            out[int(ctp.partition)] = self._result(fut, f"ListOffsets {topic}-{ctp.partition}").offset
        return out

    def read(self, topic: str, starts: Mapping[int, int], ends: Mapping[int, int], limit: int,
             needle: bytes | None = None, where: str = "any", hidden: bool = False, max_scan: int = 100_000,
             max_seconds: float = 8.0, newest: bool = False) -> tuple[list[Record], int]:
        """Records of `topic` from starts[p] (inclusive) to ends[p] (exclusive) in each partition, at most
        `limit` of them (that match `needle`, when given). Returns (records, records scanned).

        Several partitions are merged by timestamp: up to `limit` records are taken from each partition
        (librdkafka hands over one partition's batch at a time, so a global limit would fill up with the
        first partition it fetched), then the first `limit` of the merge are kept, or the last ones when
        `newest` (the starts are the partitions' tails)."""
        todo = {p: (s, ends[p]) for p, s in starts.items() if s < ends.get(p, 0)}
        if not todo or limit <= 0:
            return [], 0
        consumer: Any = self._consumer()
        found: list[Record] = []
        per_partition: dict[int, int] = dict.fromkeys(todo, 0)
        scanned = 0
        try:
            consumer.assign([CTP(topic, p, s) for p, (s, _) in todo.items()])
            open_parts = set(todo)
            deadline = time.monotonic() + max_seconds
            while open_parts and scanned < max_scan and time.monotonic() < deadline:
                # a short timeout: consume() waits all of it unless num_messages arrive first
                for msg in consumer.consume(num_messages=500, timeout=0.02):
                    err = msg.error()
                    p = msg.partition()
                    if err is not None:
                        if err.code() == -191:  # _PARTITION_EOF
                            open_parts.discard(p)
                        continue
                    if p not in open_parts:
                        continue
                    if msg.offset() >= todo[p][1]:
                        open_parts.discard(p)
                        continue
                    scanned += 1
                    rec = Record(topic, p, msg.offset(), msg.timestamp()[1], msg.key(), msg.value(),
                                 [(h, v) for h, v in (msg.headers() or [])])
                    if msg.offset() + 1 >= todo[p][1]:
                        open_parts.discard(p)
                    if needle is None or matches(rec, needle, where, hidden):
                        found.append(rec)
                        per_partition[p] += 1
                        if per_partition[p] >= limit:  # this partition has given all it can show
                            open_parts.discard(p)
                            consumer.pause([CTP(topic, p)])
        finally:
            consumer.close()
        if len(todo) == 1:
            found.sort(key=lambda r: (r.partition, r.offset))
        else:
            found.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
        return (found[-limit:] if newest else found[:limit]), scanned

    @staticmethod
    def key_partition(key: bytes, num_partitions: int) -> int:
        """Where the Java client's default partitioner puts `key` (murmur2; librdkafka's murmur2_random too)."""
        return partition_for_key(key, num_partitions)

    def timestamps_at(self, offsets: Mapping[Tp, int], max_seconds: float = 5.0) -> dict[Tp, int]:
        """The timestamp of the record at each (topic, partition) offset (for lag in seconds)."""
        if not offsets:
            return {}
        consumer: Any = self._consumer()
        out: dict[Tp, int] = {}
        try:
            consumer.assign([CTP(t, p, o) for (t, p), o in offsets.items()])
            deadline = time.monotonic() + max_seconds
            while len(out) < len(offsets) and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=len(offsets) * 4, timeout=0.02):
                    if msg.error() is not None:
                        continue
                    tp = (msg.topic(), msg.partition())
                    if tp not in out and msg.offset() >= offsets.get(tp, 0):
                        out[tp] = msg.timestamp()[1]
                        consumer.pause([CTP(tp[0], tp[1])])
        finally:
            consumer.close()
        return out

    def produce(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                headers: list[tuple[str, bytes]]) -> tuple[int, int]:
        """Produce one record, wait for its acknowledgement: (partition, offset)."""
        if self._producer is None:
            self._producer = Producer(self._config(**{"enable.idempotence": True, "linger.ms": 0}))
        result: dict[str, Any] = {}

        def done(err: Any, msg: Any) -> None:
            result["err"], result["msg"] = err, msg

        kwargs: dict[str, Any] = {"key": key, "value": value, "headers": headers or None, "on_delivery": done}
        if partition is not None:
            kwargs["partition"] = partition
        try:
            self._producer.produce(topic, **kwargs)
        except (KafkaException, BufferError) as err:
            raise ConsoleError(f"produce to {topic}: {err}") from None
        self._producer.flush(self.timeout)
        if "err" not in result:
            raise ConsoleError(f"produce to {topic}: not acknowledged within {self.timeout:g} s")
        if result["err"] is not None:
            raise ConsoleError(f"produce to {topic}: {result['err'].str()}")
        return result["msg"].partition(), result["msg"].offset()

    # -- groups ------------------------------------------------------------------------------------

    def list_groups(self, include_share: bool = True) -> list[tuple[str, str, str, bool]]:
        """(group id, type, state, simple) of every group the cluster knows; share groups only with
        `include_share` (they cost a ListGroups to every broker, which the sampler, with nothing to
        sample in a share group, does not need)."""
        res = self._result(self.admin.list_consumer_groups(request_timeout=self.timeout), "ListGroups")
        # one entry per group: librdkafka may list a group once per connection it asked through
        groups = {g.group_id: (g.group_id, _enum_name(getattr(g, "type", "unknown")), _enum_name(g.state),
                               bool(g.is_simple_consumer_group)) for g in res.valid}
        if include_share:
            for gid, state in self.list_share_groups():
                groups.setdefault(gid, (gid, "share", state, False))
        return sorted(groups.values())

    def list_share_groups(self) -> list[tuple[str, str]]:
        """[(group id, state)] of the share groups of every broker (ListGroups of type "share" to each, as
        Kafka's Admin client lists groups, the brokers asked at once); a broker that does not answer (or is
        not a Kafka 4.x) adds none."""
        from kaflite.console.wire import list_share_groups

        def ask(b: Any) -> list[tuple[str, str]]:
            try:
                return list_share_groups(b.host, b.port, timeout=min(3.0, self.timeout))
            except (OSError, ValueError, ConnectionError, EOFError):
                return []

        out: dict[str, str] = {}
        for listed in _each_at_once(ask, self.cluster()[1]):
            out.update(listed)
        return sorted(out.items())

    def share_group_member_counts(self, group_ids: list[str]) -> dict[str, int]:
        """{group id: members} of share groups: their coordinators from one DescribeGroups, then one
        ShareGroupDescribe per coordinator for all of its groups, the coordinators asked at once. A group
        whose coordinator is unknown or does not answer is left out."""
        from kaflite.console.wire import share_group_member_counts

        by_coordinator: dict[tuple[str, int], list[str]] = {}
        for gid, g in self.describe_groups(group_ids).items():
            if g.coordinator_address is not None:
                by_coordinator.setdefault(g.coordinator_address, []).append(gid)

        def ask(item: tuple[tuple[str, int], list[str]]) -> dict[str, int]:
            (host, port), gids = item
            try:
                return share_group_member_counts(host, port, gids, timeout=min(3.0, self.timeout))
            except (OSError, ValueError, ConnectionError, EOFError):
                return {}

        out: dict[str, int] = {}
        for counts in _each_at_once(ask, list(by_coordinator.items())):
            out.update(counts)
        return out

    def describe_groups(self, group_ids: list[str]) -> dict[str, GroupInfo]:
        if not group_ids:
            return {}
        futures = self.admin.describe_consumer_groups(group_ids, request_timeout=self.timeout)
        out: dict[str, GroupInfo] = {}
        for gid, fut in futures.items():
            try:
                d = fut.result(timeout=self.timeout)
            except Exception as err:
                out[gid] = GroupInfo(gid, "unknown", f"error: {err}")
                continue
            members = []
            for m in d.members:
                assigned = [_ctp_key(tp) for tp in (m.assignment.topic_partitions if m.assignment else [])]
                target_obj = getattr(m, "target_assignment", None)
                target = [_ctp_key(tp) for tp in target_obj.topic_partitions] if target_obj else None
                members.append(MemberInfo(m.member_id, m.client_id, m.host, m.group_instance_id,
                                          sorted(assigned), sorted(target) if target is not None else None))
            coord = d.coordinator
            out[gid] = GroupInfo(gid, _enum_name(getattr(d, "type", "unknown")), _enum_name(d.state),
                                 "consumer", d.partition_assignor or "", coord.id if coord is not None else None,
                                 members, bool(d.is_simple_consumer_group),
                                 (coord.host, coord.port) if coord is not None else None)
        return out

    def subscriptions(self, g: GroupInfo) -> dict[str, MemberSubscription]:
        """Each member's subscribed topics and rack, asked of the group's coordinator ({} when it cannot
        say: an old broker, an error, a group without members)."""
        if g.coordinator_address is None or not g.members:
            return {}
        host, port = g.coordinator_address
        try:
            return group_subscriptions(host, port, g.group_id, g.type, timeout=min(3.0, self.timeout))
        except (OSError, ValueError, ConnectionError, EOFError):
            return {}

    def rebalance_history(self, g: GroupInfo) -> tuple[list[tuple[str, ...]], str]:
        """The group's rebalance timeline as rows (kaflite.cluster.group_history's columns), newest first,
        asked of its coordinator; ([], why) when it cannot say (not a kaflite broker, no answer)."""
        from kaflite.cluster.group_history import GroupHistoryError, fetch_group_history, history_rows

        if g.coordinator_address is None:
            return [], "the group's coordinator is unknown"
        host, port = g.coordinator_address
        try:
            events = fetch_group_history(host, port, g.group_id, timeout=min(3.0, self.timeout))
        except GroupHistoryError as err:
            return [], str(err)
        except (OSError, ValueError, ConnectionError, EOFError) as err:
            return [], f"no answer from the coordinator {host}:{port}: {err}"
        return list(reversed(history_rows(events))), ""

    def share_group(self, g: GroupInfo) -> tuple[dict[str, Any] | None, str]:
        """A share group's members and records in flight, asked of its coordinator
        (kaflite.cluster.share_group_view); (None, why) when it cannot say (not a share group there, not a
        kaflite broker, no answer)."""
        from kaflite.cluster.share_group_view import ShareGroupViewError, fetch_share_group

        if g.coordinator_address is None:
            return None, "the group's coordinator is unknown"
        host, port = g.coordinator_address
        try:
            return fetch_share_group(host, port, g.group_id, timeout=min(3.0, self.timeout)), ""
        except ShareGroupViewError as err:
            return None, str(err)
        except (OSError, ValueError, ConnectionError, EOFError) as err:
            return None, f"no answer from the coordinator {host}:{port}: {err}"

    def committed(self, group_id: str) -> dict[Tp, int]:
        return {tp: offset for tp, (offset, _meta) in self.committed_with_metadata(group_id).items()}

    def committed_with_metadata(self, group_id: str) -> dict[Tp, tuple[int, str]]:
        """Each committed offset of the group with its metadata string ('' when none)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)],
                                                         request_timeout=self.timeout)
        res = self._result(futures[group_id], f"OffsetFetch {group_id}")
        return {_ctp_key(tp): (int(tp.offset), tp.metadata or "")
                for tp in res.topic_partitions if tp.error is None and tp.offset >= 0}


# kaflite.spark's streaming source with commitOffsetsToGroup=true commits its offsets with metadata starting
# so (kaflite.spark.group_commit.QUERY_METADATA_PREFIX; the console does not import kaflite.spark, and
# tests/spark/test_group_commit.py checks that the two agree)
SPARK_QUERY_METADATA_PREFIX = "kaflite.spark query "


def is_spark_query(committed: Mapping[Tp, tuple[int, str]]) -> bool:
    """Whether a group's committed offsets were committed by a kaflite.spark streaming query."""
    return any(meta.startswith(SPARK_QUERY_METADATA_PREFIX) for _offset, meta in committed.values())


T = TypeVar("T")
R = TypeVar("R")


def _each_at_once(ask: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """ask(item) for every item, in threads (at most 8 at once): the console's requests to several brokers
    wait for the slowest one, not for their sum."""
    if len(items) <= 1:
        return [ask(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(8, len(items)), thread_name_prefix="console-ask") as pool:
        return list(pool.map(ask, items))


class _SilentLogger:
    """A logging.Logger look-alike librdkafka can write to (its log lines are dropped)."""

    def log(self, *args: Any, **kwargs: Any) -> None:
        return None
