"""A local ZooKeeper and N broker processes under one directory, started and stopped by pid: what
`kaflite cluster up` (cli/cluster_up.py, whose docstring states the rules) and the test kit's
`EmbeddedCluster` (server/embedded_cluster.py) both run, so there is one launcher.

A failure to start raises ClusterStartError (one line naming the process and its log); `cluster up`
turns it into its one-line refusal.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BrokerProcess", "ClusterStartError", "LocalCluster", "create_internal_topics"]

BROKER_STOP_TIMEOUT_S = 30.0  # controlled shutdown of every broker, together
BROKER_START_TIMEOUT_S = 60.0
INTERNAL_TOPICS_TIMEOUT_S = 60.0


class ClusterStartError(RuntimeError):
    """A process of the cluster did not start (the message names it and its log)."""


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    proc: subprocess.Popen[bytes]
    log: Path


class LocalCluster:
    """A ZooKeeper and N broker processes under one directory, stopped by pid."""

    def __init__(
        self, data_dir: Path, brokers: int, base_port: int | None = None, overrides: dict[str, str] | None = None
    ) -> None:
        self.data_dir = data_dir
        self.count = brokers
        self.base_port = base_port
        self.overrides = overrides or {}
        self.zookeeper: Any = None
        self.brokers: list[BrokerProcess] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    def pids(self) -> list[int]:
        out = [b.proc.pid for b in self.brokers]
        if self.zookeeper is not None and self.zookeeper.pid is not None:
            out.append(self.zookeeper.pid)
        return out

    def check_ports(self) -> None:
        """Before anything starts: a port taken by another process would pass for a listening broker."""
        if self.base_port is not None:
            for i in range(self.count):
                if not _port_free(self.base_port + i):
                    raise ClusterStartError(
                        f"--base-port: 127.0.0.1:{self.base_port + i} (broker {i}) is already in use")

    def start(self, say: Any = print) -> None:
        from kaflite.cluster.zkserver import ZooKeeperServer, ZooKeeperStartError

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.zookeeper = ZooKeeperServer(self.data_dir / "zookeeper")
        try:
            self.zookeeper.start()
        except ZooKeeperStartError as err:
            self.zookeeper = None
            raise ClusterStartError(f"cannot start ZooKeeper: {err}") from None
        say(f"ZooKeeper on {self.zookeeper.connect} (pid {self.zookeeper.pid}, log {self.zookeeper.log_path})")
        from kaflite.cluster.zkserver import _free_port

        for i in range(self.count):
            port = self.base_port + i if self.base_port is not None else _free_port("127.0.0.1")
            self.brokers.append(self._start_broker(i, port))
        for b in self.brokers:
            self._wait_listening(b)
            say(f"broker {b.broker_id} on 127.0.0.1:{b.port} (pid {b.proc.pid}, log {b.log})")

    def _start_broker(self, broker_id: int, port: int) -> BrokerProcess:
        settings = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(self.data_dir / f"broker-{broker_id}"),
            "zookeeper.connect": self.zookeeper.connect,
            # Kafka's default of 3 replicas for the coordinators' internal topics, or one per broker when
            # there are fewer (Kafka would never create them: no group and no transaction could run)
            "offsets.topic.replication.factor": str(min(3, self.count)),
            "transaction.state.log.replication.factor": str(min(3, self.count)),
            **self.overrides,
        }
        cmd = [sys.executable, "-m", "kaflite.server", "--dev"]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        log_path = self.data_dir / f"broker-{broker_id}.log"
        log = open(log_path, "ab")
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        return BrokerProcess(broker_id, port, proc, log_path)

    def _wait_listening(self, b: BrokerProcess) -> None:
        import socket

        deadline = time.monotonic() + BROKER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if b.proc.poll() is not None:
                tail = _last_line(b.log)
                raise ClusterStartError(f"broker {b.broker_id} exited with code {b.proc.returncode} while starting: "
                                        f"{tail} (see {b.log})")
            try:
                socket.create_connection(("127.0.0.1", b.port), 0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise ClusterStartError(f"broker {b.broker_id} did not listen on 127.0.0.1:{b.port} within "
                                f"{BROKER_START_TIMEOUT_S:g} s (see {b.log})")

    def stop(self, say: Any = print) -> None:
        """Brokers by SIGTERM (controlled shutdown), together, bounded; then ZooKeeper. Idempotent."""
        for b in self.brokers:
            if b.proc.poll() is None:
                b.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + BROKER_STOP_TIMEOUT_S
        for b in self.brokers:
            try:
                b.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"broker {b.broker_id} did not stop within {BROKER_STOP_TIMEOUT_S:g} s: killed")
                b.proc.kill()
                b.proc.wait(10)
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def broker_states(self, status: Any) -> list[tuple[int, str, str]]:
        """(id, address, state) per started broker (`status`: cli.cluster_status.ClusterStatus or None): up (registered), starting (alive, not in Metadata),
        down (exited); a broker whose process exited but that is registered again and listening on its port
        was restarted by hand: "up (restarted by hand)" (Ctrl-C does not stop that one)."""
        out = []
        for b in self.brokers:
            code = b.proc.poll()
            registered = status is not None and b.broker_id in status.brokers
            if code is None:
                state = "up" if registered else "not registered"
            elif registered and _listening(b.port):
                state = "up (restarted by hand)"
            else:
                state = f"down (exit {code})"
            out.append((b.broker_id, f"127.0.0.1:{b.port}", state))
        return out


def _listening(port: int) -> bool:
    """Something accepts TCP on 127.0.0.1:port (a connect, not a bind: a bind fails in TIME_WAIT too)."""
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return lines[-1].strip() if lines else "(empty log)"


def create_internal_topics(cluster: LocalCluster, say: Any, admin_config: dict[str, Any] | None = None) -> None:
    """Wait until every broker is registered, then have `__consumer_offsets` and `__transaction_state`
    created (a FindCoordinator of each key type, until answered): with all brokers alive their replication
    factor (3, or N below 3 brokers) can always be met. A failure is said, never fatal: the first client
    asks again, as in Kafka."""
    from confluent_kafka.admin import AdminClient
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
    from kio.static.primitive import i8

    from kaflite.cluster.wire import request

    admin = AdminClient(admin_config if admin_config is not None else {"bootstrap.servers": cluster.bootstrap})
    deadline = time.monotonic() + INTERNAL_TOPICS_TIMEOUT_S
    registered: set[int] = set()
    while time.monotonic() < deadline and len(registered) < cluster.count:
        try:
            registered = set(admin.list_topics(timeout=2).brokers)
        except Exception:  # noqa: BLE001 - not answering yet: asked again until the deadline
            pass
        if len(registered) < cluster.count:
            time.sleep(0.2)
    if len(registered) < cluster.count:
        say(f"internal topics not created: {len(registered)} of {cluster.count} brokers registered within "
            f"{INTERNAL_TOPICS_TIMEOUT_S:g} s; the first group or transaction will create them")
        return
    first = cluster.brokers[0]
    pending = {0: "__consumer_offsets", 1: "__transaction_state"}
    last = ""
    while pending and time.monotonic() < deadline:
        for key_type in list(pending):
            try:
                resp = request("127.0.0.1", first.port, FindCoordinatorRequest(
                    key_type=i8(key_type), coordinator_keys=("kaflite-cluster-up",)), FindCoordinatorResponse, 5.0)
                code = int(resp.coordinators[0].error_code)
                if code == 0:
                    del pending[key_type]
                else:
                    last = f"error code {code}"
            except (OSError, ConnectionError) as err:
                last = str(err)
        if pending:
            time.sleep(0.2)
    if pending:
        say(f"internal topics not created ({', '.join(pending.values())}: {last}); the first group or "
            "transaction will create them")
    else:
        say(f"internal topics __consumer_offsets and __transaction_state created "
            f"(replication factor {min(3, cluster.count)})")
