"""`kaflite cluster up` for real: a ZooKeeper and three broker processes started by the command, clients
through the bootstrap it prints, `cluster status` / `topics describe` / `leader-election` against it, then
SIGINT: exit code 0 and every process it started gone (checked by pid)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from helpers import (
    Terminal,
    fresh_clone,
    missing_program,
    missing_zookeeper,
    newcomer_env,
    poll_values,
    readme_blocks,
    require,
    set_up_clone_venv,
    stop_process,
    wait_until,
)

require(missing_zookeeper(), module_level=True)


def _kaflite(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kaflite", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, NO_COLOR="1", COLUMNS="200"))


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            return proc.stdout.readline()
        if proc.poll() is not None:
            break
    raise AssertionError(f"no line from `cluster up` within {timeout} s (exit {proc.poll()})")


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (ps by pid)."""
    out = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return bool(out) and not out.startswith("Z")


def test_cluster_up_serves_clients_and_stops_everything_on_sigint(tmp_path: Path) -> None:
    """Also the README's cluster section as a newcomer runs it, in a fresh clone (as tests/cli/
    test_readme_tour.py runs the quick tour): its `cluster up` line as written, then its commands in a
    second terminal, without a bootstrap; each must exit 0, and `git status` stays clean."""
    from confluent_kafka import Consumer, Producer

    require(missing_program("git"))
    clone = fresh_clone(tmp_path)
    set_up_clone_venv(clone)
    readme = [ln for ln in readme_blocks("A cluster")[0].splitlines() if ln.strip() and not ln.startswith("#")]
    assert "cluster up --brokers 3" in readme[0] and len(readme) >= 4, readme
    errlog = open(tmp_path / "up.err", "w+")
    # the default --data-dir, relative to the working directory
    proc = Terminal(clone, newcomer_env()).start(readme[0], stderr=errlog)
    pids: list[int] = []
    env_file = clone / "kaflite-cluster" / "cluster.env"
    try:
        first = _read_line(proc, 120)
        assert first.startswith("bootstrap servers: "), first
        bootstrap = first.split(": ", 1)[1].strip()
        assert len(bootstrap.split(",")) == 3
        assert _read_line(proc, 10).strip() == f"export KAFLITE_BOOTSTRAP={bootstrap}"
        assert f"export KAFLITE_BOOTSTRAP={bootstrap}\nKAFLITE_CLUSTER_PID={proc.pid}\n" in env_file.read_text()
        errlog.seek(0)
        up_err = errlog.read()
        pids = [int(p) for p in re.findall(r"\(pid (\d+),", up_err)]
        assert len(pids) == 4, pids  # ZooKeeper and three brokers
        # the internal topics exist before any client asked for a coordinator (all brokers had registered)
        assert "internal topics __consumer_offsets and __transaction_state created" in up_err, up_err
        listed = _kaflite("topics", "list", "-b", bootstrap)
        assert {"__consumer_offsets", "__transaction_state"} <= set(listed.stdout.split()), listed.stdout
        # a client command given no bootstrap, in the directory of `cluster up`, finds it and says so
        found = subprocess.run([sys.executable, "-m", "kaflite", "cluster", "status"], cwd=clone,
                               capture_output=True, text=True, timeout=60,
                               env={k: v for k, v in os.environ.items() if k != "KAFLITE_BOOTSTRAP"})
        assert found.returncode == 0 and re.search(r"^Brokers: 3 ", found.stdout, re.M), found.stdout + found.stderr
        assert found.stderr.strip() == f"note: using the cluster started by `kaflite cluster up` " \
                                       f"(kaflite-cluster/cluster.env): {bootstrap}", found.stderr
        # the rest of the README's cluster section, typed in a second terminal (no bootstrap given)
        second = Terminal(clone, newcomer_env())
        for command in readme[1:]:
            ran = second.run(command)
            if command.startswith("kaflite "):
                assert "note: using the cluster started by `kaflite cluster up`" in ran.stderr, (command, ran.stderr)
        assert re.search(r"^Brokers: 3 ", ran.stdout, re.M), ran.stdout  # `kaflite cluster status`, last
        status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True)
        assert status.stdout == "", f"the README left files git does not ignore:\n{status.stdout}"
        # the plain status line (stdout is a pipe): three brokers up and a controller
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and not re.search(r"0=up 1=up 2=up; controller: \d", line):
            line = _read_line(proc, 30)
        assert re.search(r"0=up 1=up 2=up; controller: \d", line), line

        topic = f"up-{uuid.uuid4().hex[:8]}"
        created = _kaflite("topics", "create", topic, "--partitions", "3", "--replication-factor", "3",
                           "-b", bootstrap)
        assert created.returncode == 0, created.stderr
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(30):
            producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(got) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.add(msg.value())
        consumer.close()
        assert got == {f"v{i}".encode() for i in range(30)}

        # topics describe: Leader / Replicas / Isr as kafka-topics.sh prints them, three replicas each
        described = _kaflite("topics", "describe", topic, "-b", bootstrap)
        assert described.returncode == 0, described.stderr
        rows = re.findall(r"Partition: (\d+)\tLeader: (\d+)\tReplicas: ([\d,]+)\tIsr: ([\d,]+)", described.stdout)
        assert sorted(int(r[0]) for r in rows) == [0, 1, 2], described.stdout
        for _, leader, replicas, isr in rows:
            assert sorted(replicas.split(",")) == ["0", "1", "2"]
            assert leader in replicas.split(",") and leader in isr.split(",")

        status = _kaflite("cluster", "status", "-b", bootstrap)
        assert status.returncode == 0, status.stderr
        assert re.search(r"^Brokers: 3 \(0 127\.0\.0\.1:\d+, 1 127\.0\.0\.1:\d+, 2 127\.0\.0\.1:\d+\)$",
                         status.stdout, re.M), status.stdout
        assert re.search(r"^Controller: [012]$", status.stdout, re.M), status.stdout
        assert "Offline partitions: 0" in status.stdout

        # leader-election: the preferred replicas already lead; an unknown partition fails (exit 1)
        noop = _kaflite("leader-election", "--election-type", "preferred", "--topic", topic, "--partition", "0",
                        "-b", bootstrap)
        assert noop.returncode == 0, noop.stderr
        assert noop.stdout.strip() == f"Valid replica already elected for partitions {topic}-0"
        spec = tmp_path / "election.json"
        spec.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 1},
                                                   {"topic": "no-such-topic", "partition": 0}]}))
        mixed = _kaflite("leader-election", "--election-type", "PREFERRED", "--path-to-json-file", str(spec),
                         "-b", bootstrap)
        assert mixed.returncode == 1
        assert f"Valid replica already elected for partitions {topic}-1" in mixed.stdout
        assert "Error completing leader election (PREFERRED) for partition: no-such-topic-0: " in mixed.stdout
        assert "UNKNOWN_TOPIC_OR_PART" in mixed.stdout
        assert mixed.stderr.strip() == "error: 1 replica(s) could not be elected"

        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        assert time.monotonic() - start < 45
        assert [p for p in pids if _alive(p)] == []
        assert not env_file.exists()
        errlog.seek(0)
        assert errlog.read().rstrip().endswith("cluster stopped")
    finally:
        # a failure above: stop the cluster as Ctrl-C would, then by pid
        stop_process(proc, signal.SIGINT, timeout=60)
        errlog.seek(0)
        for pid in map(int, re.findall(r"\(pid (\d+),", errlog.read())):
            try:  # only ours: a pid reused by another process does not name our directory
                if _alive(pid) and str(tmp_path) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, FileNotFoundError):
                pass
        errlog.close()


