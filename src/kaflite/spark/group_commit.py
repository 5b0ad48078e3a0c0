"""Streaming queries as consumer groups (`commitOffsetsToGroup=true`, kaflite only): the offsets a query
has processed are committed to the consumer group `kafka.group.id`, so `kaflite groups describe`, the
console and any Kafka tool show how far behind the query is. Observability only: Spark's checkpoint stays
the one record a query restarts from; the group's offsets are never read back.

Rules:
- only offsets Spark has recorded as processed are committed: the `start` handed to latestOffset(start,
  limit) (Spark plans batch N+1 only after batch N is in its commit log, so `start` is the end of a
  committed batch, or the query's initial offsets before its first batch) and the `end` handed to
  commit(end) (Spark's hook, called for batch N when it plans batch N+1, so one batch late: without the
  latestOffset commits an idle or finished query would show the last batch as lag forever);
- a commit is Kafka's "simple" commit: OffsetCommit with generation -1 and no member id, the group is never
  joined (it stays Empty, and a group with live members refuses the commit);
- the same offsets are committed once: a trigger without new data sends nothing;
- the metadata of every committed offset is `kaflite.spark query {"run": <hex>, "commit": <n>}`: a run id
  new at each start of the query and the number of this run's commits (Spark gives the Python stream
  reader neither its query id nor its batch ids, docs/spark.md); the console marks a group whose
  committed metadata starts with `kaflite.spark query` as a Spark query;
- a failed commit is logged (`kaflite.spark` logger) and never fails the query.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.streaming.datasource import ReadLimit

from kaflite.spark.offsets import PartitionOffsets, TopicPartition, from_checkpoint
from kaflite.spark.options import ReaderOptions
from kaflite.spark.reader import KafkaStreamReader

log = logging.getLogger("kaflite.spark")

# The console recognises Spark queries by this prefix of the committed metadata (it does not import
# kaflite.spark: tests/spark/test_group_commit.py checks both sides agree).
QUERY_METADATA_PREFIX = "kaflite.spark query"


def query_metadata(run_id: str, commit: int) -> str:
    """The committed offset metadata of a query's group: `kaflite.spark query {"run": ..., "commit": n}`."""
    return f"{QUERY_METADATA_PREFIX} " + json.dumps({"run": run_id, "commit": commit}, separators=(",", ":"))


def parse_query_metadata(metadata: str | None) -> dict[str, Any] | None:
    """{"run": ..., "commit": n} when `metadata` is a query's commit metadata, else None."""
    if not metadata or not metadata.startswith(QUERY_METADATA_PREFIX + " "):
        return None
    try:
        value = json.loads(metadata[len(QUERY_METADATA_PREFIX) + 1 :])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _commit_client(client_config: Mapping[str, str], group: str) -> Any:
    conf: dict[str, Any] = dict(client_config)
    # the offsets are the connector's to commit, once, explicitly: never librdkafka's automatic ones
    conf.update({"group.id": group, "enable.auto.commit": False, "enable.auto.offset.store": False})
    return Consumer(conf)


class GroupCommitter:
    """Commits offset maps to one consumer group (driver side, lazily connected, picklable)."""

    def __init__(
        self,
        group: str,
        client_config: Mapping[str, str],
        run_id: str | None = None,
        client_factory: Callable[[Mapping[str, str], str], Any] = _commit_client,
        timeout_s: float = 30.0,
    ) -> None:
        self.group = group
        self.client_config = dict(client_config)
        self.run_id = run_id or uuid.uuid4().hex
        self.client_factory = client_factory
        self.timeout_s = timeout_s
        self.commits = 0
        self.last: PartitionOffsets | None = None
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles stream readers (their read() runs on executors): never a live client
        state = self.__dict__.copy()
        state["_client"] = None
        return state

    def commit(self, offsets: Mapping[TopicPartition, int]) -> bool:
        """Commit `offsets` (next offset to read per partition) unless they were the last ones committed.
        Returns whether a commit was sent and accepted for every partition."""
        if not offsets or self.last == dict(offsets):
            return False
        metadata = query_metadata(self.run_id, self.commits + 1)
        request = [KafkaTopicPartition(t, p, int(o), metadata=metadata) for (t, p), o in sorted(offsets.items())]
        try:
            if self._client is None:
                self._client = self.client_factory(self.client_config, self.group)
            answer = self._client.commit(offsets=request, asynchronous=False)
        except KafkaException as e:
            log.warning("commitOffsetsToGroup: committing to group %r failed: %s", self.group, e)
            return False
        failed = [tp for tp in answer or [] if tp.error is not None]
        if failed:
            log.warning(
                "commitOffsetsToGroup: group %r refused %s",
                self.group,
                ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed),
            )
            return False
        self.commits += 1
        self.last = dict(offsets)
        return True

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class GroupCommittingStreamReader(KafkaStreamReader):
    """KafkaStreamReader that also commits the processed offsets to `commit_group` (see the rules)."""

    def __init__(self, options: ReaderOptions, committer: GroupCommitter | None = None) -> None:
        super().__init__(options)
        if committer is None:
            if options.commit_group is None:
                raise ValueError("GroupCommittingStreamReader needs options.commit_group")
            committer = GroupCommitter(options.commit_group, options.client_config)
        self.group_committer = committer

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # `start` ends the last batch in Spark's commit log (or is where the query starts)
        self.group_committer.commit(from_checkpoint(start))
        return super().latestOffset(start, limit)

    def commit(self, end: dict) -> None:
        super().commit(end)
        self.group_committer.commit(from_checkpoint(end))

    def stop(self) -> None:
        try:
            self.group_committer.close()
        finally:
            super().stop()
