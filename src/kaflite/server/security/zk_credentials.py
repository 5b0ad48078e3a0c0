"""SCRAM credentials of a cluster in ZooKeeper, as Kafka's ZooKeeper mode keeps them (ZkAdminManager,
ScramCredentialUtils, the user ConfigHandler): every broker reads and writes the same znodes, so Kafka's
own tools (`kafka-configs.sh --zookeeper ... --entity-type users`) and kaflite agree.

Rules:
- a user's credentials are `/config/users/<sanitized user>` holding `{"version":1,"config":{...}}` (compact
  JSON), one entry per mechanism, `"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,
  iterations=<n>"`; other keys of the same znode (quotas) are kept untouched by a change, also one written
  by another broker at the same time (compare-and-set on the znode's version, KafkaZkClient.update_entity_config);
- the user name in the path is Kafka's Sanitizer form: URL-encoded UTF-8 (Java's URLEncoder: letters,
  digits and `.-_*` kept, the rest %XX), then `*` -> %2A and a space -> %20;
- every change writes the user's znode, then a notification `/config/changes/config_change_<seq>` holding
  `{"version":2,"entity_path":"users/<sanitized user>"}`;
- each broker loads every user at start-up and re-reads a user's znode on each notification naming it
  (the zk-watch thread: never the event loop); the SASL exchange reads the in-memory table only;
- `save` and `refresh` call ZooKeeper and block: the handlers run them in a thread;
- the table is replaced whole (the event loop reads it without a lock); every read-then-replace of it
  (start-up, a notification, Describe's refresh, an alteration) holds one lock and reads ZooKeeper inside
  it, so an older read never overwrites a newer one; the watch is armed before the first read, so no
  notification falls between them;
- nothing here logs a salt or a key.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from typing import TYPE_CHECKING, Any

from kaflite.server.security.scram import MECHANISMS, CredentialStore, ScramCredential

if TYPE_CHECKING:
    from kaflite.cluster.zk import KafkaZkClient

__all__ = ["USERS", "ZkCredentialStore", "desanitize", "sanitize"]

log = logging.getLogger("kaflite.cluster.zk")

USERS = "users"  # the entity type: /config/users/<user>


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: the znode name of a user."""
    encoded = urllib.parse.quote_plus(name, safe="*")  # Java's URLEncoder keeps letters, digits, . - _ *
    return encoded.replace("~", "%7E").replace("*", "%2A").replace("+", "%20")


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (Java's URLDecoder)."""
    return urllib.parse.unquote_plus(name)


def _credentials(config: dict[str, str], path: str) -> dict[str, ScramCredential]:
    out = {}
    for mechanism in MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            out[mechanism] = ScramCredential.from_text(text)
        except (KeyError, ValueError):  # a malformed entry is not a login; never echo the text (keys)
            log.warning("%s: the %s credential is malformed and is ignored", path, mechanism)
    return out


class ZkCredentialStore(CredentialStore):
    """The credential table of one broker, kept in step with ZooKeeper."""

    def __init__(self, zk: KafkaZkClient) -> None:
        super().__init__(None)
        self.zk = zk
        self._lock = threading.Lock()

    def load(self) -> None:
        """A watch of the notifications, then every user's credentials (blocking: at start-up)."""
        self.zk.watch_config_changes(self._on_change)
        self.refresh()

    def refresh(self) -> None:
        """Read every user's znode again (DescribeUserScramCredentials reads ZooKeeper, as Kafka's)."""
        with self._lock:
            users = {}
            for child in self.zk.get_children(f"/config/{USERS}"):
                creds = _credentials(self.zk.get_entity_config(USERS, child), f"/config/{USERS}/{child}")
                if creds:
                    users[desanitize(child)] = creds
            self.users = users

    def _on_change(self, event: Any) -> None:
        from kaflite.cluster.zk import ConfigChanged

        if not isinstance(event, ConfigChanged) or event.entity_type != USERS or "/" in event.name:
            return  # topics, clients, and <user>/clients/<id> quota entities are not credentials
        with self._lock:
            creds = _credentials(self.zk.get_entity_config(USERS, event.name), f"/config/{USERS}/{event.name}")
            self._put(desanitize(event.name), creds)

    def _put(self, user: str, creds: dict[str, ScramCredential]) -> None:
        users = dict(self.users)  # replaced whole: the event loop reads it without a lock
        if creds:
            users[user] = creds
        else:
            users.pop(user, None)
        self.users = users

    def with_changes(self, upserts: dict[tuple[str, str], ScramCredential],
                     deletions: set[tuple[str, str]]) -> dict[str, dict[str, ScramCredential]]:
        """The table after these changes, carrying the changes themselves: `save` applies them to each
        user's znode as read then (Kafka's read-modify-write), not the table, which another broker's
        change of the same user may have outdated."""
        table = _Changes(super().with_changes(upserts, deletions))
        table.ops = {**dict.fromkeys(deletions), **upserts}
        return table

    def save(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Write each changed user's znode (its other keys and mechanisms kept), each with its
        notification; only those users change in the table."""
        if isinstance(users, _Changes):
            ops = users.ops
        else:  # a whole table: every mechanism of every user that differs
            ops = {}
            for user in set(users) | set(self.users):
                for mech in MECHANISMS:
                    new = users.get(user, {}).get(mech)
                    if new != self.users.get(user, {}).get(mech):
                        ops[(user, mech)] = new
        with self._lock:
            for user in sorted({u for u, _ in ops}):
                name = sanitize(user)

                def change(config: dict[str, str], user: str = user) -> dict[str, str]:
                    for (u, mech), cred in ops.items():
                        if u != user:
                            continue
                        if cred is None:
                            config.pop(mech, None)
                        else:
                            config[mech] = cred.to_text()
                    return config

                # compare-and-set: a quota of the same user written meanwhile by another broker is kept
                config = self.zk.update_entity_config(USERS, name, change)
                self._put(user, _credentials(config, f"/config/{USERS}/{name}"))


class _Changes(dict[str, dict[str, ScramCredential]]):
    """A credential table and the (user, mechanism) changes that made it (None: deleted)."""

    ops: dict[tuple[str, str], ScramCredential | None]