def test_cluster_up_without_java_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # no java on it
    proc = subprocess.run(
        [sys.executable, "-m", "kaflite", "cluster", "up", "--data-dir", str(tmp_path / "c")],
        capture_output=True, text=True, timeout=60, env=dict(env, NO_COLOR="1"),
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().startswith("error: cannot start ZooKeeper: Java not found")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c").exists()


def test_cluster_up_stops_everything_on_sigterm(tmp_path: Path) -> None:
    """SIGTERM (a service manager, `kill`) stops like Ctrl-C: brokers, then ZooKeeper, exit code 0; the
    broker listens on --base-port."""
    from helpers import free_port

    port = free_port()
    errlog = open(tmp_path / "up.err", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite", "cluster", "up", "--brokers", "1", "--data-dir", str(tmp_path / "c"),
         "--base-port", str(port)],
        stdout=subprocess.PIPE, stderr=errlog, stdin=subprocess.DEVNULL, text=True,
    )
    try:
        assert _read_line(proc, 120).strip() == f"bootstrap servers: 127.0.0.1:{port}"
        errlog.seek(0)
        pids = [int(p) for p in re.findall(r"\(pid (\d+),", errlog.read())]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert [p for p in pids if _alive(p)] == []
    finally:
        stop_process(proc, signal.SIGINT, timeout=60)
        errlog.seek(0)
        for pid in map(int, re.findall(r"\(pid (\d+),", errlog.read())):
            try:
                if _alive(pid) and str(tmp_path) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, FileNotFoundError):
                pass
        errlog.close()


