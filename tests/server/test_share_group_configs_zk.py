"""A cluster's share-group configs in ZooKeeper (handlers/share.py): /config/groups/<group> read at start-up
and on every /config/changes notification, applied on the event loop; IncrementalAlterConfigs of a GROUP
changes the znode by compare-and-set. ZooKeeper is faked here (the real one: tests/cluster/test_share_cluster.py
::test_a_group_config_altered_at_one_broker_applies_at_every_leader)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from kaflite.cluster.zk import ConfigChanged
from kaflite.coordinator.share.group import ShareGroupCoordinator
from kaflite.coordinator.share.partition import ShareConfig
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.coordinators.share_state import SHARE_COORDINATOR
from kaflite.server.handlers import share
from kaflite.server.services import BrokerServices


class FakeZk:
    def __init__(self, groups: dict[str, dict[str, str]]) -> None:
        self.groups = groups
        self.callbacks: list[Callable[[Any], None]] = []
        self.writes = 0
        self.down = False

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        assert entity_type == "groups"
        return dict(self.groups.get(name, {}))

    def get_children(self, path: str) -> list[str]:
        assert path == "/config/groups"
        return sorted(self.groups)

    def watch_config_changes(self, callback: Callable[[Any], None]) -> None:
        self.callbacks.append(callback)

    def update_entity_config(self, entity_type: str, name: str,
                             change: Callable[[dict[str, str]], dict[str, str]]) -> dict[str, str]:
        if self.down:
            raise ConnectionError("ZooKeeper is gone")
        new = change(self.get_entity_config(entity_type, name))
        self.groups[name] = new
        self.writes += 1
        return new


def broker_with(zk: FakeZk) -> Any:
    services = BrokerServices()
    services.set(SHARE_COORDINATOR, ShareGroupCoordinator(ShareConfig()))
    return SimpleNamespace(in_cluster=True, metadata_writer=SimpleNamespace(zk=zk), services=services)


async def _settle() -> None:
    for _ in range(5):  # what the worker / watch threads handed to the loop
        await asyncio.sleep(0.01)


def test_start_up_reads_every_group_then_every_notification_applies(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        zk = FakeZk({"a": {"share.auto.offset.reset": "earliest"}, "b": {"share.delivery.count.limit": "3"}})
        b = broker_with(zk)
        coord = b.services.get(SHARE_COORDINATOR)
        await share._watch_cluster_group_configs(b, zk)
        await _settle()
        assert coord.group_configs == {"a": {"share.auto.offset.reset": "earliest"},
                                       "b": {"share.delivery.count.limit": "3"}}
        assert len(zk.callbacks) == 1  # the watch was set before the znodes were read
        # another broker's changes: a notification names the group, the znode is read as it is then
        zk.groups["a"] = {}
        zk.groups["c"] = {"share.record.lock.duration.ms": "5000"}
        zk.groups["bad"] = {"share.delivery.count.limit": "99"}
        events = [ConfigChanged("groups", "a"), ConfigChanged("groups", "c"), ConfigChanged("topics", "b"),
                  ConfigChanged("groups", "bad")]
        thread = threading.Thread(target=lambda: [zk.callbacks[0](e) for e in events])  # ZooKeeper's thread
        thread.start()
        thread.join()
        await _settle()
        assert coord.group_configs == {"b": {"share.delivery.count.limit": "3"},
                                       "c": {"share.record.lock.duration.ms": "5000"}}
        assert coord.config_for("c").record_lock_duration_ms == 5000
        assert "/config/groups/bad" in caplog.text  # refused: the group keeps the broker's keys
    asyncio.run(main())


def test_alter_writes_the_znode_by_compare_and_set_and_refuses_whole() -> None:
    async def main() -> None:
        zk = FakeZk({"g": {"share.isolation.level": "read_committed"}})  # another broker's change
        b = broker_with(zk)
        coord = b.services.get(SHARE_COORDINATOR)

        def setting(key: str, value: str | None) -> Callable[[dict[str, str]], dict[str, str | None]]:
            return lambda current: {**current, key: value}
        await share.alter_group_configs(b, "g", setting("share.auto.offset.reset", "earliest"), False)
        assert zk.groups["g"] == {"share.isolation.level": "read_committed", "share.auto.offset.reset": "earliest"}
        assert coord.group_configs["g"] == zk.groups["g"]  # applied here once written
        await share.alter_group_configs(b, "g", setting("share.heartbeat.interval.ms", "7"), True)
        assert zk.writes == 1 and "share.heartbeat.interval.ms" not in zk.groups["g"]  # validate only
        with pytest.raises(KafkaError) as refused:
            await share.alter_group_configs(b, "g", setting("share.delivery.count.limit", "11"), False)
        assert refused.value.code is ErrorCode.invalid_config and zk.writes == 1
        await share.alter_group_configs(b, "g", setting("share.isolation.level", None), False)
        assert zk.groups["g"] == {"share.auto.offset.reset": "earliest"} == coord.group_configs["g"]
        zk.down = True
        with pytest.raises(KafkaError) as failed:
            await share.alter_group_configs(b, "g", setting("share.auto.offset.reset", "latest"), False)
        assert failed.value.code is ErrorCode.kafka_storage_error
        assert coord.group_configs["g"] == {"share.auto.offset.reset": "earliest"}  # nothing applied
    asyncio.run(main())
