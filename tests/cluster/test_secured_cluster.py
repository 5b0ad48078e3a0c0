"""A secured cluster (issue 26): three `python -m kaflite.server` processes whose only listener is SASL_SSL,
for clients and between brokers (security.inter.broker.protocol=SASL_SSL, SCRAM-SHA-512 as the user
`broker`), on a real ZooKeeper; one module-scoped cluster.

- the brokers' own SCRAM credential is written into ZooKeeper before they start, as Kafka's tools write it
  (`/config/users/broker` and a `/config/changes` notification, raw bytes through kazoo): replication
  between the brokers logs in with it;
- a credential created with kaflite (confluent-kafka's AlterUserScramCredentials on one broker) is Kafka's
  znode byte for byte, and every broker accepts it (and, once deleted, refuses it) within 1 s;
- an RF 3 topic replicates, a kill -9 of a leader fails over, a transaction commits across leaders
  (its markers go over SASL_SSL), nothing acknowledged is lost;
- a fourth broker with the wrong inter-broker password has its fetches refused and never joins an ISR,
  while the cluster keeps serving; no password appears in any broker's log.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from cluster.conftest import BrokerProcesses
from helpers import free_port, holds_by, wait_until
from kaflite.cluster.zk import KafkaZkClient
from kaflite.cluster.zkserver import ZooKeeperServer
from kaflite.server.broker_connection import BrokerConnection
from kaflite.server.security.certs import issue, make_ca, write_private
from kaflite.server.security.client import BrokerConnector, InterBrokerAuthenticationError

BROKER_PASSWORD = "broker-secret-7f3a"
WRONG_PASSWORD = "wrong-secret-91c2"
APP_PASSWORD = "app-secret-5d0e"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
TOPIC = "secured"


@dataclass
class SecuredCluster:
    brokers: BrokerProcesses
    zk: KafkaZkClient
    ca_file: Path
    keystore: Path

    def bootstrap(self, *ids: int) -> str:
        return self.brokers.bootstrap(*ids)

    def client(self, user: str = "broker", password: str = BROKER_PASSWORD,
               mechanism: str = "SCRAM-SHA-512", **extra: object) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap(), "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.ca_file), "sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": password, **extra}

    def overrides(self, broker_id: int, password: str = BROKER_PASSWORD) -> list[str]:
        port = self.brokers.ports.setdefault(broker_id, free_port())
        return [
            f"listeners=SASL_SSL://127.0.0.1:{port}", "security.inter.broker.protocol=SASL_SSL",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={self.keystore}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={self.ca_file}",
            "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            f'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_MODULE} required username="broker" '
            f'password="{password}";',
            "replica.lag.time.max.ms=3000", "replica.fetch.backoff.ms=200",
            "offsets.topic.replication.factor=3", "transaction.state.log.replication.factor=3",
            "transaction.state.log.min.isr=2",
        ]


def kafka_tools_credential(password: str, mechanism: str, iterations: int = 4096) -> str:
    """What kafka-configs.sh writes for 'SCRAM-SHA-512=[password=...]' (ScramFormatter, written here
    independently of kaflite's code)."""
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    salt = uuid.uuid4().bytes + uuid.uuid4().bytes
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    stored = hashlib.new(name, hmac.new(salted, b"Client Key", name).digest()).digest()
    server = hmac.new(salted, b"Server Key", name).digest()
    b64 = base64.b64encode
    return (f"salt={b64(salt).decode()},stored_key={b64(stored).decode()},server_key={b64(server).decode()},"
            f"iterations={iterations}")


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    from kazoo.client import KazooClient

    d = tmp_path_factory.mktemp("secured-cluster")
    ca = make_ca("CN=cluster CA,O=kaflite")
    (d / "ca.pem").write_text(ca.cert_pem)
    write_private(d / "broker.pem", issue(ca, "CN=broker,O=kaflite", hosts=("127.0.0.1", "localhost")).keystore_pem())
    connect = f"{zookeeper.connect}/kaflite-secured-{uuid.uuid4().hex[:8]}"
    # the brokers' credential, as `kafka-configs.sh --zookeeper ... --alter --add-config
    # 'SCRAM-SHA-512=[password=...]' --entity-type users --entity-name broker` writes it, before any broker
    tools = KazooClient(hosts=connect)
    tools.start(10)
    try:
        tools.create("/config/users/broker", json.dumps(
            {"version": 1, "config": {"SCRAM-SHA-512": kafka_tools_credential(BROKER_PASSWORD, "SCRAM-SHA-512")}},
            separators=(",", ":")).encode(), makepath=True)
        tools.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/broker"}',
                     sequence=True, makepath=True)
    finally:
        tools.stop()
        tools.close()
    zk = KafkaZkClient(connect, session_timeout_ms=10000)
    zk.start()
    brokers = BrokerProcesses(connect, d)
    c = SecuredCluster(brokers, zk, d / "ca.pem", d / "broker.pem")
    try:
        for b in (1, 2, 3):  # started together: each start costs seconds on a loaded machine
            brokers.start(b, *c.overrides(b), wait=False)
        for b in (1, 2, 3):
            brokers.wait_listening(b, timeout=90)  # three starts at once on two shared cores
        wait_until("brokers registered", lambda: zk.get_broker_ids() == [1, 2, 3])
        yield c
    finally:
        brokers.stop_all()
        zk.close()
    for b in range(1, 5):  # no broker logged a password, on any path
        log = (d / f"broker-{b}.log").read_text(errors="replace") if (d / f"broker-{b}.log").exists() else ""
        for secret in (BROKER_PASSWORD, WRONG_PASSWORD, APP_PASSWORD):
            assert secret not in log, (b, "a password is in the log")


