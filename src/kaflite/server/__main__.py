"""`python -m kaflite.server [server.properties] [--override key=value ...] [--dev]`: run one broker.

The same as `kaflite serve` without the CLI's extras; used by tests that need a real broker process
(kill -9 and restart).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from kaflite.hypothesis_gate import keep_hypothesis_out

    keep_hypothesis_out()  # kio would import it: 0.6-0.9 s of CPU for nothing (kaflite/hypothesis_gate.py)
    from kaflite.server.app import run_broker

    parser = argparse.ArgumentParser(prog="python -m kaflite.server")
    parser.add_argument("config", nargs="?", type=Path, help="a server.properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--dev", action="store_true", help="development profile (NOT durable)")
    args = parser.parse_args(argv)
    overrides: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--override expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value
    from kaflite.server.config import BrokerConfig, ConfigError

    try:
        config = BrokerConfig.load(args.config, overrides=overrides, dev=args.dev)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        run_broker(config)
    except ConfigError as e:  # a rule only the broker can check (the data directory's cluster id, ...)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the port is taken, the data directory is not writable, ...
        print(f"error: cannot start the broker: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
