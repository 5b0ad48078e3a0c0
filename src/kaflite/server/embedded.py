"""`EmbeddedBroker`: a real kaflite broker inside the current process, for tests and notebooks.

    with EmbeddedBroker() as broker:            # or: async with EmbeddedBroker() as broker
        Producer({"bootstrap.servers": broker.bootstrap})

The broker runs its asyncio server (uvloop when available) on a background thread with its own event loop,
listens on 127.0.0.1 (an ephemeral port unless `port` is given) and keeps its data in `data_dir` (a
temporary directory, removed on stop, when None). `dev=True` applies the `--dev` profile (100 ms initial
rebalance delay, small segments).

    with EmbeddedBroker(security="sasl_ssl") as broker:     # "ssl", "sasl_plaintext", "sasl_ssl"
        Producer(broker.confluent_config())                   # TLS to a generated CA, user alice

A secured broker (server/security/testkit.py) serves one listener of that protocol with development
certificates and users made for it, and hands out ready client configurations.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from kaflite.coordinator.timeline import RebalanceEvent
from kaflite.server.app import KafkaServer, new_event_loop
from kaflite.server.config import BrokerConfig
from kaflite.server.faults import FaultInjector
from kaflite.server.security.testkit import DEFAULT_USERS, SecurityKit

__all__ = ["EmbeddedBroker", "load_broker_config"]

T = TypeVar("T")


def load_broker_config(overrides: dict[str, str], dev: bool) -> BrokerConfig:
    """Kafka's defaults (plus the `--dev` profile when `dev`) with `overrides` applied; raises
    `ConfigError` naming a bad key or value."""
    return BrokerConfig.load(None, overrides=overrides, dev=dev)


class EmbeddedBroker:
    """A real kaflite broker in this process, on 127.0.0.1, for tests, notebooks and scripts.

    Use it as a context manager (`with` or `async with`), or call `start()` / `stop()`:

        with EmbeddedBroker() as broker:
            print(broker.bootstrap)                  # "127.0.0.1:<port>"

    Arguments:
        data_dir: where the logs live. None (default): a new temporary directory, removed by `stop()`;
            a path: kept after `stop()`, so a second broker on it finds the same topics and records.
        port: the listener's port; 0 (default) picks a free one (read it from `port` / `bootstrap`).
        overrides: any broker key of `server.properties` (e.g. {"num.partitions": "3"}); a bad key or
            value raises ConfigError naming it.
        dev: True (default) applies the `--dev` profile of `kaflite serve`: 100 ms initial rebalance
            delay and 1 MiB segments, so consumer groups form fast in tests. Like `--dev` it is not the
            durable mode; pass dev=False for Kafka's defaults (3 s rebalance delay, 1 GiB segments),
            and {"log.flush.interval.messages": "1"} to fsync before acknowledging.
        security: None (default): PLAINTEXT. "ssl", "sasl_plaintext" or "sasl_ssl": the one listener
            speaks that protocol, with a certificate for 127.0.0.1 from a CA generated for this broker
            (`ca_file`) and, for SASL, PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 logins for `users`.
        users: user -> password of a SASL broker (default alice/alice-secret and bob/bob-secret).
        sasl_mechanism: the mechanism the client configurations use (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
        client_auth: TLS only: require a client certificate from the broker's CA (the configurations
            carry one, for the first user).

    `confluent_config()`, `kafka_python_config()` and `aiokafka_config()` return the keyword arguments
    or the configuration dict of a client of each library for this broker (any protocol); `user=` picks
    the user of a SASL broker.

    The broker runs its asyncio server on a background (daemon) thread with its own event loop;
    `server` is the KafkaServer and `call(fn, *args)` runs `fn` on that loop and returns its result.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        port: int = 0,
        overrides: dict[str, str] | None = None,
        dev: bool = True,
        security: str | None = None,
        users: dict[str, str] | None = None,
        sasl_mechanism: str = "PLAIN",
        client_auth: bool = False,
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self._requested_port = port
        self.overrides = dict(overrides or {})
        self.dev = dev
        self.port = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: KafkaServer | None = None
        self._stopped: asyncio.Event | None = None
        self.kit: SecurityKit | None = None
        if security is not None:
            self.kit = SecurityKit(security, dict(users) if users is not None else dict(DEFAULT_USERS),
                                   sasl_mechanism, client_auth)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def security_protocol(self) -> str:
        return self.kit.protocol if self.kit is not None else "PLAINTEXT"

    @property
    def ca_file(self) -> Path | None:
        """The CA certificate clients must trust (TLS brokers), else None."""
        return self.kit.ca_file if self.kit is not None and self.kit.tls else None

    def confluent_config(self, user: str | None = None) -> dict[str, Any]:
        """confluent-kafka's configuration for this broker: `Producer(broker.confluent_config())`."""
        if self.kit is None:
            return {"bootstrap.servers": self.bootstrap}
        return self.kit.confluent(self.bootstrap, user)

    def kafka_python_config(self, user: str | None = None) -> dict[str, Any]:
        """kafka-python's keyword arguments: `KafkaProducer(**broker.kafka_python_config())`."""
        if self.kit is None:
            return {"bootstrap_servers": self.bootstrap}
        return self.kit.kafka_python(self.bootstrap, user)

    def aiokafka_config(self, user: str | None = None) -> dict[str, Any]:
        """aiokafka's keyword arguments: `AIOKafkaProducer(**broker.aiokafka_config())`."""
        if self.kit is None:
            return {"bootstrap_servers": self.bootstrap}
        return self.kit.aiokafka(self.bootstrap, user)

    @property
    def faults(self) -> FaultInjector:
        """The broker's fault injector (server/faults.py): `broker.faults.fail(api="Produce", error=...,
        times=3)`; needs `overrides={"kaflite.faults.enable": "true"}`."""
        faults = self.server.broker.faults
        if faults is None:
            raise RuntimeError('fault injection is off: start the broker with overrides={"kaflite.faults.enable": '
                               '"true"}')
        return faults

    @property
    def server(self) -> KafkaServer:
        assert self._server is not None, "broker not started"
        return self._server

    def start(self) -> EmbeddedBroker:
        if self._thread is not None:
            return self
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="kaflite-"))
        protocol = self.security_protocol
        overrides = {
            "listeners": f"{protocol}://127.0.0.1:{self._requested_port}",
            "log.dirs": str(self.data_dir),
            **(self.kit.prepare(self.data_dir) if self.kit is not None else {}),
            **self.overrides,
        }
        try:
            config = load_broker_config(overrides, self.dev)
        except BaseException:
            self._cleanup()
            raise
        started: Future[None] = Future()
        self._thread = threading.Thread(
            target=self._serve, args=(config, started), name="kaflite-broker", daemon=True
        )
        self._thread.start()
        try:
            started.result(timeout=30)
        except BaseException:
            self._thread.join(5)
            self._thread = None
            self._cleanup()
            raise
        return self

    def _serve(self, config: BrokerConfig, started: Future[None]) -> None:
        loop = new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)

        async def main() -> None:
            self._stopped = asyncio.Event()
            server = KafkaServer(config)
            try:
                await server.start()
            except BaseException as e:
                started.set_exception(e)
                return
            self._server = server
            self.port = server.port
            started.set_result(None)
            try:
                await self._stopped.wait()
            finally:
                await server.stop()

        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    def stop(self) -> None:
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if self._stopped is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._stopped.set)
            except RuntimeError:
                pass
        thread.join(30)
        self._thread = None
        self._loop = None
        self._server = None
        self._cleanup()

    def _cleanup(self) -> None:
        if self.kit is not None:
            self.kit.cleanup()
        if self._own_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` on the broker's loop thread and return its result (for tests and tools)."""
        assert self._loop is not None
        fut: Future[T] = Future()

        def run() -> None:
            try:
                fut.set_result(fn(*args))
            except BaseException as e:
                fut.set_exception(e)

        self._loop.call_soon_threadsafe(run)
        return fut.result(timeout=30)

    def expire_member(self, group: str, member_id: str) -> None:
        """Expire `member_id` of group `group` now, as its session timeout would: the coordinator removes
        it and rebalances (a KIP-848 group: fenced, its partitions released, the group epoch + 1); the
        member's next heartbeat gets UNKNOWN_MEMBER_ID and it rejoins (KIP-848: with member epoch 0)."""
        self._group_step(group, lambda shard, now: shard.handle_expire_member(group, member_id, now))

    def force_rebalance(self, group: str) -> None:
        """Make group `group` rebalance now: a stable classic group's members rejoin at their next
        heartbeat; a KIP-848 group's epoch goes up by one, so its members get a new target assignment and
        member epoch at their next heartbeat."""
        self._group_step(group, lambda shard, now: shard.handle_force_rebalance(group, now))

    def rebalance_history(self, group: str) -> list[RebalanceEvent]:
        """The rebalance timeline the coordinator keeps for `group`, oldest first (kaflite.coordinator.timeline:
        who joined or left and why, each rebalance's start, end, duration, generation and moved partitions);
        [] for a group it has none of; a share group's comes from the share coordinator (in memory). What
        `kaflite groups describe --history` shows."""
        from kaflite.protocol.errors import ErrorCode, KafkaError
        from kaflite.server.coordinators.groups import GroupService
        from kaflite.server.handlers.share import share_group_history

        assert self._loop is not None, "broker not started"

        async def run() -> Any:
            shared = share_group_history(self.server.broker, group)
            if shared is not None:
                return shared
            service = GroupService.of(self.server.broker)
            return await service.call(group, lambda shard, now: shard.handle_group_history(group, now),
                                      lambda code: code)

        result = asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)
        if isinstance(result, ErrorCode):
            raise KafkaError(result, f"group {group!r}")
        if result is None:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, f"group {group!r}")
        return result  # type: ignore[no-any-return]

    def _group_step(self, group: str, op: Callable[[Any, int], Any]) -> None:
        from kaflite.protocol.errors import ErrorCode, KafkaError
        from kaflite.server.coordinators.groups import GroupService

        assert self._loop is not None, "broker not started"

        async def run() -> ErrorCode:
            service = GroupService.of(self.server.broker)
            return await service.call(group, op, lambda code: code)  # type: ignore[no-any-return]

        code = asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)
        if code != ErrorCode.none:
            raise KafkaError(code, f"group {group!r}")

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedBroker:
        await asyncio.get_running_loop().run_in_executor(None, self.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.stop)
