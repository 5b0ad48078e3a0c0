"""bench/_broker_process.py (the benches' broker in a process of its own) against real broker processes: it
starts `kaflite serve` (or `python -m kaflite.server`) with the caller's configuration, waits for the port,
reads the broker's CPU and memory, and stops it cleanly by its pid; a broker that cannot start fails with
its log's tail, and one that ignores SIGTERM is killed after the grace time. And bench/_timing.py's
in-process broker: started on a temporary directory, stopped and the directory gone afterwards."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

from helpers import load_bench
from kaflite.storage.checkpoint import CLEAN_SHUTDOWN_FILE

bp = load_bench("_broker_process")
timing = load_bench("_timing")


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 2).close()
        return True
    except OSError:
        return False


@pytest.mark.timeout(120)
def test_kaflite_serve_starts_with_the_overrides_and_stops_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with bp.BrokerProcess(data, overrides={"broker.id": "7"}) as b:
        assert b.bootstrap == f"127.0.0.1:{b.port}" and _accepts(b.port)
        assert b.command()[1:5] == ["-m", "kaflite", "serve", "--host"]
        assert "starting broker 7 on PLAINTEXT://127.0.0.1:" in b.log()  # the override reached it
        user, system = b.cpu()
        assert user + system > 0 and b.cpu_seconds() >= user + system
        assert 10 < b.rss_mib() <= b.peak_rss_mib()
        assert b.minor_faults() > 0 and sum(b.switches()) > 0
        log = b.log_path
        assert log is not None and log.parent == tmp_path and log.exists()
    assert b.proc.returncode == 0  # SIGTERM: the broker's clean stop
    assert (data / CLEAN_SHUTDOWN_FILE).exists()
    assert not log.exists()  # the temporary log is removed after a clean stop
    assert b.stop() == 0.0  # stopped already: nothing to do


@pytest.mark.timeout(120)
def test_the_server_module_with_arguments_and_the_callers_log(tmp_path: Path) -> None:
    log = tmp_path / "mine.log"
    b = bp.BrokerProcess(tmp_path / "data", args=["--dev"], server_module=True, log_path=log).start(wait=60)
    try:
        cmd = b.command()
        assert cmd[1:4] == ["-m", "kaflite.server", "--dev"]
        assert f"listeners=PLAINTEXT://127.0.0.1:{b.port}" in cmd
        assert _accepts(b.port)
    finally:
        took = b.stop(grace=30)
    assert b.proc.returncode == 0 and 0 < took < 30
    assert log.exists()  # the caller's log is the caller's to remove


@pytest.mark.timeout(120)
def test_a_broker_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    b = bp.BrokerProcess(tmp_path / "data", overrides={"log.segment.bytes": "12"})  # below its minimum
    with pytest.raises(RuntimeError, match=r"exited \(2\) before listening") as err:
        b.start(wait=60)
    assert "log.segment.bytes" in str(err.value)  # the broker's own error, from its log's tail
    assert b.proc.returncode == 2  # reaped
    assert b.log_path is not None and b.log_path.exists()  # kept: the error names it
    b.log_path.unlink()


@pytest.mark.timeout(60)
def test_a_broker_that_ignores_sigterm_is_killed_after_the_grace_time(tmp_path: Path) -> None:
    # a stand-in that listens on the port it is given and ignores SIGTERM: `python -c CODE -m kaflite
    # serve ... --port P ...` (with -c, the rest of the line is the code's sys.argv)
    code = (
        "import signal, socket, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[sys.argv.index('--port') + 1]))); "
        "s.listen(); time.sleep(60)"
    )
    b = bp.BrokerProcess(tmp_path / "data", python_args=["-c", code]).start(wait=30)
    with pytest.raises(RuntimeError, match="did not stop within 1 s of SIGTERM"):
        b.stop(grace=1)
    assert b.proc.returncode == -9  # killed, and reaped
    other = bp.BrokerProcess(tmp_path / "data2", python_args=["-c", code]).start(wait=30)
    assert 1 <= other.stop(grace=1, strict=False) < 20 and other.proc.returncode == -9


@pytest.mark.timeout(60)
def test_a_broker_that_does_not_listen_in_time_is_killed(tmp_path: Path) -> None:
    b = bp.BrokerProcess(
        tmp_path / "data", python_args=["-c", "import time; print('stuck', flush=True); time.sleep(60)"]
    )
    with pytest.raises(RuntimeError, match=r"did not listen within 1 s; its log .* ends:\nstuck"):
        b.start(wait=1)
    assert b.proc.returncode == -9  # not left running behind the failed bench


@pytest.mark.timeout(60)
def test_a_broker_that_exited_by_itself_is_named_at_the_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = (
        "import socket, sys, time; s = socket.socket(); "
        "s.bind(('127.0.0.1', int(sys.argv[sys.argv.index('--port') + 1]))); s.listen(); time.sleep(0.5)"
    )
    b = bp.BrokerProcess(tmp_path / "data", python_args=["-c", code]).start(wait=30)
    b.proc.wait(30)
    assert b.stop() == 0.0
    assert f"had exited by itself (0); its log: {b.log_path}" in capsys.readouterr().err
    assert b.log_path is not None and b.log_path.exists()  # kept for a look


def test_the_in_process_broker_is_stopped_and_its_directory_removed() -> None:
    async def run() -> Path:
        async with timing.in_process_broker("kaflite-test-ipb-") as broker:
            data = Path(broker.config.log_dir)
            assert data.name.startswith("kaflite-test-ipb-") and data.is_dir()
            broker.create_topic("t", 2, None)
            assert broker.log_manager is not None and broker.log_manager.get("t", 1) is not None
        return data

    data = asyncio.run(run())
    assert not data.exists()


def test_load_bench_leaves_sys_path_as_it_was() -> None:
    before = list(sys.path)
    load_bench("_timing")
    assert sys.path == before
