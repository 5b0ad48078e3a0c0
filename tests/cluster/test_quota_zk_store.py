"""Client quotas in ZooKeeper as Kafka's ZooKeeper mode keeps them (server/quota/store.py's ZkQuotaStore),
against a real ZooKeeper without brokers: the znode bytes and notifications kaflite writes, a user's SCRAM
credentials and quotas sharing one znode without either losing the other's keys (also when written at the
same time by two brokers), and a znode written as Kafka's tools write it published by a watching store
within 1 s. Through brokers and clients: tests/cluster/test_quota_cluster.py."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from helpers import wait_until
from kaflite.cluster.zk import KafkaZkClient
from kaflite.server.quota import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity, QuotaManager
from kaflite.server.quota.store import Configs, ZkQuotaStore
from kaflite.server.security.scram import derive_credential
from kaflite.server.security.zk_credentials import ZkCredentialStore

SALT = b"0123456789abcdef"


def _last_change(zk: KafkaZkClient) -> bytes:
    last = sorted(zk._zk.get_children("/config/changes"))[-1]
    return zk._zk.get(f"/config/changes/{last}")[0]  # type: ignore[no-any-return]


def test_alter_writes_kafkas_znodes_and_notifications(zk: KafkaZkClient) -> None:
    zk.create_top_level_paths()
    published: list[tuple[Configs, bool]] = []
    store = ZkQuotaStore(zk, lambda c, whole: published.append((c, whole)))
    store.start()
    assert published == [({}, True)]
    both = QuotaEntity("bob smith", "app-1")
    defaults = QuotaEntity(DEFAULT, DEFAULT)
    literal = QuotaEntity("<default>", None)  # a user literally named <default> is not the default
    out, failed = store.alter([
        (both, {PRODUCER_BYTE_RATE: 1024.0, CONSUMER_BYTE_RATE: 2048.0}),
        (defaults, {"request_percentage": 12.5}),
        (literal, {PRODUCER_BYTE_RATE: 7.0}),
        (QuotaEntity(None, DEFAULT), {CONSUMER_BYTE_RATE: 100.0}),
    ])
    assert failed == {}
    assert out[both] == {PRODUCER_BYTE_RATE: 1024.0, CONSUMER_BYTE_RATE: 2048.0}
    assert published[-1] == (out, False)
    assert zk._zk.get("/config/users/bob%20smith/clients/app-1")[0] == \
        b'{"version":1,"config":{"producer_byte_rate":"1024","consumer_byte_rate":"2048"}}'
    assert zk._zk.get("/config/users/<default>/clients/<default>")[0] == \
        b'{"version":1,"config":{"request_percentage":"12.5"}}'
    assert json.loads(zk._zk.get("/config/users/%3Cdefault%3E")[0])["config"] == {PRODUCER_BYTE_RATE: "7"}
    assert json.loads(zk._zk.get("/config/clients/<default>")[0])["config"] == {CONSUMER_BYTE_RATE: "100"}
    assert _last_change(zk) == b'{"version":2,"entity_path":"clients/<default>"}'
    changes = [zk._zk.get(f"/config/changes/{c}")[0] for c in sorted(zk._zk.get_children("/config/changes"))]
    assert b'{"version":2,"entity_path":"users/bob%20smith/clients/app-1"}' in changes
    # a second broker loads the same table
    assert ZkQuotaStore(zk).load() == {
        both: {PRODUCER_BYTE_RATE: 1024.0, CONSUMER_BYTE_RATE: 2048.0}, defaults: {"request_percentage": 12.5},
        literal: {PRODUCER_BYTE_RATE: 7.0}, QuotaEntity(None, DEFAULT): {CONSUMER_BYTE_RATE: 100.0}}
    # removing a key keeps the others; removing the last keeps the znode with an empty config (as Kafka)
    out, _ = store.alter([(both, {PRODUCER_BYTE_RATE: None})])
    assert out == {both: {CONSUMER_BYTE_RATE: 2048.0}}
    out, _ = store.alter([(both, {CONSUMER_BYTE_RATE: None})])
    assert out == {both: {}}
    assert zk._zk.get("/config/users/bob%20smith/clients/app-1")[0] == b'{"version":1,"config":{}}'
    assert both not in store.load()


def test_quotas_and_scram_credentials_share_a_users_znode(zk: KafkaZkClient) -> None:
    zk.create_top_level_paths()
    creds = ZkCredentialStore(zk)
    creds.load()
    quotas = ZkQuotaStore(zk)
    quotas.start()
    cred = derive_credential("SCRAM-SHA-256", "pw", SALT, 4096)
    creds.save(creds.with_changes({("alice", "SCRAM-SHA-256"): cred}, set()))
    quotas.alter([(QuotaEntity("alice", None), {PRODUCER_BYTE_RATE: 500.0})])
    assert json.loads(zk._zk.get("/config/users/alice")[0])["config"] == \
        {"SCRAM-SHA-256": cred.to_text(), PRODUCER_BYTE_RATE: "500"}
    # a credential is not a quota, a quota is not a credential
    assert quotas.load() == {QuotaEntity("alice", None): {PRODUCER_BYTE_RATE: 500.0}}
    assert creds.get("alice", "SCRAM-SHA-256") == cred
    creds.save(creds.with_changes({}, {("alice", "SCRAM-SHA-256")}))
    assert json.loads(zk._zk.get("/config/users/alice")[0])["config"] == {PRODUCER_BYTE_RATE: "500"}
    quotas.alter([(QuotaEntity("alice", None), {PRODUCER_BYTE_RATE: None})])
    creds.save(creds.with_changes({("alice", "SCRAM-SHA-256"): cred}, set()))
    assert json.loads(zk._zk.get("/config/users/alice")[0])["config"] == {"SCRAM-SHA-256": cred.to_text()}
    assert quotas.load() == {}


def test_two_brokers_writing_one_users_znode_at_once_both_keep_their_keys(
        zk: KafkaZkClient, zk_connect: str) -> None:
    """Both read the user's znode at the same version; the quota is written first, the credential second:
    the credential's compare-and-set fails and its change is applied again to what the quota's wrote
    (before, a SCRAM save read the znode, then set it unconditionally, and the quota was lost)."""
    zk.create_top_level_paths()
    other = KafkaZkClient(zk_connect, session_timeout_ms=10000)
    other.start()
    try:
        both_read = threading.Barrier(2)
        quota_written = threading.Event()
        first = {"creds": True, "quotas": True}

        def hold(who: str) -> None:
            if first[who]:
                first[who] = False
                both_read.wait(timeout=5)
                if who == "creds":
                    assert quota_written.wait(timeout=5)

        real_update, real_get = other.update_entity_config, other.get_entity_config

        def creds_update(kind: str, name: str, change: Any) -> dict[str, str]:
            return real_update(kind, name, lambda config: (hold("creds"), change(config))[1])

        def creds_get(kind: str, name: str) -> dict[str, str]:  # the read of a read-then-set
            config = real_get(kind, name)
            hold("creds")
            return config

        other.update_entity_config = creds_update  # type: ignore[method-assign]
        other.get_entity_config = creds_get  # type: ignore[method-assign]
        real_quota_update = zk.update_entity_config

        def quota_update(kind: str, name: str, change: Any) -> dict[str, str]:
            return real_quota_update(kind, name, lambda config: (hold("quotas"), change(config))[1])

        zk.update_entity_config = quota_update  # type: ignore[method-assign]
        creds = ZkCredentialStore(other)
        quotas = ZkQuotaStore(zk)
        cred = derive_credential("SCRAM-SHA-512", "pw", SALT, 4096)
        t = threading.Thread(target=creds.save, args=(creds.with_changes({("carol", "SCRAM-SHA-512"): cred},
                                                                          set()),))
        t.start()
        _, failed = quotas.alter([(QuotaEntity("carol", None), {CONSUMER_BYTE_RATE: 9000.0})])
        quota_written.set()
        t.join(10)
        assert failed == {}
        assert json.loads(zk._zk.get("/config/users/carol")[0])["config"] == \
            {"SCRAM-SHA-512": cred.to_text(), CONSUMER_BYTE_RATE: "9000"}
    finally:
        other.close()


def test_a_znode_written_as_kafkas_tools_do_is_published_within_a_second(zk: KafkaZkClient) -> None:
    zk.create_top_level_paths()
    manager = QuotaManager()
    lock = threading.Lock()

    def publish(configs: Configs, whole: bool) -> None:
        with lock:
            manager.apply(configs, whole)

    store = ZkQuotaStore(zk, publish)
    store.start()
    # kafka-configs.sh --zookeeper --alter --entity-type users --entity-name dave --entity-type clients
    #   --entity-name c1 --add-config producer_byte_rate=4096
    zk._zk.create("/config/users/dave/clients/c1", b'{"version":1,"config":{"producer_byte_rate":"4096"}}',
                  makepath=True)
    written = time.monotonic()
    zk._zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/dave/clients/c1"}',
                  sequence=True)
    wait_until("dave/c1 published", lambda: manager.quota(PRODUCER_BYTE_RATE, "User:dave", "c1") == 4096.0,
               timeout=1.0, interval=0.01)
    assert time.monotonic() - written < 1.0
    # a SCRAM-only change of a user publishes no quota; a value that is not a number is left out
    zk._zk.create("/config/users/erin", b'{"version":1,"config":{"SCRAM-SHA-256":"salt=x",'
                  b'"consumer_byte_rate":"lots","producer_byte_rate":"10"}}')
    zk._zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/erin"}', sequence=True)
    wait_until("erin published", lambda: manager.quota(PRODUCER_BYTE_RATE, "User:erin", "x") == 10.0,
               timeout=1.0, interval=0.01)
    assert manager.entities()[QuotaEntity("erin", None)] == {PRODUCER_BYTE_RATE: 10.0}
    # the znode emptied: the quota is gone
    zk._zk.set("/config/users/dave/clients/c1", b'{"version":1,"config":{}}')
    zk._zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/dave/clients/c1"}',
                  sequence=True)
    wait_until("dave/c1 removed", lambda: QuotaEntity("dave", "c1") not in manager.entities(), timeout=1.0,
               interval=0.01)
