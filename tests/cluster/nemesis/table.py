"""The table of nemesis runs in docs/replication.md, from the runs' summary.json files (written by
`run.run`), so that no figure is retyped:

    PYTHONPATH=src:tests python -m cluster.nemesis.table <run dir or summary.json>...

One markdown row per run, in the order given; the checker column names every check (`run.CHECKS`) whose
count is not zero, "0 violations" when none is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .run import CHECKS

HEADER = ("| Seed, s | Faults (per kind) | Acknowledged (sent) | Transactions committed / aborted / unknown "
          "| Group commits | Wall | Longest unavailability per kind (s) | Checker |\n"
          "|---|---|---|---|---|---|---|---|")


def row(s: dict) -> str:
    faults = ", ".join(f"{k} {n}" for k, n in sorted(s["faults"].items()))
    txns = s["txns"]
    unavailable = ", ".join(f"{k} {v:.1f}" for k, v in sorted(s["unavailability_s"].items()))
    counts = s["violations"]
    bad = [f"{k} {counts[k]}" for k in CHECKS if counts.get(k)]
    verdict = "**" + ", ".join(bad) + "**" if bad else "0 violations"
    if s.get("expected_loss_records"):
        verdict += f"; {s['expected_loss_records']} acknowledged nm-isr1 records lost as expected (unclean)"
    mode = "" if str(s.get("mode", "")).startswith("namespaces") else f" ({s.get('mode')})"
    unclean = ", unclean" if "unclean-election" in s["faults"] else ""
    return (f"| {s['seed']}, {s['seconds']:g}{unclean}{mode} | {s['faults_total']}: {faults} | {s['acked']:,} "
            f"({s['sent']:,}) | {txns.get('committed', 0)} / {txns.get('aborted', 0)} / {txns.get('unknown', 0)} "
            f"| {s['group_commits']} | {s['wall_s']:.0f} s | {unavailable} | {verdict} |")


def main(paths: list[str]) -> None:
    print(HEADER)
    for p in paths:
        path = Path(p)
        path = path / "summary.json" if path.is_dir() else path
        if not path.exists():  # a run still going, or one that never reached its report
            print(f"{p}: no summary", file=sys.stderr)
            continue
        print(row(json.loads(path.read_text())))


if __name__ == "__main__":
    main(sys.argv[1:])
