"""The session layer of a broker's ZooKeeper client (Kafka's `ZooKeeperClient`): the connection, the
retries, session expiry and its events, and the thread watches hand their work to. The znode layout lives
above it (`cluster.zk.KafkaZkClient`); this module and that one are the only ones that import kazoo.

Rules:
- the chroot of `zookeeper.connect` is created when missing, as Kafka does; ZooKeeper being unreachable
  at start-up is a one-line `ZkConnectionError` naming the address and the timeout key, never a traceback;
- kazoo reconnects for ever (0.1 s doubling to 1 s); only a running ZooKeeper expires a session;
- an operation wrapped by `retried` is run again on ConnectionLoss / OperationTimeout while the session
  lives (kazoo's KazooRetry: at most RETRY_MAX_TRIES tries within one session timeout, backoff 0.1 s
  doubling to 1 s), as Kafka's ZooKeeperClient retries every request until connected; an expired session
  ends the retries (SessionExpiredError), and running out of them raises RetryFailedError;
- session changes become `SessionStateChanged` ("connected", "suspended", "lost") for every listener, on
  kazoo's thread (listeners must not block); what needs ZooKeeper after a reconnection runs on threads of
  its own (`_on_connected`, overridden by the layout: re-registration, re-armed watches);
- what kazoo calls on its single callback thread for a watch (`_safe`) only enqueues: the work runs on the
  `zk-watch` thread, one task at a time in the order the watches fired, a failing task logged and the next
  one run.
"""

from __future__ import annotations

import functools
import inspect
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from kaflite.cluster import zkdata as zd
from kaflite.cluster.zkdata import parse_connect

__all__ = ["RETRY_MAX_TRIES", "SessionStateChanged", "ZkConnectionError", "ZooKeeperSession", "retried"]

log = logging.getLogger("kaflite.cluster.zk")

# tries of one ZooKeeper operation on ConnectionLoss / OperationTimeout (within one session timeout)
RETRY_MAX_TRIES = 20

_P = ParamSpec("_P")
_T = TypeVar("_T")
_S = TypeVar("_S", bound="ZooKeeperSession")


class ZkConnectionError(RuntimeError):
    """ZooKeeper could not be reached (or the session was lost) — the message says where and why."""


@dataclass(frozen=True)
class SessionStateChanged:
    """ "connected", "suspended" (connection lost, session may survive) or "lost" (session expired:
    every ephemeral znode of this broker is gone; the client re-registers the broker on reconnect)."""

    state: str


