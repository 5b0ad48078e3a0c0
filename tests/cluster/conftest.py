"""Fixtures for the cluster tests: a real standalone ZooKeeper (Debian's jars, started from Java).

`zookeeper` is one server for the whole session (a JVM start costs about a second on this machine);
each test that uses `zk_connect` gets its own chroot under it, so tests never see each other's znodes.
`three_brokers` is brokers 1-3 shared by the tests of one module (in a chroot of the module), brought back
to health before each test (rebuilt from nothing when that fails: `SharedCluster`); `brokers` starts a
test's own. `three_members` shares members 1-3 (`python -m kaflite.cluster.member`, the control plane
alone) the same way; `members` starts a test's own.
Tests that stop or kill ZooKeeper itself use `zookeeper_private`. Every fixture is skipped, with the
reason, only where Java or ZooKeeper's jars are missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Generic, TypeVar

import pytest

from helpers import missing_zookeeper, require
from kaflite.cluster.zk import KafkaZkClient
from kaflite.cluster.zkserver import ZooKeeperServer


def _require_zookeeper() -> None:
    require(missing_zookeeper())


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    _require_zookeeper()
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zookeeper_private(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of this test alone (for tests that stop, kill or restart it)."""
    _require_zookeeper()
    server = ZooKeeperServer(tmp_path / "zookeeper")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """`zookeeper.connect` for this test: the shared server with a chroot of its own."""
    return f"{zookeeper.connect}/kaflite-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KafkaZkClient]:
    """A ZooKeeper client of this test, in this test's chroot, to observe and drive the cluster (its
    session outlives the brokers' shorter ones, so it sees their registrations come and go)."""
    c = KafkaZkClient(zk_connect, session_timeout_ms=10000)
    c.start()
    try:
        yield c
    finally:
        c.close()


class ClusterProcesses:
    """What the member and broker processes of a test cluster have in common: started by pid, one log file
    per broker id (appended to across restarts), and the way back to a whole cluster for a shared one."""

    log_prefix = ""  # the log of broker N is `<log_prefix>-N.log` in `directory`

    def __init__(self, connect: str, directory: Path, session_timeout_ms: int) -> None:
        self.connect = connect
        self.directory = directory
        self.session_timeout_ms = session_timeout_ms
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.started: list[subprocess.Popen[bytes]] = []  # every process, even one whose id was reused
        # broker -> where `log` starts reading: a test on a shared cluster sees only what its brokers logged
        # since it began (`mark_logs`), never an earlier test's line
        self.log_marks: dict[int, int] = {}

    def log(self, broker_id: int) -> str:
        """Broker `broker_id`'s log since `mark_logs` (the whole of it without a mark)."""
        with open(self.directory / f"{self.log_prefix}-{broker_id}.log", "rb") as f:
            f.seek(self.log_marks.get(broker_id, 0))
            return f.read().decode(errors="replace")

    def mark_logs(self) -> None:
        """From now on `log` starts at each log's present end."""
        for path in self.directory.glob(f"{self.log_prefix}-*.log"):
            broker_id = path.name.removeprefix(f"{self.log_prefix}-").removesuffix(".log")
            if broker_id.isdigit():
                self.log_marks[int(broker_id)] = path.stat().st_size

    def stop_all(self) -> None:
        """Stop every process this started, by pid (each kind its own way)."""
        raise NotImplementedError

    def kill_all(self) -> None:
        """SIGKILL every process still running (a cluster given up on)."""
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.procs.clear()

    def restore(
        self, zk: KafkaZkClient, ids: Sequence[int], restart: Callable[[int], object], timeout: float
    ) -> None:
        """Bring a shared cluster back to processes `ids`, all registered and a controller elected, whatever
        the test before did: resume a frozen one, stop one it added, `restart` one it stopped (once
        ZooKeeper has dropped the dead one's registration, which its session timeout bounds: a new process
        of the same id would be refused). Each wait is bounded."""
        from helpers import stop_process, wait_until

        for proc in self.started:  # one a test took out of `procs` to stop it, and failed before it exited
            if proc.poll() is None and all(proc is not p for p in self.procs.values()):
                os.kill(proc.pid, signal.SIGCONT)
                stop_process(proc, timeout=15)
        for broker_id, proc in list(self.procs.items()):
            if proc.poll() is not None:
                del self.procs[broker_id]
            elif broker_id not in ids:
                os.kill(proc.pid, signal.SIGCONT)
                stop_process(proc, timeout=15)
                del self.procs[broker_id]
            else:
                os.kill(proc.pid, signal.SIGCONT)  # a test that froze it and failed before resuming it
        missing = [b for b in ids if b not in self.procs]
        if missing:
            wait_until(
                f"the registrations of stopped brokers {missing} gone",
                lambda: not set(missing) & set(zk.get_broker_ids()),
                timeout=self.session_timeout_ms / 1000 + 10,
            )
            for broker_id in missing:
                restart(broker_id)
        wanted = sorted(ids)
        wait_until(
            f"brokers {wanted} registered",
            lambda: zk.get_broker_ids() == wanted,
            timeout=timeout,
            context=zk.get_broker_ids,
        )
        wait_until("a controller", zk.get_controller_id, timeout=timeout)


