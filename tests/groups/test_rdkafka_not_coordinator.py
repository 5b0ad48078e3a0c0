"""What a former group coordinator answers, and what librdkafka does with it.

When the leadership of a group's `__consumer_offsets` partition moves away, the broker drops the group's
shard (`on_resignation`, Kafka's onResignation) and answers the group's requests NOT_COORDINATOR until
the client finds the new coordinator. Here the shard of one broker is dropped and loaded again, which is
what the old coordinator does in a move A -> B -> A (tests/cluster/test_group_failover.py runs the real
move on three brokers):

- the answers are Kafka 3.8's (KafkaApis): OffsetFetch v8+ a group entry carrying the error and no topics,
  v2-v7 the top-level error and no topics; OffsetCommit the error on every partition;
- a librdkafka Consumer (group.id set, partitions assigned, never subscribed) gets NOT_COORDINATOR from
  commit() and committed(), and commits and reads again once the shard is loaded;
- librdkafka's AdminClient dies of SIGSEGV on the OffsetFetch answer in list_consumer_group_offsets: a
  librdkafka bug that Kafka's identical answer triggers too (docs/compatibility.md, "Client bugs").

The confluent_kafka clients run in a subprocess (`OffsetsClient`), so a crash fails a test instead of
killing pytest."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchV7
from kio.schema.offset_fetch.v7.request import OffsetFetchRequestTopic
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as OffsetFetchV9
from kio.schema.offset_fetch.v9.request import OffsetFetchRequestGroup
from kio.static.primitive import i32

from groups.coord_wire import commit, commit_request, fetch
from groups.rdkafka_offsets_client import OffsetsClient
from kaflite.protocol.errors import ErrorCode
from kaflite.server.coordinators.groups import GROUP_SERVICE
from server.kwire import WireClient

NOT_COORDINATOR = int(ErrorCode.not_coordinator)


def _service(broker: Any) -> Any:
    return broker.server.broker.services.get(GROUP_SERVICE)


@contextmanager
def resigned(broker: Any, group: str) -> Iterator[None]:
    """The group's shard dropped as at a resignation; loaded again (replaying its log) at the end."""
    partition = _service(broker).partition_for(group)
    broker.call(lambda: _service(broker).on_resignation(partition))
    try:
        yield
    finally:
        broker.call(lambda: _service(broker).on_election(partition))


def test_a_former_coordinator_answers_as_kafka(broker, topic_factory) -> None:  # noqa: ANN001
    topic = topic_factory(1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as c:
        assert commit(c, group, topic, "", -1, 5) is ErrorCode.none
        with resigned(broker, group):
            v9 = c.request(OffsetFetchV9(groups=(OffsetFetchRequestGroup(group_id=group, topics=None),)))
            assert [(g.group_id, g.topics, int(g.error_code)) for g in v9.groups] == [(group, (), NOT_COORDINATOR)]
            v7 = c.request(OffsetFetchV7(group_id=group, require_stable=False, topics=(
                OffsetFetchRequestTopic(name=topic, partition_indexes=(i32(0),)),)))
            assert (v7.topics, int(v7.error_code)) == ((), NOT_COORDINATOR)
            committed = c.request(commit_request(group, topic, "", -1, 6))
            assert [(t.name, [(int(p.partition_index), int(p.error_code)) for p in t.partitions])
                    for t in committed.topics] == [(topic, [(0, NOT_COORDINATOR)])]
        assert fetch(c, group, topic) == (ErrorCode.none, 5)


def test_a_librdkafka_consumer_survives_not_coordinator(broker, topic_factory, tmp_path: Path) -> None:  # noqa: ANN001
    topic = topic_factory(1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    client = OffsetsClient(broker.bootstrap, group, topic, tmp_path / "client.err")
    try:
        assert client.ask("commit 5") == "ok [[5, null]]"
        assert client.ask("committed") == "ok [[5, null]]"
        with resigned(broker, group):
            assert client.ask("commit 7") == f"error {NOT_COORDINATOR}"
            assert client.ask("committed") == f"error {NOT_COORDINATOR}"
        assert client.ask("committed") == "ok [[5, null]]"
        assert client.ask("commit 8") == "ok [[8, null]]"
        assert client.ask("committed") == "ok [[8, null]]"
    finally:
        rc = client.close()
    assert rc == 0, (rc, client.stderr.read_text()[-2000:])


# the last librdkafka release known to crash (the one CI installs at this writing); a later one must not
LAST_CRASHING = (2, 16)


def test_librdkafka_admin_list_offsets_on_not_coordinator(broker, topic_factory, tmp_path: Path) -> None:  # noqa: ANN001
    """The librdkafka bug, kept checkable: AdminClient.list_consumer_group_offsets on Kafka's
    NOT_COORDINATOR answer (test_a_former_coordinator_answers_as_kafka) calls rd_kafka_cgrp_op() on the
    admin handle's consumer group, which an AdminClient does not have (NULL): SIGSEGV up to librdkafka
    2.16 (issue #5040, open). With a later librdkafka the call must answer (an error or the offsets)
    and the client live on: if it still crashes, raise LAST_CRASHING and update docs/compatibility.md."""
    topic = topic_factory(1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    client = OffsetsClient(broker.bootstrap, group, topic, tmp_path / "client.err")
    try:
        assert client.ask("commit 5") == "ok [[5, null]]"
        assert client.ask("list") == f'ok [["{topic}", 0, 5]]'  # the coordinator found and cached
        with resigned(broker, group):
            answer = client.ask("list")
    finally:
        rc = client.close()
    version = confluent_kafka.libversion()[0]
    if tuple(int(x) for x in version.split(".")[:2]) <= LAST_CRASHING:
        assert (answer, rc) == ("", -signal.SIGSEGV), f"librdkafka {version} no longer crashes: update the docs"
    else:
        assert answer != "" and rc == 0, f"librdkafka {version} crashed (exit {rc}): see docs/compatibility.md"
