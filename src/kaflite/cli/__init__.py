"""kaflite's command line: `kaflite serve | topics | produce | consume | ...` (Kafka's CLI vocabulary).

`main()` is the console-script entry point; it imports the Typer application (`kaflite.cli.main`) only
when called. The helpers shared by every sub-command module (also those of other packages, e.g.
`kaflite.cli.groups_cmd`) live in `kaflite.cli.common` and are re-exported here; command modules import
them from `kaflite.cli.common`, so no module of the package imports the package itself.

Exit codes: 0 success, 1 a runtime failure (broker unreachable, topic missing, request refused),
2 bad usage or configuration (unknown key, invalid value, malformed KEY=VALUE).
"""

from __future__ import annotations

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_USAGE,
    Bootstrap,
    ClientErrors,
    CliFailure,
    admin_client,
    admin_result,
    check_reachable,
    client_config,
    describe_exception,
    fail,
    handle_errors,
    parse_key_values,
    print_error,
)

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "Bootstrap",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "CliFailure",
    "ClientErrors",
    "admin_client",
    "admin_result",
    "check_reachable",
    "client_config",
    "describe_exception",
    "fail",
    "handle_errors",
    "print_error",
    "parse_key_values",
    "main",
]


def main() -> None:
    """Console-script entry point (`kaflite ...`).

    Ctrl-C stops every command the same way whatever SIGINT disposition the process inherited: Python
    leaves SIGINT ignored when it starts ignored (a background job of a non-interactive shell, nohup, some
    CI runners), so the entry point installs the KeyboardInterrupt handler itself; commands that need
    more (produce, consume, serve) install their own on top of it."""
    import signal

    from kaflite.hypothesis_gate import keep_hypothesis_out

    keep_hypothesis_out()  # kio would import it: 0.6-0.9 s of CPU for nothing (kaflite/hypothesis_gate.py)
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # pragma: no cover - not the main thread (embedded use)
        pass
    from kaflite.cli.main import app

    app()