class MemberProcesses(ClusterProcesses):
    """Cluster members as real processes (`python -m kaflite.cluster.member`), stopped by pid."""

    log_prefix = "member"

    def start(self, broker_id: int, *extra: str) -> subprocess.Popen[bytes]:
        log = open(self.directory / f"member-{broker_id}.log", "ab")
        cmd = [
            sys.executable, "-m", "kaflite.cluster.member", "--broker-id", str(broker_id),
            "--zookeeper", self.connect, "--session-timeout-ms", str(self.session_timeout_ms),
            "--port", str(19000 + broker_id), *extra,
        ]  # fmt: skip
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self.procs[broker_id] = proc
        self.started.append(proc)
        return proc

    def ensure_healthy(self, zk: KafkaZkClient, ids: Sequence[int], timeout: float = 60.0) -> None:
        """`restore`: members `ids` registered, a controller (members hold no data: nothing else to wait
        for; a partition whose only ISR member was killed stays leaderless, as in Kafka, until it is back)."""
        self.restore(zk, ids, self.start, timeout)

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)  # a frozen one cannot handle SIGTERM
                except ProcessLookupError:
                    pass
                proc.terminate()
        for proc in self.started:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.procs.clear()


@pytest.fixture
def members(zk_connect: str, tmp_path: Path) -> Iterator[MemberProcesses]:
    m = MemberProcesses(zk_connect, tmp_path, session_timeout_ms=3000)
    try:
        yield m
    finally:
        m.stop_all()


