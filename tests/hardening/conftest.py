"""The hardening tests: hostile and slow clients, full disks, crash recovery, descriptor limits."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
