"""EmbeddedCluster.create_topic returns only once every running broker's own metadata has the topic with a
leader for each partition (the wait move_leader has), not once the one broker the admin client asked does:
without brokers, the admin client and each broker's Metadata answer stood in for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kaflite.server.embedded_cluster import EmbeddedCluster


class Admin:
    """The admin client: the topic created, and led in the metadata of the broker it asks."""

    def create_topics(self, topics: list[Any]) -> dict[str, Any]:
        return {t.topic: SimpleNamespace(result=lambda timeout: None) for t in topics}

    def list_topics(self, topic: str | None = None, timeout: float = 5.0) -> Any:
        parts = {p: SimpleNamespace(leader=1, replicas=[1, 2, 3]) for p in range(2)}
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=parts)})


def cluster(views: dict[int, list[dict[int, int]]]) -> tuple[EmbeddedCluster, list[int]]:
    """A cluster whose broker b answers Metadata with views[b] in turn (the last one for ever after)."""
    c = EmbeddedCluster.__new__(EmbeddedCluster)
    asked: list[int] = []
    admin = Admin()

    def leaders_on(broker_id: int, topic: str) -> dict[int, int]:
        asked.append(broker_id)
        seq = views[broker_id]
        return seq.pop(0) if len(seq) > 1 else seq[0]

    c._admin = lambda: admin  # type: ignore[method-assign]
    c._running = lambda: sorted(views)  # type: ignore[method-assign]
    c._leaders_on = leaders_on  # type: ignore[method-assign]
    return c, asked


def test_create_topic_waits_for_every_running_brokers_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda _s: None)
    led = {0: 1, 1: 2}
    # broker 3 has not seen the topic at first, then has it with no leader for partition 1, then led
    c, asked = cluster({1: [led], 2: [led], 3: [{}, {0: 1, 1: -1}, led]})
    c.create_topic("t", 2, 3)
    assert asked.count(3) == 3  # returned only once broker 3's own metadata had both partitions led
    assert {1, 2} <= set(asked)


def test_create_topic_times_out_naming_the_lagging_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda _s: None)
    c, _asked = cluster({1: [{0: 1}], 2: [{}]})
    with pytest.raises(TimeoutError, match=r"brokers \[2\]"):
        c.create_topic("t", 1, 2, timeout=0.05)
