"""SCRAM credentials of a cluster in ZooKeeper, as Kafka's ZooKeeper mode keeps them (ZkAdminManager,
ScramCredentialUtils, the user ConfigHandler): every broker reads and writes the same znodes, so Kafka's
own tools (`kafka-configs.sh --zookeeper ... --entity-type users`) and kaflite agree.

Rules:
- a user's credentials are `/config/users/<sanitized user>` holding `{"version":1,"config":{...}}` (compact
  JSON), one entry per mechanism, `"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,
  iterations=<n>"`; other keys of the same znode (quotas) are kept untouched by a change;
- the user name in the path is Kafka's Sanitizer form: URL-encoded UTF-8 (Java's URLEncoder: letters,
  digits and `.-_*` kept, the rest %XX), then `*` -> %2A and a space -> %20;
- every change writes the user's znode, then a notification `/config/changes/config_change_<seq>` holding
  `{"version":2,"entity_path":"users/<sanitized user>"}`;
- each broker loads every user at start-up and re-reads a user's znode on each notification naming it
  (the zk-watch thread: never the event loop); the SASL exchange reads the in-memory table only;
- `save` and `refresh` call ZooKeeper and block: the handlers run them in a thread;
- nothing here logs a salt or a key.
"""

from __future__ import annotations

import logging
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

    def load(self) -> None:
        """Every user's credentials, then a watch of the notifications (blocking: at start-up)."""
        self.refresh()
        self.zk.watch_config_changes(self._on_change)

    def refresh(self) -> None:
        """Read every user's znode again (DescribeUserScramCredentials reads ZooKeeper, as Kafka's)."""
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
        creds = _credentials(self.zk.get_entity_config(USERS, event.name), f"/config/{USERS}/{event.name}")
        users = dict(self.users)  # replaced whole: the event loop reads it without a lock
        name = desanitize(event.name)
        if creds:
            users[name] = creds
        else:
            users.pop(name, None)
        self.users = users

    def save(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Write the users whose credentials differ from the table's (read-modify-write of each user's
        znode, its other keys kept), each with its notification, then make `users` the table."""
        for user in sorted(set(users) | set(self.users)):
            if users.get(user) == self.users.get(user):
                continue
            name = sanitize(user)
            config = {k: v for k, v in self.zk.get_entity_config(USERS, name).items() if k not in MECHANISMS}
            config.update({m: c.to_text() for m, c in sorted(users.get(user, {}).items())})
            self.zk.set_entity_config(USERS, name, config)
        self.users = users
