"""Helpers importable from every test module (`from helpers import ...`; pytest's pythonpath has tests/)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[1]
VECTORS = REPO / "tests" / "data" / "kafka-reference-cases.json"
T = TypeVar("T")


@cache
def load_vectors() -> list[dict[str, Any]]:
    return json.loads(VECTORS.read_text())


def vectors_of_kind(prefix: str) -> list[dict[str, Any]]:
    """Every reference case whose kind starts with `prefix` (for pytest.mark.parametrize)."""
    return [c for c in load_vectors() if c["kind"].startswith(prefix)]


def load_bench(name: str) -> ModuleType:
    """bench/`name`.py as the module `name`, for a test of a bench's data side. It is registered in
    sys.modules before it runs (dataclasses look their module up by name), and bench/ is on sys.path while
    it loads (a bench imports its siblings by name: _timing, _broker_process, ...; what it imports at the
    top stays in sys.modules afterwards)."""
    bench = str(REPO / "bench")
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"no bench/{name}.py"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, bench)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(bench)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker_process(cmd: list[str], port: int, log_path: Path, timeout_s: float = 30) -> subprocess.Popen[bytes]:
    """Start a broker process (its output appended to `log_path`) and return once `port` accepts a
    connection; a broker that exits or does not listen within `timeout_s` fails with its log's tail."""
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_listening(proc, port, lambda: log_path.read_text(errors="replace"), timeout_s)
    except RuntimeError:
        stop_process(proc, signal.SIGKILL, timeout=10)
        raise
    return proc


def wait_listening(
    proc: subprocess.Popen[Any], port: int, log: Callable[[], str], timeout_s: float = 30, name: str = "broker"
) -> None:
    """Return once 127.0.0.1:`port` accepts a connection; a `proc` (called `name`) that exits first, or
    does not listen within `timeout_s`, fails with a RuntimeError carrying the tail of its `log()`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}): {log()[-2000:]}") from None
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s: {log()[-2000:]}")


def wait_until(
    what: str,
    fn: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = 0.05,
    context: Callable[[], object] | None = None,
) -> T:
    """Poll `fn` every `interval` s until it returns something truthy, and return that. After `timeout` s
    fail with an AssertionError naming `what` (and what `context()` says then, e.g. the state seen last),
    so a test that waits on a cluster never hangs and never fails without saying what it waited for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(interval)
    extra = f" ({context()})" if context is not None else ""
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{extra}")


def holds_by(what: str, fn: Callable[[], T | None], deadline: float, interval: float = 0.1) -> T:
    """A "within N s" promise checked as soon as it holds: poll `fn` until it returns something truthy
    (returned), at least once and the last time at or after `deadline` (time.monotonic()); falsy then, fail
    naming `what`. The same check as a sleep to the deadline and one look, without the rest of the sleep."""
    while True:
        final = time.monotonic() >= deadline
        got = fn()
        if got:
            return got
        if final:
            raise AssertionError(f"{what}: not so by the deadline")
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))