def _status(bootstrap: str) -> str:
    return _kaflite("cluster", "status", "-b", bootstrap, "--timeout", "10").stdout


def _wait_status(bootstrap: str, pattern: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    out = ""
    while time.monotonic() < deadline:
        out = _status(bootstrap)
        if re.search(pattern, out, re.S | re.M):
            return out
        time.sleep(0.5)
    raise AssertionError(f"cluster status never matched {pattern!r} within {timeout} s; last:\n{out}")


def test_status_shows_offline_and_under_replicated_and_preferred_election_moves_leaders_back(
    brokers: Any, tmp_path: Path
) -> None:
    """A broker stopped: its RF-1 partition is offline and the RF-3 partitions it held are under-replicated
    in `cluster status`; back and in sync: all clear, and `leader-election --election-type preferred`
    gives each partition back to its first replica (what `topics describe` then shows)."""
    for b in (0, 1, 2):
        brokers.start(b, "replica.lag.time.max.ms=3000")
    bootstrap = brokers.bootstrap()
    for topic, rf in (("wide", "3"), ("solo", "1")):
        made = _kaflite("topics", "create", topic, "--partitions", "3", "--replication-factor", rf, "-b", bootstrap)
        assert made.returncode == 0, made.stderr
    _wait_status(bootstrap, r"^Offline partitions: 0$.*^Under-replicated partitions: 0$", 60)

    proc = brokers.procs.pop(0)
    proc.terminate()  # controlled shutdown
    assert proc.wait(60) == 0
    others = brokers.bootstrap(1, 2)
    out = _wait_status(others, r"^Offline partitions: 1$.*^Under-replicated partitions: 3$", 60)
    assert re.search(r"^Brokers: 2 \(1 127\.0\.0\.1:\d+, 2 127\.0\.0\.1:\d+\)$", out, re.M), out
    assert re.search(r"^\tTopic: solo\tPartition: \d\tLeader: none\tReplicas: 0\tIsr: 0$", out, re.M), out
    assert len(re.findall(r"^\tTopic: wide\tPartition: \d\tLeader: [12]\tReplicas: [\d,]+\tIsr: [12],[12]$",
                          out, re.M)) == 3, out
    failing = _kaflite("cluster", "status", "--fail-on-problem", "-b", others)
    assert failing.returncode == 1
    # kafka-topics.sh's reports: only those partitions, no topic lines
    under = _kaflite("topics", "describe", "--under-replicated-partitions", "-b", others)
    assert under.returncode == 0, under.stderr
    assert len(under.stdout.splitlines()) == 3, under.stdout
    assert all(re.fullmatch(r"\tTopic: wide\tPartition: \d\tLeader: [12]\tReplicas: [\d,]+\tIsr: [12],[12]", line)
               for line in under.stdout.splitlines()), under.stdout
    unavailable = _kaflite("topics", "describe", "--unavailable-partitions", "-b", others)
    assert unavailable.returncode == 0, unavailable.stderr
    assert re.fullmatch(r"\tTopic: solo\tPartition: \d\tLeader: none\tReplicas: 0\tIsr: 0\n", unavailable.stdout), \
        unavailable.stdout

    brokers.start(0, "replica.lag.time.max.ms=3000")
    _wait_status(bootstrap, r"^Offline partitions: 0$.*^Under-replicated partitions: 0$", 90)
    clear = _kaflite("topics", "describe", "--under-replicated-partitions", "--unavailable-partitions", "-b",
                     bootstrap)
    assert (clear.returncode, clear.stdout) == (0, "")
    described = _kaflite("topics", "describe", "wide", "-b", bootstrap).stdout
    rows = re.findall(r"Partition: (\d+)\tLeader: (\d+)\tReplicas: ([\d,]+)\tIsr: ([\d,]+)", described)
    moved = sorted(f"wide-{p}" for p, leader, replicas, _ in rows if replicas.split(",")[0] != leader)
    assert moved, f"broker 0's preferred partition kept its leader through the shutdown:\n{described}"

    elected = _kaflite("leader-election", "--election-type", "preferred", "--all-topic-partitions", "-b", bootstrap)
    assert elected.returncode == 0, elected.stderr
    assert elected.stdout.strip() == f"Successfully completed leader election (PREFERRED) for partitions {', '.join(moved)}"
    described = _kaflite("topics", "describe", "wide", "-b", bootstrap).stdout
    rows = re.findall(r"Partition: (\d+)\tLeader: (\d+)\tReplicas: ([\d,]+)\tIsr: ([\d,]+)", described)
    assert len(rows) == 3 and all(replicas.split(",")[0] == leader for _, leader, replicas, _ in rows), described


def _run_up(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`cluster up` expected to fail by itself; stopped (and whatever it started, by pid) if it does not."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite", "cluster", "up", "--data-dir", str(tmp_path / "c"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=dict(os.environ, NO_COLOR="1", COLUMNS="300"),
    )
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    for pid in map(int, re.findall(r"\(pid (\d+),", err)):
        try:
            if _alive(pid) and str(tmp_path) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, FileNotFoundError):
            pass
    return proc.returncode, out, err


def test_cluster_up_refuses_a_taken_base_port_before_starting_anything(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = _run_up(tmp_path, "--brokers", "1", "--base-port", str(port))
    assert (code, out) == (1, "")
    assert err.strip() == f"error: --base-port: 127.0.0.1:{port} (broker 0) is already in use"
    assert not (tmp_path / "c").exists()


def test_cluster_up_broker_that_cannot_start_stops_the_rest_and_says_why(tmp_path: Path) -> None:
    """A broker that exits while starting (here: a value it refuses): `cluster up` names it, its reason and
    its log in one line, exits 1 and leaves no process behind (ZooKeeper stopped, checked by pid)."""
    code, out, err = _run_up(tmp_path, "--brokers", "1", "--override", "num.partitions=0")
    assert (code, out) == (1, "")
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, err
    assert errors[0].startswith("error: broker 0 exited with code 2 while starting: error: num.partitions"), err
    assert "broker-0.log" in errors[0]
    pids = [int(p) for p in re.findall(r"\(pid (\d+),", err)]
    assert len(pids) == 1  # ZooKeeper, stopped
    assert not _alive(pids[0])


def test_cluster_up_on_a_terminal_draws_the_live_table(tmp_path: Path) -> None:
    """stdout a terminal (a pty): the Rich table with each broker's state and the controller, refreshed;
    Ctrl-C still stops everything (exit 0)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite", "cluster", "up", "--brokers", "2", "--data-dir", str(tmp_path / "c")],
        stdout=slave, stderr=open(tmp_path / "up.err", "w"), stdin=subprocess.DEVNULL,
        env=dict(os.environ, COLUMNS="120", TERM="xterm"),
    )
    os.close(slave)
    screen = b""
    try:
        deadline = time.monotonic() + 120
        up_rows = re.compile(r"\s0 \S+ 127\.0\.0\.1:\d+ \S+ up .*\s1 \S+ 127\.0\.0\.1:\d+ \S+ up ", re.S)

        def plain() -> str:  # the screen without its colours and cursor moves
            return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode(errors="replace"))

        # the coordinators' internal topics, created by `cluster up` once every broker registered (50 + 50): the
        # frames between their creation and the controller's first election count them offline, so the wait
        # is for a frame with every partition led (the screen keeps every frame drawn)
        settled = re.compile(r"Controller: [01] +Topics: 2 +Partitions: 100 +Offline: 0 +Under-replicated: 0")
        while time.monotonic() < deadline and not (up_rows.search(plain()) and settled.search(plain())):
            if select.select([master], [], [], 1)[0]:
                try:
                    screen += os.read(master, 65536)
                except OSError:
                    break
        text = plain()
        assert "bootstrap servers: 127.0.0.1:" in text
        assert up_rows.search(text), text[-3000:]
        assert settled.search(text), text[-3000:]
        assert "Ctrl-C stops the cluster" in text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
    finally:
        stop_process(proc, signal.SIGINT, timeout=60)
        for pid in map(int, re.findall(r"\(pid (\d+),", (tmp_path / "up.err").read_text())):
            try:
                if _alive(pid) and str(tmp_path) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, FileNotFoundError):
                pass
        os.close(master)


def test_leader_election_unclean_brings_back_a_partition_whose_isr_died(brokers: Any, tmp_path: Path) -> None:
    """kafka-leader-election.sh --election-type unclean through the CLI: u-0 on [1, 2] (of brokers 1-3)
    whose whole ISR died (2 first, then 1, the last in sync) stays offline when 2 returns (unclean.leader.election.enable is
    off); `kaflite leader-election --election-type unclean` makes the out-of-sync 2 its leader, the
    controller warns of the loss, and what only 1 had is gone."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from kaflite.cluster.admin import ZkAdmin
    from kaflite.cluster.zk import KafkaZkClient

    zk = KafkaZkClient(brokers.connect)
    zk.start()

    def state() -> tuple[int, tuple[int, ...]] | None:
        s = zk.get_partition_states([("u", 0)])[("u", 0)]
        return (s.leader, tuple(sorted(s.isr))) if s is not None else None

    def seen() -> str:  # what a wait that times out reports
        return f"u-0: {state()}"

    def produce(value: bytes, *ids: int) -> None:
        p = Producer({"bootstrap.servers": brokers.bootstrap(*ids), "acks": "all", "message.timeout.ms": 20000})
        errors: list[Any] = []
        p.produce("u", value=value, partition=0, on_delivery=lambda err, _m: errors.append(err))
        assert p.flush(30) == 0 and errors == [None], errors

    try:
        # 3 holds no replica of u: a controller stays alive through the deaths
        brokers.start_registered(zk, 1, 2, 3, overrides=("replica.lag.time.max.ms=3000",))
        ZkAdmin(zk).create_topic("u", -1, -1, {}, assignment=[[1, 2]])
        wait_until("u-0 led by 1 with both in sync", lambda: state() == (1, (1, 2)), context=seen)
        produce(b"both", 1)  # acks=all: on 1 and 2
        brokers.kill(2)
        wait_until("the ISR shrunk to 1", lambda: state() == (1, (1,)), context=seen)
        produce(b"only-1", 1)  # acks=all with the ISR [1]: only broker 1 has it
        brokers.kill(1)
        wait_until("u-0 offline", lambda: state() == (-1, (1,)), context=seen)
        brokers.start(2, "replica.lag.time.max.ms=3000")
        wait_until("2 back", lambda: zk.get_broker_ids() == [2, 3], context=seen)
        time.sleep(1.0)
        assert state() == (-1, (1,))  # unclean election off: offline rather than lose a record
        bootstrap = brokers.bootstrap(2, 3)
        offline = _kaflite("topics", "describe", "--unavailable-partitions", "-b", bootstrap)
        assert offline.stdout == "\tTopic: u\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: 1\n", offline

        elected = _kaflite("leader-election", "--election-type", "unclean", "--topic", "u", "--partition", "0",
                           "-b", bootstrap)
        assert (elected.returncode, elected.stdout.strip()) == (
            0, "Successfully completed leader election (UNCLEAN) for partitions u-0"), elected
        wait_until("u-0 led by 2", lambda: state() == (2, (2,)), context=seen)
        logs = brokers.log(2) + brokers.log(3)  # the controller's (3, or 2 if it won the election since)
        assert re.search(r"unclean leader election for u-0 \(ElectLeaders\): broker 2 leads, the ISR was \[1\]",
                         logs), logs[-3000:]
        # back in service on the out-of-sync replica: the record only 1 had is lost, new ones are taken
        produce(b"after", 2)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                             "enable.auto.commit": False, "enable.partition.eof": False})
        try:
            consumer.assign([TopicPartition("u", 0, 0)])
            seen = poll_values(consumer, 2, poll_s=0.2)
        finally:
            consumer.close()
        assert seen == [b"both", b"after"]
    finally:
        zk.close()
        for b in list(brokers.procs):
            brokers.kill(b)
