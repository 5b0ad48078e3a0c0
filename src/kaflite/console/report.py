"""The assignment lab as one self-contained HTML file (`kaflite assign --html OUT`): the same results
and SVG drawings as the console's lab page, with the stylesheet inlined, so it opens offline anywhere."""

from __future__ import annotations

from collections.abc import Iterable

from kaflite.assign.simulate import Group
from kaflite.console.lab import LAB_STRATEGIES, Change, run_lab

__all__ = ["lab_report_html"]


def lab_report_html(group: Group, change: Change | None = None, strategies: Iterable[str] = LAB_STRATEGIES) -> str:
    from kaflite.console.render import HERE, template_env

    runs, after = run_lab(group, change or None, strategies)
    css = (HERE / "static" / "console.css").read_text()
    return template_env().get_template("lab_report.html").render(
        group=group, runs=runs, change=change or None, after=after, css=css)