def stop_process(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """Stop `proc` if it still runs: `sig` first (the clean shutdown under test elsewhere), SIGKILL if it
    has not exited within `timeout` s, so a failed test never leaves a broker or a cluster behind."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def poll_values(consumer: Any, count: int, timeout: float = 30.0, poll_s: float = 0.5) -> list[bytes]:
    """The values a confluent-kafka `consumer` (already assigned or subscribed) polls, until `count` have
    arrived or `timeout` s have passed (records with an error are skipped): the caller asserts on the list,
    so a short one fails there with what did arrive."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        m = consumer.poll(poll_s)
        if m is not None and m.error() is None:
            got.append(m.value())
    return got


def iterate_values(consumer: Any, got: list[bytes], count: int) -> None:
    """Appends the values a kafka-python `consumer` (an iterator, ended by its consumer_timeout_ms) yields
    to `got` until it holds `count`: the caller asserts on `got`, so a short one fails there."""
    for m in consumer:
        got.append(m.value)
        if len(got) == count:
            break


def produce_numbered(producer: Any, topic: str, prefix: str, count: int = 10, timeout: float = 30.0) -> list[bytes]:
    """Produces `prefix`0 .. `prefix`{count-1} with a confluent-kafka `producer` and waits for every
    acknowledgement; returns the values in order."""
    values = [f"{prefix}{i}".encode() for i in range(count)]
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(timeout) == 0
    return values

# -- missing test dependencies --------------------------------------------------------------------
# Outside CI a test whose external tool is missing (ZooKeeper/Java, kcat, chromium, ruff, mypy) is skipped
# with the reason; CI sets KAFLITE_REQUIRE_ALL=1 (.ci/run), under which the same absence is a failure, so
# a CI run that silently tested less than the whole suite cannot pass. Every such condition in tests/
# goes through `require` (tests/test_helpers_require.py checks that none bypasses it).
REQUIRE_ALL_ENV = "KAFLITE_REQUIRE_ALL"


def read_to_end(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed",
                at_least: int = 0, timeout: float = 60.0) -> list[bytes]:
    """Every value of `topic`'s partitions 0..partitions-1 from offset 0 to each partition's end: the high
    watermark, or with read_committed the last stable offset, which librdkafka reports as a partition EOF
    once it has fetched up to it, past any commit or abort markers (no idle wait decides it: those cost
    seconds per read). A coordinator answers a commit before it writes the markers (Kafka's does the same),
    so a transaction committed just before may not be visible yet: `at_least` values are read in any case.
    Fails when the end or `at_least` is not reached within `timeout`."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-to-end-{time.monotonic_ns()}",
                     "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    out: list[bytes] = []
    at_end: set[int] = set()
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while (len(at_end) < partitions or len(out) < at_least) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is None:
                out.append(m.value())
                at_end.discard(m.partition())  # more may follow
            elif m.error().code() == ck.KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
    finally:
        c.close()
    assert len(at_end) == partitions, f"{topic}: {len(at_end)} of {partitions} partitions read to the end"
    assert len(out) >= at_least, f"{topic}: {len(out)} of at least {at_least} records read in {timeout:.0f} s"
    return out


def spark_tmp_env(directory: Path) -> dict[str, str]:
    """Environment that puts every temporary file of a Spark JVM started from it under `directory` (which
    the caller removes): without it each session leaves /tmp/spark-*, blockmgr-*, artifacts-* and
    liblz4-java-*.so behind (its shutdown hook deletes some of them, never on a SIGKILL). SPARK_LOCAL_DIRS
    places spark.local.dir (blockmgr, the session's spark-* dirs); java.io.tmpdir (artifacts, the native
    libraries' copies) is a JVM option, given as spark.*.defaultJavaOptions through PYSPARK_SUBMIT_ARGS,
    which pyspark adds to the SparkSession builder's own options: a driver's or an executor's
    extraJavaOptions set in code still apply. TMPDIR does the same for the Python side (e.g. `kaflite
    pipeline demo`'s work directory without --out)."""
    java = f"-Djava.io.tmpdir={directory}"
    return {
        "SPARK_LOCAL_DIRS": str(directory),
        "TMPDIR": str(directory),
        "PYSPARK_SUBMIT_ARGS": f"--conf spark.driver.defaultJavaOptions={java} "
        f"--conf spark.executor.defaultJavaOptions={java} pyspark-shell",
    }


def require_all() -> bool:
    return os.environ.get(REQUIRE_ALL_ENV, "") not in ("", "0")


def require(missing: str | None, *, module_level: bool = False) -> None:
    """`missing`: why a dependency of this test is absent (None when present). Skips, or fails when
    KAFLITE_REQUIRE_ALL is set."""
    if missing is None:
        return
    if require_all():
        pytest.fail(f"{missing} ({REQUIRE_ALL_ENV}=1: a missing test dependency is an error)", pytrace=False)
    pytest.skip(missing, allow_module_level=module_level)


def missing_program(*names: str) -> str | None:
    """None when one of `names` is on PATH, else why not."""
    if any(shutil.which(n) for n in names):
        return None
    return f"{' / '.join(names)} not installed"


def missing_module(name: str) -> str | None:
    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        found = False
    return None if found else f"Python module {name} not installed"


def missing_zookeeper() -> str | None:
    from kaflite.cluster.zkserver import missing_reason

    reason = missing_reason()
    return None if reason is None else f"ZooKeeper cannot run here: {reason}"


# -- the README as a newcomer runs it: a fresh clone, its venv, a terminal ---------------------------

def fresh_clone(tmp_path: Path) -> Path:
    """A `git clone` of this repository (its committed HEAD) at tmp_path/empty/kaflite, with nothing beside
    it (tests/test_fresh_clone.py, the README walkthroughs)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    clone = empty / "kaflite"
    proc = subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in empty.iterdir()] == ["kaflite"]  # nothing beside the clone
    return clone


def set_up_clone_venv(clone: Path) -> None:
    """clone/.venv as `./run.sh setup` leaves it, without pip and without a network: `python` is the tests'
    own interpreter importing the clone's src (PYTHONPATH comes before the editable install of another
    checkout), `kaflite` runs it, `activate` puts them first on PATH, and the editable-install path and the
    pyproject stamps are those run.sh checks, so `./run.sh serve` goes straight to `.venv/bin/kaflite serve`
    (run.sh's own set-up decisions: tests/cli/test_run_sh.py)."""
    import hashlib
    import sys

    root = clone.resolve()
    venv = root / ".venv"
    (venv / "bin").mkdir(parents=True)
    scripts = {
        "python": f'#!/bin/sh\nPYTHONPATH="{root}/src" exec "{sys.executable}" "$@"\n',
        "kaflite": f'#!/bin/sh\nexec "{venv}/bin/python" -m kaflite "$@"\n',
    }
    for name, text in scripts.items():
        (venv / "bin" / name).write_text(text)
        (venv / "bin" / name).chmod(0o755)
    (venv / "bin" / "activate").write_text(f'VIRTUAL_ENV="{venv}"\nexport VIRTUAL_ENV\n'
                                           'PATH="$VIRTUAL_ENV/bin:$PATH"\nexport PATH\n')
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "__editable__.kaflite-0.1.0.pth").write_text(f"{root}/src\n")
    digest = hashlib.sha1((root / "pyproject.toml").read_bytes()).hexdigest()[:12]
    for kind in ("base", "test"):
        (venv / f".kaflite-{kind}-{digest}").touch()
    # the compiled decoder's stamp too: without it run.sh would "build" the decoder with `pip install -e .`
    # through this `python`, which is the tests' own interpreter, and so repoint the tests' own venv's
    # editable install at this temporary clone (it did, once, in a full run)
    decoder = hashlib.sha1((root / "src/kaflite/spark/_decode.c").read_bytes()).hexdigest()[:12]
    (venv / f".kaflite-decoder-{decoder}").touch()


def newcomer_env() -> dict[str, str]:
    """The environment of a newcomer's terminal: no kaflite variable, no virtualenv active, no PYTHONPATH,
    the tests' own venv off PATH (so `kaflite` is found only once the README's venv is activated), and
    Python's bytecode cache on (PYTHONDONTWRITEBYTECODE, if the tests run with it, made every command of a
    fresh clone compile kaflite again: seconds each on a loaded machine)."""
    import sys

    ours = str(Path(sys.executable).parent)
    dropped = ("PYTHONPATH", "VIRTUAL_ENV", "FORCE_COLOR", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFLITE_", "PYTEST_")) and k not in dropped}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours)
    env.update(NO_COLOR="1", COLUMNS="120")
    return env


def readme_blocks(section: str, lang: str = "bash", readme: Path | None = None) -> list[str]:
    """The ```lang blocks of the README's `## section`, in order."""
    import re

    text = (readme or REPO / "README.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", body, re.S)


class Terminal:
    """One terminal of a newcomer in `cwd`: each README line runs in bash after the `. …/activate` lines
    this terminal ran before (a terminal keeps its activation), and one that exits non-zero fails with the
    line and its output."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd, self.env = cwd, env
        self.sourced: list[str] = []

    def script(self, line: str) -> str:
        return "".join(f"{s} && " for s in self.sourced) + line

    def run(self, line: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        ran = subprocess.run(["bash", "-o", "pipefail", "-c", self.script(line)], cwd=self.cwd, env=self.env,
                             capture_output=True, text=True, timeout=timeout)
        assert ran.returncode == 0, f"$ {line}\nexit {ran.returncode}\n{ran.stdout}\n{ran.stderr}"
        if line.startswith(". "):
            self.sourced.append(line)
        return ran

    def start(self, line: str, **popen: Any) -> subprocess.Popen[str]:
        """A long-running line (a broker, `cluster up`, the console), its stdout a pipe. bash execs it, so
        the process returned is the command's own (a signal reaches it, as Ctrl-C would)."""
        return subprocess.Popen(["bash", "-c", self.script(f"exec {line}")], cwd=self.cwd, env=self.env,
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, **popen)


def kio_served_versions(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """(api key, version) of every served pair that kio has a schema for, from `Registry.ranges()`: the
    requests a test can generate or sample from kio. Produce v0-v2 have none (decoded by hand,
    src/kaflite/protocol/produce_request.py; their tests are tests/protocol/test_legacy_produce.py)."""
    from kaflite.protocol.messages import request_schema

    return [(k, v) for k, lo, hi in ranges for v in range(lo, hi + 1) if request_schema(k, v) is not None]


async def longest_loop_turn(work: Callable[[], Any]) -> float:
    """The longest turn of the running event loop while `await work()` runs, in the loop thread's CPU time
    (`time.thread_time`: a loaded machine's preemptions count in no turn): a probe task yields at every
    turn and keeps the longest gap between two of its wake-ups (one or more other callbacks ran in it).
    Garbage collection is off while measuring: a full collection in the long-lived process of a whole
    suite run took 1.1 s of the loop thread's CPU in one turn, which is not the code under test."""
    import asyncio
    import gc

    gc.collect()
    gc.disable()
    try:
        stop = False
        longest = 0.0

        async def probe() -> None:
            nonlocal longest
            last = time.thread_time()
            while not stop:
                await asyncio.sleep(0)
                now = time.thread_time()
                longest = max(longest, now - last)
                last = now

        task = asyncio.ensure_future(probe())
        await asyncio.sleep(0.01)
        await work()
        stop = True
        await task
        return longest
    finally:
        gc.enable()


def wait_share_partition_open(broker: Any, consumers: list[Any], group: str, topic: str, partition: int = 0,
                              timeout: float = 15.0) -> None:
    """Poll share consumers (none may get a record) until the broker has opened the group's share partition:
    records produced afterwards are theirs (share.auto.offset.reset=latest starts at the log end)."""
    from kaflite.server.coordinators.share_state import SHARE_COORDINATOR

    def opened() -> bool:
        coord = broker.server.broker.services.get(SHARE_COORDINATOR)
        return coord is not None and (group, topic, partition) in coord.partitions
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not broker.call(opened):
        for c in consumers:
            assert list(c.poll(0.2)) == []
    assert broker.call(opened), f"share partition {topic}-{partition} of {group} not opened in {timeout:g} s"


def acknowledge_by_value(consumer: Any, count: int, timeout: float = 20.0) -> list[bytes]:
    """Poll an explicit-mode ShareConsumer until `count` deliveries: a record whose value is b"reject" is
    rejected, b"release" released the first time and accepted when it comes back, any other accepted.
    Returns the values of every delivery, redeliveries included."""
    import confluent_kafka as ck

    seen: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(seen) < count:
        for m in consumer.poll(0.3):
            if m.error() is not None:
                continue
            seen.append(m.value())
            kind = ck.AcknowledgeType.ACCEPT
            if m.value() == b"reject":
                kind = ck.AcknowledgeType.REJECT
            elif m.value() == b"release" and seen.count(b"release") == 1:
                kind = ck.AcknowledgeType.RELEASE
            consumer.acknowledge(m, kind)
    return seen


class FetchThroughKio:
    """A base for a fake leader connection whose `request(req, schema, timeout)` answers kio requests: the
    replica fetcher's hand-encoded Fetch v12 (`request_flexible_bytes`) is read with kio, handed to
    `request`, and the kio answer encoded back into the frame the fetcher decodes."""

    async def request(self, req: Any, schema: Any, timeout: float) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    async def request_flexible_bytes(self, api_key: int, version: int, body: bytes,
                                     timeout: float) -> tuple[bytes, int]:
        import io

        from kio.schema.fetch.v12.request import FetchRequest
        from kio.schema.fetch.v12.response import FetchResponse
        from kio.serial import entity_reader, entity_writer

        assert (api_key, version) == (1, 12)
        req, _size = entity_reader(FetchRequest)(body, 0)
        answer = await self.request(req, FetchResponse, timeout)
        out = io.BytesIO()
        entity_writer(FetchResponse)(out, answer)
        return b"\x00\x00\x00\x00\x00" + out.getvalue(), 5  # response header v1: correlation id, no tags
