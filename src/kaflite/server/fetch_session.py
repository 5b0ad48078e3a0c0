"""Incremental fetch sessions (KIP-227): the broker remembers what a consumer fetches, so each request
carries only the partitions that changed and each response only the partitions with news.

Rules (Kafka's `FetchSessionCache` / `FetchContext`), by the request's (session id, epoch):
- epoch -1 (FINAL): a full, sessionless fetch; a named session is closed first. Answered with id 0.
- id 0, epoch 0 (INITIAL): a new session holding the request's partitions; the answer carries its id and
  every partition. When the cache is full (`max.incremental.fetch.session.cache.slots`) the least
  recently used session is evicted (Kafka evicts by a privileged/size rule; one broker, LRU suffices).
- id N, epoch E > 0: an incremental fetch. Unknown N -> FETCH_SESSION_ID_NOT_FOUND; E other than the
  session's expected epoch -> INVALID_FETCH_SESSION_EPOCH. Otherwise the request's partitions are added
  or update their fetch offset / max bytes, `forgotten_topics_data` removes partitions, the session's
  expected epoch moves to E + 1, and every partition of the session is read.
- In an incremental answer a partition appears only when it has records, an error, or a high watermark,
  last stable offset or log start offset other than the one last sent in this session (Kafka's
  `IncrementalFetchContext`); a full answer (new or sessionless) has every partition.
Pure: no I/O; the Fetch handler reads the logs and tells `sent()` what it answered.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from kaflite.protocol.errors import ErrorCode

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "FetchSessionCache", "FetchTarget", "SessionContext"]

FINAL_EPOCH, INITIAL_EPOCH = -1, 0

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class FetchTarget:
    fetch_offset: int
    max_bytes: int
    # what the last answer of this session said (-2: never sent, so the first answer includes it)
    high_watermark: int = -2
    last_stable_offset: int = -2
    log_start_offset: int = -2


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int  # the epoch the next request must carry
    partitions: OrderedDict[TopicPartition, FetchTarget] = field(default_factory=OrderedDict)


@dataclass(slots=True)
class SessionContext:
    """What one Fetch request reads and how it is answered."""

    error: ErrorCode
    session_id: int  # the id to answer with (0: sessionless)
    targets: list[tuple[TopicPartition, FetchTarget]]
    incremental: bool
    session: FetchSession | None = None

    def include(self, tp: TopicPartition, has_records: bool, error: ErrorCode, hw: int, lso: int,
                start: int) -> bool:
        """Whether this partition belongs in the answer (always, unless incremental and unchanged)."""
        if not self.incremental or has_records or error is not ErrorCode.none:
            return True
        assert self.session is not None
        t = self.session.partitions[tp]
        return (t.high_watermark, t.last_stable_offset, t.log_start_offset) != (hw, lso, start)

    def sent(self, tp: TopicPartition, hw: int, lso: int, start: int) -> None:
        """Remember what was answered for `tp` (sessions only)."""
        if self.session is not None and tp in self.session.partitions:
            t = self.session.partitions[tp]
            t.high_watermark, t.last_stable_offset, t.log_start_offset = hw, lso, start


class FetchSessionCache:
    def __init__(self, max_sessions: int = 1000) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def context(
        self,
        session_id: int,
        epoch: int,
        requested: Iterable[tuple[TopicPartition, int, int]],
        forgotten: Iterable[TopicPartition] = (),
    ) -> SessionContext:
        """Resolve a Fetch request: `requested` = ((topic, partition), fetch offset, max bytes)."""
        requested = list(requested)
        if epoch == FINAL_EPOCH:
            self._sessions.pop(session_id, None)
            return SessionContext(ErrorCode.none, 0, _targets(requested), incremental=False)
        if epoch == INITIAL_EPOCH:
            if session_id != 0:
                self._sessions.pop(session_id, None)
            if self.max_sessions <= 0:
                return SessionContext(ErrorCode.none, 0, _targets(requested), incremental=False)
            while len(self._sessions) >= self.max_sessions:
                self._sessions.popitem(last=False)
            session = FetchSession(next(self._ids), 1)
            for tp, offset, max_bytes in requested:
                session.partitions[tp] = FetchTarget(offset, max_bytes)
            self._sessions[session.id] = session
            return SessionContext(ErrorCode.none, session.id, list(session.partitions.items()), incremental=False,
                                  session=session)
        found = self._sessions.get(session_id)
        if found is None:
            return SessionContext(ErrorCode.fetch_session_id_not_found, 0, [], incremental=False)
        if epoch != found.epoch:
            return SessionContext(ErrorCode.invalid_fetch_session_epoch, 0, [], incremental=False)
        self._sessions.move_to_end(session_id)
        for tp in forgotten:
            found.partitions.pop(tp, None)
        for tp, offset, max_bytes in requested:
            known = found.partitions.get(tp)
            if known is None:
                found.partitions[tp] = FetchTarget(offset, max_bytes)
            else:
                known.fetch_offset, known.max_bytes = offset, max_bytes
        found.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        return SessionContext(ErrorCode.none, found.id, list(found.partitions.items()), incremental=True,
                              session=found)


def _targets(requested: list[tuple[TopicPartition, int, int]]) -> list[tuple[TopicPartition, FetchTarget]]:
    return [(tp, FetchTarget(offset, max_bytes)) for tp, offset, max_bytes in requested]
