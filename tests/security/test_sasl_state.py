"""The SASL state machine (server/security/sasl.py) without sockets: frames in, Steps out."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32
from kwire import decode_response

from kaflite.protocol.errors import ErrorCode
from kaflite.server.security.sasl import (
    TABLE,
    AuthenticationFailed,
    PlainServer,
    SaslAuthenticator,
    ScramServer,
    State,
)
from kaflite.server.security.scram import CredentialStore, derive_credential

USERS = {"alice": "alice-secret"}


def frame(api_key: int, version: int, correlation_id: int = 7, **fields: object) -> bytes:
    """A request frame without its size prefix, as the connection hands it over."""
    req_mod = load_payload_module(api_key, version, EntityType.request)
    cls = next(v for k, v in vars(req_mod).items() if k.endswith("Request") and isinstance(v, type))
    request = cls(**fields)
    header_cls = HeaderV2 if cls.__flexible__ else HeaderV1
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=i16(api_key), request_api_version=i16(version),
                                             correlation_id=i32(correlation_id), client_id="test"))
    entity_writer(cls)(buf, request)
    return buf.getvalue()


def response(out: list[bytes | memoryview] | None, api_key: int, version: int) -> Any:
    assert out is not None
    data = b"".join(bytes(p) for p in out)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    return decode_response(api_key, version, data[4:], 7)


def plain() -> SaslAuthenticator:
    return SaslAuthenticator({"PLAIN": lambda: PlainServer(USERS)}, failed_delay_ms=100)


def test_api_versions_first_then_handshake_then_authenticate() -> None:
    auth = plain()
    assert auth.receive(frame(18, 3, client_software_name="t", client_software_version="1")).dispatch
    assert auth.state is State.HANDSHAKE
    step = auth.receive(frame(17, 1, mechanism="PLAIN"))
    r = response(step.response, 17, 1)
    assert r.error_code == ErrorCode.none and r.mechanisms == ("PLAIN",)
    assert auth.state is State.AUTHENTICATE
    step = auth.receive(frame(36, 2, auth_bytes=b"\x00alice\x00alice-secret"))
    r = response(step.response, 36, 2)
    assert r.error_code == ErrorCode.none
    assert step.principal == "User:alice" and step.close is None
    assert auth.state is State.COMPLETE


def test_nothing_but_api_versions_and_handshake_before_authentication() -> None:
    for request in (frame(3, 9, topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False,
                          include_cluster_authorized_operations=False),
                    frame(36, 2, auth_bytes=b"\x00alice\x00alice-secret")):
        auth = plain()
        step = auth.receive(request)
        assert step.close is not None and step.response is None and not step.dispatch
        assert auth.state is State.FAILED


def test_second_api_versions_is_illegal() -> None:
    auth = plain()
    auth.receive(frame(18, 0))
    step = auth.receive(frame(18, 0))
    assert step.close is not None and not step.dispatch


def test_request_other_than_authenticate_after_handshake_closes() -> None:
    auth = plain()
    auth.receive(frame(17, 1, mechanism="PLAIN"))
    step = auth.receive(frame(18, 0))
    assert step.close is not None and not step.dispatch and step.principal is None


def test_unsupported_mechanism_lists_the_enabled_ones_then_closes() -> None:
    auth = plain()
    step = auth.receive(frame(17, 1, mechanism="GSSAPI"))
    r = response(step.response, 17, 1)
    assert r.error_code == ErrorCode.unsupported_sasl_mechanism
    assert r.mechanisms == ("PLAIN",)
    assert step.close is not None and auth.state is State.FAILED


@pytest.mark.parametrize("token", [b"\x00alice\x00wrong", b"\x00nobody\x00alice-secret", b"garbage",
                                   b"bob\x00alice\x00alice-secret"])
def test_failed_login_is_answered_after_the_delay_then_closed(token: bytes) -> None:
    auth = plain()
    auth.receive(frame(17, 1, mechanism="PLAIN"))
    step = auth.receive(frame(36, 1, auth_bytes=token))
    r = response(step.response, 36, 1)
    assert r.error_code == ErrorCode.sasl_authentication_failed
    assert step.delay_ms == 100 and step.close is not None and step.principal is None
    assert "secret" not in (r.error_message or "") and "wrong" not in (r.error_message or "")


def test_v0_handshake_then_raw_tokens() -> None:
    auth = plain()
    step = auth.receive(frame(17, 0, mechanism="PLAIN"))
    assert response(step.response, 17, 0).error_code == ErrorCode.none
    assert auth.state is State.RAW_TOKENS
    step = auth.receive(b"\x00alice\x00alice-secret")  # no request header: the token alone
    assert step.response is not None and b"".join(bytes(p) for p in step.response) == b"\x00\x00\x00\x00"
    assert step.principal == "User:alice"


def test_v0_raw_token_failure_closes_without_an_answer() -> None:
    auth = plain()
    auth.receive(frame(17, 0, mechanism="PLAIN"))
    step = auth.receive(b"\x00alice\x00nope")
    assert step.response is None and step.close is not None and step.delay_ms == 100


def test_every_state_but_the_final_ones_has_a_way_out() -> None:
    sources = {s for s, _ in TABLE}
    assert sources == set(State) - {State.COMPLETE, State.FAILED}
    assert all(t in State for t in TABLE.values())


def test_scram_exchange_with_scramp_client_and_kafkas_derivation() -> None:
    from scramp import ScramClient

    store = CredentialStore(None)
    store.users = {"carol": {"SCRAM-SHA-256": derive_credential("SCRAM-SHA-256", "pässword", b"sixteen-byte-slt", 4096)}}
    server = ScramServer("SCRAM-SHA-256", store)
    client = ScramClient(["SCRAM-SHA-256"], "carol", "pässword")
    first, done = server.evaluate(client.get_client_first().encode())
    assert not done
    client.set_server_first(first.decode())
    final, done = server.evaluate(client.get_client_final().encode())
    client.set_server_final(final.decode())  # raises if the server's signature is wrong
    assert done and server.user == "carol"


@pytest.mark.parametrize("user,password", [("carol", "wrong"), ("nobody", "x")])
def test_scram_refuses_wrong_password_and_unknown_user(user: str, password: str) -> None:
    from scramp import ScramClient

    store = CredentialStore(None)
    store.users = {"carol": {"SCRAM-SHA-512": derive_credential("SCRAM-SHA-512", "right", b"sixteen-byte-slt", 4096)}}
    server = ScramServer("SCRAM-SHA-512", store)
    client = ScramClient(["SCRAM-SHA-512"], user, password)
    with pytest.raises(AuthenticationFailed) as err:
        first, _ = server.evaluate(client.get_client_first().encode())
        client.set_server_first(first.decode())
        server.evaluate(client.get_client_final().encode())
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(err.value)


def test_kafkas_derivation_has_no_saslprep() -> None:
    # U+2168 (ROMAN NUMERAL NINE) is "IX" after SASLprep's NFKC: Kafka hashes the raw UTF-8 bytes
    raw = derive_credential("SCRAM-SHA-256", "\u2168", b"s", 4096)
    assert raw != derive_credential("SCRAM-SHA-256", "IX", b"s", 4096)
    import hashlib
    import hmac

    salted = hashlib.pbkdf2_hmac("sha256", "\u2168".encode(), b"s", 4096)
    assert raw.server_key == hmac.new(salted, b"Server Key", "sha256").digest()


def test_api_versions_at_an_unsupported_version_may_be_retried() -> None:
    from kaflite.server.handlers.api_versions import APIS
    from kaflite.server.security.sasl import API_VERSIONS_MAX

    assert APIS[18][1] == API_VERSIONS_MAX
    auth = plain()
    assert auth.receive(_api_versions_frame(API_VERSIONS_MAX + 1)).dispatch
    assert auth.state is State.HANDSHAKE_OR_VERSIONS
    assert auth.receive(frame(18, 0)).dispatch
    assert auth.state is State.HANDSHAKE


def _api_versions_frame(version: int) -> bytes:
    """A request header for an ApiVersions version kio has no schema for (the body does not matter)."""
    return struct.pack(">hhih", 18, version, 7, 4) + b"test" + b"\x00"
