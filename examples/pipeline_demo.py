"""The kaflite Spark pipeline in one script (same as `kaflite pipeline demo`).

    .venv/bin/python examples/pipeline_demo.py                 # embedded kaflite broker
    .venv/bin/python examples/pipeline_demo.py 127.0.0.1:9092  # any Kafka-compatible broker

Like the command, Spark stays on loopback and logs only errors; the summary ends with the full path of
the Parquet output and of the temporary work directory.
"""

import sys

from kaflite.cli.pipeline_cmd import embedded_broker
from kaflite.spark.demo import print_report, run_demo

if __name__ == "__main__":
    report = run_demo(
        bootstrap=sys.argv[1] if len(sys.argv) > 1 else None,
        events=1500,
        rate=150,
        broker=embedded_broker,
    )
    print_report(report)
    sys.exit(1 if report.mismatches else 0)
