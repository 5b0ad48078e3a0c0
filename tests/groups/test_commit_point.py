"""The commit point on the real replica path: a group step's answer leaves only once the high watermark of
its `__consumer_offsets` partition passed its records. A fake follower in the partition's ISR holds the
high watermark (as a follower that has not fetched yet would) until the test reports its fetch."""

from __future__ import annotations

import select
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka.admin as cka
import pytest
from kio.schema.offset_commit.v8.request import OffsetCommitRequest

from groups.coord_wire import answer_of, commit, commit_request, fetch
from groups.group_members import wait_for
from kaflite.coordinator import OFFSETS_TOPIC, partition_for
from kaflite.protocol.errors import ErrorCode
from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.replica import PartitionState, produce_key
from server.kwire import WireClient

FOLLOWER = 1


@pytest.fixture
def lagging(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    overrides = {"group.min.session.timeout.ms": "1000", "offsets.commit.timeout.ms": "1500"}
    with EmbeddedBroker(data_dir=tmp_path / "data", overrides=overrides) as b:
        yield b


def _partition(broker: EmbeddedBroker, p: int) -> Any:
    return broker.server.broker.replica_manager.get_partition(OFFSETS_TOPIC, p)


def add_follower(broker: EmbeddedBroker, p: int) -> None:
    """The partition gets a second replica, in the ISR, that has reported nothing: the HW stays put."""
    def apply() -> None:
        part = _partition(broker, p)
        st = part.state
        assert part.apply_state(PartitionState(st.leader, st.leader_epoch, st.partition_epoch + 1,
                                               (*st.replicas, FOLLOWER), (*st.isr, FOLLOWER)))
    broker.call(apply)


def follower_caught_up(broker: EmbeddedBroker, p: int) -> None:
    """What the follower's fetch does: report its log end offset, moving the HW, and wake the waiters."""
    def report() -> None:
        part = _partition(broker, p)
        part.update_follower_fetch_state(FOLLOWER, part.log_end_offset)
        broker.server.broker.purgatory.complete(produce_key(OFFSETS_TOPIC, p))
    broker.call(report)


def offsets_log(broker: EmbeddedBroker, p: int) -> tuple[int, int]:
    """(log end offset, high watermark) of the partition."""
    return broker.call(lambda: (_partition(broker, p).log_end_offset, _partition(broker, p).high_watermark))


def unanswered(client: WireClient) -> bool:
    readable, _, _ = select.select([client.sock], [], [], 0)
    return not readable


def test_commit_is_answered_only_when_the_high_watermark_passes_it(lagging: EmbeddedBroker) -> None:
    broker = lagging
    topic = "t"
    admin = cka.AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([cka.NewTopic(topic, 1, 1)])[topic].result(15)
    group = f"hw-{uuid.uuid4().hex[:8]}"
    p = partition_for(group)
    with WireClient(broker.bootstrap) as c:
        assert commit(c, group, topic, "", -1, 3) == ErrorCode.none  # a simple group: generation -1
        add_follower(broker, p)
        end, hw = offsets_log(broker, p)
        assert end == hw

        # written, not committed: no answer until the follower has it
        request: OffsetCommitRequest = commit_request(group, topic, "", -1, 5)
        corr = c.send(request)
        wait_for(lambda: offsets_log(broker, p) == (end + 1, hw), 10, "the commit written, the HW held")
        assert unanswered(c)
        follower_caught_up(broker, p)
        assert answer_of(c, request, corr).topics[0].partitions[0].error_code == ErrorCode.none
        assert fetch(c, group, topic) == (ErrorCode.none, 5)

        # the follower never gets this one: after offsets.commit.timeout.ms the commit fails as Kafka
        # maps a timeout, and no read reports the written-but-uncommitted offset
        assert commit(c, group, topic, "", -1, 9) == ErrorCode.coordinator_not_available
        code, offset = fetch(c, group, topic)
        assert offset != 9 and (code, offset) in {(ErrorCode.none, 5), (ErrorCode.not_coordinator, -1)}
        # once the follower has it, it is committed: reported from then on
        follower_caught_up(broker, p)
        wait_for(lambda: fetch(c, group, topic) == (ErrorCode.none, 9), 15, "the late commit reported")
