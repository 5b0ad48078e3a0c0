"""KIP-368 re-authentication without sockets, with an injected clock: the session lifetime a completed
login answers (server/security/sasl.py, Kafka's calcCompletionTimesAndReturnSessionLifetimeMs), the
SessionGate that decides what an authenticated connection does with each request, and a re-authentication
through a second SaslAuthenticator."""

from __future__ import annotations

from datetime import timedelta

import pytest
from oauthkit import client_first, unsecured
from test_sasl_state import USERS, frame, response

from kaflite.protocol.errors import ErrorCode
from kaflite.server.security.oauth import OAuthBearerServer, UnsecuredValidator
from kaflite.server.security.sasl import MechanismServer, PlainServer, SaslAuthenticator, SessionGate, State


class Clock:
    def __init__(self, ms: int = 1_800_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def mechanisms(clock: Clock) -> dict[str, type[MechanismServer] | object]:
    return {"PLAIN": lambda: PlainServer({**USERS, "bob": "bob-secret"}),
            "OAUTHBEARER": lambda: OAuthBearerServer(UnsecuredValidator({}, clock))}


def login(auth: SaslAuthenticator, mechanism: str, token: bytes, version: int = 2) -> tuple[object, object]:
    auth.receive(frame(17, 1, mechanism=mechanism))
    step = auth.receive(frame(36, version, auth_bytes=token))
    return step, response(step.response, 36, version)


def token_for(clock: Clock, sub: str, life_s: int) -> bytes:
    return client_first(unsecured({"sub": sub, "exp": clock.ms / 1000 + life_s}))


@pytest.mark.parametrize("max_reauth,mechanism,life_s,lifetime", [
    (0, "PLAIN", 0, 0),  # neither set: no lifetime, no expiry
    (5000, "PLAIN", 0, 5000),  # connections.max.reauth.ms alone
    (0, "OAUTHBEARER", 60, 60_000),  # the token's exp alone
    (5000, "OAUTHBEARER", 60, 5000),  # the smaller of the two
    (120_000, "OAUTHBEARER", 60, 60_000),
])
def test_session_lifetime_is_the_smaller_of_the_config_and_the_credentials_life(
        max_reauth: int, mechanism: str, life_s: int, lifetime: int) -> None:
    clock = Clock()
    auth = SaslAuthenticator(mechanisms(clock), max_reauth_ms={mechanism: max_reauth}, now_ms=clock)  # type: ignore[arg-type]
    token = b"\x00alice\x00alice-secret" if mechanism == "PLAIN" else token_for(clock, "alice", life_s)
    step, r = login(auth, mechanism, token)
    assert r.error_code == ErrorCode.none and r.session_lifetime == timedelta(milliseconds=lifetime)  # type: ignore[attr-defined]
    assert step.session_end_ms == (clock.ms + lifetime if lifetime else None)  # type: ignore[attr-defined]


def test_version_0_answers_no_lifetime_but_the_session_still_ends() -> None:
    clock = Clock()
    auth = SaslAuthenticator(mechanisms(clock), max_reauth_ms={"PLAIN": 5000}, now_ms=clock)  # type: ignore[arg-type]
    step, r = login(auth, "PLAIN", b"\x00alice\x00alice-secret", version=0)
    assert not hasattr(r, "session_lifetime")
    assert step.session_end_ms == clock.ms + 5000  # type: ignore[attr-defined]


def test_gate_serves_until_the_end_then_expires_except_for_a_handshake() -> None:
    clock = Clock()
    gate = SessionGate(clock.ms + 5000, "PLAIN", "User:alice", clock)
    assert gate.check(0) == gate.SERVE
    clock.ms += 5000
    assert gate.check(0) == gate.SERVE  # the end itself is still inside (Kafka: now - end > 0 expires)
    clock.ms += 1
    assert gate.check(3) == gate.EXPIRED
    assert gate.check(17) == gate.REAUTHENTICATE  # a re-authentication may begin after the end


def test_gate_allows_one_reauthentication_start_per_second() -> None:
    clock = Clock()
    gate = SessionGate(clock.ms + 60_000, "PLAIN", "User:alice", clock)
    assert gate.check(17) == gate.REAUTHENTICATE
    clock.ms += 999
    assert gate.check(17) == gate.SERVE  # goes to the handler: ILLEGAL_SASL_STATE, as Kafka
    clock.ms += 1
    assert gate.check(17) == gate.REAUTHENTICATE


def reauth(clock: Clock, mechanism: str, principal: str, max_reauth: int = 5000) -> SaslAuthenticator:
    return SaslAuthenticator(mechanisms(clock), max_reauth_ms={"PLAIN": max_reauth, "OAUTHBEARER": 0},  # type: ignore[arg-type]
                             now_ms=clock, reauth_of=(mechanism, principal))


def test_reauthentication_same_principal_gives_a_new_session() -> None:
    clock = Clock()
    auth = reauth(clock, "PLAIN", "User:alice")
    assert auth.state is State.REAUTH_HANDSHAKE
    clock.ms += 4000
    step, r = login(auth, "PLAIN", b"\x00alice\x00alice-secret")
    assert r.error_code == ErrorCode.none and r.session_lifetime == timedelta(milliseconds=5000)  # type: ignore[attr-defined]
    assert step.principal == "User:alice" and step.session_end_ms == clock.ms + 5000  # type: ignore[attr-defined]


def test_reauthentication_with_another_principal_fails_and_closes() -> None:
    clock = Clock()
    step, r = login(reauth(clock, "PLAIN", "User:alice"), "PLAIN", b"\x00bob\x00bob-secret")
    assert r.error_code == ErrorCode.sasl_authentication_failed  # type: ignore[attr-defined]
    assert r.error_message == "Cannot change principals during re-authentication from User:alice: User:bob"  # type: ignore[attr-defined]
    assert step.close is not None and step.principal is None  # type: ignore[attr-defined]


def test_reauthentication_with_another_token_of_the_same_subject_takes_the_new_expiry() -> None:
    clock = Clock()
    step, r = login(reauth(clock, "OAUTHBEARER", "User:alice"), "OAUTHBEARER", token_for(clock, "alice", 90))
    assert r.session_lifetime == timedelta(milliseconds=90_000) and step.principal == "User:alice"  # type: ignore[attr-defined]


def test_reauthentication_with_another_mechanism_fails_at_the_token() -> None:
    clock = Clock()
    auth = reauth(clock, "OAUTHBEARER", "User:alice")
    hs = auth.receive(frame(17, 1, mechanism="PLAIN"))
    assert response(hs.response, 17, 1).error_code == ErrorCode.none and hs.close is None
    step = auth.receive(frame(36, 2, auth_bytes=b"\x00alice\x00alice-secret"))
    r = response(step.response, 36, 2)
    assert r.error_code == ErrorCode.sasl_authentication_failed and "re-authentication" in r.error_message
    assert step.close is not None


def test_reauthentication_starts_with_a_v1_handshake_only() -> None:
    clock = Clock()
    for request in (frame(18, 3, client_software_name="t", client_software_version="1"),
                    frame(17, 0, mechanism="PLAIN"), frame(36, 2, auth_bytes=b"\x00alice\x00alice-secret")):
        auth = reauth(clock, "PLAIN", "User:alice")
        step = auth.receive(request)
        assert step.close is not None and not step.dispatch and auth.state is State.FAILED
