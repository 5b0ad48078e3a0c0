"""Log compaction (cleanup.policy=compact). Placeholder until the cleaner lands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kaflite.storage.log import Log


@dataclass(frozen=True, slots=True)
class CleanResult:
    cleaned: bool
    segments: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


def compact_log(log: Log, now_ms: int) -> CleanResult:
    return CleanResult(False)
