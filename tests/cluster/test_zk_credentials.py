"""SCRAM credentials in ZooKeeper as Kafka's ZooKeeper mode keeps them (server/security/zk_credentials.py), against
a real ZooKeeper without brokers: the znode bytes kaflite writes, and a znode written as Kafka's tools
write it (raw bytes through kazoo) applied by a watching store within 1 s. The same formats end to end,
through brokers and clients: tests/cluster/test_secured_cluster.py."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

from helpers import wait_until
from kaflite.cluster.zk import KafkaZkClient
from kaflite.server.security.scram import derive_credential
from kaflite.server.security.zk_credentials import ZkCredentialStore, desanitize, sanitize

SALT = b"0123456789abcdef"


def test_user_names_are_sanitized_as_kafkas_sanitizer() -> None:
    # Java's URLEncoder keeps letters, digits and . - _ *; then * -> %2A, + (a space) -> %20
    assert sanitize("alice") == "alice"
    assert sanitize("User.Name-1_x") == "User.Name-1_x"
    assert sanitize("a b*c+d~é/") == "a%20b%2Ac%2Bd%7E%C3%A9%2F"
    for name in ("alice", "a b*c+d~é/", "CN=x,O=y"):
        assert desanitize(sanitize(name)) == name


@pytest.fixture
def store(zk: KafkaZkClient) -> Iterator[ZkCredentialStore]:
    zk.create_top_level_paths()
    s = ZkCredentialStore(zk)
    s.load()
    yield s


def test_a_saved_credential_is_kafkas_znode_byte_for_byte(zk: KafkaZkClient, store: ZkCredentialStore) -> None:
    # a quota of the same user (kafka-configs.sh --add-config producer_byte_rate=...) is kept
    zk.set_entity_config("users", "bob%20smith", {"producer_byte_rate": "1024"})
    cred = derive_credential("SCRAM-SHA-512", "pw", SALT, 4096)
    store.save(store.with_changes({("bob smith", "SCRAM-SHA-512"): cred}, set()))
    data, _ = zk._zk.get("/config/users/bob%20smith")
    assert data == ('{"version":1,"config":{"producer_byte_rate":"1024","SCRAM-SHA-512":"' + cred.to_text()
                    + '"}}').encode()
    assert re.fullmatch(r"salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=[A-Za-z0-9+/]+=*,server_key=[A-Za-z0-9+/]+=*,"
                        r"iterations=4096", cred.to_text())
    last = sorted(zk._zk.get_children("/config/changes"))[-1]
    assert zk._zk.get(f"/config/changes/{last}")[0] == b'{"version":2,"entity_path":"users/bob%20smith"}'
    assert re.fullmatch(r"config_change_\d{10}", last)
    # removing the credential leaves the quota
    store.save(store.with_changes({}, {("bob smith", "SCRAM-SHA-512")}))
    assert json.loads(zk._zk.get("/config/users/bob%20smith")[0]) == \
        {"version": 1, "config": {"producer_byte_rate": "1024"}}
    assert store.get("bob smith", "SCRAM-SHA-512") is None


def test_a_znode_written_as_kafkas_tools_do_is_applied_within_a_second(
        zk: KafkaZkClient, store: ZkCredentialStore) -> None:
    cred = derive_credential("SCRAM-SHA-256", "secret", SALT, 8192)
    zk._zk.create("/config/users/carol", b'{"version":1,"config":{"SCRAM-SHA-256":"' + cred.to_text().encode()
                  + b'"}}', makepath=True)
    written = time.monotonic()
    zk._zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/carol"}', sequence=True)
    wait_until("carol applied", lambda: store.get("carol", "SCRAM-SHA-256") == cred, timeout=1.0, interval=0.01)
    assert time.monotonic() - written < 1.0
    # a second store, started later, loads it at start-up
    other = ZkCredentialStore(zk)
    other.refresh()
    assert other.get("carol", "SCRAM-SHA-256") == cred and repr(cred) == "ScramCredential(iterations=8192)"
    # quota entities of a user's clients (users/<user>/clients/<id>) and other types are not credentials
    zk._zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/carol/clients/c1"}',
                  sequence=True)
    zk._zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"topics/t"}', sequence=True)
    zk._zk.delete("/config/users/carol")
    zk._zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/carol"}', sequence=True)
    wait_until("carol removed", lambda: store.get("carol", "SCRAM-SHA-256") is None, timeout=1.0, interval=0.01)


def test_an_alteration_applies_to_the_znode_as_read_not_to_an_outdated_table(
        zk: KafkaZkClient, store: ZkCredentialStore) -> None:
    # broker B's table predates broker A's change of the same user (its notification not yet applied)
    b = ZkCredentialStore(zk)
    b.refresh()
    c256 = derive_credential("SCRAM-SHA-256", "one", SALT, 4096)
    c512 = derive_credential("SCRAM-SHA-512", "two", SALT, 4096)
    store.save(store.with_changes({("alice", "SCRAM-SHA-256"): c256}, set()))
    b.save(b.with_changes({("alice", "SCRAM-SHA-512"): c512}, set()))
    config = json.loads(zk._zk.get("/config/users/alice")[0])["config"]
    assert config == {"SCRAM-SHA-256": c256.to_text(), "SCRAM-SHA-512": c512.to_text()}  # A's change kept
    assert b.get("alice", "SCRAM-SHA-256") == c256  # B's table follows the znode it read
    wait_until("A applied B's change", lambda: store.get("alice", "SCRAM-SHA-512") == c512, timeout=1.0,
               interval=0.01)
