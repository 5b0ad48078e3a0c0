"""The nemesis's cluster: one ZooKeeper (root namespace, 127.0.0.1) and three `python -m kaflite.server`
brokers, each in its own network namespace when the machine allows it (see net.py), else on loopback.

Rules:
- every broker's Kafka listener is reached through a relay in the root namespace (its advertised address),
  and every broker reaches ZooKeeper through a relay of its own (relay.py): so one broker's traffic can be
  delayed and one broker can be cut off from ZooKeeper alone, which the kernel here cannot do (no netem,
  no iptables/nft); in namespaces the relays listen on the bridge, so an isolated broker reaches none;
- processes are started by us and stopped by pid (SIGCONT first, then SIGTERM, SIGKILL after a bound);
  `close` stops every process, relay, namespace and link this cluster made, even after a failure, and
  returns what it could not remove;
- the timeline (`events`) records every fault and heal with its time since the cluster started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kaflite.cluster.zk import KafkaZkClient
from kaflite.cluster.zkdata import LeaderAndIsr
from kaflite.cluster.zkserver import ZooKeeperServer

from .net import Namespaces, unavailable_reason
from .relay import Relay, RelayHub
from .workload import DATA_TOPICS, PARTITIONS, TXN_TOPIC

BROKERS = (1, 2, 3)
SESSION_TIMEOUT_MS = 3000
KAFKA_PORT = 9092  # inside a namespace every broker can use the same port


class Cluster:
    def __init__(self, directory: Path, unclean: bool = False, use_namespaces: bool = True) -> None:
        self.directory = directory
        self.unclean = unclean
        self.t0 = time.monotonic()
        self.events: list[tuple[float, str]] = []
        reason = unavailable_reason() if use_namespaces else "disabled by the caller"
        self.loopback_reason = reason
        self.net: Namespaces | None = None if reason else Namespaces(list(BROKERS), 20 + os.getpid() % 200)
        self.hub = RelayHub()
        self.zk_server = ZooKeeperServer(directory / "zookeeper")
        self.zk: KafkaZkClient | None = None
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.started: list[subprocess.Popen[bytes]] = []
        self.kafka_relay: dict[int, Relay] = {}
        self.zk_relay: dict[int, Relay] = {}
        self.loop_ports: dict[int, int] = {}
        self.closed = False

    # --- timeline -------------------------------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic() - self.t0

    def event(self, text: str) -> None:
        self.events.append((self.now(), text))
        print(f"[nemesis {self.now():7.2f}s] {text}", flush=True)

    # --- addresses --------------------------------------------------------------------------------------------
    @property
    def relay_host(self) -> str:
        return self.net.host_addr if self.net else "127.0.0.1"

    def broker_addr(self, b: int) -> tuple[str, int]:
        """Where broker b's listener is bound (its namespace address, or a loopback port)."""
        if self.net:
            return self.net.addr(b), KAFKA_PORT
        return "127.0.0.1", self.loop_ports[b]

    def bootstrap(self) -> str:
        return ",".join(f"{self.relay_host}:{self.kafka_relay[b].port}" for b in BROKERS)

    # --- start / stop -------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self.net is None:
            print(f"nemesis: loopback only, no isolation faults: {self.loopback_reason}", flush=True)
        else:
            self.net.setup()
        self.zk_server.start()
        self.zk = KafkaZkClient(f"127.0.0.1:{self.zk_server.port}", session_timeout_ms=20000)
        self.zk.start()
        for b in BROKERS:
            if self.net is None:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))
                    self.loop_ports[b] = int(s.getsockname()[1])
            self.kafka_relay[b] = self.hub.add(f"kafka-{b}", self.relay_host, self.broker_addr(b))
            self.zk_relay[b] = self.hub.add(f"zk-{b}", self.relay_host, ("127.0.0.1", self.zk_server.port))
        for b in BROKERS:
            self.start_broker(b)
        self.wait("all brokers registered", lambda: self.registered() == list(BROKERS), 60)
        self.event(f"cluster up ({'namespaces ' + self.net.tag if self.net else 'loopback'}), bootstrap "
                   f"{self.bootstrap()}")

    def start_broker(self, b: int) -> None:
        host, port = self.broker_addr(b)
        cmd = [*(self.net.exec_prefix(b) if self.net else []), sys.executable, "-m", "kaflite.server", "--dev"]
        for kv in (
            f"broker.id={b}",
            f"listeners=PLAINTEXT://{host}:{port}",
            f"advertised.listeners=PLAINTEXT://{self.relay_host}:{self.kafka_relay[b].port}",
            f"log.dirs={self.directory / f'broker-{b}'}",
            f"zookeeper.connect={self.relay_host}:{self.zk_relay[b].port}",
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
            "default.replication.factor=3",
            "offsets.topic.replication.factor=3",
            "offsets.topic.num.partitions=3",
            "transaction.state.log.replication.factor=3",
            "transaction.state.log.num.partitions=3",
            "transaction.state.log.min.isr=2",
            "replica.lag.time.max.ms=4000",
            "replica.fetch.backoff.ms=200",
            "unclean.leader.election.enable=false",  # the run enables it on one topic only
        ):
            cmd += ["--override", kv]
        with open(self.directory / f"broker-{b}.log", "ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs[b] = proc
        self.started.append(proc)
        self.wait(f"broker {b} listening", lambda: self._listening(b) or proc.poll() is not None, 30)
        if proc.poll() is not None:
            raise RuntimeError(f"broker {b} exited ({proc.returncode}): {self.log(b)[-2000:]}")

    def _listening(self, b: int) -> bool:
        try:
            socket.create_connection(self.broker_addr(b), 0.3).close()
            return True
        except OSError:
            return False

    def log(self, b: int) -> str:
        return (self.directory / f"broker-{b}.log").read_text(errors="replace")

    def close(self) -> list[str]:
        """Stop everything this cluster started; what could not be removed (empty when clean). A second
        call does nothing."""
        if self.closed:
            return []
        self.closed = True
        left: list[str] = []
        for proc in self.started:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
        for proc in self.started:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    left.append(f"process {proc.pid}")
        if self.zk is not None:
            with contextlib.suppress(Exception):
                self.zk.close()
        self.zk_server.stop()
        self.hub.close()
        if self.net is not None:
            left += self.net.teardown()
        return left

    # --- observation ---------------------------------------------------------------------------------------------
    def wait(self, what: str, cond: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if cond():
                return True
            time.sleep(0.1)
        return False

    def registered(self) -> list[int]:
        assert self.zk is not None
        try:
            return self.zk.get_broker_ids()
        except Exception:
            return []

    def controller(self) -> int | None:
        assert self.zk is not None
        try:
            return self.zk.get_controller_id()
        except Exception:
            return None

    def states(self, topics: tuple[str, ...] | None = None) -> dict[tuple[str, int], LeaderAndIsr | None]:
        assert self.zk is not None
        names = topics or (*sorted(DATA_TOPICS), TXN_TOPIC, "__consumer_offsets", "__transaction_state")
        tps = [(t, p) for t in names for p in range(PARTITIONS)]
        try:
            return dict(self.zk.get_partition_states(tps))
        except Exception:
            return dict.fromkeys(tps)

    def unhealthy(self) -> list[str]:
        """Why the cluster is not whole: a broker not registered, a partition without a leader or with
        a short ISR (empty when every broker is up and every partition led with its ISR full)."""
        out = [f"broker {b} not registered" for b in BROKERS if b not in self.registered()]
        for (t, p), s in sorted(self.states().items()):
            if s is None and t.startswith("__"):
                continue  # an internal topic is created on first use
            if s is None or s.leader < 0:
                out.append(f"{t}-{p} has no leader")
            elif sorted(s.isr) != list(BROKERS):
                out.append(f"{t}-{p} ISR {list(s.isr)}")
        return out

    def leaders(self) -> dict[tuple[str, int], int]:
        return {tp: s.leader for tp, s in self.states(tuple(sorted(DATA_TOPICS))).items() if s and s.leader > 0}

    def preferred_replica(self, topic: str, partition: int) -> int | None:
        assert self.zk is not None
        try:
            got = self.zk.get_topic_assignment(topic)
        except Exception:
            return None
        replicas = got[0].partitions.get(partition) if got else None
        return replicas[0] if replicas else None

    def preferred_election(self, topic: str, partition: int) -> bool:
        """Ask the controller for a preferred replica election of one partition (/admin/preferred_replica_election)."""
        assert self.zk is not None
        try:
            self.zk.create_preferred_replica_election([(topic, partition)])
        except Exception as e:
            self.event(f"preferred replica election of {topic}-{partition} not requested: {e}")
            return False
        self.event(f"preferred replica election of {topic}-{partition} requested")
        return True

    # --- faults (each records itself on the timeline) ---------------------------------------------------------
    def kill(self, b: int) -> None:
        proc = self.procs.pop(b)
        proc.kill()
        proc.wait(10)
        self.event(f"kill -9 broker {b} (pid {proc.pid})")

    def restart(self, b: int) -> None:
        # its old registration must be gone first (a live id is refused, as in Kafka)
        if not self.wait(f"broker {b} deregistered", lambda: b not in self.registered(), 20):
            self.event(f"broker {b} still registered 20 s after its death")
        self.start_broker(b)
        self.event(f"restart broker {b} (pid {self.procs[b].pid})")

    def pause(self, b: int) -> None:
        os.kill(self.procs[b].pid, signal.SIGSTOP)
        self.event(f"SIGSTOP broker {b}")

    def resume(self, b: int) -> None:
        os.kill(self.procs[b].pid, signal.SIGCONT)
        self.event(f"SIGCONT broker {b}")

    def isolate(self, b: int) -> None:
        assert self.net is not None
        self.net.isolate(b)
        self.event(f"isolate broker {b} (veth down)")

    def heal_isolation(self, b: int) -> None:
        assert self.net is not None
        self.net.heal(b)
        self.event(f"heal broker {b} (veth up)")

    def cut_zk(self, b: int, cut: bool) -> None:
        self.hub.set_cut(self.zk_relay[b], cut)
        self.event(f"{'cut' if cut else 'restore'} broker {b}'s ZooKeeper link")

    def delay(self, b: int, delay_s: float) -> None:
        # inbound: its listener's relay and its ZooKeeper relay; outbound: by its address in every relay
        for relay in (self.kafka_relay[b], self.zk_relay[b]):
            self.hub.set_delay(relay, None, delay_s)
        if self.net is not None:
            self.hub.set_delay(None, self.net.addr(b), delay_s)
        scope = "" if self.net else " (loopback: its inbound connections only)"
        self.event(f"delay broker {b}: {delay_s * 1000:.0f} ms per direction{scope}" if delay_s else f"undelay broker {b}")

    def kill_zookeeper(self) -> None:
        self.zk_server.kill()
        self.event("kill -9 ZooKeeper")

    def restart_zookeeper(self) -> None:
        self.zk_server.start()  # same port, same data directory
        self.event("restart ZooKeeper")
