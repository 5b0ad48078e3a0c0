"""Jinja2 templates and their filters, shared by the console's pages and the static lab report (which
needs only Jinja2, not the web stack)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import jinja2

from kaflite.console.lab import key_label

__all__ = ["HERE", "template_env", "human_bytes", "human_rate", "human_seconds", "human_time"]

HERE = Path(__file__).parent


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"


def human_rate(r: float | None) -> str:
    return "-" if r is None else f"{r:,.1f}/s"


def human_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if math.isinf(s):
        return "never"
    s = max(0.0, s)
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    if s < 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def human_time(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def template_env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(bytes=human_bytes, rate=human_rate, seconds=human_seconds, time=human_time,
                       keylabel=key_label, urlq=lambda s: quote(str(s), safe=""), tp=lambda tp: f"{tp[0]}-{tp[1]}")
    return env
