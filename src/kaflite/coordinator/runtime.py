"""The coordinator runtime (Kafka's CoordinatorRuntime): state machines sharded by the partitions of an
internal topic, whose answers leave only once their records are committed.

A *shard* is the state of one partition of the topic (`__consumer_offsets` for groups; the transaction
coordinator uses `__transaction_state` the same way). It is a pure state machine:
    replay(key, value)       apply one record of its partition (loading and live writes alike)
    activate(now_ms)         loading is over (start timers); returns a step result
    poll_timers(now_ms)      fire due timers; returns a step result
    next_deadline()          the earliest timer, or None
and every operation on it is a *step*: `op(shard, now_ms) -> result` with `result.records` (each with
`.key` / `.value` bytes, already applied to the shard) and `result.responses` ((token, response) pairs:
token None is the caller's answer, other tokens answer requests parked by earlier steps).

Rules (as Kafka's runtime):
- a partition's shard exists only between load(partition) and unload(partition); a request for a
  partition that is not loaded fails NOT_COORDINATOR, one that is loading COORDINATOR_LOAD_IN_PROGRESS;
- load replays every record of the partition (up to its log end) into a FRESH shard, then activates
  it; when the log holds records beyond the high watermark (written, not yet committed), every answer
  of the shard waits, as behind a pending write, until they are committed (Kafka reads its committed
  snapshot instead); unload drops the shard and answers every request it still holds (parked or waiting
  for a commit) NOT_COORDINATOR;
- leader epochs (what failover passes, as Kafka's onElection / onResignation): load(p, e) is the election
  at epoch e, unload(p, e) the loss of leadership to epoch e (the NEW leader's epoch, or the epoch of the
  image that says this broker no longer leads). unload(p, e) drops the shard unless e is older than the
  shard's epoch (a stale resignation); load(p, e) is ignored when the shard's epoch is >= e, and
  otherwise replays the log into a fresh shard, unless the shard provably holds the whole log: its
  `position` (the writer's token for the log's content: log end offset, latest leader epoch, the log
  itself), taken before its load read the log and carried over each of its own appends, still equals the
  writer's position now; then only its epoch moves. A shard never outlives a gap: anything another
  leader wrote, or a truncation, changes the position, and a write the shard did not make (e.g. a
  transaction marker appended by another path) leaves its position unknown (None), which never matches;
- a step's records are appended to its partition as one batch through the injected PartitionWriter; its
  responses are released only when that write is COMMITTED (the writer's awaitable resolves when the
  partition's high watermark passes the batch), in append order; a step without records answers at
  once, unless a write of the same partition is still pending: then after it (it may have read that
  write's state), as Kafka's "read operation after all";
- a write that fails (the append raises, or its commit wait does) answers that step with Kafka's mapping
  of the error (`coordinator_error`: storage error -> NOT_COORDINATOR, unknown partition / not enough
  replicas / timeout -> COORDINATOR_NOT_AVAILABLE, too large -> UNKNOWN_SERVER_ERROR), answers every
  later pending step and every parked request of the shard NOT_COORDINATOR (their state was built on the
  lost write), and reloads the shard from the log: the shard then holds exactly what was written (Kafka
  reverts its timeline snapshot; we have none, so we replay). A step that raises is treated the same way
  (UNKNOWN_SERVER_ERROR) since it may have left the shard half-changed. That reload is a load like any
  other: it becomes active only if the writer's `committed_end` says this broker still leads the
  partition (it raises NOT_LEADER_OR_FOLLOWER otherwise, and the partition stays unloaded); a failure
  of a shard already unloaded (resigned) or replaced reloads nothing;
- transactional writes (Kafka's scheduleTransactionalWriteOperation): `write(..., producer=(id, epoch))`
  appends the step's records as one transactional batch of that producer; loading hands a record of a
  transactional batch to `replay_transactional(producer_id, key, value)` and a COMMIT / ABORT marker to
  `replay_end_transaction(producer_id, commit)`, so the shard keeps such records pending until their
  transaction ends, live and after a reload alike;
- listeners (`add_listener`) hear of every change of a partition's active shard: (partition, shard) once
  a loaded shard is active (after its activation step), (partition, None) once an active shard is
  unloaded (a resignation, a reload after a failed write, close); a shard kept across an election (it
  holds the whole log) is no change. A listener that raises is logged and does not stop the others;
- everything runs on the event loop thread; a step is synchronous, so steps of a shard never interleave.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kaflite.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("kaflite.coordinator")

Record = tuple[bytes, bytes | None]
Producer = tuple[int, int]  # (producer id, producer epoch) of a transactional write


@dataclass(frozen=True, slots=True)
class TransactionalRecord:
    """A record of a transactional batch, as loading reads it (pending until its transaction's marker)."""

    producer_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A COMMIT / ABORT control record, as loading reads it."""

    producer_id: int
    commit: bool


LoadedRecord = Record | TransactionalRecord | EndTransactionMarker


class StepRecord(Protocol):
    @property
    def key(self) -> bytes: ...
    @property
    def value(self) -> bytes | None: ...


class StepResult(Protocol):
    @property
    def records(self) -> Sequence[StepRecord]: ...
    @property
    def responses(self) -> Sequence[tuple[Hashable, Any]]: ...
    @property
    def timers(self) -> Sequence[Any]: ...


class CoordinatorShard(Protocol):
    def replay(self, key: bytes, value: bytes | None) -> None: ...
    def replay_transactional(self, producer_id: int, key: bytes, value: bytes | None) -> None: ...
    def replay_end_transaction(self, producer_id: int, commit: bool) -> None: ...
    def activate(self, now_ms: int) -> Any: ...
    def poll_timers(self, now_ms: int) -> Any: ...
    def next_deadline(self) -> int | None: ...


class PartitionWriter(Protocol):
    """What the runtime needs from the storage / replica layer (Kafka's PartitionWriter)."""

    def append(self, partition: int, records: Sequence[Record], producer: Producer | None = None
               ) -> Awaitable[Any] | None:
        """Write `records` as one batch to the partition as its leader, now (a transactional batch of
        `producer` when given). Raises (or the awaitable
        raises) when the write fails; the awaitable resolves once the batch is committed (high watermark
        past it); None when it already is (one replica: the append moved the high watermark)."""
        ...

    def read(self, partition: int) -> Iterable[LoadedRecord] | Awaitable[Iterable[LoadedRecord]]:
        """Every record of the partition, in offset order (an awaitable when read off the event loop)."""
        ...

    def committed_end(self, partition: int) -> Awaitable[Any] | None:
        """None when everything in the partition is committed; else an awaitable that resolves when the
        high watermark reaches the log end offset of now (or raises why it did not). Raises (KafkaError
        NOT_LEADER_OR_FOLLOWER) when this broker does not lead the partition: a load must not activate a
        shard there."""
        ...

    def position(self, partition: int) -> Hashable | None:
        """A token for the partition's log content now: two equal tokens mean nothing was appended to or
        truncated from the log between them (e.g. the log, its end offset and its latest leader epoch).
        None when unknown (never proves anything)."""
        ...


S = TypeVar("S", bound=CoordinatorShard)
Op = Callable[[S, int], Any]


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


# Kafka's CoordinatorOperationExceptionHelper: what a client is told when a coordinator write fails.
_APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    # not in Kafka's table (its runtime waits for the high watermark, never for acks=-1): the same meaning
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


def coordinator_error(exc: BaseException) -> ErrorCode:
    """The error a coordinator operation answers when its write (or the operation) failed with `exc`."""
    if isinstance(exc, KafkaError):
        return _APPEND_ERRORS.get(exc.code, exc.code)
    if isinstance(exc, OSError):  # the log's disk: Kafka's KAFKA_STORAGE_ERROR
        return ErrorCode.not_coordinator
    return ErrorCode.unknown_server_error


@dataclass(eq=False)
class _Pending:
    """A step waiting for its write (or an earlier write of its shard) to be committed."""

    responses: Sequence[tuple[Hashable, Any]]
    direct: asyncio.Future[Any]
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass(eq=False)
class _Context(Generic[S]):
    """One partition's shard and what it holds for clients (Kafka's CoordinatorContext)."""

    partition: int
    shard: S
    state: ShardState = ShardState.LOADING
    leader_epoch: int = -1
    parked: dict[Hashable, asyncio.Future[Any]] = field(default_factory=dict)
    pending: list[_Pending] = field(default_factory=list)
    # the writer's position of the log this shard holds all of (None: not known, a load at a newer epoch
    # replays the log); taken before the load read the log, carried over the shard's own appends
    position: Hashable | None = None
    loaded: asyncio.Future[None] | None = None  # the load that built this shard


class CoordinatorRuntime(Generic[S]):
    """Shards by partition, steps that answer on commit, load / unload, one timer task for all shards."""

    def __init__(self, new_shard: Callable[[int], S], writer: PartitionWriter, now_ms: Callable[[], int],
                 name: str = "coordinator") -> None:
        self._new_shard = new_shard
        self._writer = writer
        self._now_ms = now_ms
        self.name = name
        self._contexts: dict[int, _Context[S]] = {}
        self._tokens = itertools.count(1)
        self._wakeup: asyncio.Event | None = None
        self._tasks: set[asyncio.Future[None]] = set()  # commit waits and loads in flight
        self._listeners: list[Callable[[int, S | None], None]] = []

    # --- shards ---------------------------------------------------------------------------------

    def partitions(self) -> list[int]:
        return sorted(self._contexts)

    def state(self, partition: int) -> ShardState | None:
        ctx = self._contexts.get(partition)
        return None if ctx is None else ctx.state

    def shard(self, partition: int) -> S:
        """The ACTIVE shard of `partition` (for reads), else KafkaError NOT_COORDINATOR / LOAD_IN_PROGRESS."""
        return self._active(partition).shard

    def active_shards(self) -> list[tuple[int, S]]:
        return [(p, c.shard) for p, c in sorted(self._contexts.items()) if c.state is ShardState.ACTIVE]

    def _active(self, partition: int) -> _Context[S]:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.state is ShardState.CLOSED:
            raise KafkaError(ErrorCode.not_coordinator, f"{self.name} partition {partition} is not loaded here")
        if ctx.state is ShardState.LOADING:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, f"{self.name} partition {partition} is loading")
        return ctx

    def add_listener(self, listener: Callable[[int, S | None], None]) -> None:
        """Call `listener(partition, shard)` when a shard becomes active, `(partition, None)` when an
        active one is unloaded (see the rules): state kept beside the shards follows them without asking."""
        self._listeners.append(listener)

    def _notify(self, partition: int, shard: S | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(partition, shard)
            except Exception:  # noqa: BLE001 - one listener's bug must not stop a load or the others
                log.exception("%s partition %d: a shard listener failed", self.name, partition)

    def leader_epoch(self, partition: int) -> int | None:
        ctx = self._contexts.get(partition)
        return None if ctx is None else ctx.leader_epoch

    def load(self, partition: int, leader_epoch: int | None = None) -> asyncio.Future[None]:
        """Become the coordinator of `partition`: replay its log into a fresh shard, then activate it. When
        the writer reads synchronously the shard is active when this returns; the future says when.
        Without `leader_epoch` the shard is always rebuilt (start-up, recovery from a failed write). With
        it (an election), a loaded shard of an older epoch is kept only when it provably holds the whole
        log (its position is the writer's now); else it is unloaded and the log replayed."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        current = self._contexts.get(partition)
        if leader_epoch is not None and current is not None:
            if current.leader_epoch >= leader_epoch:
                log.info("%s partition %d: ignoring load for stale leader epoch %d (current %d)", self.name,
                         partition, leader_epoch, current.leader_epoch)
                done.set_result(None)
                return done
            if self._holds_whole_log(current):
                # nothing was written or truncated since the shard read / wrote the log (e.g. the epoch
                # moved because a follower left the ISR): the state is the log's, parked requests stay
                current.leader_epoch = leader_epoch
                if current.loaded is not None and not current.loaded.done():
                    return current.loaded
                done.set_result(None)
                return done
            log.info("%s partition %d: elected at leader epoch %d, the log changed since epoch %d: replaying it",
                     self.name, partition, leader_epoch, current.leader_epoch)
        epoch = leader_epoch if leader_epoch is not None else (current.leader_epoch if current else -1)
        if current is not None:
            self.unload(partition)
        ctx: _Context[S] = _Context(partition, self._new_shard(partition), leader_epoch=epoch, loaded=done)
        self._contexts[partition] = ctx
        # taken before the read: whatever is appended meanwhile moves the log past it (a reload then)
        ctx.position = self._position(partition)
        try:
            records = self._writer.read(partition)
        except Exception as e:  # noqa: BLE001 - a failed load leaves the partition unloaded, loudly
            self._load_failed(ctx, e, done)
            return done
        if inspect.isawaitable(records):
            async def finish(pending: Awaitable[Iterable[LoadedRecord]]) -> None:
                try:
                    self._finish_load(ctx, await pending, done)
                except Exception as e:  # noqa: BLE001
                    self._load_failed(ctx, e, done)
            self._keep(asyncio.ensure_future(finish(records)))
        else:
            self._finish_load(ctx, records, done)
        return done

    def _finish_load(self, ctx: _Context[S], records: Iterable[LoadedRecord], done: asyncio.Future[None]) -> None:
        if self._contexts.get(ctx.partition) is not ctx:  # unloaded (or reloaded) meanwhile
            done.set_result(None)
            return
        count = 0
        shard = ctx.shard
        for item in records:
            try:
                if isinstance(item, TransactionalRecord):
                    shard.replay_transactional(item.producer_id, item.key, item.value)
                elif isinstance(item, EndTransactionMarker):
                    shard.replay_end_transaction(item.producer_id, item.commit)
                else:
                    shard.replay(item[0], item[1])
                count += 1
            except ValueError as e:  # a record we cannot read must not stop the load (as before)
                log.warning("%s partition %d: skipping a record: %s", self.name, ctx.partition, e)
        try:
            barrier = self._writer.committed_end(ctx.partition)
        except Exception as e:  # noqa: BLE001 - e.g. no longer the leader: the partition stays unloaded
            self._load_failed(ctx, e, done)
            return
        ctx.state = ShardState.ACTIVE
        self._run(ctx, lambda shard, now: shard.activate(now), None)
        if self._contexts.get(ctx.partition) is ctx and ctx.state is ShardState.ACTIVE:  # activation did not fail
            self._notify(ctx.partition, ctx.shard)
        if barrier is not None:  # the replayed tail is not committed yet: answers wait for it
            direct: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            direct.add_done_callback(_retrieve)
            pending = _Pending((), direct)
            ctx.pending.append(pending)
            self._keep(asyncio.ensure_future(self._await_commit(ctx, pending, barrier, None)))
        log.debug("%s partition %d loaded: %d record(s)", self.name, ctx.partition, count)
        done.set_result(None)

    def _position(self, partition: int) -> Hashable | None:
        try:
            return self._writer.position(partition)
        except Exception:  # noqa: BLE001 - unknown: proves nothing
            return None

    def _holds_whole_log(self, ctx: _Context[S]) -> bool:
        """The shard replayed (or wrote) every record the log holds now, and nothing it holds was truncated."""
        if ctx.state is ShardState.CLOSED or ctx.position is None:
            return False
        return bool(ctx.position == self._position(ctx.partition))

    def _load_failed(self, ctx: _Context[S], exc: BaseException, done: asyncio.Future[None]) -> None:
        log.error("%s partition %d failed to load: %s", self.name, ctx.partition, exc, exc_info=exc)
        if self._contexts.get(ctx.partition) is ctx:
            del self._contexts[ctx.partition]
            self._fail_all(ctx, ErrorCode.not_coordinator)
        done.set_result(None)

    def unload(self, partition: int, leader_epoch: int | None = None) -> None:
        """Stop coordinating `partition` (failover, or before a reload): drop the shard and answer all it
        holds NOT_COORDINATOR, so clients look for the new coordinator. `leader_epoch`: the epoch at which
        this broker no longer leads (the new leader's); ignored only when older than the shard's own epoch
        (a resignation that an election since has superseded)."""
        ctx = self._contexts.get(partition)
        if ctx is None:
            return
        if leader_epoch is not None and leader_epoch < ctx.leader_epoch:
            log.info("%s partition %d: ignoring unload for stale leader epoch %d (current %d)", self.name,
                     partition, leader_epoch, ctx.leader_epoch)
            return
        del self._contexts[partition]
        was_active = ctx.state is ShardState.ACTIVE
        ctx.state = ShardState.CLOSED
        self._fail_all(ctx, ErrorCode.not_coordinator)
        if was_active:
            self._notify(partition, None)

    def close(self) -> None:
        for partition in list(self._contexts):
            self.unload(partition)
        for task in list(self._tasks):
            task.cancel()

    # --- steps ----------------------------------------------------------------------------------

    def park(self, partition: int) -> tuple[Hashable, asyncio.Future[Any]]:
        """A token for a request a later step may answer (JoinGroup, SyncGroup), and its future."""
        ctx = self._active(partition)
        token = ("parked", partition, next(self._tokens))
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        ctx.parked[token] = fut
        return token, fut

    def write(self, partition: int, op: Op[S], token: Hashable = None, producer: Producer | None = None
              ) -> asyncio.Future[Any]:
        """Run one step on the partition's shard now. The future resolves with the step's direct answer
        (token None) once its records are committed, or raises KafkaError with the code to answer.
        `token`: the parked request this step was made for (failed with it if the step cannot run).
        `producer`: the step's records are one transactional batch of that producer."""
        try:
            ctx = self._active(partition)
        except KafkaError as e:
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            fut.set_exception(e)
            return fut
        return self._run(ctx, op, token, producer)

    def _run(self, ctx: _Context[S], op: Op[S], token: Hashable, producer: Producer | None = None
             ) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        direct: asyncio.Future[Any] = loop.create_future()
        direct.add_done_callback(_retrieve)
        try:
            result = op(ctx.shard, self._now_ms())
        except Exception as e:  # noqa: BLE001 - a bug in a step: answer, then rebuild the shard from its log
            log.exception("%s partition %d: a step failed", self.name, ctx.partition)
            error = coordinator_error(e)
            direct.set_exception(KafkaError(error, str(e)))
            parked = ctx.parked.pop(token, None) if token is not None else None
            if parked is not None and not parked.done():
                parked.set_exception(KafkaError(error, str(e)))
            self._fail_and_reload(ctx)
            return direct
        if result.timers and self._wakeup is not None:
            self._wakeup.set()
        records = [(r.key, r.value) for r in result.records]
        if not records:
            if not ctx.pending:
                self._answer(ctx, result.responses, direct)
                return direct
            pending = _Pending(result.responses, direct)
            previous = ctx.pending[-1].done
            ctx.pending.append(pending)
            previous.add_done_callback(lambda f: self._settle(ctx, pending, f.exception()))
            return direct
        pending = _Pending(result.responses, direct)
        previous_done = ctx.pending[-1].done if ctx.pending else None
        ctx.pending.append(pending)
        before = self._position(ctx.partition)
        try:
            committed = (self._writer.append(ctx.partition, records) if producer is None
                         else self._writer.append(ctx.partition, records, producer))
        except Exception as e:  # noqa: BLE001 - the write failed before it was written
            self._write_failed(ctx, pending, e)
            return direct
        # the shard holds the whole log after its own append only if it held it before (something
        # appended by another path in between, e.g. a transaction marker, makes it unknown)
        ctx.position = self._position(ctx.partition) if before is not None and before == ctx.position else None
        if committed is None:  # committed by the append itself: answer now, or after the writes before it
            if previous_done is None:
                self._settle(ctx, pending, None)
            else:
                previous_done.add_done_callback(lambda f: self._settle(ctx, pending, f.exception()))
            return direct
        self._keep(asyncio.ensure_future(self._await_commit(ctx, pending, committed, previous_done)))
        return direct

    async def _await_commit(self, ctx: _Context[S], pending: _Pending, committed: Awaitable[Any],
                            previous: asyncio.Future[None] | None) -> None:
        try:
            await committed
        except Exception as e:  # noqa: BLE001
            self._write_failed(ctx, pending, e)
            return
        if previous is not None and not previous.done():
            await asyncio.wait([previous])  # answers leave in append order
        self._settle(ctx, pending, previous.exception() if previous is not None else None)

    def _settle(self, ctx: _Context[S], pending: _Pending, earlier_failure: BaseException | None) -> None:
        if pending.done.done():
            return
        if pending in ctx.pending:
            ctx.pending.remove(pending)
        if earlier_failure is not None or ctx.state is not ShardState.ACTIVE:
            self._fail_step(ctx, pending, ErrorCode.not_coordinator, "an earlier write of this coordinator failed")
            pending.done.set_exception(KafkaError(ErrorCode.not_coordinator))
            pending.done.exception()
            return
        self._answer(ctx, pending.responses, pending.direct)
        pending.done.set_result(None)

    def _write_failed(self, ctx: _Context[S], pending: _Pending, exc: BaseException) -> None:
        error = coordinator_error(exc)
        log.error("%s partition %d: a write or its commit failed (%s); answering %s, reloading from the log",
                  self.name, ctx.partition, exc, error.name.upper())
        if pending in ctx.pending:
            ctx.pending.remove(pending)
        self._fail_step(ctx, pending, error, str(exc))
        if not pending.done.done():
            pending.done.set_exception(KafkaError(error, str(exc)))
            pending.done.exception()
        self._fail_and_reload(ctx)

    def _fail_and_reload(self, ctx: _Context[S]) -> None:
        if self._contexts.get(ctx.partition) is not ctx:
            return  # already unloaded or reloaded
        self.unload(ctx.partition)  # every later step and parked request: NOT_COORDINATOR
        self.load(ctx.partition)
        reloaded = self._contexts.get(ctx.partition)
        if reloaded is not None:
            reloaded.leader_epoch = ctx.leader_epoch  # still the leader, in the same epoch

    def _fail_step(self, ctx: _Context[S], pending: _Pending, error: ErrorCode, message: str) -> None:
        exc = KafkaError(error, message)
        if not pending.direct.done():
            pending.direct.set_exception(exc)
        for token, _ in pending.responses:
            if token is None:
                continue
            fut = ctx.parked.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_exception(KafkaError(error, message))

    def _fail_all(self, ctx: _Context[S], error: ErrorCode) -> None:
        for pending in list(ctx.pending):
            self._fail_step(ctx, pending, error, "the coordinator moved")
            if not pending.done.done():
                pending.done.set_exception(KafkaError(error))
                pending.done.exception()
        ctx.pending.clear()
        for fut in ctx.parked.values():
            if not fut.done():
                fut.set_exception(KafkaError(error, "the coordinator moved"))
        ctx.parked.clear()

    def _answer(self, ctx: _Context[S], responses: Sequence[tuple[Hashable, Any]], direct: asyncio.Future[Any]) -> None:
        answered = False
        for token, response in responses:
            if token is None:
                if not direct.done():
                    direct.set_result(response)
                answered = True
                continue
            fut = ctx.parked.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(response)
        if not answered and not direct.done():
            direct.set_result(None)

    def _keep(self, task: asyncio.Future[None]) -> None:
        self._tasks.add(task)  # a reference, so the task is not collected while it runs
        task.add_done_callback(self._tasks.discard)

    # --- timers ---------------------------------------------------------------------------------

    async def run_timers(self) -> None:
        """Fire every shard's due timers as steps, sleeping until the earliest deadline (run as a task)."""
        self._wakeup = asyncio.Event()
        while True:
            now = self._now_ms()
            earliest: int | None = None
            fired = False
            for ctx in list(self._contexts.values()):
                if ctx.state is not ShardState.ACTIVE:
                    continue
                deadline = ctx.shard.next_deadline()
                if deadline is None:
                    continue
                if deadline <= now:
                    self._run(ctx, lambda shard, t: shard.poll_timers(t), None)
                    fired = True
                elif earliest is None or deadline < earliest:
                    earliest = deadline
            if fired:
                await asyncio.sleep(0)  # let the requests already read run between timer rounds
                continue
            self._wakeup.clear()
            timeout = None if earliest is None else (earliest - now) / 1000.0
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                pass


def _retrieve(fut: asyncio.Future[Any]) -> None:
    # a step's direct answer nobody awaits (a JoinGroup's step, a timer) must not log "never retrieved"
    if not fut.cancelled():
        fut.exception()