def _isr(zk: KafkaZkClient, topic: str, partition: int) -> list[int]:
    s = zk.get_partition_states([(topic, partition)])[(topic, partition)]
    return [] if s is None else sorted(s.isr)


def _leader(zk: KafkaZkClient, topic: str, partition: int) -> int:
    s = zk.get_partition_states([(topic, partition)])[(topic, partition)]
    return -1 if s is None else s.leader


def _login(c: SecuredCluster, broker_id: int, user: str, password: str, mechanism: str) -> bool:
    """One SCRAM login on `broker_id`'s SASL_SSL listener (kaflite's inter-broker client side)."""
    ctx = ssl.create_default_context(cafile=str(c.ca_file))
    connector = BrokerConnector("SASL_SSL", ctx, mechanism, user, password)

    async def go() -> bool:
        try:
            conn = await BrokerConnection.open("127.0.0.1", c.brokers.ports[broker_id], "test", 10, connector)
        except InterBrokerAuthenticationError:
            return False
        conn.close()
        return True

    return asyncio.run(go())


def test_the_brokers_log_in_to_each_other_with_the_credential_kafkas_tools_wrote(cluster: SecuredCluster) -> None:
    admin = AdminClient(cluster.client())  # the brokers' own user, as a client too
    admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    wait_until("full ISRs over SASL_SSL", lambda: all(_isr(cluster.zk, TOPIC, p) == [1, 2, 3] for p in range(3)))
    assert not _login(cluster, 2, "broker", "not-it", "SCRAM-SHA-512")


def test_a_credential_written_by_kaflite_is_kafkas_znode_and_every_broker_applies_it(
        cluster: SecuredCluster) -> None:
    admin = AdminClient(cluster.client(**{"bootstrap.servers": cluster.bootstrap(1)}))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("app", info, APP_PASSWORD.encode())])[
        "app"].result(30)
    written = time.monotonic()
    data, _ = cluster.zk._zk.get("/config/users/app")
    m = re.fullmatch(rb'\{"version":1,"config":\{"SCRAM-SHA-256":"salt=([A-Za-z0-9+/=]+),stored_key=([A-Za-z0-9+/=]+),'
                     rb'server_key=([A-Za-z0-9+/=]+),iterations=8192"\}\}', data)
    assert m, data
    salt, stored, server = (base64.b64decode(g) for g in m.groups())
    salted = hashlib.pbkdf2_hmac("sha256", APP_PASSWORD.encode(), salt, 8192)
    assert stored == hashlib.sha256(hmac.new(salted, b"Client Key", "sha256").digest()).digest()
    assert server == hmac.new(salted, b"Server Key", "sha256").digest()
    changes = [cluster.zk._zk.get(f"/config/changes/{n}")[0] for n in sorted(cluster.zk._zk.get_children("/config/changes"))]
    assert changes[-1] == b'{"version":2,"entity_path":"users/app"}'
    # 1 s after the answer every broker has applied it (its notification's watch): logins on each until one
    # succeeds, the last at the deadline however long a login takes on a loaded machine
    for b in (2, 3):
        holds_by(f"broker {b} logs app in", lambda b=b: _login(cluster, b, "app", APP_PASSWORD, "SCRAM-SHA-256"),
                 written + 1.0)
    # Describe on another broker reads ZooKeeper
    other = AdminClient(cluster.client(**{"bootstrap.servers": cluster.bootstrap(3)}))
    described = other.describe_user_scram_credentials(["app"])["app"].result(30)
    assert [(ci.mechanism, ci.iterations) for ci in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 8192)]
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("app", ScramMechanism.SCRAM_SHA_256)])[
        "app"].result(30)
    holds_by("broker 3 refuses app", lambda: not _login(cluster, 3, "app", APP_PASSWORD, "SCRAM-SHA-256"),
             time.monotonic() + 1.0)
    assert json.loads(cluster.zk._zk.get("/config/users/app")[0]) == {"version": 1, "config": {}}


