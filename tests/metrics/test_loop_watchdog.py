"""The event-loop stall watchdog (server/loop_watchdog.py): the loop's lateness is measured all the time,
exported as kaflite_eventloop_lag_{max,p99}_ms, and a call that blocks the loop for more than 100 ms is
logged with the loop thread's stack sampled while it blocks."""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.loop_watchdog import LagWindows, LoopWatchdog, StallDetector


def test_lag_windows_max_and_p99() -> None:
    w = LagWindows(window_s=10, now=0)
    assert w.stats() == (0.0, 0.0)
    for i in range(1, 101):
        w.add(float(i), now=1)
    assert w.stats() == (100.0, 99.0)
    w.add(500.0, now=12)  # a new window: the previous one still counts
    assert w.stats() == (500.0, 100.0)
    w.add(1.0, now=23)  # and again: the 1..100 window is gone
    assert w.stats() == (500.0, 500.0)
    w.add(2.0, now=100)  # windows without samples in between: only the new one
    assert w.stats() == (2.0, 2.0)


def test_stall_detector_samples_once_per_stall() -> None:
    d = StallDetector(interval_s=0.05, stall_ms=100, now=0.0)
    assert not d.should_sample(0.14)  # 90 ms overdue
    assert d.should_sample(0.16)  # 110 ms overdue
    assert not d.should_sample(0.5)  # the same stall
    d.ticked(0.6)
    assert not d.should_sample(0.7)
    assert d.should_sample(0.8)


def test_the_watcher_sleeps_until_a_stall_could_be_seen() -> None:
    d = StallDetector(interval_s=0.05, stall_ms=100, now=0.0)
    assert d.next_look(0.01) == pytest.approx(0.14)  # the next tick 100 ms overdue: 150 ms after the last
    d.ticked(0.05)
    assert d.next_look(0.1) == pytest.approx(0.1)  # the loop ticked meanwhile: from its new last tick
    assert d.next_look(0.3) == 0.001  # already past: look (almost) at once
    assert d.should_sample(0.3)
    assert d.next_look(0.3) == 0.05  # sampled: nothing more before the loop ticks again


def test_a_healthy_loop_wakes_the_watcher_a_few_times_a_second() -> None:
    """The watcher thread takes the GIL from the loop each time it looks: on a loop that ticks, it looks
    when a stall would first be visible (every 100-150 ms), not every 25 ms."""
    watchdog = LoopWatchdog()

    async def main() -> None:
        watchdog.start()
        await asyncio.sleep(1.0)
        watchdog.stop()

    asyncio.run(main())
    # about 7 (40 when it looked every interval / 2); a stall of a loaded machine adds a look per 50 ms of it
    assert 3 <= watchdog.looks <= 20, watchdog.looks


def _block_the_loop_deliberately(seconds: float) -> None:
    time.sleep(seconds)  # what an fsync or a whole-log scan on the loop would do


def test_a_blocking_call_is_logged_with_its_stack(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = LoopWatchdog()

    async def main() -> None:
        watchdog.start()
        await asyncio.sleep(0.3)
        max_before, _ = watchdog.stats()
        assert max_before < 100 and watchdog.stalls == 0 and not watchdog.last_stack
        _block_the_loop_deliberately(0.4)
        await asyncio.sleep(0.2)
        watchdog.stop()

    with caplog.at_level(logging.WARNING, logger="kaflite.server"):
        asyncio.run(main())
    lag_max, lag_p99 = watchdog.stats()
    assert lag_max >= 300 and watchdog.stalls == 1
    assert "_block_the_loop_deliberately" in watchdog.last_stack
    blocked = [r.getMessage() for r in caplog.records if "event loop blocked" in r.getMessage()]
    assert len(blocked) == 1 and "_block_the_loop_deliberately" in blocked[0]
    assert any("event loop stalled" in r.getMessage() for r in caplog.records)


def test_the_lag_is_exported(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path, overrides={"metrics.listener": "http://127.0.0.1:0"}) as b:
        b.call(_block_the_loop_deliberately, 0.3)
        time.sleep(0.2)
        endpoint = b.server.metrics_endpoint
        assert endpoint is not None
        with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=10) as r:
            text = r.read().decode()
    values = {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert values["kaflite_eventloop_lag_max_ms"] >= 250
    assert 0 <= values["kaflite_eventloop_lag_p99_ms"] <= values["kaflite_eventloop_lag_max_ms"]
    assert values["kaflite_eventloop_stalls_total"] >= 1
