"""The reference for the share-group coordinator's session expiry: `expire` as it was before its bound, a
scan of every member and every share session at each call. tests/coordinator/share/test_group.py checks
that the bounded `expire` removes what this one removes, at the same `now`; bench/share_expiry_bench.py
measures what the bound saves against it. One copy, so that both compare against the same baseline."""

from __future__ import annotations

from kaflite.coordinator.share.group import ShareGroupCoordinator


class ScanEveryCall(ShareGroupCoordinator):
    """The reference: `expire` as it was before the bound, a scan of every member and session each call."""

    def expire(self, now: int) -> list[tuple[str, str]]:
        self._now_ms = now
        gone = [
            (g.group_id, m.member_id)
            for g in self.groups.values()
            for m in g.members.values()
            if now >= m.deadline_ms
        ]
        for group_id, member_id in gone:
            self._remove(self.groups[group_id], member_id, "session-timeout")
        for (group_id, member_id), sess in list(self._sessions.items()):
            lock_ms = self.config_for(group_id).record_lock_duration_ms
            if sess.left_at is not None and now >= sess.left_at + lock_ms:
                del self._sessions[(group_id, member_id)]
                self._release_held(group_id, member_id)
        return gone
