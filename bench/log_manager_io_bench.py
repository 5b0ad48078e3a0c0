"""LogManager.load() and close() of an existing data directory, in this process, with N worker threads.

    PYTHONPATH=src .venv/bin/python bench/log_manager_io_bench.py DIR --threads 1 8 1 8

DIR is a broker's log dir (e.g. one filled by `bench/scale_bench.py`'s start-up phase, or a stopped broker's):
for each --threads value, in order, one load (the wall and CPU seconds, and whether the previous close left
the clean-shutdown marker) and one clean close (wall seconds). Alternating the values lets the page cache and
the machine's changing load hit both alike. The directory is left as a clean close leaves it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from kaflite.storage import LogConfig, LogManager
from kaflite.storage.checkpoint import CLEAN_SHUTDOWN_FILE


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    args = ap.parse_args()
    print(f"{'threads':>7} {'marker':>7} {'logs':>7} {'load s':>8} {'load CPU s':>11} {'close s':>8}")
    for n in args.threads:
        clean = (args.dir / CLEAN_SHUTDOWN_FILE).exists()
        m = LogManager([args.dir], LogConfig(), io_threads=n)
        t0, c0 = time.perf_counter(), time.process_time()
        m.load()
        load_s, load_cpu = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        m.close()
        close_s = time.perf_counter() - t0
        print(f"{n:>7} {'yes' if clean else 'no':>7} {len(m.logs()):>7,} {load_s:>8.2f} {load_cpu:>11.2f} {close_s:>8.2f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