class BrokerProcesses(ClusterProcesses):
    """kaflite brokers (`python -m kaflite.server`) joined to one ZooKeeper, each on its own free port and
    data directory, stopped by pid."""

    log_prefix = "broker"

    def __init__(self, connect: str, directory: Path, session_timeout_ms: int = 3000) -> None:
        super().__init__(connect, directory, session_timeout_ms)
        self.ports: dict[int, int] = {}

    def bootstrap(self, *ids: int) -> str:
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in (ids or sorted(self.procs)))

    def start(self, broker_id: int, *overrides: str, wait: bool = True) -> subprocess.Popen[bytes]:
        from helpers import free_port

        port = self.ports.setdefault(broker_id, free_port())
        cmd = [sys.executable, "-m", "kaflite.server", "--dev"]
        for kv in (
            f"broker.id={broker_id}",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            f"log.dirs={self.directory / f'broker-{broker_id}'}",
            f"zookeeper.connect={self.connect}",
            f"zookeeper.session.timeout.ms={self.session_timeout_ms}",
            "offsets.topic.replication.factor=1",  # most tests start fewer than 3 brokers; one that needs
            "transaction.state.log.replication.factor=1",  # replicated internal topics overrides these
            *overrides,
        ):
            cmd += ["--override", kv]
        log = open(self.directory / f"broker-{broker_id}.log", "ab")
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self.procs[broker_id] = proc
        self.started.append(proc)
        if wait:
            self.wait_listening(broker_id)
        return proc

    def start_registered(self, zk: KafkaZkClient, *ids: int, overrides: Sequence[str] = ()) -> None:
        """Start brokers `ids` (each listening, each with `overrides`) and wait until ZooKeeper lists
        exactly them as registered: the cluster a test begins with."""
        from helpers import wait_until

        for broker_id in ids:
            self.start(broker_id, *overrides)
        wanted = sorted(ids)
        wait_until(f"brokers {wanted} registered", lambda: zk.get_broker_ids() == wanted)

    def wait_listening(self, broker_id: int, timeout: float = 30.0) -> None:
        from helpers import wait_listening

        proc, port = self.procs[broker_id], self.ports[broker_id]
        wait_listening(proc, port, lambda: self.log(broker_id), timeout, name=f"broker {broker_id}")

    def ensure_healthy(
        self, zk: KafkaZkClient, ids: Sequence[int], overrides: Sequence[str] = (), timeout: float = 60.0
    ) -> None:
        """`restore` brokers `ids` (a stopped one restarted with `overrides`), then wait until every
        partition is led by one of them."""
        from helpers import wait_until

        self.restore(zk, ids, lambda broker_id: self.start(broker_id, *overrides), timeout)

        def offline() -> list[tuple[str, int]]:
            deleting = zk.get_topics_marked_for_deletion()
            partitions = []
            for topic in sorted(zk.get_all_topics() - deleting):
                got = zk.get_topic_assignment(topic)
                if got is not None:
                    partitions += [(topic, p) for p in got[0].partitions]
            states = zk.get_partition_states(partitions)
            return sorted(tp for tp, s in states.items() if s is None or s.leader not in ids)

        wait_until(
            "every partition led", lambda: not offline(), timeout=timeout, interval=0.2, context=offline
        )

    def kill(self, broker_id: int) -> None:
        proc = self.procs.pop(broker_id)
        proc.kill()
        proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                proc.terminate()
        for proc in self.started:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                # shown in pytest's warnings summary: a broker that needs SIGKILL is a product bug (a user's
                # `kill` would hang too) and 15 s of suite time, as a swallowed fetcher cancellation once was
                which = next((a for a in proc.args if str(a).startswith("broker.id=")), "?")
                warnings.warn(
                    f"broker pid {proc.pid} ({which!s}, logs in {self.directory}) did not exit within "
                    "15 s of SIGTERM: killed",
                    stacklevel=1,
                )
                proc.kill()
                proc.wait(10)
        self.procs.clear()


@pytest.fixture
def brokers(zk_connect: str, tmp_path: Path) -> Iterator[BrokerProcesses]:
    b = BrokerProcesses(zk_connect, tmp_path)
    try:
        yield b
    finally:
        b.stop_all()


ProcessesT = TypeVar("ProcessesT", bound=ClusterProcesses)


