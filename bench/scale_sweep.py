"""Cost against connections, groups and partitions, as plots (issue 28): bench/scale_bench.py's phases at
several sizes, each size repeated, the raw results in a JSON file and drawn as SVG plots.

    PYTHONPATH=src .venv/bin/python bench/scale_sweep.py                 # the three sweeps, 3 repeats each
                                          # (14 min at load 11-18 on 2 cores, then 1.5 min removing --cache)
    PYTHONPATH=src .venv/bin/python bench/scale_sweep.py --only partitions --repeat 5 --cache /tmp/sweep
    PYTHONPATH=src .venv/bin/python bench/scale_sweep.py --connections 200 500 --groups 20 50 \\
        --partitions 0 100 --repeat 1 --out /tmp/quick                    # a check of the plumbing, 1-3 minutes
    PYTHONPATH=src .venv/bin/python bench/scale_sweep.py --plot-only docs/img/scale-sweep.json

What is measured is scale_bench's, one broker process per size and repeat (a new directory each, left
SETTLE_S after its first Metadata answer before the phase begins), so no size inherits another's heap:

- connections (`connections_phase`): N idle connections, each answered one ApiVersions: the broker's RSS
  before and after (KiB per connection), its CPU per accepted connection, the accept rate, and a probe's
  Metadata p50 / p99 with the N open beside its own p50 / p99 a moment before, with none open.
- groups (`groups_phase`): M classic groups of 3 members heartbeating: the broker's CPU over the window
  (and the same broker's idle CPU just before, per second), per heartbeat, and one more group's rebalance
  alone (before the M form) and with the M heartbeating.
- partitions (`timed_start`): a cleanly stopped directory of P partitions (topics of 100, --fill-records x
  --fill-size B each, P = 0 the empty broker) started: seconds and broker CPU seconds until the first
  Metadata answer, then its clean stop (SIGTERM). The directories are created once under --cache (a
  `.ready` file beside each says its creation finished, so an interrupted one is made again) and removed
  at the end, unless --keep-cache (then a later run with the same --cache reuses them).

Sizes are visited in turn within each repeat, in reverse order every other repeat, so a change of the
machine's load falls on all sizes alike. The load average is recorded beside every measurement: the machine
is shared, and the plots' titles give its range. The per-unit figures (KiB per connection, CPU per
connection, per heartbeat, per partition) are the steadier ones; wall times and tails move with the load.

Plots need matplotlib (the `bench` extra: pip install -e '.[bench]'); without it the JSON is still written,
a line says what to install, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scale_bench import (
    OVERRIDES,
    connections_phase,
    groups_phase,
    live_broker,
    populate,
    raise_nofile,
    timed_start,
    wait_metadata,
)

BENCH = Path(__file__).resolve().parent
DOCS_IMG = BENCH.parent / "docs" / "img"
KINDS = ("connections", "groups", "partitions")
# a new broker's first seconds are not idle (it warms up the protocol schemas 1 s after it listens; a first
# sweep had its "idle" CPU at 26 % of a core and a negative CPU per heartbeat): the phases start after this
SETTLE_S = 3.0


# -- the runs ---------------------------------------------------------------------------------------------
def turns(sizes: list[int], repeat: int) -> list[tuple[int, int]]:
    """(repeat, size) in the order they run: every size once per repeat, reversed every other repeat."""
    return [(r, n) for r in range(repeat) for n in (sizes if r % 2 == 0 else sizes[::-1])]


async def sweep(
    kind: str, sizes: list[int], repeat: int, one: Callable[[int], Awaitable[dict[str, Any]]]
) -> list[dict[str, Any]]:
    rows = []
    for r, n in turns(sizes, repeat):
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        row = await one(n)
        rows.append({"repeat": r, "size": n, "load": load0, "load_end": os.getloadavg()[0], **row})
        print(
            f"{kind} {n:,} (repeat {r + 1}/{repeat}): {time.perf_counter() - t0:.0f} s, load {load0:.1f}",
            flush=True,
        )
    return rows


async def one_connections(tmp: Path, n: int, probes: int) -> dict[str, Any]:
    b, limit = live_broker(Path(tempfile.mkdtemp(dir=tmp)) / "live", n, 0)
    try:
        await wait_metadata(b.port)
        await asyncio.sleep(SETTLE_S)
        return await connections_phase(b, n, probes, limit)
    finally:
        b.stop()
        shutil.rmtree(b.data.parent)


async def one_groups(tmp: Path, m: int, hb_ms: int, window: float, rebalances: int) -> dict[str, Any]:
    b, _ = live_broker(Path(tempfile.mkdtemp(dir=tmp)) / "live", 0, m)
    try:
        await wait_metadata(b.port)
        await asyncio.sleep(SETTLE_S)
        return await groups_phase(b, m, hb_ms, window, rebalances)
    finally:
        b.stop()
        shutil.rmtree(b.data.parent)


async def prepare(cache: Path, sizes: list[int], records: int, size: int) -> dict[int, Path]:
    """A cleanly stopped directory per partition count under `cache`, made unless its `.ready` is there."""
    dirs = {}
    for p in sizes:
        d = cache / f"p{p}-{records}x{size}"
        ready = d.with_name(d.name + ".ready")
        if not ready.exists():
            shutil.rmtree(d, ignore_errors=True)
            # the empty broker is started and stopped once too: every start measured is a restart
            took = await populate(d, p, records, size)
            ready.write_text(f"{took:.1f} s to create and fill\n")
        dirs[p] = d
    return dirs


async def one_start(data: Path, p: int) -> dict[str, Any]:
    secs, cpu, parts, stop_s = await timed_start(data, OVERRIDES, False)
    if parts != p:
        raise RuntimeError(f"{data}: {parts} partitions in the Metadata answer, {p} expected")
    return {"start_s": secs, "cpu_s": cpu, "stop_s": stop_s}


def commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(BENCH), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def save(raw: Path, data: dict[str, Any]) -> None:
    raw.write_text(json.dumps(data, indent=1) + "\n")
    print(f"raw results: {raw}", flush=True)


async def run(args: argparse.Namespace, tmp: Path, raw: Path) -> dict[str, Any]:
    """The sweeps asked for; `raw` is written after each (a failure late in a long run keeps the rest)."""
    only = set(args.only or KINDS)
    nofile = raise_nofile(max([*args.connections, *(3 * m for m in args.groups), 0]) + 200)
    data: dict[str, Any] = {
        "meta": {
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "cores": os.cpu_count(),
            "commit": commit(),
            "python": sys.version.split()[0],
            "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
            "nofile": nofile,
            "repeat": args.repeat,
            "probes": args.probes,
            "heartbeat_ms": args.heartbeat_ms,
            "window_s": args.window,
            "rebalances": args.rebalances,
            "fill_records": args.fill_records,
            "fill_size": args.fill_size,
            "load_start": os.getloadavg(),
        }
    }
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {nofile}", flush=True)
    if "connections" in only:
        data["connections"] = await sweep(
            "connections", args.connections, args.repeat, lambda n: one_connections(tmp, n, args.probes)
        )
        save(raw, data)
    if "groups" in only:
        data["groups"] = await sweep(
            "groups",
            args.groups,
            args.repeat,
            lambda m: one_groups(tmp, m, args.heartbeat_ms, args.window, args.rebalances),
        )
        save(raw, data)
    if "partitions" in only:
        t0 = time.perf_counter()
        dirs = await prepare(args.cache, args.partitions, args.fill_records, args.fill_size)
        data["meta"]["partitions_prepared_s"] = time.perf_counter() - t0
        data["partitions"] = await sweep(
            "partitions", args.partitions, args.repeat, lambda p: one_start(dirs[p], p)
        )
    data["meta"]["load_end"] = os.getloadavg()
    data["meta"]["ended"] = datetime.now(UTC).isoformat(timespec="seconds")
    save(raw, data)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return data


# -- what the plots show (no matplotlib needed) -----------------------------------------------------------
@dataclass
class Series:
    """Points (size, value), every repeat's; drawn as dots with a line through each size's median. `fit`:
    the unit of the least-squares slope (value per size, times `fit_scale`) to name in the legend."""

    label: str
    points: list[tuple[float, float]]
    fit: str | None = None
    fit_scale: float = 1.0


@dataclass
class Panel:
    title: str
    ylabel: str
    series: list[Series]
    hlines: list[tuple[float, str]] = field(default_factory=list)
    log: bool = False  # a logarithmic y axis: for tails, where one run's outlier would flatten the rest


@dataclass
class Plot:
    name: str
    title: str
    xlabel: str
    panels: list[Panel]


def by_size(points: list[tuple[float, float]]) -> list[tuple[float, float, float, float]]:
    """(size, min, median, max) of each size's values, sizes ascending."""
    values: dict[float, list[float]] = {}
    for x, y in points:
        values.setdefault(x, []).append(y)
    return [(x, min(v), statistics.median(v), max(v)) for x, v in sorted(values.items())]


def slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through every point."""
    fit = statistics.linear_regression([x for x, _ in points], [y for _, y in points])
    return fit.slope, fit.intercept


def fit_label(s: Series) -> str:
    if s.fit is None or len({x for x, _ in s.points}) < 2:
        return s.label
    return f"{s.label}; fit: {slope(s.points)[0] * s.fit_scale:.3g} {s.fit}"


def title(what: str, rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    loads = [x for r in rows for x in (r["load"], r["load_end"])]
    return (
        f"kaflite, {what}: {meta['started'][:16].replace('T', ' ')} UTC, {meta['cores']} cores shared with "
        f"other jobs (load average {min(loads):.1f}-{max(loads):.1f}), {meta['repeat']} runs of each size"
    )


def plots(data: dict[str, Any]) -> list[Plot]:
    meta, out = data["meta"], []
    if rows := data.get("connections"):
        p99_base = [r["base_p99"] for r in rows]
        out.append(
            Plot(
                "scale-connections",
                title("idle connections", rows, meta),
                "idle connections open (each answered one ApiVersions)",
                [
                    Panel(
                        "broker RSS",
                        "MiB",
                        [
                            Series(
                                "the N open (none open: same broker, before)",
                                [(r["n"], r["rss1"]) for r in rows] + [(0, r["rss0"]) for r in rows],
                                "KiB per connection",
                                1024,
                            )
                        ],
                    ),
                    Panel(
                        "broker RSS per idle connection",
                        "KiB",
                        [Series("(after - before) / N", [(r["n"], r["kib_per_conn"]) for r in rows])],
                    ),
                    Panel(
                        "broker CPU per accepted connection",
                        "ms (utime + stime, 10 ms ticks)",
                        [
                            Series(
                                "connect + one ApiVersions, 100 in flight",
                                [(r["n"], r["accept_cpu_ms"]) for r in rows],
                            )
                        ],
                    ),
                    Panel(
                        "accept rate (the bench's client loop on the same cores)",
                        "connections / s",
                        [Series("N / time to open all", [(r["n"], r["accept_per_s"]) for r in rows])],
                    ),
                    Panel(
                        f"probe: {meta['probes']} Metadata round trips on its own connection",
                        "ms",
                        [
                            Series("p99, the N open", [(r["n"], r["p99"]) for r in rows]),
                            Series(
                                "p99, none open (same broker, just before)",
                                [(r["n"], r["base_p99"]) for r in rows],
                            ),
                            Series("p50, the N open", [(r["n"], r["p50"]) for r in rows]),
                            Series("p50, none open", [(r["n"], r["base_p50"]) for r in rows]),
                        ],
                        [(2 * statistics.median(p99_base), "2 x the median p99 with none open")],
                    ),
                    Panel(
                        "probe p99: N open / none open, same broker",
                        "ratio",
                        [Series("each run's ratio", [(r["n"], r["p99"] / r["base_p99"]) for r in rows])],
                        [(2.0, "the acceptance: 2 x")],
                    ),
                ],
            )
        )
    if rows := data.get("groups"):
        hb_s = meta["heartbeat_ms"] / 1000
        out.append(
            Plot(
                "scale-groups",
                title(
                    f"classic groups of 3 members, a heartbeat every {meta['heartbeat_ms']} ms", rows, meta
                ),
                "groups heartbeating (3 members each, a connection per member)",
                [
                    Panel(
                        f"broker CPU over a {meta['window_s']:.0f} s window",
                        "% of a core",
                        [
                            Series(
                                "the M groups heartbeating",
                                [(r["m"], r["cpu_share"] * 100) for r in rows],
                                "% per 1,000 groups",
                                1000,
                            ),
                            Series(
                                "idle (same broker, before they formed)",
                                [(r["m"], r["idle_cpu"] / r["window_s"] * 100) for r in rows],
                            ),
                        ],
                    ),
                    Panel(
                        "broker CPU per heartbeat (idle CPU taken off)",
                        "us",
                        [Series("per heartbeat answered", [(r["m"], r["us_per_hb"]) for r in rows])],
                    ),
                    Panel(
                        "heartbeats answered",
                        "per s",
                        [
                            Series("answered in the window", [(r["m"], r["hb_per_s"]) for r in rows]),
                            Series(
                                "asked (3 M per heartbeat interval)",
                                [(r["m"], 3 * r["m"] / hb_s) for r in rows],
                            ),
                        ],
                    ),
                    Panel(
                        f"one more group's rebalance, median of {meta['rebalances']}",
                        "ms (first JoinGroup to last SyncGroup)",
                        [
                            Series("with the M heartbeating", [(r["m"], r["loaded_p50"]) for r in rows]),
                            Series(
                                "alone (same broker, before they formed)",
                                [(r["m"], r["alone_p50"]) for r in rows],
                            ),
                        ],
                    ),
                    Panel(
                        f"one more group's rebalance, worst of {meta['rebalances']}",
                        "ms (log scale)",
                        [
                            Series("with the M heartbeating", [(r["m"], r["loaded_max"]) for r in rows]),
                            Series(
                                "alone (same broker, before they formed)",
                                [(r["m"], r["alone_max"]) for r in rows],
                            ),
                        ],
                        log=True,
                    ),
                    Panel(
                        "time for all M groups to form",
                        "s",
                        [Series("3 M members joined and synced", [(r["m"], r["formed_s"]) for r in rows])],
                    ),
                ],
            )
        )
    if rows := data.get("partitions"):
        out.append(
            Plot(
                "scale-partitions",
                title(
                    f"start-up after a clean stop, topics of 100 partitions, "
                    f"{meta['fill_records']} x {meta['fill_size']} B in each",
                    rows,
                    meta,
                ),
                "partitions (0: the empty broker, same run)",
                [
                    Panel(
                        "broker CPU by its first Metadata answer",
                        "s (utime + stime)",
                        [
                            Series(
                                "each start",
                                [(r["size"], r["cpu_s"]) for r in rows],
                                "s per 1,000 partitions",
                                1000,
                            )
                        ],
                    ),
                    Panel(
                        "process start to first Metadata answer",
                        "s (wall)",
                        [
                            Series(
                                "each start",
                                [(r["size"], r["start_s"]) for r in rows],
                                "s per 1,000 partitions",
                                1000,
                            )
                        ],
                    ),
                    Panel(
                        "clean stop (SIGTERM) after that start",
                        "s (wall)",
                        [
                            Series(
                                "each stop",
                                [(r["size"], r["stop_s"]) for r in rows],
                                "s per 1,000 partitions",
                                1000,
                            )
                        ],
                    ),
                ],
            )
        )
    return out


def summary(data: dict[str, Any]) -> list[str]:
    """A line per panel series: each size's min / median / max, and the fitted slope where one is drawn."""
    lines = []
    for p in plots(data):
        lines.append(f"== {p.name}: {p.title}")
        for panel in p.panels:
            for s in panel.series:
                cells = ", ".join(
                    f"{x:,.0f}: {lo:.3g}/{med:.3g}/{hi:.3g}" for x, lo, med, hi in by_size(s.points)
                )
                lines.append(f"{panel.title} [{panel.ylabel}], {fit_label(s)}: {cells}")
    return lines


