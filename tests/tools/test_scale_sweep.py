"""bench/scale_sweep.py's data side: the order sizes run in, what each plot shows (every run's point, the
baselines of the same run, the fitted slope in the unit named), and its plots or, without matplotlib (not a
test dependency), the line naming the extra to install. The sweep itself runs brokers: it is a bench."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import load_bench

sweep = load_bench("scale_sweep")  # (it imports scale_bench, which imports _timing and _broker_process)


def _data() -> dict[str, Any]:
    """Two repeats of two sizes per sweep, with figures whose slopes are known."""
    meta = {
        "started": "2026-11-29T10:00:00+00:00",
        "cores": 2,
        "repeat": 2,
        "probes": 500,
        "heartbeat_ms": 1000,
        "window_s": 4.0,
        "rebalances": 20,
        "fill_records": 10,
        "fill_size": 100,
    }
    conns, groups, parts = [], [], []
    for r in range(2):
        for n in (1000, 4000):
            conns.append(
                {
                    "repeat": r,
                    "size": n,
                    "n": n,
                    "load": 3.0 + r,
                    "load_end": 3.5,
                    "rss0": 80.0 + r,
                    "rss1": 80.0 + r + n * 4 / 1024,  # 4 KiB a connection
                    "kib_per_conn": 4.0,
                    "accept_cpu_ms": 0.7,
                    "accept_per_s": 500.0,
                    "base_p50": 0.4,
                    "base_p99": 2.0,
                    "p50": 0.5,
                    "p99": 3.0 + r,
                }
            )
        for m in (100, 300):
            groups.append(
                {
                    "repeat": r,
                    "size": m,
                    "m": m,
                    "load": 2.0,
                    "load_end": 6.0,
                    "cpu_share": m * 3 * 150e-6,  # 3 M heartbeats a second at 150 us each
                    "idle_cpu": 0.04,
                    "window_s": 4.0,
                    "us_per_hb": 150.0,
                    "hb_per_s": 3.0 * m,
                    "loaded_p50": 4.0,
                    "alone_p50": 3.0,
                    "loaded_max": 9.0,
                    "alone_max": 5.0,
                    "formed_s": m / 100,
                }
            )
        for p in (0, 5000):
            parts.append(
                {
                    "repeat": r,
                    "size": p,
                    "load": 4.0,
                    "load_end": 4.0,
                    "cpu_s": 1.5 + p * 0.2 / 1000,
                    "start_s": 2.0 + p / 1000,
                    "stop_s": 0.5,
                }
            )
    return {"meta": meta, "connections": conns, "groups": groups, "partitions": parts}


def test_every_size_runs_once_a_repeat_in_reverse_order_every_other_repeat() -> None:
    assert sweep.turns([1, 2, 3], 3) == [
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 3),
        (1, 2),
        (1, 1),
        (2, 1),
        (2, 2),
        (2, 3),
    ]


def test_each_size_has_its_min_median_and_max() -> None:
    assert sweep.by_size([(2, 5.0), (1, 3.0), (2, 1.0), (2, 2.0)]) == [(1, 3.0, 3.0, 3.0), (2, 1.0, 2.0, 5.0)]


def test_the_plots_show_every_run_the_same_runs_baselines_and_the_fitted_slope_in_its_unit() -> None:
    plots = {p.name: p for p in sweep.plots(_data())}
    assert sorted(plots) == ["scale-connections", "scale-groups", "scale-partitions"]
    rss = plots["scale-connections"].panels[0].series[0]
    # each run's RSS with none open (x = 0) beside its RSS with the N open: 4 runs, 8 points
    assert sorted(rss.points) == sorted(
        [
            (0, 80.0),
            (0, 81.0),
            (0, 80.0),
            (0, 81.0),
            (1000, 80.0 + 1000 * 4 / 1024),
            (1000, 81.0 + 1000 * 4 / 1024),
        ]
        + [(4000, 80.0 + 4000 * 4 / 1024), (4000, 81.0 + 4000 * 4 / 1024)]
    )
    assert sweep.fit_label(rss).endswith("fit: 4 KiB per connection")
    probe, ratio = plots["scale-connections"].panels[4:6]
    assert [(x, y) for x, y in probe.series[1].points] == [
        (1000, 2.0),
        (4000, 2.0),
    ] * 2  # none open, same run
    assert probe.hlines[0][0] == 4.0  # 2 x the median p99 with none open
    assert sorted(y for _, y in ratio.series[0].points) == [1.5, 1.5, 2.0, 2.0]
    cpu = plots["scale-groups"].panels[0].series
    assert sweep.fit_label(cpu[0]).endswith("fit: 45 % per 1,000 groups")
    assert {y for _, y in cpu[1].points} == {1.0}  # the idle broker: 0.04 s in a 4 s window
    start_cpu = plots["scale-partitions"].panels[0].series[0]
    assert sweep.fit_label(start_cpu).endswith("fit: 0.2 s per 1,000 partitions")
    assert "2 cores shared" in plots["scale-partitions"].title
    assert "load average 2.0-6.0" in plots["scale-groups"].title


def test_a_single_size_draws_no_fit() -> None:
    assert sweep.fit_label(sweep.Series("x", [(5, 1.0), (5, 2.0)], "s per 1,000")) == "x"


def test_the_summary_gives_each_sizes_spread() -> None:
    lines = sweep.summary(_data())
    assert any(
        line.startswith("probe p99: N open / none open") and "1,000: 1.5/1.75/2" in line for line in lines
    )


def test_render_writes_small_svgs(tmp_path: Path) -> None:
    # matplotlib is in the `test` extra as well as `bench`, so this runs wherever the suite does
    written = sweep.render(_data(), tmp_path)
    assert [p.name for p in written] == ["scale-connections.svg", "scale-groups.svg", "scale-partitions.svg"]
    for p in written:
        svg = p.read_text()
        assert len(svg) < 60_000
        assert "broker" in svg  # text as text (svg.fonttype none), not glyph outlines
        assert "<dc:date>" not in svg


def test_without_matplotlib_render_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert sweep.render(_data(), tmp_path) is None
    assert "pip install -e '.[bench]'" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_the_json_of_a_run_round_trips_into_the_same_plots(tmp_path: Path) -> None:
    path = tmp_path / "scale-sweep.json"
    path.write_text(json.dumps(_data()))
    assert sweep.summary(json.loads(path.read_text())) == sweep.summary(_data())


def test_compact_rounds_coordinates_but_not_a_labels_text() -> None:
    svg = (
        '  <path d="M 52.542628 240.22002 \n'
        '    L 257.977812 51.88 " style="stroke-width: 0.8"/>\n'
        '   <text x="35.761234" y="163.153089">fit: 0.000123 s per 1,000</text>\n'
    )
    assert sweep.compact(svg) == (
        '<path d="M 52.54 240.22 \n'
        'L 257.97 51.88 " style="stroke-width: 0.8"/>\n'
        '<text x="35.76" y="163.15">fit: 0.000123 s per 1,000</text>\n'
    )
