"""Share-group membership survives the coordinator (docs/share-groups.md, "Durable membership"): written to
`__consumer_offsets` (Kafka's share-group records) before a heartbeat is answered, replayed when the broker
starts again, a failed write answered with the runtime's error and changing nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i8, i32

from groups.coord_wire import full_disk
from groups.test_share_wire import Member, new_topic
from helpers import free_port
from kaflite.coordinator import partition_for
from kaflite.protocol.errors import ErrorCode
from kaflite.server.embedded import EmbeddedBroker
from server.kwire import WireClient

SESSION_MS = 3000
OVERRIDES = {"group.share.session.timeout.ms": str(SESSION_MS)}


def _describe(b: EmbeddedBroker, group: str) -> Any:
    with WireClient(b.bootstrap) as c:
        (g,) = c.request(ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)).groups
    return g


def _view(g: Any) -> tuple[int, int, str, dict[str, tuple[int, list[tuple[Any, list[int]]], tuple[str, ...]]]]:
    members = {m.member_id: (int(m.member_epoch), [(tp.topic_id, sorted(tp.partitions))
                                                   for tp in m.assignment.topic_partitions],
                             tuple(m.subscribed_topic_names)) for m in g.members}
    return int(g.group_epoch), int(g.assignment_epoch), g.group_state, members


def _listed(b: EmbeddedBroker) -> set[tuple[str, str, str]]:
    with WireClient(b.bootstrap) as c:
        r = c.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
    return {(g.group_id, g.group_type, g.group_state) for g in r.groups}


def _heartbeat(m: Member, epoch: int) -> Any:
    return m.client.request(ShareGroupHeartbeatRequest(group_id=m.group, member_id=m.member_id,
                                                       member_epoch=i32(epoch), subscribed_topic_names=None))


def test_a_restart_keeps_the_group_its_epochs_and_members(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    with EmbeddedBroker(data_dir=data, port=port, overrides=OVERRIDES) as b:
        topic, tid = new_topic(b, 2)
        a, m2 = Member(b, "keep-members", [topic]), Member(b, "keep-members", [topic])
        a.heartbeat()  # a moves to epoch 2: one partition each
        gone = Member(b, "keep-members", [topic])
        assert _heartbeat(gone, gone.epoch).error_code == 0
        assert _heartbeat(gone, -1).error_code == 0  # left: its records are tombstones
        a.heartbeat()
        m2.heartbeat()
        before = _view(_describe(b, "keep-members"))
        assert before[0] == 4 and before[2] == "Stable" and set(before[3]) == {a.member_id, m2.member_id}
        for m in (a, m2, gone):
            m.close()
    with EmbeddedBroker(data_dir=data, port=port, overrides=OVERRIDES) as b:
        # before any member is back: listed and described as written
        assert ("keep-members", "share", "Stable") in _listed(b)
        assert _view(_describe(b, "keep-members")) == before
        # a member heartbeating with its epoch of before the restart is accepted, nothing bumped
        again = Member.__new__(Member)
        again.client, again.group, again.member_id = WireClient(b.bootstrap), "keep-members", a.member_id
        r = _heartbeat(again, 4)
        assert (r.error_code, int(r.member_epoch)) == (0, 4)
        assert _view(_describe(b, "keep-members")) == before
        assert _heartbeat(again, 3).error_code == ErrorCode.fenced_member_epoch  # epochs are checked as before
        assert _heartbeat(again, -1).error_code == 0
        again.member_id = m2.member_id
        assert _heartbeat(again, -1).error_code == 0
        with WireClient(b.bootstrap) as c:  # empty now: deleted, its records tombstoned
            assert c.request(DeleteGroupsRequest(groups_names=("keep-members",))).results[0].error_code == 0
        again.client.close()
    with EmbeddedBroker(data_dir=data, port=port, overrides=OVERRIDES) as b:
        assert "keep-members" not in {g for g, _t, _s in _listed(b)}
        assert _describe(b, "keep-members").error_code == ErrorCode.group_id_not_found


def test_a_member_that_never_comes_back_expires_a_session_timeout_after_the_load(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    with EmbeddedBroker(data_dir=data, port=port, overrides=OVERRIDES) as b:
        topic, _tid = new_topic(b, 1)
        stays, lost = Member(b, "expire-after-load", [topic]), Member(b, "expire-after-load", [topic])
        stays.heartbeat()
        ids = (stays.member_id, lost.member_id)
        stays.close()
        lost.close()
    with EmbeddedBroker(data_dir=data, port=port, overrides=OVERRIDES) as b:
        loaded = time.monotonic()
        assert set(_view(_describe(b, "expire-after-load"))[3]) == set(ids)
        back = Member.__new__(Member)
        back.client, back.group, back.member_id = WireClient(b.bootstrap), "expire-after-load", ids[0]
        epoch = 2
        while time.monotonic() - loaded < SESSION_MS / 1000 + 1:
            r = _heartbeat(back, epoch)
            assert r.error_code == 0
            epoch = int(r.member_epoch)
            time.sleep(0.3)
        epoch, _ae, _state, members = _view(_describe(b, "expire-after-load"))
        assert set(members) == {ids[0]} and epoch == 3  # the lost member expired: the group epoch moved
        back.client.close()
    with EmbeddedBroker(data_dir=data, port=port, overrides=OVERRIDES) as b:  # the expiry was written
        epoch, _ae, _state, members = _view(_describe(b, "expire-after-load"))
        assert set(members) == {ids[0]} and epoch == 3


def test_a_failed_write_answers_the_error_and_changes_nothing(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path / "data", overrides=OVERRIDES) as b:
        topic, _tid = new_topic(b, 1)
        group = "failed-write-g"
        with WireClient(b.bootstrap) as c:  # as a client does first: the group coordinator starts
            (found,) = c.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,))).coordinators
            assert found.error_code == 0
        a = Member(b, group, [topic])
        before = _view(_describe(b, group))
        with full_disk(b, partition_for(group)) as refused:
            joining = Member(b, group, [topic])
            assert joining.last.error_code == ErrorCode.not_coordinator and refused
            assert _view(_describe(b, group)) == before  # the member that could not be written is not in
            assert _heartbeat(a, -1).error_code == ErrorCode.not_coordinator  # a leave that was not written
        assert _view(_describe(b, group)) == before  # ... left nothing behind either
        assert _heartbeat(a, a.epoch).error_code == 0
        a.close()
        joining.close()


def test_many_joins_then_a_restart_give_the_same_group(tmp_path: Path) -> None:
    """Writes in part (each heartbeat writes its member's records and the targets its join moved, not the
    group's: share_membership's rules): 25 members join one at a time, after each join only the 3 members
    before it heartbeat (the others stay at older epochs), one leaves; a restart replays the records into
    the same group, every member's epoch and assignment as described before."""
    data, port = tmp_path / "data", free_port()
    overrides = {"group.share.session.timeout.ms": "120000"}  # nobody expires while the others join
    with EmbeddedBroker(data_dir=data, port=port, overrides=overrides) as b:
        topic, _tid = new_topic(b, 4)
        client = WireClient(b.bootstrap)
        members: list[Member] = []
        for i in range(25):
            m = Member.__new__(Member)
            m.client, m.group, m.member_id, m.epoch, m.assignment = client, "many-joins", f"m-{i:02d}", 0, []
            assert m.heartbeat([topic]).error_code == 0
            for other in members[-3:]:
                assert other.heartbeat().error_code == 0
            members.append(m)
        assert _heartbeat(members[7], -1).error_code == 0
        before = _view(_describe(b, "many-joins"))
        epochs = {epoch for epoch, _a, _s in before[3].values()}
        assert len(before[3]) == 24 and len(epochs) > 6 and before[2] == "Reconciling"  # epochs of all ages
        client.close()
    with EmbeddedBroker(data_dir=data, port=port, overrides=overrides) as b:
        assert _view(_describe(b, "many-joins")) == before
