"""Storage errors reported once per partition per interval, as one line (no traceback).

Why: on a full disk every produce, flush and checkpoint of every partition fails the same way, many times
a second; a traceback per failure buries the one line the operator needs. Kafka marks the log directory
offline and logs once; kaflite keeps serving what it can (reads, deletions that free space, writes again
as soon as space returns) and reports each partition's failure once per interval with the number of
repeats since the last report.

Rules: the key is what failed (a partition's directory name, a checkpoint file); the table is bounded
(keys not seen for an interval are forgotten once it holds `max_keys`); the clock is injectable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["ErrorThrottle", "storage_errors"]

log = logging.getLogger("kaflite.storage")


class ErrorThrottle:
    def __init__(self, interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 10_000) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.max_keys = max_keys
        self._seen: dict[str, list[float | int]] = {}  # key -> [time of last report, repeats since]

    def report(self, key: str, what: str, error: BaseException) -> bool:
        """Log `<key>: <what> failed: <error>` at ERROR unless this key was reported within the interval;
        returns whether a line was written."""
        now = self.clock()
        entry = self._seen.get(key)
        if entry is not None and now - entry[0] < self.interval_s:
            entry[1] += 1
            return False
        repeats = int(entry[1]) if entry is not None else 0
        if entry is None and len(self._seen) >= self.max_keys:
            self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.interval_s}
        self._seen[key] = [now, 0]
        suffix = f" ({repeats} more in the last {self.interval_s:.0f} s)" if repeats else ""
        log.error("%s: %s failed: %s%s", key, what, _describe(error), suffix)
        return True


def _describe(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror} (errno {error.errno})" + (f": {error.filename}" if error.filename else "")
    return f"{type(error).__name__}: {error}"


storage_errors = ErrorThrottle()
