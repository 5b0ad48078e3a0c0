"""Small server-side SVG charts: the console draws its pictures itself, so it needs no JavaScript chart
library and no network (it works offline, and a static `kaflite assign --html` report is one file).

Every function is pure: data in, an SVG string out. Text is escaped; sizes are in SVG user units and the
element scales with its container (viewBox + width 100%).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "line_chart", "bar_chart", "assignment_grid", "fmt_number"]

# Colour-blind friendly (Okabe-Ito, then Tableau's), cycled.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
           "#4E79A7", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#76B7B2", "#EDC948", "#9C755F")


def fmt_number(v: float) -> str:
    """Compact axis labels: 950, 1.2k, 3.4M, 0.25."""
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.3g}G"
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    if a == int(a):
        return str(int(v))
    return f"{v:.3g}"


def _nice_max(v: float) -> float:
    """The smallest 1/2/5 x 10^k at or above v (axis top)."""
    if v <= 0:
        return 1.0
    exp = math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        top = m * 10.0 ** exp
        if top >= v:
            return top
    return 10.0 ** (exp + 1)


def _svg_open(width: int, height: int, label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
            f'class="chart" role="img" aria-label="{escape(label)}" font-family="sans-serif" font-size="11">'
            f"<title>{escape(label)}</title>")


def line_chart(series: Mapping[str, Sequence[tuple[float, float]]], *, title: str, x_is_time: bool = True,
               y_label: str = "", width: int = 640, height: int = 220, now: float | None = None) -> str:
    """One polyline per series of (x, y) points. With `x_is_time`, x is epoch seconds and the axis is
    labelled in seconds before `now` (default: the last x)."""
    left, right, top, bottom = 56, 12, 22, 34
    pw, ph = width - left - right, height - top - bottom
    points = [p for s in series.values() for p in s]
    out = [_svg_open(width, height, title),
           f'<text x="{left}" y="14" font-weight="bold">{escape(title)}</text>']
    if not points:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#666">'
                   "no samples yet</text></svg>")
        return "".join(out)
    xs = [p[0] for p in points]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0 -= 1
    ymax = _nice_max(max(p[1] for p in points))
    end = x1 if now is None else now

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return top + ph - (y / ymax) * ph

    # grid and y ticks
    for i in range(5):
        y = ymax * i / 4
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 4}" y="{sy(y) + 4:.1f}" text-anchor="end">{fmt_number(y)}</text>')
    for i in range(5):
        x = x0 + (x1 - x0) * i / 4
        label = f"-{fmt_number(round(end - x))}s" if x_is_time else fmt_number(x)
        if x_is_time and round(end - x) == 0:
            label = "now"
        out.append(f'<text x="{sx(x):.1f}" y="{top + ph + 14}" text-anchor="middle">{label}</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" stroke="#888"/>')
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="#888"/>')
    if y_label:
        out.append(f'<text x="12" y="{top + ph / 2}" transform="rotate(-90 12 {top + ph / 2})" '
                   f'text-anchor="middle">{escape(y_label)}</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        if not pts:
            continue
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}">'
                   f"<title>{escape(name)}</title></polyline>")
        if len(pts) == 1:
            x, y = pts[0]
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>')
    # legend (first 8 series)
    lx = left + 8
    for i, name in enumerate(list(series)[:8]):
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{lx}" y="{height - 12}" width="10" height="8" fill="{color}"/>'
                   f'<text x="{lx + 13}" y="{height - 4}">{escape(name[:24])}</text>')
        lx += 20 + 7 * min(len(name), 24)
    out.append("</svg>")
    return "".join(out)


def bar_chart(labels: Sequence[str], values: Sequence[float], *, title: str, width: int = 640,
              bar_height: int = 16, highlight: Sequence[int] = ()) -> str:
    """Horizontal bars, one per label (records per partition, the heaviest keys...)."""
    left, right, top = 120, 60, 22
    height = top + len(labels) * (bar_height + 4) + 8
    out = [_svg_open(width, height, title),
           f'<text x="4" y="14" font-weight="bold">{escape(title)}</text>']
    vmax = max([*values, 0]) or 1
    pw = width - left - right
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        y = top + i * (bar_height + 4)
        w = max(1.0, v / vmax * pw) if v else 0
        color = PALETTE[3] if i in highlight else PALETTE[0]
        out.append(f'<text x="{left - 6}" y="{y + bar_height - 4}" text-anchor="end">{escape(label[:20])}</text>'
                   f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_height}" fill="{color}">'
                   f"<title>{escape(label)}: {fmt_number(v)}</title></rect>"
                   f'<text x="{left + w + 4:.1f}" y="{y + bar_height - 4}">{fmt_number(v)}</text>')
    out.append("</svg>")
    return "".join(out)


def assignment_grid(members: Sequence[str], partitions: Sequence[tuple[str, int]],
                    owner: Mapping[tuple[str, int], str], *, title: str,
                    previous_owner: Mapping[tuple[str, int], str] | None = None,
                    revoked: Mapping[tuple[str, int], str] | None = None, max_cells: int = 4000) -> str:
    """Members as rows, partitions as columns; a filled cell = the member owns the partition (coloured by
    topic). With `previous_owner`, a partition that changed owner has a red outline in its new row and a
    dashed outline in the row that lost it; `revoked` (cooperative rounds) marks partitions only revoked."""
    cols, rows = len(partitions), len(members)
    if cols * max(rows, 1) > max_cells:
        return (f'<p class="muted">{escape(title)}: {rows} members x {cols} partitions is too large to draw '
                f"(more than {max_cells} cells); see the table.</p>")
    cell = max(6, min(22, 560 // max(cols, 1)))
    left, top = 110, 34
    width = left + cols * cell + 60
    height = top + rows * cell + 18
    topics = list(dict.fromkeys(t for t, _ in partitions))
    tcolor = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(topics)}
    out = [_svg_open(width, height, title),
           f'<text x="4" y="14" font-weight="bold">{escape(title)}</text>']
    col_of = {tp: i for i, tp in enumerate(partitions)}
    # topic bands over the columns
    for t in topics:
        idx = [col_of[tp] for tp in partitions if tp[0] == t]
        x = left + min(idx) * cell
        w = (max(idx) - min(idx) + 1) * cell
        out.append(f'<rect x="{x}" y="20" width="{w - 1}" height="8" fill="{tcolor[t]}" opacity="0.5">'
                   f"<title>{escape(t)}</title></rect>")
        if w > 30:
            out.append(f'<text x="{x + 2}" y="27" font-size="8">{escape(t[: max(1, w // 6)])}</text>')
    row_of = {m: i for i, m in enumerate(members)}
    counts = dict.fromkeys(members, 0)
    for m, i in row_of.items():
        y = top + i * cell
        out.append(f'<text x="{left - 6}" y="{y + cell * 0.75:.1f}" text-anchor="end">{escape(m[:16])}</text>'
                   f'<line x1="{left}" x2="{left + cols * cell}" y1="{y}" y2="{y}" stroke="#eee"/>')
    for tp, m in owner.items():
        if m not in row_of or tp not in col_of:
            continue
        counts[m] += 1
        x, y = left + col_of[tp] * cell, top + row_of[m] * cell
        moved = previous_owner is not None and previous_owner.get(tp) != m
        stroke = ' stroke="#d00" stroke-width="2"' if moved else ""
        out.append(f'<rect class="owned{" moved" if moved else ""}" x="{x + 1}" y="{y + 1}" '
                   f'width="{cell - 2}" height="{cell - 2}" fill="{tcolor[tp[0]]}"{stroke}>'
                   f"<title>{escape(tp[0])}-{tp[1]} -&gt; {escape(m)}</title></rect>")
    lost: dict[tuple[str, int], str] = {}
    if previous_owner is not None:
        lost = {tp: m for tp, m in previous_owner.items() if owner.get(tp) != m}
    for tp, m in {**lost, **(revoked or {})}.items():
        if m not in row_of or tp not in col_of:
            continue
        x, y = left + col_of[tp] * cell, top + row_of[m] * cell
        out.append(f'<rect class="lost" x="{x + 1}" y="{y + 1}" width="{cell - 2}" height="{cell - 2}" fill="none" '
                   f'stroke="#d00" stroke-dasharray="2,2"><title>{escape(tp[0])}-{tp[1]} left {escape(m)}</title></rect>')
    for m, i in row_of.items():
        out.append(f'<text x="{left + cols * cell + 6}" y="{top + i * cell + cell * 0.75:.1f}">{counts[m]}</text>')
    out.append("</svg>")
    return "".join(out)
