"""Shared pieces of the security tests: certificates, the secured broker's configuration, SCRAM users."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.security.certs import Issued, issue, make_ca, write_private

PLAIN_USERS = {"alice": "alice-secret", "bob": 'b"o\\b secret'}
SCRAM_USERS = {"carol": "carol-secret", "dave": "dave-secret"}
KEY_PASSWORD = "broker-key-pass"


@dataclass(frozen=True)
class Certs:
    dir: Path
    ca: Issued
    ca_file: Path
    broker_keystore: Path  # key (encrypted with KEY_PASSWORD) + certificate, Kafka's PEM key store
    client_cert: Path
    client_key: Path
    rogue_cert: Path  # a client certificate from another CA
    rogue_key: Path
    rogue_ca_file: Path


def make_certs(d: Path) -> Certs:
    ca = make_ca("CN=test CA,O=kaflite")
    broker = issue(ca, "CN=localhost,O=kaflite", hosts=("127.0.0.1", "localhost"), key_password=KEY_PASSWORD)
    client = issue(ca, "CN=client,OU=apps,O=kaflite")
    rogue_ca = make_ca("CN=rogue CA")
    rogue = issue(rogue_ca, "CN=mallory")
    (d / "ca.pem").write_text(ca.cert_pem)
    (d / "rogue-ca.pem").write_text(rogue_ca.cert_pem)
    write_private(d / "broker.keystore.pem", broker.keystore_pem())
    (d / "client.pem").write_text(client.cert_pem)
    write_private(d / "client.key", client.key_pem)
    (d / "rogue.pem").write_text(rogue.cert_pem)
    write_private(d / "rogue.key", rogue.key_pem)
    return Certs(d, ca, d / "ca.pem", d / "broker.keystore.pem", d / "client.pem", d / "client.key",
                 d / "rogue.pem", d / "rogue.key", d / "rogue-ca.pem")


def jaas_plain(users: dict[str, str]) -> str:
    def q(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    opts = " ".join(f"user_{u}={q(p)}" for u, p in users.items())
    return f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="x" {opts};'


def secured_overrides(certs: Certs) -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,"
                     "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_file),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        # the MTLS listener's principals are the certificates' common names
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/, DEFAULT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
        "listener.name.sasl_ssl.ssl.client.auth": "none",
        "connection.failed.authentication.delay.ms": "50",
    }


def create_scram_users(bootstrap: str, users: dict[str, str]) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    alterations = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), password.encode())
        for user, password in users.items()
        for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    for future in admin.alter_user_scram_credentials(alterations).values():
        future.result(timeout=30)


@dataclass
class Secured:
    broker: EmbeddedBroker
    ports: dict[str, int]

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"
