"""The SASL listener on the wire (raw frames): what is served before authentication, the delayed close
after a failed login, v0 raw tokens, the SCRAM credential APIs, and secrets never logged."""

from __future__ import annotations

import logging
import time

import pytest
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.schema.metadata.v9.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as HandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import i8, i32
from kwire import WireClient
from seckit import PLAIN_USERS, SCRAM_USERS, Secured, create_scram_users

from kaflite.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)

METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False)


def test_api_versions_advertises_the_security_apis(secured: Secured) -> None:
    with WireClient(secured.addr("SASL_PLAINTEXT")) as w:
        r = w.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert keys[17] == (0, 1) and keys[36] == (0, 2) and keys[50] == (0, 0) and keys[51] == (0, 0)


def test_metadata_before_authentication_closes_the_connection(secured: Secured) -> None:
    with WireClient(secured.addr("SASL_PLAINTEXT")) as w:
        w.send(METADATA)
        assert w.is_closed()


def test_failed_login_answered_then_closed_after_the_delay(secured: Secured) -> None:
    with WireClient(secured.addr("SASL_PLAINTEXT")) as w:
        assert w.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
        started = time.monotonic()
        r = w.request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00wrong"))
        assert r.error_code == ErrorCode.sasl_authentication_failed
        assert w.is_closed()
        assert time.monotonic() - started >= 0.045  # connection.failed.authentication.delay.ms=50


def test_unsupported_mechanism_lists_the_enabled_ones(secured: Secured) -> None:
    with WireClient(secured.addr("SASL_PLAINTEXT")) as w:
        r = w.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        assert r.error_code == ErrorCode.unsupported_sasl_mechanism
        assert r.mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
        assert w.is_closed()


def test_v0_handshake_raw_tokens_then_requests(secured: Secured) -> None:
    import struct

    with WireClient(secured.addr("SASL_PLAINTEXT")) as w:
        assert w.request(HandshakeV0(mechanism="PLAIN")).error_code == ErrorCode.none
        token = f"\x00alice\x00{PLAIN_USERS['alice']}".encode()
        w.send_raw(struct.pack(">i", len(token)) + token)
        assert w.read_frame() == b""  # PLAIN's empty server token, framed
        assert w.request(METADATA).brokers  # an ordinary connection now


def test_sasl_requests_on_plaintext_are_illegal_sasl_state(secured: Secured) -> None:
    with WireClient(secured.addr("PLAINTEXT")) as w:
        assert w.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.illegal_sasl_state


def _upsert(name: str, mechanism: int = 1, iterations: int = 4096, salt: bytes = b"0123456789abcdef") -> object:
    return ScramCredentialUpsertion(name=name, mechanism=i8(mechanism), iterations=i32(iterations), salt=salt,
                                    salted_password=b"x" * 32)


def test_alter_and_describe_scram_credentials(secured: Secured) -> None:
    with WireClient(secured.addr("PLAINTEXT")) as w:
        r = w.request(AlterUserScramCredentialsRequest(deletions=(), upsertions=(
            _upsert("erin"), _upsert("frank", iterations=4095), _upsert("gina", mechanism=9),
            _upsert("hank", salt=b""))))
        codes = {x.user: x.error_code for x in r.results}
        assert codes == {"erin": ErrorCode.none, "frank": ErrorCode.unacceptable_credential,
                         "gina": ErrorCode.unsupported_sasl_mechanism, "hank": ErrorCode.unacceptable_credential}
        r = w.request(DescribeUserScramCredentialsRequest(users=(UserName(name="erin"), UserName(name="frank"))))
        got = {x.user: (x.error_code, [(c.mechanism, c.iterations) for c in x.credential_infos]) for x in r.results}
        assert got == {"erin": (ErrorCode.none, [(1, 4096)]), "frank": (ErrorCode.resource_not_found, [])}
        r = w.request(DescribeUserScramCredentialsRequest(users=None))
        assert {"carol", "dave", "erin"} <= {x.user for x in r.results}
        r = w.request(AlterUserScramCredentialsRequest(upsertions=(), deletions=(
            ScramCredentialDeletion(name="erin", mechanism=i8(1)), ScramCredentialDeletion(name="erin", mechanism=i8(2)))))
        assert [x.error_code for x in r.results] == [ErrorCode.resource_not_found]  # a user with an error changes nothing
        r = w.request(AlterUserScramCredentialsRequest(upsertions=(), deletions=(
            ScramCredentialDeletion(name="erin", mechanism=i8(1)),)))
        assert [x.error_code for x in r.results] == [ErrorCode.none]
        r = w.request(DescribeUserScramCredentialsRequest(users=(UserName(name="erin"),)))
        assert r.results[0].error_code == ErrorCode.resource_not_found


