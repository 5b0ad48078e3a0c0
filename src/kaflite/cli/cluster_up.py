"""`kaflite cluster up` and `kaflite cluster status`: a local ZooKeeper + N brokers in one command, and the
cluster's health over the wire.

Rules of `cluster up`:
- ZooKeeper is `kaflite.cluster.zkserver` (Debian's jars run from Java); where it cannot run the command
  refuses in one line (`missing_reason()`) before starting anything;
- broker i (0..N-1) is `python -m kaflite.server --dev` with `broker.id=i`, its data in
  `<data-dir>/broker-i`, its log in `<data-dir>/broker-i.log`, listening on 127.0.0.1 only, on a free
  port or `--base-port + i`; the dev profile gives `zookeeper.session.timeout.ms=6000`;
  `offsets.topic.replication.factor` and `transaction.state.log.replication.factor` are Kafka's 3, or N
  when N < 3 brokers (so groups and transactions work on any cluster it starts); `--override` wins;
- every child runs in its own session, so a Ctrl-C in the terminal reaches this command only, and the
  stopping order is ours: brokers first by SIGTERM (controlled shutdown: leadership moves off each before
  it exits), then ZooKeeper (brokers need it to shut down cleanly);
- every process is stopped by its pid, with a bounded wait, then SIGKILL; SIGINT and SIGTERM both stop;
- a failure while starting stops what was started, and says which process failed and where its log is;
- once every broker is registered (Metadata lists all N), the coordinators' internal topics
  (`__consumer_offsets`, `__transaction_state`) are created by a FindCoordinator for each, bounded by
  INTERNAL_TOPICS_TIMEOUT_S: a broker lost a minute later cannot leave them uncreatable;
- then stdout gets `bootstrap servers: ...` and `export KAFLITE_BOOTSTRAP=...`, and `<data-dir>/cluster.env`
  holds that export line and this command's pid (client commands given no bootstrap use it while that pid
  lives); the file is removed when the cluster stops.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from kaflite.cli.cluster_status import ClusterStatus, status_lines, summarize
from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    Bootstrap,
    admin_client,
    client_config,
    describe_exception,
    fail,
    handle_errors,
    parse_key_values,
)
from kaflite.server.local_cluster import (
    BrokerProcess,
    ClusterStartError,
    LocalCluster,
    create_internal_topics,
)
from kaflite.storage.checkpoint import atomic_write

__all__ = ["BrokerProcess", "LocalCluster", "register_commands"]



class _Stop(BaseException):
    """SIGTERM received: stop like Ctrl-C. A BaseException, as KeyboardInterrupt: raised by the signal handler
    wherever the main thread is, it must not be taken for a failed status poll (`except Exception` there)."""


def _fetch_status(admin: Any, timeout: float) -> tuple[ClusterStatus | None, str | None]:
    try:
        return summarize(admin.list_topics(timeout=timeout)), None
    except Exception as err:
        return None, describe_exception(err)


def _table(cluster: LocalCluster, status: ClusterStatus | None, error: str | None) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"kaflite cluster ({cluster.bootstrap})", title_justify="left")
    table.add_column("Broker", justify="right")
    table.add_column("Address")
    table.add_column("State")
    table.add_column("Controller")
    for bid, addr, state in cluster.broker_states(status):
        style = "green" if state.startswith("up") else "red" if state.startswith("down") else "yellow"
        is_controller = status is not None and status.controller == bid
        table.add_row(str(bid), addr, Text(state, style=style), "*" if is_controller else "")
    zk_alive = cluster.zookeeper is not None and cluster.zookeeper.proc is not None and \
        cluster.zookeeper.proc.poll() is None
    footer = [f"ZooKeeper {cluster.zookeeper.connect if cluster.zookeeper else '-'}: "
              f"{'up' if zk_alive else 'down'}"]
    if status is not None:
        footer.append(
            f"Controller: {status.controller if status.controller is not None else 'none'}   "
            f"Topics: {status.topics}   Partitions: {status.partitions}   "
            f"Offline: {len(status.offline)}   Under-replicated: {len(status.under_replicated)}"
        )
    else:
        footer.append(f"Metadata unavailable: {error}")
    footer.append("Ctrl-C stops the cluster")
    return Group(table, Text("\n".join(footer)))


def _plain(cluster: LocalCluster, status: ClusterStatus | None, error: str | None) -> str:
    brokers = " ".join(f"{bid}={state}" for bid, _, state in cluster.broker_states(status))
    if status is None:
        return f"brokers: {brokers}; metadata unavailable: {error}"
    return (
        f"brokers: {brokers}; controller: {status.controller if status.controller is not None else 'none'}; "
        f"partitions: {status.partitions}; offline: {len(status.offline)}; "
        f"under-replicated: {len(status.under_replicated)}"
    )


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop()


@handle_errors
def up(
    brokers: Annotated[int, typer.Option("--brokers", "-n", min=1, max=64, help="Number of brokers.")] = 3,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Directory for ZooKeeper's and every broker's data and logs.")
    ] = Path("kaflite-cluster"),
    base_port: Annotated[
        int | None,
        typer.Option("--base-port", min=1, max=65535, help="Broker i listens on BASE_PORT + i (default: free ports)."),
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", "-o", metavar="KEY=VALUE", help="A broker configuration key for every broker."),
    ] = None,
    refresh: Annotated[float, typer.Option("--refresh", min=0.2, help="Seconds between status refreshes.")] = 1.0,
) -> None:
    """Start a local ZooKeeper and N brokers (dev profile), show a live status table; Ctrl-C stops all."""
    from kaflite.cluster.zkserver import missing_reason

    if base_port is not None and base_port + brokers - 1 > 65535:
        fail(f"--base-port: {base_port} + {brokers} brokers goes past port 65535", EXIT_USAGE)
    overrides = parse_key_values(override, "--override")
    reserved = {"broker.id", "listeners", "log.dirs", "zookeeper.connect"} & set(overrides)
    if reserved:
        fail(f"--override: {', '.join(sorted(reserved))} is set by `cluster up` itself", EXIT_USAGE)
    reason = missing_reason()
    if reason is not None:
        fail(f"cannot start ZooKeeper: {reason}")
    cluster = LocalCluster(data_dir.resolve(), brokers, base_port, overrides)
    try:
        cluster.check_ports()
    except ClusterStartError as err:
        fail(str(err))
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    tty = sys.stdout.isatty()

    def say(line: str) -> None:
        typer.echo(line, err=True)

    env_file = cluster.data_dir / "cluster.env"
    try:
        try:
            try:
                cluster.start(say)
            except ClusterStartError as err:
                fail(str(err))
            create_internal_topics(cluster, say, client_config(cluster.bootstrap))
            # the file before the lines: whoever reads the lines (a script, a test) may look for it at once
            atomic_write(env_file, cluster_env_text(cluster.bootstrap, os.getpid()).encode("utf-8"))
            typer.echo(f"bootstrap servers: {cluster.bootstrap}", nl=True)
            typer.echo(f"export KAFLITE_BOOTSTRAP={cluster.bootstrap}", nl=True)
            sys.stdout.flush()
            _watch(cluster, refresh, tty)
        except (KeyboardInterrupt, _Stop):
            pass
        finally:
            signal.signal(signal.SIGTERM, _raise_stop)  # a second SIGTERM while stopping: ignored below
            env_file.unlink(missing_ok=True)
            if cluster.pids():
                say("stopping the brokers (controlled shutdown), then ZooKeeper ...")
            _stop_shielded(cluster, say)
    finally:
        signal.signal(signal.SIGTERM, previous)
    say("cluster stopped")


def cluster_env_text(bootstrap: str, pid: int) -> str:
    """cluster.env: a line to source (`. kaflite-cluster/cluster.env`) and the pid that proves it current."""
    return (f"# written by `kaflite cluster up` (pid {pid}); removed when it stops\n"
            f"export KAFLITE_BOOTSTRAP={bootstrap}\nKAFLITE_CLUSTER_PID={pid}\n")


def _stop_shielded(cluster: LocalCluster, say: Any) -> None:
    """Stop everything even if another Ctrl-C / SIGTERM arrives meanwhile (each is bounded anyway)."""
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    old_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        cluster.stop(say)
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


def _watch(cluster: LocalCluster, refresh: float, tty: bool) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(cluster.bootstrap))
    timeout = max(1.0, refresh * 2)
    if tty:
        from rich.live import Live

        status, error = _fetch_status(admin, timeout)
        with Live(_table(cluster, status, error), refresh_per_second=4, transient=False) as live:
            while True:
                time.sleep(refresh)
                status, error = _fetch_status(admin, timeout)
                live.update(_table(cluster, status, error))
    last = None
    while True:
        status, error = _fetch_status(admin, timeout)
        line = _plain(cluster, status, error)
        if line != last:  # plain output: one line per change, not one per second
            typer.echo(line)
            sys.stdout.flush()
            last = line
        time.sleep(refresh)


@handle_errors
def status(
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds to wait for the answer.")] = 15.0,
    fail_on_problem: Annotated[
        bool,
        typer.Option("--fail-on-problem", help="Exit 1 when a partition is offline or under-replicated."),
    ] = False,
) -> None:
    """Brokers, controller, offline and under-replicated partitions (from a Metadata request)."""
    admin = admin_client(bootstrap_server)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception as err:
        fail(f"asking for the cluster's metadata: {describe_exception(err)}")
    st = summarize(metadata)
    for line in status_lines(st):
        typer.echo(line)
    if fail_on_problem and (st.offline or st.under_replicated):
        raise typer.Exit(1)


def register_commands(cluster_app: typer.Typer) -> None:
    cluster_app.command("up")(up)
    cluster_app.command("status")(status)