def test_replication_failover_and_a_transaction_lose_nothing(cluster: SecuredCluster) -> None:
    zk = cluster.zk
    produced: list[bytes] = []
    p = ck.Producer(cluster.client(**{"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
    for i in range(300):
        produced.append(f"a-{i}".encode())
        p.produce(TOPIC, produced[-1], partition=i % 3)
    assert p.flush(30) == 0
    # the transaction coordinator's topic needs its three brokers to be created: before the kill
    t = ck.Producer(cluster.client(**{"transactional.id": "secured-tx", "linger.ms": 5}))
    t.init_transactions(60)
    victim = _leader(zk, TOPIC, 0)
    cluster.brokers.kill(victim)
    wait_until("partition 0 failed over", lambda: _leader(zk, TOPIC, 0) not in (-1, victim))
    for i in range(300):
        produced.append(f"b-{i}".encode())
        p.produce(TOPIC, produced[-1], partition=i % 3)
    assert p.flush(60) == 0
    # a transaction across the leaders, one broker down (markers between brokers over SASL_SSL)
    t.begin_transaction()
    for i in range(30):
        t.produce(TOPIC, f"t-{i}".encode(), partition=i % 3)
    t.commit_transaction(60)
    produced += [f"t-{i}".encode() for i in range(30)]
    # the killed broker comes back, catches up over SASL_SSL and rejoins every ISR
    cluster.brokers.start(victim, *cluster.overrides(victim))
    wait_until("full ISRs again", lambda: all(_isr(zk, TOPIC, p) == [1, 2, 3] for p in range(3)), timeout=60)
    c = ck.Consumer(cluster.client(**{"group.id": "check", "isolation.level": "read_committed",
                                      "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    c.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(3)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(produced) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    assert sorted(got) == sorted(produced)


def test_a_broker_with_wrong_inter_broker_credentials_never_joins_the_isr(cluster: SecuredCluster) -> None:
    zk = cluster.zk
    cluster.brokers.start(4, *cluster.overrides(4, password=WRONG_PASSWORD))
    wait_until("broker 4 registered", lambda: 4 in zk.get_broker_ids())
    admin = AdminClient(cluster.client())
    admin.create_topics([NewTopic("with-4", 1, replica_assignment=[[1, 4]])])["with-4"].result(30)
    # broker 4 may start in the ISR (the controller's first ISR is every live replica): the leader drops
    # it after replica.lag.time.max.ms and it never comes back
    wait_until("broker 4 out of the ISR", lambda: _isr(zk, "with-4", 0) == [1], timeout=20)
    p = ck.Producer(cluster.client(**{"acks": "all"}))
    for i in range(20):
        p.produce("with-4", f"v-{i}".encode(), partition=0)
    assert p.flush(30) == 0  # the cluster keeps serving
    time.sleep(2)  # several fetch attempts of broker 4 (backoff 200 ms), each refused
    assert _isr(zk, "with-4", 0) == [1]
    log4 = cluster.brokers.log(4)
    assert "SASL_AUTHENTICATION_FAILED" in log4, log4[-2000:]
    assert WRONG_PASSWORD not in log4
    cluster.brokers.kill(4)
