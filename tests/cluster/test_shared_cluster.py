"""The cluster a module's tests share (`SharedCluster` of cluster/conftest.py, behind `three_brokers` and
`three_members`), on real members and a real ZooKeeper: a test that leaves it in a state `ensure_healthy`
cannot undo (here a fourth registration that never goes away) gets the next test a cluster rebuilt from
nothing in a new chroot, whole, with a warning naming what was wrong, rather than a failure of every later
test of the module; one it can undo (a member stopped, one frozen) is restored in place."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from cluster.conftest import MemberProcesses, SharedCluster
from kaflite.cluster.zk import KafkaZkClient
from kaflite.cluster.zkdata import BrokerInfo, ZkEndpoint
from kaflite.cluster.zkserver import ZooKeeperServer

SHORT_S = 1.0  # the wait for the registrations once broker 7's is there (it never goes): then the rebuild


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_restored_in_place_or_rebuilt(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    shared = SharedCluster(
        zookeeper, tmp_path_factory, lambda c, d: MemberProcesses(c, d, session_timeout_ms=3000)
    )
    patience = {"timeout": 60.0}  # each wait of ensure_healthy (member starts are slow on a loaded machine)

    def ensure(m: MemberProcesses, zk: KafkaZkClient) -> None:
        m.ensure_healthy(zk, (1, 2, 3), timeout=patience["timeout"] if shared.rebuilds == 0 else 60.0)

    try:
        first = shared.whole(ensure)
        assert shared.zk.get_broker_ids() == [1, 2, 3]
        # what ensure_healthy undoes: a member stopped, one frozen
        gone, frozen = first.procs[1], first.procs[2]
        gone.terminate()  # (its session closes with it: no session timeout to wait for here)
        gone.wait(10)
        os.kill(frozen.pid, signal.SIGSTOP)
        assert shared.whole(ensure) is first and shared.rebuilds == 0
        assert shared.zk.get_broker_ids() == [1, 2, 3] and not _stopped(frozen.pid)
        assert first.procs[1] is not gone and first.procs[2] is frozen

        # what it does not: a registration of broker 7 that lives as long as the shared client's session
        shared.zk.register_broker(BrokerInfo(7, (ZkEndpoint("PLAINTEXT", "127.0.0.1", 1),)))
        old = list(first.started)
        patience["timeout"] = SHORT_S
        with pytest.warns(UserWarning, match=r"was not whole .*brokers \[1, 2, 3\] registered"):
            second = shared.whole(ensure)
        assert second is not first and second.connect != first.connect and shared.rebuilds == 1
        assert all(p.poll() is not None for p in old)  # the old cluster's processes are gone
        assert shared.zk.get_broker_ids() == [1, 2, 3]
        assert shared.zk.get_controller_id() in (1, 2, 3)
    finally:
        shared.close()
