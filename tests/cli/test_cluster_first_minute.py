"""The cluster's first minute without ZooKeeper: finding a running `cluster up` from its cluster.env, and a
group command that cannot find a coordinator saying why (kaflite.cli.coordinator_check). The real
`cluster up` (its export line, cluster.env, internal topics) is tests/cluster/test_cluster_cli.py."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kaflite.cli.cluster_up import cluster_env_text
from kaflite.cli.common import read_cluster_env, running_cluster_bootstrap
from kaflite.cli.coordinator_check import coordinator_problem, offsets_topic_verdict


def test_offsets_topic_verdict() -> None:
    assert offsets_topic_verdict(2, 3, False, []) == (
        "the group coordinator is unavailable: __consumer_offsets needs 3 live brokers "
        "(offsets.topic.replication.factor), 2 are registered")
    assert offsets_topic_verdict(3, 3, False, []) is None  # it will be created on the next request
    assert offsets_topic_verdict(1, None, False, []) is None  # nothing claimed that was not read
    assert offsets_topic_verdict(3, None, True, []) is None
    assert "2 partition(s) of __consumer_offsets have no leader (4, 7)" in str(
        offsets_topic_verdict(1, None, True, [4, 7]))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_running_cluster_up_is_found_by_its_env_file_and_a_stale_one_ignored(tmp_path: Path,
                                                                               cli_bootstrap: str) -> None:
    env = tmp_path / "cluster.env"
    assert running_cluster_bootstrap(env) is None  # no file
    env.write_text(cluster_env_text(cli_bootstrap, os.getpid()))
    assert read_cluster_env(env) == (cli_bootstrap, os.getpid())
    assert running_cluster_bootstrap(env) == cli_bootstrap
    env.write_text(cluster_env_text(cli_bootstrap, _dead_pid()))  # `cluster up` killed -9: file left
    assert running_cluster_bootstrap(env) is None
    env.write_text(cluster_env_text("127.0.0.1:1", os.getpid()))  # alive but nothing listens
    assert running_cluster_bootstrap(env) is None


def test_client_without_bootstrap_uses_the_running_cluster_and_says_so(tmp_path: Path, cli_bootstrap: str,
                                                                       kaflite_exe: Path) -> None:
    env = dict(os.environ)
    env.pop("KAFLITE_BOOTSTRAP", None)
    (tmp_path / "kaflite-cluster").mkdir()
    (tmp_path / "kaflite-cluster" / "cluster.env").write_text(cluster_env_text(cli_bootstrap, os.getpid()))
    found = subprocess.run([str(kaflite_exe), "topics", "list"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    assert found.stderr.strip() == ("note: using the cluster started by `kaflite cluster up` "
                                    f"(kaflite-cluster/cluster.env): {cli_bootstrap}")
    # an explicit bootstrap (option or KAFLITE_BOOTSTRAP) wins, without a note
    given = subprocess.run([str(kaflite_exe), "topics", "list"], cwd=tmp_path, capture_output=True, text=True,
                           env=dict(env, KAFLITE_BOOTSTRAP=cli_bootstrap), timeout=60)
    assert given.returncode == 0 and given.stderr == "", given.stderr


class _Future:
    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error

    def result(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class _TwoOfThree:
    """An AdminClient of a cluster with 2 brokers registered, __consumer_offsets (RF 3) not created, and a
    DescribeGroups that gets no answer: what a group command sees after an early broker loss."""

    def list_topics(self, timeout: float = 0) -> Any:
        return SimpleNamespace(brokers={0: None, 2: None}, topics={"orders": SimpleNamespace(error=None)})

    def describe_configs(self, resources: list[Any], request_timeout: float = 0) -> dict[Any, _Future]:
        entries = {"offsets.topic.replication.factor": SimpleNamespace(value="3"),
                   "zookeeper.connect": SimpleNamespace(value="127.0.0.1:2181")}
        return {resources[0]: _Future(entries)}

    def describe_consumer_groups(self, groups: list[str], request_timeout: float = 0) -> dict[str, _Future]:
        return {groups[0]: _Future(error=concurrent.futures.TimeoutError())}


def test_group_command_without_coordinator_says_why(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    assert coordinator_problem(_TwoOfThree()) == (
        "the group coordinator is unavailable: __consumer_offsets needs 3 live brokers "
        "(offsets.topic.replication.factor), 2 are registered")
    monkeypatch.setattr("kaflite.cli.groups_cmd.admin_client", lambda bootstrap: _TwoOfThree())
    result = cli("groups", "describe", "--group", "g", "-b", "127.0.0.1:1", "--timeout", "0.2")
    assert result.exit_code == 1
    assert result.stderr.strip() == ("error: describing group 'g': the group coordinator is unavailable: "
                                     "__consumer_offsets needs 3 live brokers (offsets.topic.replication.factor), "
                                     "2 are registered")


def test_single_node_is_not_blamed(cli_bootstrap: str) -> None:
    """kaflite's single node says offsets.topic.replication.factor=3 but creates the topic with 1 replica."""
    from confluent_kafka.admin import AdminClient

    assert coordinator_problem(AdminClient({"bootstrap.servers": cli_bootstrap})) is None


class _Exited:
    def poll(self) -> int:
        return -9


def test_cluster_up_table_shows_a_broker_restarted_by_hand_as_up(tmp_path: Path) -> None:
    """Its process (started by cluster up) exited, but broker 1 is registered again and listening: up."""
    import socket

    from kaflite.cli.cluster_status import ClusterStatus
    from kaflite.cli.cluster_up import BrokerProcess, LocalCluster

    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        closed.bind(("127.0.0.1", 0))
        cluster = LocalCluster(tmp_path, 2)
        cluster.brokers = [BrokerProcess(0, closed.getsockname()[1], _Exited(), tmp_path / "b0.log"),  # type: ignore[arg-type]
                           BrokerProcess(1, listening.getsockname()[1], _Exited(), tmp_path / "b1.log")]  # type: ignore[arg-type]
        status = ClusterStatus(cluster_id="c", controller=1, brokers={0: "127.0.0.1:1", 1: "127.0.0.1:2"},
                               topics=0, partitions=0, offline=[], under_replicated=[])
        states = [state for _bid, _addr, state in cluster.broker_states(status)]
    assert states == ["down (exit -9)", "up (restarted by hand)"]