def test_login_with_a_short_salt_credential(secured: Secured) -> None:
    """Kafka accepts any non-empty salt: librdkafka's 0081 stores a credential salted with the 4 bytes "salt".
    kaflite refused salts under 12 bytes (UNACCEPTABLE_CREDENTIAL) because scramp, which runs the exchange,
    does; now it is stored and a SCRAM-SHA-256 client logs in with it and produces."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": secured.addr("PLAINTEXT")})
    upsert = UserScramCredentialUpsertion("shorty", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"shorty-secret", salt=b"salt")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)
    delivered: list[object] = []
    p = Producer({"bootstrap.servers": secured.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "shorty", "sasl.password": "shorty-secret",
                  "message.timeout.ms": 20000})
    p.produce("short-salt", b"v", on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(30) == 0
    assert delivered == [None]
    # the wrong password with the same short-salt credential still fails
    bad = Producer({"bootstrap.servers": secured.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "shorty", "sasl.password": "wrong"})
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException):
        bad.list_topics(timeout=3)


def test_describe_with_an_empty_user_list_describes_every_user(secured: Secured) -> None:
    """Kafka describes every user for a null or an empty list; librdkafka's describe of all users (what
    `kaflite users --describe` sends) is an empty list, which was answered with no user at all."""
    with WireClient(secured.addr("PLAINTEXT")) as w:
        r = w.request(DescribeUserScramCredentialsRequest(users=()))
        assert {"carol", "dave"} <= {x.user for x in r.results}
        assert all(x.error_code == ErrorCode.none for x in r.results)


def test_scram_credentials_survive_a_restart(certs: object, tmp_path: object) -> None:
    from pathlib import Path

    from confluent_kafka import Producer
    from seckit import secured_overrides

    from kaflite.server.embedded import EmbeddedBroker

    data = Path(str(tmp_path))
    with EmbeddedBroker(data_dir=data, overrides=secured_overrides(certs)) as b:  # type: ignore[arg-type]
        plain = {li.name: li.port for li in b.server.bound}["PLAINTEXT"]
        create_scram_users(f"127.0.0.1:{plain}", {"ivy": "ivy-secret"})
    stored = (data / "scram-credentials.json").read_text()
    assert "ivy" in stored and "ivy-secret" not in stored
    with EmbeddedBroker(data_dir=data, overrides=secured_overrides(certs)) as b:  # type: ignore[arg-type]
        port = {li.name: li.port for li in b.server.bound}["SASL_PLAINTEXT"]
        p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "ivy", "sasl.password": "ivy-secret"})
        assert p.list_topics(timeout=10).brokers


def test_secrets_are_never_logged(secured: Secured, caplog: pytest.LogCaptureFixture) -> None:
    from confluent_kafka import Producer

    caplog.set_level(logging.DEBUG, logger="kaflite")
    for mechanism, user, password in [("PLAIN", "alice", PLAIN_USERS["alice"]), ("PLAIN", "alice", "wrong-pw-1"),
                                      ("SCRAM-SHA-256", "carol", SCRAM_USERS["carol"]),
                                      ("SCRAM-SHA-512", "carol", "wrong-pw-2")]:
        p = Producer({"bootstrap.servers": secured.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                      "log_level": 0})
        try:
            p.list_topics(timeout=10 if password in (PLAIN_USERS["alice"], SCRAM_USERS["carol"]) else 2)
        except Exception:  # the wrong passwords
            pass
    create_scram_users(secured.addr("PLAINTEXT"), {"carol": SCRAM_USERS["carol"]})
    text = caplog.text
    assert "authenticated as User:alice" in text and "SASL authentication failed" in text  # it did log
    for secret in (*PLAIN_USERS.values(), *SCRAM_USERS.values(), "wrong-pw-1", "wrong-pw-2", "broker-key-pass"):
        assert secret not in text


def test_a_broken_exchange_closes_only_that_connection_without_an_error_line(
        secured: Secured, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from kaflite.server.security import sasl

    def broken(self: object, token: bytes) -> tuple[bytes, bool]:
        raise TypeError("a mechanism bug or a token it did not expect")

    monkeypatch.setattr(sasl.PlainServer, "evaluate", broken)
    caplog.set_level(logging.INFO, logger="kaflite")
    with WireClient(secured.addr("SASL_PLAINTEXT")) as w:
        assert w.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
        w.send(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00x"))
        assert w.is_closed()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    with WireClient(secured.addr("SASL_PLAINTEXT")) as w:  # the listener still serves
        assert w.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == ErrorCode.none
