"""A secured broker for tests in one line (`EmbeddedBroker(security="sasl_ssl")`): development
certificates made with `cryptography` (server/security/certs.py), users for PLAIN (JAAS) and SCRAM (the
credential store of the data directory), the broker keys that serve them, and ready client configurations
for confluent-kafka, kafka-python and aiokafka.

Rules (tests/security/test_embedded_secured.py):
- `ssl`: one SSL listener; `sasl_plaintext`: one SASL_PLAINTEXT listener; `sasl_ssl`: one SASL_SSL
  listener; SASL listeners serve PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for every user;
- TLS listeners present a certificate for 127.0.0.1 and localhost signed by a CA made for this broker
  (`ca_file`); with `client_auth=True` the listener requires a client certificate from that CA and the
  client configurations carry one (`CN=<first user>`, principal `User:CN=<user>` on an SSL listener);
- certificates and keys are written, mode 0600 for keys, in a temporary directory removed by `stop()`;
- the client configurations name the listener's bootstrap address, its security protocol, the CA, and
  for SASL the mechanism (`sasl_mechanism`, PLAIN unless told) with the user's password.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SECURITY_PROTOCOLS", "SecurityKit"]

SECURITY_PROTOCOLS = {"ssl": "SSL", "sasl_plaintext": "SASL_PLAINTEXT", "sasl_ssl": "SASL_SSL"}
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class SecurityKit:
    security: str  # one of SECURITY_PROTOCOLS
    users: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_USERS))
    sasl_mechanism: str = "PLAIN"
    client_auth: bool = False
    dir: Path | None = None  # the certificates (a temporary directory, removed by cleanup())

    def __post_init__(self) -> None:
        if self.security not in SECURITY_PROTOCOLS:
            raise ValueError(f"security must be one of {', '.join(SECURITY_PROTOCOLS)} (or None for PLAINTEXT), "
                             f"got {self.security!r}")
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ValueError(f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, got {self.sasl_mechanism!r}")
        if not self.users and self.sasl:
            raise ValueError("a SASL broker needs at least one user")

    @property
    def protocol(self) -> str:
        return SECURITY_PROTOCOLS[self.security]

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def ca_file(self) -> Path:
        assert self.dir is not None
        return self.dir / "ca.pem"

    @property
    def client_cert(self) -> Path:
        assert self.dir is not None
        return self.dir / "client.pem"

    @property
    def client_key(self) -> Path:
        assert self.dir is not None
        return self.dir / "client.key"

    def prepare(self, data_dir: Path) -> dict[str, str]:
        """Write the certificates and the SCRAM users (into `data_dir`'s credential store); the broker
        keys serving them on one listener named after the protocol, on 127.0.0.1:<port>."""
        overrides: dict[str, str] = {"listener.security.protocol.map": f"{self.protocol}:{self.protocol}"}
        if self.tls:
            overrides.update(self._write_certificates())
        if self.sasl:
            overrides["sasl.enabled.mechanisms"] = ",".join(SASL_MECHANISMS)
            users = " ".join(f"user_{u}={_jaas_quote(p)}" for u, p in self.users.items())
            overrides[f"listener.name.{self.protocol.lower()}.plain.sasl.jaas.config"] = \
                f"{_PLAIN_MODULE} required {users};"
            self._write_scram_users(data_dir)
        return overrides

    def _write_certificates(self) -> dict[str, str]:
        from kaflite.server.security.certs import issue, make_ca, write_private

        self.dir = Path(tempfile.mkdtemp(prefix="kaflite-tls-"))
        ca = make_ca("CN=kaflite test CA,O=kaflite")
        broker = issue(ca, "CN=localhost,O=kaflite", hosts=("127.0.0.1", "localhost"))
        self.ca_file.write_text(ca.cert_pem)
        write_private(self.dir / "broker.keystore.pem", broker.keystore_pem())
        overrides = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.dir / "broker.keystore.pem"),
                     "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file)}
        if self.client_auth:
            client = issue(ca, f"CN={next(iter(self.users), 'client')}")
            self.client_cert.write_text(client.cert_pem)
            write_private(self.client_key, client.key_pem)
            overrides["ssl.client.auth"] = "required"
        return overrides

    def _write_scram_users(self, data_dir: Path) -> None:
        from kaflite.server.security.scram import FILE_NAME, CredentialStore, derive_credential

        data_dir.mkdir(parents=True, exist_ok=True)
        store = CredentialStore(data_dir / FILE_NAME)
        upserts = {(user, mech): derive_credential(mech, password, os.urandom(16), 4096)
                   for user, password in self.users.items() for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
        store.save(store.with_changes(upserts, set()))

    def cleanup(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _user(self, user: str | None) -> tuple[str, str]:
        if not self.users:
            return "", ""
        name = user if user is not None else next(iter(self.users))
        if name not in self.users:
            raise KeyError(f"no user {name!r} on this broker (users: {', '.join(self.users)})")
        return name, self.users[name]

    # --- client configurations ----------------------------------------------------------------------
    def confluent(self, bootstrap: str, user: str | None = None) -> dict[str, Any]:
        name, password = self._user(user)
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": self.protocol}
        if self.tls:
            conf["ssl.ca.location"] = str(self.ca_file)
            if self.client_auth:
                conf["ssl.certificate.location"] = str(self.client_cert)
                conf["ssl.key.location"] = str(self.client_key)
        if self.sasl:
            conf.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": name, "sasl.password": password})
        return conf

    def kafka_python(self, bootstrap: str, user: str | None = None) -> dict[str, Any]:
        name, password = self._user(user)
        conf: dict[str, Any] = {"bootstrap_servers": bootstrap, "security_protocol": self.protocol}
        if self.tls:
            conf["ssl_cafile"] = str(self.ca_file)
            if self.client_auth:
                conf["ssl_certfile"] = str(self.client_cert)
                conf["ssl_keyfile"] = str(self.client_key)
        if self.sasl:
            conf.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=name, sasl_plain_password=password)
        return conf

    def aiokafka(self, bootstrap: str, user: str | None = None) -> dict[str, Any]:
        name, password = self._user(user)
        conf: dict[str, Any] = {"bootstrap_servers": bootstrap, "security_protocol": self.protocol}
        if self.tls:
            from aiokafka.helpers import create_ssl_context

            conf["ssl_context"] = create_ssl_context(
                cafile=str(self.ca_file),
                certfile=str(self.client_cert) if self.client_auth else None,
                keyfile=str(self.client_key) if self.client_auth else None)
        if self.sasl:
            conf.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=name, sasl_plain_password=password)
        return conf