def compact(svg: str) -> str:
    """matplotlib's SVG without its indentation, and its coordinates to 1/100 of a point (it writes six
    decimals): a third smaller. A label's text is left as it is."""
    out = []
    for line in svg.splitlines():
        line = line.lstrip(" ")
        head, text = (line.split(">", 1) + [""])[:2] if line.startswith("<text") else (line, "")
        head = re.sub(r"(\d\.\d\d)\d+", r"\1", head)
        out.append(f"{head}>{text}" if text else head)
    return "\n".join(out) + "\n"


# -- the plots (matplotlib) ---------------------------------------------------------------------------------
def render(data: dict[str, Any], out_dir: Path) -> list[Path] | None:
    """An SVG per sweep in `out_dir`; None (and a line saying what to install) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, MaxNLocator
    except ImportError:
        print(
            "matplotlib is not installed, so no plots: pip install -e '.[bench]' (the raw results are in the JSON)"
        )
        return None
    # small, diffable files: text as text (no embedded glyphs) naming one font family, not matplotlib's list
    # of ten on each of the hundred labels; ids that do not change between renders
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "kaflite-scale-sweep",
            "font.size": 8,
            "font.family": "sans-serif",
            "font.sans-serif": ["DejaVu Sans"],
        }
    )
    written = []
    for p in plots(data):
        cols = min(3, len(p.panels))
        rows = -(-len(p.panels) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows + 0.5), squeeze=False)
        for ax, panel in zip(axes.flat, p.panels, strict=False):
            for i, s in enumerate(panel.series):
                colour = f"C{i}"
                # no alpha, no edge: a dot's style is one fill colour (it is written out for every dot)
                ax.plot([x for x, _ in s.points], [y for _, y in s.points], "o", color=colour, ms=3, mew=0)
                med = by_size(s.points)
                ax.plot([m[0] for m in med], [m[2] for m in med], "-", color=colour, lw=1, label=fit_label(s))
            for y, label in panel.hlines:
                ax.axhline(y, color="grey", ls="--", lw=0.8, label=label)
            ax.set_title(panel.title, fontsize=8)
            ax.set_ylabel(panel.ylabel)
            ax.set_xlabel(p.xlabel, fontsize=7)
            if panel.log:
                ax.set_yscale("log")
            else:
                ax.set_ylim(bottom=0)
                ax.yaxis.set_major_locator(MaxNLocator(5))
            xmax = max(x for s in panel.series for x, _ in s.points)
            ax.set_xlim(-0.04 * xmax, 1.04 * xmax)  # a size-0 baseline's dots whole, beside the y axis
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
            ax.xaxis.set_major_locator(MaxNLocator(5))  # each tick is a few hundred bytes of SVG
            ax.grid(True, axis="y", lw=0.3)
            ax.legend(fontsize=6.5, loc="best")
        for ax in list(axes.flat)[len(p.panels) :]:
            ax.set_visible(False)
        fig.suptitle(p.title + "\n(dots: every run; line: each size's median)", fontsize=8.5)
        fig.tight_layout()
        svg = io.StringIO()
        fig.savefig(svg, format="svg", metadata={"Date": None})
        plt.close(fig)
        path = out_dir / f"{p.name}.svg"
        path.write_text(compact(svg.getvalue()))
        written.append(path)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, nargs="+", default=[1000, 2500, 5000, 10000])
    ap.add_argument("--groups", type=int, nargs="+", default=[100, 250, 500, 1000])
    ap.add_argument("--partitions", type=int, nargs="+", default=[0, 1000, 2500, 5000, 10000])
    ap.add_argument("--only", choices=KINDS, nargs="+", help="these sweeps only (default: all three)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each size")
    ap.add_argument("--probes", type=int, default=500)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--window", type=float, default=4.0)
    ap.add_argument("--rebalances", type=int, default=20)
    ap.add_argument("--fill-records", type=int, default=10)
    ap.add_argument("--fill-size", type=int, default=100)
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "kaflite-scale-sweep",
        help="where the partition sweep's directories are made once and kept until the end",
    )
    ap.add_argument("--keep-cache", action="store_true", help="leave --cache for the next run")
    ap.add_argument("--out", type=Path, default=DOCS_IMG, help="the folder for scale-sweep.json and the SVGs")
    ap.add_argument(
        "--plot-only",
        type=Path,
        metavar="JSON",
        help="draw the plots of an earlier run's JSON, into the JSON's folder",
    )
    args = ap.parse_args()
    if min([*args.connections, *args.groups]) < 1 or min(args.partitions) < 0:
        ap.error("connections and groups from 1 (none open is each run's baseline), partitions from 0")
    if args.plot_only is not None:
        data = json.loads(args.plot_only.read_text())
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        try:
            with tempfile.TemporaryDirectory(prefix="kaflite-sweep-") as d:
                data = asyncio.run(run(args, Path(d), args.out / "scale-sweep.json"))
        finally:
            if not args.keep_cache:
                shutil.rmtree(args.cache, ignore_errors=True)
    print("\n".join(summary(data)))
    written = render(data, args.out if args.plot_only is None else args.plot_only.parent)
    if written is None:
        sys.exit(1)
    for path in written:
        print(f"{path}: {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