class SharedCluster(Generic[ProcessesT]):
    """The processes of a cluster shared by the tests of one module, in a ZooKeeper chroot of its own, and
    a ZooKeeper client there. `whole` hands it to the next test whole; when it cannot be made whole (a
    test left something `ensure_healthy` does not undo) it is rebuilt from nothing in a new chroot, with a
    warning naming what was wrong, so one broken test does not fail every test after it."""

    def __init__(
        self,
        zookeeper: ZooKeeperServer,
        tmp_path_factory: pytest.TempPathFactory,
        make: Callable[[str, Path], ProcessesT],
    ) -> None:
        self._zookeeper = zookeeper
        self._tmp_path_factory = tmp_path_factory
        self._make = make
        self.rebuilds = 0
        self.procs, self.zk = self._new()

    def _new(self) -> tuple[ProcessesT, KafkaZkClient]:
        connect = f"{self._zookeeper.connect}/kaflite-module-{uuid.uuid4().hex[:12]}"
        procs = self._make(connect, self._tmp_path_factory.mktemp("shared"))
        zk = KafkaZkClient(connect, session_timeout_ms=10000)
        zk.start()
        return procs, zk

    def whole(self, ensure: Callable[[ProcessesT, KafkaZkClient], None]) -> ProcessesT:
        """`ensure` (each of its waits bounded) on this cluster, or on a new one if it fails here."""
        try:
            ensure(self.procs, self.zk)
        except Exception as e:  # a wait timed out, or ZooKeeper refused: rebuilt all the same
            warnings.warn(
                f"the shared cluster in {self.procs.directory} was not whole ({e}): rebuilt", stacklevel=1
            )
            self.close(kill=True)
            self.procs, self.zk = self._new()
            self.rebuilds += 1
            ensure(self.procs, self.zk)
        self.procs.mark_logs()
        return self.procs

    def close(self, kill: bool = False) -> None:
        """Stop every process (SIGKILL when `kill`: a cluster given up on, its shutdown not under test)."""
        self.zk.close()
        if kill:
            self.procs.kill_all()
        self.procs.stop_all()


@pytest.fixture(scope="module")
def _module_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedCluster[BrokerProcesses]]:
    """The brokers and a ZooKeeper client behind `three_brokers`; the brokers start at the first test
    that asks for them."""
    shared = SharedCluster(zookeeper, tmp_path_factory, BrokerProcesses)
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def three_brokers(
    request: pytest.FixtureRequest, _module_cluster: SharedCluster[BrokerProcesses]
) -> BrokerProcesses:
    """Brokers 1, 2 and 3 (`BrokerProcesses`' defaults) shared by the tests of one module: three broker
    starts and stops a test, most of a cluster test's time on 2 cores, once a module instead. Each test
    begins on a healthy cluster (`ensure_healthy`: what an earlier test stopped or froze is back, every
    partition led; rebuilt when that fails) and sees only its own part of the brokers' logs; it names its
    own topics and groups. A test that needs a fresh cluster (other broker settings, ZooKeeper state such
    as the producer id block counted from zero, the whole cluster stopped) keeps `brokers`. A module's
    THREE_BROKERS_OVERRIDES (`--override`s) apply to every start of them, its tests' restarts giving the
    same."""
    overrides = getattr(request.module, "THREE_BROKERS_OVERRIDES", ())
    return _module_cluster.whole(lambda b, c: b.ensure_healthy(c, (1, 2, 3), overrides=overrides))


@pytest.fixture
def three_brokers_zk(
    three_brokers: BrokerProcesses, _module_cluster: SharedCluster[BrokerProcesses]
) -> KafkaZkClient:
    """A ZooKeeper client in `three_brokers`' chroot (as `zk` is in a test's own)."""
    return _module_cluster.zk


@pytest.fixture(scope="module")
def _module_members(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedCluster[MemberProcesses]]:
    """The members and a ZooKeeper client behind `three_members`."""
    shared = SharedCluster(
        zookeeper, tmp_path_factory, lambda c, d: MemberProcesses(c, d, session_timeout_ms=3000)
    )
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def three_members(_module_members: SharedCluster[MemberProcesses]) -> MemberProcesses:
    """Members 1, 2 and 3 (3 s sessions) shared by the tests of one module, as `three_brokers` shares
    brokers: each test begins with the three registered and a controller elected (`ensure_healthy`: a
    killed one restarted, a frozen one resumed; rebuilt when that fails), sees only its own part of their
    logs and names its own topics. A test may kill or freeze members; one that needs the cluster's first
    election (controller epoch 1) or starts a member of a live id keeps `members`."""
    return _module_members.whole(lambda m, c: m.ensure_healthy(c, (1, 2, 3)))


@pytest.fixture
def three_members_zk(
    three_members: MemberProcesses, _module_members: SharedCluster[MemberProcesses]
) -> KafkaZkClient:
    """A ZooKeeper client in `three_members`' chroot."""
    return _module_members.zk
