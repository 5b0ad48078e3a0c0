"""`cluster status`'s summary (offline / under-replicated) and leader-election's JSON file, without sockets;
the options leader-election refuses before connecting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kaflite.cli.cluster_status import status_lines, summarize
from kaflite.cli.common import CliFailure
from kaflite.cli.leader_election_cmd import parse_partitions_json


def _metadata() -> SimpleNamespace:
    def part(pid: int, leader: int, replicas: list[int], isr: list[int]) -> SimpleNamespace:
        return SimpleNamespace(id=pid, leader=leader, replicas=replicas, isrs=isr)

    return SimpleNamespace(
        cluster_id="c1",
        controller_id=2,
        brokers={0: SimpleNamespace(id=0, host="h", port=1), 2: SimpleNamespace(id=2, host="h", port=3)},
        topics={
            "b": SimpleNamespace(partitions={0: part(0, 0, [0, 1, 2], [0, 1, 2]), 1: part(1, -1, [1], [1])}),
            "a": SimpleNamespace(partitions={1: part(1, 2, [1, 2, 0], [2, 0]), 0: part(0, 0, [0, 2], [0, 2])}),
        },
    )


def test_summary_counts_offline_once_and_under_replicated_by_isr_size() -> None:
    st = summarize(_metadata())
    assert st.controller == 2 and st.brokers == {0: "h:1", 2: "h:3"}
    assert (st.topics, st.partitions) == (2, 4)
    assert [(p.topic, p.partition) for p in st.offline] == [("b", 1)]
    assert [(p.topic, p.partition) for p in st.under_replicated] == [("a", 1)]
    lines = status_lines(st)
    assert "Offline partitions: 1" in lines and "Under-replicated partitions: 1" in lines
    assert "\tTopic: b\tPartition: 1\tLeader: none\tReplicas: 1\tIsr: 1" in lines
    assert "\tTopic: a\tPartition: 1\tLeader: 2\tReplicas: 1,2,0\tIsr: 2,0" in lines


def test_no_controller_is_none() -> None:
    md = _metadata()
    md.controller_id = -1
    assert summarize(md).controller is None
    assert "Controller: none" in status_lines(summarize(md))


def test_election_json_file() -> None:
    text = '{"partitions": [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 3}]}'
    assert parse_partitions_json(text, "f.json") == [("t", 0), ("u", 3)]
    for bad, why in [
        ("{", "not JSON"),
        ('{"partition": []}', "expected"),
        ('{"partitions": [{"topic": "t"}]}', "partitions[0]"),
        ('{"partitions": [{"topic": "t", "partition": -1}]}', "partitions[0]"),
        ('{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}', "duplicate"),
        ('{"partitions": []}', "empty"),
    ]:
        with pytest.raises(CliFailure) as err:
            parse_partitions_json(bad, "f.json")
        assert why in err.value.message and err.value.code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "t", "--partition", "0"], "missing --election-type (allowed: PREFERRED, UNCLEAN)"),
        (["--election-type", "fast", "--all-topic-partitions"], "--election-type: expected PREFERRED or UNCLEAN"),
        (["--election-type", "preferred"], "give exactly one of"),
        (["--election-type", "preferred", "--all-topic-partitions", "--topic", "t"], "give exactly one of"),
        (["--election-type", "preferred", "--topic", "t"], "--topic and --partition go together"),
    ],
)
def test_leader_election_usage_errors(args: list[str], message: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "kaflite", "leader-election", *args, "-b", "127.0.0.1:1"],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, NO_COLOR="1"))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {message}") and len(proc.stderr.strip().splitlines()) == 1


def test_sigterm_during_a_status_poll_is_not_taken_for_a_failed_poll() -> None:
    # `cluster up` turns SIGTERM into _Stop from its signal handler, raised wherever the main thread is;
    # raised inside the status poll's librdkafka call it was caught as a failed poll and the cluster kept
    # running (tests/cluster/test_cluster_cli.py::test_cluster_up_stops_everything_on_sigterm, under load)
    import pytest

    from kaflite.cli.cluster_up import _fetch_status, _Stop

    class Admin:
        def list_topics(self, timeout: float) -> None:
            raise _Stop()

    with pytest.raises(_Stop):
        _fetch_status(Admin(), 1.0)

    class Down:
        def list_topics(self, timeout: float) -> None:
            raise RuntimeError("no broker answered")

    assert _fetch_status(Down(), 1.0) == (None, "no broker answered")
