"""What this VM charges for memory the guest has not touched lately: system CPU per GB written into the
page cache (as the broker appends: `os.pwritev` of 400 KB buffers into a new file) or touched as new
anonymous memory, pass after pass.

    PYTHONPATH=src .venv/bin/python bench/page_cache_bench.py [--gb 1.2] [--passes 4] [--pause 0]
        [--mode file|anon] [--dir /tmp]

Each pass writes (or touches) --gb GB, reports the system and user CPU seconds per GB of each step of
about 0.4 GB, then deletes its file (or unmaps its memory), waits --pause seconds and starts the next.
The guest kernel's free page reporting (virtio-balloon, VIRTIO_BALLOON_F_REPORTING) hands free 2 MiB
blocks back to the host a while after they are freed; a guest page the host has taken back is faulted in
again by the host on its next touch, and the guest sees that as slow kernel copies (system time) of the
process that touched it. Pages freed moments ago are reused first and cost the guest's work only; pages
never touched, or freed long ago, cost more. --pause shows the difference.
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import time
from pathlib import Path

CHUNK = 400 * 1024  # the size of one of the sink's record batches, one pwritev of the broker's append
STEP = 1024 * CHUNK  # about 0.4 GB between reports


REPORTED = Path("/sys/module/page_reporting/parameters/reported_kib")


def reported_gb() -> float:
    """GB of free memory the guest has reported to the host since boot (this VM's kernel counts them in
    page_reporting's `reported_kib`); NaN where the kernel does not say."""
    try:
        return int(REPORTED.read_text()) / 1e6
    except (OSError, ValueError):
        return float("nan")


def _cpu() -> tuple[float, float]:
    t = os.times()
    return t.user, t.system


WATCHED = ("compact_stall", "compact_isolated", "pgscan_direct", "pgscan_kswapd")


def vmstat() -> dict[str, int]:
    """The kernel's counters of WATCHED (/proc/vmstat): direct compaction (a process waited for the kernel
    to move pages and make a larger free block), and reclaim (direct: in the allocating process)."""
    out = dict.fromkeys(WATCHED, 0)
    with open("/proc/vmstat") as f:
        for line in f:
            name, _, value = line.partition(" ")
            if name in out:
                out[name] = int(value)
    return out


def file_pass(directory: Path, total: int) -> list[tuple[float, float, float]]:
    """Write `total` bytes to a new file, 400 KB at a time; (GB, user s, system s) of each step."""
    buf = memoryview(bytearray(b"x" * CHUNK))
    steps: list[tuple[float, float, float]] = []
    fd, name = tempfile.mkstemp(prefix="kaflite-pcb-", dir=directory)
    try:
        pos = 0
        while pos < total:
            u0, s0 = _cpu()
            start, end = pos, min(total, pos + STEP)
            while pos < end:
                pos += os.pwritev(fd, [buf[: end - pos]], pos)
            u1, s1 = _cpu()
            steps.append(((end - start) / 1e9, u1 - u0, s1 - s0))
    finally:
        os.close(fd)
        os.unlink(name)
    return steps


def anon_pass(total: int) -> list[tuple[float, float, float]]:
    """Touch `total` bytes of new anonymous memory, one write per 4 KiB page; (GB, user s, system s) of
    each step."""
    steps: list[tuple[float, float, float]] = []
    m = mmap.mmap(-1, total)
    try:
        page = mmap.PAGESIZE
        pos = 0
        while pos < total:
            u0, s0 = _cpu()
            end = min(total, pos + STEP)
            for off in range(pos, end, page):
                m[off] = 1
            u1, s1 = _cpu()
            steps.append(((end - pos) / 1e9, u1 - u0, s1 - s0))
            pos = end
    finally:
        m.close()
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.2)
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--pause", type=float, default=0.0, help="seconds between passes")
    ap.add_argument("--mode", choices=("file", "anon"), default="file")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = ap.parse_args()
    if not 0 < args.gb <= 8 or not 1 <= args.passes <= 20 or not 0 <= args.pause <= 600:
        ap.error("--gb in (0, 8], --passes in [1, 20], --pause in [0, 600]")
    total = int(args.gb * 1e9)
    print(f"{args.mode}: {args.gb} GB per pass, pause {args.pause:g} s; load {os.getloadavg()[0]:.1f}")
    ended = reported_gb()  # at the end of the previous pass
    for i in range(args.passes):
        if i and args.pause:
            time.sleep(args.pause)
        t0, reported0, vm0 = time.perf_counter(), reported_gb(), vmstat()
        if i:
            print(f"reported to the host between passes {reported0 - ended:.2f} GB")
        steps = file_pass(args.dir, total) if args.mode == "file" else anon_pass(total)
        wall = time.perf_counter() - t0
        gb = sum(s[0] for s in steps)
        per_step = " ".join(f"{s[2] / s[0]:.2f}" for s in steps)
        print(
            f"pass {i + 1}: system {sum(s[2] for s in steps) / gb:.3f} CPU-s/GB, user "
            f"{sum(s[1] for s in steps) / gb:.3f} CPU-s/GB, wall {wall:.2f} s; system CPU-s/GB per step: "
            f"{per_step}; reported to the host since the pass began {reported_gb() - reported0:.2f} GB; "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        vm = vmstat()
        print("    kernel counters over the pass: " + ", ".join(f"{k} +{vm[k] - vm0[k]}" for k in WATCHED))
        ended = reported_gb()


if __name__ == "__main__":
    main()
