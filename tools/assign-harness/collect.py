"""Turn AssignHarness.java's output into the test data kaflite's CI checks (tests/data/).

Adds the provenance (Kafka commit, JDK, generator seed) and writes compact JSON, one case per line.
"""

from __future__ import annotations

import argparse
import json
import subprocess


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
        return out.stderr.splitlines()[0] if out.stderr else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("harness_output")
    ap.add_argument("--kafka-commit", required=True, help="the apache/kafka commit the classes were compiled from")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.harness_output) as f:
        data = json.load(f)
    cases = data["cases"]
    meta = {
        "what": "rebalance rounds computed by Apache Kafka's own assignor classes (tools/assign-harness)",
        "kafka_commit": args.kafka_commit,
        "java": java_version(),
        "generator": data.get("meta"),
        "cases": len(cases),
        "rounds": sum(len(c["rounds"]) for c in cases),
    }
    with open(args.out, "w") as f:
        f.write('{"meta": ' + json.dumps(meta) + ',\n"cases": [\n')
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")
    print(f"{meta['cases']} cases, {meta['rounds']} rounds -> {args.out}")


if __name__ == "__main__":
    main()
