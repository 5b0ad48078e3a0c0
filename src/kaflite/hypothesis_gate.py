"""Keeping hypothesis out of the processes that never generate test data.

kio imports hypothesis whenever it is installed (a virtualenv with kaflite's test extras, a data engineer's
environment) and registers a test strategy for each of its types: with pytest and trio pulled in that is
0.6-0.9 s of CPU in every process that imports kio. A broker (`python -m kaflite.server`), a `kaflite`
command and a Spark Python worker never use those strategies, so their processes make `import hypothesis`
fail (kio catches the ImportError and goes on without it).

Rules:
- `keep_hypothesis_out()` blocks the import only when hypothesis is not imported yet and
  KAFLITE_CLI_HYPOTHESIS is unset or empty (set, kio's own behaviour is kept: a test that needs it);
- it is called by the broker's and the CLI's entry points, and at `import kaflite` in a Spark Python
  worker (`in_spark_worker()`: the process was started as a `pyspark.*` module, as pyspark.daemon
  starts its workers); a user's own process (a notebook, a driver, pytest) is never changed by an import.
"""

from __future__ import annotations

import os
import sys

__all__ = ["in_spark_worker", "keep_hypothesis_out"]


def keep_hypothesis_out() -> None:
    """Make `import hypothesis` fail in this process (module rules)."""
    if "hypothesis" not in sys.modules and not os.environ.get("KAFLITE_CLI_HYPOTHESIS"):
        sys.modules["hypothesis"] = None  # type: ignore[assignment]  # None: ImportError on import


def in_spark_worker() -> bool:
    """Whether this process is one of PySpark's Python workers (pyspark.daemon and the workers it forks,
    or a worker module run on its own)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return str(getattr(spec, "name", "") or "").startswith("pyspark.")
