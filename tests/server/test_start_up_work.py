"""What a broker process does before it accepts clients (issue 25: a restart after kill -9 answering within
3 s, measured by bench/recovery_bench.py). Each probe runs in a fresh interpreter: what counts is what a new
broker process imports, which this test process has long since imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import missing_module, require

_NO_HYPOTHESIS = """
import sys
from kaflite.server.__main__ import main
try:
    main(["--help"])  # the entry point's start-up, then argparse exits
except SystemExit:
    pass
import kaflite.server.app, kaflite.server.broker  # what run_broker imports
print(sorted(m for m, v in sys.modules.items() if m.split(".")[0] == "hypothesis" and v is not None))
"""

_SCHEMAS = """
import sys
from kaflite.server.handlers import load_registry
def requests():
    return sum(1 for m in sys.modules if m.startswith("kio.schema.") and m.endswith(".request"))
registry = load_registry()
before = requests()
warmed = registry.warm_schemas()
print(before, requests(), warmed, len(registry.ranges()))
"""


def _run(code: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "KAFLITE_CLI_HYPOTHESIS"}
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[-1]


def test_the_broker_process_does_not_import_hypothesis(tmp_path: Path) -> None:
    """kio registers a hypothesis strategy per type when hypothesis is importable: 0.6-0.7 s of CPU at every
    broker start in a virtualenv with the test extras (before: the broker's entry point let it in)."""
    require(missing_module("hypothesis"))  # with the test extras installed, where the cost was
    assert _run(_NO_HYPOTHESIS, tmp_path) == "[]"


def test_the_registry_loads_no_protocol_schema_until_warmed(tmp_path: Path) -> None:
    """The handler registry clips each API's versions from kio's index; the ~100 schema modules (request and
    response of each API's newest version) load in `warm_schemas`, which the server runs in a worker thread
    once it listens (before: `register` loaded them all before the broker listened)."""
    before, after, warmed, apis = (int(x) for x in _run(_SCHEMAS, tmp_path).split())
    assert warmed == apis > 40
    assert after - before >= apis - 2  # (a handler module may import a request schema of its own)


_FREEZE = """
import asyncio, gc, os, signal, sys
from kaflite.server.app import run_broker
from kaflite.server.config import BrokerConfig

config = BrokerConfig.load(None, overrides={"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": sys.argv[1]})
seen = []

def started(server):
    async def watch():
        for _ in range(2000):  # freeze_start_up_heap runs once the schemas are loaded (20 s at most)
            if gc.get_freeze_count():
                break
            await asyncio.sleep(0.01)
        seen.append(gc.get_freeze_count())
        os.kill(os.getpid(), signal.SIGTERM)
    seen.append(gc.get_freeze_count())  # none yet when the broker starts listening
    asyncio.ensure_future(watch())

run_broker(config, on_started=started)
print(seen[0], seen[1])
"""


def test_the_broker_process_freezes_its_start_up_heap_once_started(tmp_path: Path) -> None:
    """A full garbage collection traversed the whole start-up heap (~60,000 objects, never garbage) on
    whichever thread allocated, the event loop's included: 30-65 ms with nothing collected, the idle loop's
    longest stall in bench/loop_stall_bench.py. run_broker moves that heap to the permanent generation once
    the broker listens and its schemas are loaded (before: never)."""
    env = {k: v for k, v in os.environ.items() if k != "KAFLITE_CLI_HYPOTHESIS"}
    out = subprocess.run([sys.executable, "-c", _FREEZE, str(tmp_path / "data")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    at_start, frozen = (int(x) for x in out.stdout.split())
    assert at_start == 0 and frozen > 10_000, out.stdout
    assert "start-up heap frozen" in out.stderr


_WARM_LATER = """
import os, signal, sys, time
from kaflite.server import app
from kaflite.server.app import run_broker
from kaflite.server.config import BrokerConfig
from kaflite.server.handlers import Registry

config = BrokerConfig.load(None, overrides={"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": sys.argv[1]})
at: dict[str, float] = {}
real = Registry.warm_schemas

def warm(self):
    at["warm"] = time.monotonic()
    os.kill(os.getpid(), signal.SIGTERM)
    return real(self)

Registry.warm_schemas = warm

def started(server):
    at["listening"] = time.monotonic()

run_broker(config, on_started=started)
print(at["warm"] - at["listening"], app.SCHEMA_WARM_UP_DELAY_S)
"""


def test_the_schemas_warm_up_waits_a_moment_after_the_broker_listens(tmp_path: Path) -> None:
    """The first answers after a start (a Metadata of every partition: the longest) do not share the GIL
    with the worker thread importing the protocol schemas: that starts SCHEMA_WARM_UP_DELAY_S after the
    broker listens (before: at once, 0.3 s of CPU beside the first answer of a 10,000-partition start)."""
    env = {k: v for k, v in os.environ.items() if k != "KAFLITE_CLI_HYPOTHESIS"}
    out = subprocess.run([sys.executable, "-c", _WARM_LATER, str(tmp_path / "data")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    waited, delay = (float(x) for x in out.stdout.split())
    assert delay > 0 and waited >= delay * 0.9, out.stdout