def retried(method: Callable[Concatenate[_S, _P], _T]) -> Callable[Concatenate[_S, _P], _T]:
    """The method, run again on ConnectionLoss / OperationTimeout under the session's `retry_policy` (a
    copy per call: KazooRetry counts its attempts in itself). Nested retried calls do not multiply: an
    inner one that gives up raises RetryFailedError, which the outer one does not retry."""

    @functools.wraps(method)
    def run(self: _S, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return self.retry_policy.copy()(method, self, *args, **kwargs)  # type: ignore[no-any-return]

    return run


class ZooKeeperSession:
    """One ZooKeeper session: connect, retry, report its state, run the watches' work."""

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        self.hosts, self.chroot = parse_connect(connect)
        self.connect_string = connect
        self.session_timeout_ms = session_timeout_ms
        # Kafka: zookeeper.connection.timeout.ms defaults to the session timeout
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._hosts_text = ",".join(f"{h}:{p}" for h, p in self.hosts)
        self._op_timeout_s = max(10.0, 2 * session_timeout_ms / 1000)
        self._zk = KazooClient(
            hosts=self._hosts_text + (self.chroot or ""),
            timeout=session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
        )
        # Kafka retries a request until connected while the session lives; bounded here by the session
        # timeout (a longer outage is reported to the caller: the controller resigns and re-reads)
        self.retry_policy = KazooRetry(max_tries=RETRY_MAX_TRIES, delay=0.1, backoff=2, max_delay=1.0,
                                       deadline=session_timeout_ms / 1000, ignore_expire=False)
        self._watches: list[Any] = []
        self._listeners: list[Callable[[SessionStateChanged], None]] = []
        self._session_lost = False
        self._disconnected = False
        self._last_session = 0
        self._closed = False
        # the zk-watch thread: what a watch needs beyond its own znode (reads, the callback) runs there
        self._work: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        self._zk.add_listener(self._on_state)

    # --- connection -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Connect (creating the chroot when missing) or raise ZkConnectionError."""
        timeout_s = self.connection_timeout_ms / 1000
        if self.chroot:
            root = KazooClient(hosts=self._hosts_text, timeout=self.session_timeout_ms / 1000)
            try:
                root.start(timeout=timeout_s)
                root.ensure_path(self.chroot)
            except KazooTimeoutError as e:
                raise self._unreachable() from e
            finally:
                root.stop()
                root.close()
        try:
            self._zk.start(timeout=timeout_s)
        except KazooTimeoutError as e:
            self._zk.stop()
            raise self._unreachable() from e

    def _unreachable(self) -> ZkConnectionError:
        return ZkConnectionError(
            f"could not connect to ZooKeeper at {self._hosts_text} within {self.connection_timeout_ms} ms "
            "(zookeeper.connect / zookeeper.connection.timeout.ms)"
        )

    def close(self) -> None:
        """End the session: this broker's ephemeral znodes (registration, /controller) vanish at once."""
        self._closed = True
        self._work.put(None)
        for w in self._watches:
            if hasattr(w, "_stopped"):
                w._stopped = True
        try:
            self._zk.stop()
        finally:
            self._zk.close()

    @property
    def session_id(self) -> int:
        cid = self._zk.client_id
        return int(cid[0]) if cid else 0

    @property
    def connected(self) -> bool:
        return bool(self._zk.connected)

    # --- session state --------------------------------------------------------------------------------
    def add_listener(self, callback: Callable[[SessionStateChanged], None]) -> None:
        """Receive SessionStateChanged events (called on kazoo's thread)."""
        self._listeners.append(callback)

    def _on_state(self, state: str) -> None:
        # kazoo: listeners must not block; what needs ZooKeeper runs on threads of its own. The log lines say
        # what a ZooKeeper outage does to this session (kazoo's own warnings carry no time and repeat)
        if state == KazooState.LOST:
            self._session_lost = True
            if not self._closed:
                log.warning("ZooKeeper session 0x%x expired: its ephemeral znodes (this broker's registration, "
                            "/controller if held) are gone; a new session follows", self._last_session)
            self._emit_state("lost")
        elif state == KazooState.SUSPENDED:
            self._disconnected = True
            if not self._closed:
                log.warning("lost the connection to ZooKeeper at %s (session 0x%x): the session lasts while "
                            "ZooKeeper hears from it again within %d ms", self._hosts_text, self._last_session,
                            self.session_timeout_ms)
            self._emit_state("suspended")
        elif state == KazooState.CONNECTED:
            session = self.session_id
            if self._disconnected or self._session_lost:
                kept = "kept" if session == self._last_session else "new"
                log.info("connected to ZooKeeper again (%s session 0x%x)", kept, session)
            self._disconnected = False
            self._last_session = session
            new_session = self._session_lost
            self._session_lost = False
            if not self._closed:
                self._on_connected(new_session)
            self._emit_state("connected")

    def _on_connected(self, new_session: bool) -> None:
        """Connected (again); `new_session` after an expiry. Runs on kazoo's thread: must not block."""

    def _emit_state(self, state: str) -> None:
        for cb in list(self._listeners):
            try:
                cb(SessionStateChanged(state))
            except Exception:  # a listener's bug must not kill kazoo's event thread
                log.exception("ZooKeeper session listener failed")

    # --- watches ------------------------------------------------------------------------------------------
    def _safe(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """What kazoo calls when a watch fires: it only enqueues `handler` (with the arguments it takes) for
        the zk-watch thread; stopped once the client closes."""
        nargs = len(inspect.signature(handler).parameters)

        def run(*args: Any) -> Any:
            if self._closed:
                return False  # closing: stop watching
            self._enqueue(lambda: handler(*args[:nargs]))
            return None

        return run

    def _enqueue(self, task: Callable[[], Any]) -> None:
        """Run `task` on the zk-watch thread (started on first use), after every task enqueued before it."""
        with self._worker_lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work_loop, name="zk-watch", daemon=True)
                self._worker.start()
        self._work.put(task)

    def _work_loop(self) -> None:
        """The zk-watch thread: a task that fails (ZooKeeper unreachable past the retries, a bad znode, a
        callback's bug) is logged, and the next one runs."""
        while True:
            task = self._work.get()
            if task is None:
                return
            if self._closed:
                continue
            try:
                task()
            except KazooException as e:
                if not self._closed:
                    log.warning("a ZooKeeper read for a watch failed (%s: %s); the watch fires again on the next "
                                "change or session", type(e).__name__, e)
            except zd.ZkDataError as e:
                log.error("unreadable znode: %s", e)
            except Exception:  # a callback's bug must not end the thread every watch goes through
                log.exception("ZooKeeper watch callback failed")
