"""SCRAM-SHA-256/512 credentials as Kafka derives and stores them, and their durable store on one node.

Rules:
- a credential is (salt, stored_key, server_key, iterations) with Kafka's derivation (ScramFormatter):
  salted = PBKDF2-HMAC(password as raw UTF-8 - no SASLprep -, salt, iterations), client_key =
  HMAC(salted, "Client Key"), stored_key = H(client_key), server_key = HMAC(salted, "Server Key");
- iterations outside 4096..16384 are refused (Kafka's UNACCEPTABLE_CREDENTIAL);
- on a single node the store is one JSON file in the data directory (in a cluster, ZooKeeper's
  /config/users: server/security/zk_credentials.py, a subclass), written whole to a temporary file, fsynced and
  renamed over the old one (never half written); `save` blocks, so the broker calls it in a thread;
  the credential text per mechanism is Kafka's ZooKeeper form
  `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`;
- neither the store nor its errors ever name a password or a key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MIN_ITERATIONS",
    "CredentialStore",
    "ScramCredential",
    "credential_from_salted_password",
    "derive_credential",
]

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# mechanism name -> (hash name, Kafka's ScramMechanism type code on the wire)
MECHANISMS: dict[str, tuple[str, int]] = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
FILE_NAME = "scram-credentials.json"


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the keys
        return f"ScramCredential(iterations={self.iterations})"

    def to_text(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        parts = dict(p.split("=", 1) for p in text.split(","))
        return cls(base64.b64decode(parts["salt"]), base64.b64decode(parts["stored_key"]),
                   base64.b64decode(parts["server_key"]), int(parts["iterations"]))


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """What the broker keeps of an AlterUserScramCredentials upsertion (the client sends salt and salted)."""
    hash_name = MECHANISMS[mechanism][0]
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def derive_credential(mechanism: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """Kafka's ScramFormatter.generateCredential: the password's raw UTF-8 bytes, no SASLprep."""
    salted = hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode("utf-8"), salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


class CredentialStore:
    """user -> mechanism -> credential, loaded once at start-up and saved whole on every change."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.users: dict[str, dict[str, ScramCredential]] = {}
        if path is not None and path.exists():
            data = json.loads(path.read_text())
            self.users = {
                user: {mech: ScramCredential.from_text(text) for mech, text in mechs.items()}
                for user, mechs in data.get("users", {}).items()
            }

    def refresh(self) -> None:
        """Read the table again from where it is kept (a cluster's ZooKeeper: server/security/zk_credentials.py);
        the file here is this process's own, so nothing to do."""

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def with_changes(self, upserts: dict[tuple[str, str], ScramCredential],
                     deletions: set[tuple[str, str]]) -> dict[str, dict[str, ScramCredential]]:
        """The user table after these changes (the store itself is unchanged until `replace`)."""
        users = {u: dict(m) for u, m in self.users.items()}
        for user, mech in deletions:
            users.get(user, {}).pop(mech, None)
        for (user, mech), cred in upserts.items():
            users.setdefault(user, {})[mech] = cred
        return {u: m for u, m in users.items() if m}

    def save(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Write `users` durably (blocking: call it in a thread), then make it the store's table."""
        if self.path is not None:
            text = json.dumps({"version": 1, "users": {
                u: {m: c.to_text() for m, c in sorted(mechs.items())} for u, mechs in sorted(users.items())
            }}, indent=1)
            tmp = self.path.with_name(self.path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self.users = users
