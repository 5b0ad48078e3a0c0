"""The server side of SASL on SASL_PLAINTEXT and SASL_SSL listeners (Kafka's SaslServerAuthenticator),
pure: frames in, `Step`s out, no socket and no clock (the connection applies a Step's delay).

Rules (checkable against TABLE below and tests/server/test_sasl_state.py):
- before authentication only ApiVersions (once, first; an unsupported version of it is answered and may
  be retried) and SaslHandshake are served; any other request
  closes the connection (Kafka's IllegalSaslStateException), nothing of it reaches a handler;
- SaslHandshake naming a mechanism that is not enabled is answered UNSUPPORTED_SASL_MECHANISM with the
  enabled list, then the connection is closed;
- after SaslHandshake v1, only SaslAuthenticate requests carry the tokens; after SaslHandshake v0 the
  next frames are raw SASL tokens framed by a 4-byte length, answered the same way (Kafka and
  kafka-python's legacy flow);
- a failed login is answered SASL_AUTHENTICATION_FAILED at once (v0 raw tokens: no answer) and the
  connection is closed `connection.failed.authentication.delay.ms` later (Kafka's delayed close: the
  client reads the error before the EOF; nothing it sends meanwhile is served);
- a completed login gives the connection its principal (`User:<name>`); from then on the connection
  is an ordinary one (the authenticator is dropped: no per-request cost);
- error messages name the mechanism and never a password or a proof.

Re-authentication (KIP-368, Kafka's SaslServerAuthenticator.ReauthInfo and KafkaChannel):
- a completed login has a session lifetime: `connections.max.reauth.ms` of the mechanism (0: unset), the
  credential's remaining life (an OAUTHBEARER token's `exp`), or the smaller of the two; none when
  neither is set; SaslAuthenticate v1+ answers it as `session_lifetime_ms` (0: no expiry);
- with a lifetime, a SaslHandshake on the authenticated connection begins a re-authentication
  (SessionGate: at most one start per second, Kafka's MIN_REAUTH_INTERVAL; otherwise, or without a
  lifetime, it goes to the handler, which answers ILLEGAL_SASL_STATE); the re-authentication must use
  SaslHandshake v1 and SaslAuthenticate; another enabled mechanism is accepted by the handshake and
  fails at the next token, an unknown one is UNSUPPORTED_SASL_MECHANISM and closes; it must give the
  same principal ("Cannot change principals during re-authentication"), else SASL_AUTHENTICATION_FAILED
  and the connection closes; a completed one starts a new session lifetime;
- any other request arriving after the session's end closes the connection (nothing of it is served).
"""

from __future__ import annotations

import datetime
import enum
import hmac
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.messages import (
    API_VERSIONS_KEY,
    ProtocolError,
    decode_request,
    encode_response,
    parse_request_header,
)
from kaflite.server.context import build, response_module
from kaflite.server.security.scram import CredentialStore

__all__ = [
    "TABLE",
    "AuthenticationFailed",
    "MechanismServer",
    "PlainServer",
    "SaslAuthenticator",
    "ScramServer",
    "SessionGate",
    "State",
    "Step",
]

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
_SIZE = struct.Struct(">i")
API_VERSIONS_MAX = 4  # the highest ApiVersions version served (handlers/api_versions.py; a test checks it)
MIN_REAUTH_INTERVAL_MS = 1000  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


def wall_ms() -> int:
    return int(time.time() * 1000)


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake_or_versions"  # first request: ApiVersions or SaslHandshake
    HANDSHAKE = "handshake"  # ApiVersions answered: SaslHandshake next
    REAUTH_HANDSHAKE = "reauth_handshake"  # a re-authentication: its SaslHandshake (v1) first
    AUTHENTICATE = "authenticate"  # handshake v1 done: SaslAuthenticate requests
    RAW_TOKENS = "raw_tokens"  # handshake v0 done: length-framed raw tokens
    COMPLETE = "complete"  # authenticated
    FAILED = "failed"  # answered a failure; the connection closes


class Event(enum.Enum):
    API_VERSIONS = "api_versions"
    HANDSHAKE_V0 = "handshake_v0"
    HANDSHAKE_V1 = "handshake_v1"
    BAD_MECHANISM = "bad_mechanism"
    TOKEN_CHALLENGE = "token_challenge"  # a token answered, more to come
    TOKEN_DONE = "token_done"  # the last token: authenticated
    TOKEN_FAILED = "token_failed"  # wrong credentials
    OTHER = "other"  # anything else: illegal in this state


# (state, event) -> next state; a pair not listed closes the connection (illegal SASL state)
TABLE: dict[tuple[State, Event], State] = {
    (State.HANDSHAKE_OR_VERSIONS, Event.API_VERSIONS): State.HANDSHAKE,
    (State.HANDSHAKE_OR_VERSIONS, Event.HANDSHAKE_V0): State.RAW_TOKENS,
    (State.HANDSHAKE_OR_VERSIONS, Event.HANDSHAKE_V1): State.AUTHENTICATE,
    (State.HANDSHAKE_OR_VERSIONS, Event.BAD_MECHANISM): State.FAILED,
    (State.HANDSHAKE, Event.HANDSHAKE_V0): State.RAW_TOKENS,
    (State.HANDSHAKE, Event.HANDSHAKE_V1): State.AUTHENTICATE,
    (State.HANDSHAKE, Event.BAD_MECHANISM): State.FAILED,
    (State.REAUTH_HANDSHAKE, Event.HANDSHAKE_V1): State.AUTHENTICATE,
    (State.REAUTH_HANDSHAKE, Event.BAD_MECHANISM): State.FAILED,
    (State.AUTHENTICATE, Event.TOKEN_CHALLENGE): State.AUTHENTICATE,
    (State.AUTHENTICATE, Event.TOKEN_DONE): State.COMPLETE,
    (State.AUTHENTICATE, Event.TOKEN_FAILED): State.FAILED,
    (State.RAW_TOKENS, Event.TOKEN_CHALLENGE): State.RAW_TOKENS,
    (State.RAW_TOKENS, Event.TOKEN_DONE): State.COMPLETE,
    (State.RAW_TOKENS, Event.TOKEN_FAILED): State.FAILED,
}


class AuthenticationFailed(Exception):
    """Wrong credentials (or a malformed token): SASL_AUTHENTICATION_FAILED, then closed."""


class MechanismServer(Protocol):
    def evaluate(self, token: bytes) -> tuple[bytes, bool]:
        """The server's answer to a client token and whether authentication is complete; raises
        AuthenticationFailed."""
        ...

    @property
    def user(self) -> str: ...


class PlainServer:
    """SASL/PLAIN (RFC 4616) against a user -> password table (PlainLoginModule's user_<name> options)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.user = ""

    def evaluate(self, token: bytes) -> tuple[bytes, bool]:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        expected = self._users.get(user)
        # compared in constant time; an unknown user fails the same way as a wrong password
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.user = user
        return b"", True


class ScramServer:
    """SCRAM-SHA-256/512 (RFC 5802) with `scramp` over Kafka's stored credentials."""

    def __init__(self, mechanism: str, store: CredentialStore) -> None:
        from scramp import ScramMechanism, core

        # scramp refuses a salt under 12 bytes, also one it is handed from storage (its auth_fn result goes
        # through its Salt class); RFC 5802 sets no minimum and Kafka accepts any non-empty salt set by
        # AlterUserScramCredentials (librdkafka's 0081 stores the 4 bytes "salt"). The salt is only echoed
        # to the client in server-first, the proof is checked against the stored keys, so a short one is safe
        # to serve. tests/security/test_sasl_wire.py::test_login_with_a_short_salt_credential fails if a scramp
        # release moves this check elsewhere.
        if getattr(core.Salt, "MIN_LENGTH", 1) > 1:
            core.Salt.MIN_LENGTH = 1
        self.mechanism = mechanism
        self._store = store
        self._server = ScramMechanism(mechanism).make_server(self._lookup)
        self._round = 0
        self.user = ""

    def _lookup(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        cred = self._store.get(user, self.mechanism)
        if cred is None:
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid "
                                       f"credentials with SASL mechanism {self.mechanism}")
        self.user = user
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def evaluate(self, token: bytes) -> tuple[bytes, bool]:
        from scramp import ScramException

        failed = AuthenticationFailed(f"Authentication failed during authentication due to invalid "
                                      f"credentials with SASL mechanism {self.mechanism}")
        try:
            text = token.decode("utf-8")
            self._round += 1
            if self._round == 1:
                self._server.set_client_first(text)
                return self._server.get_server_first().encode(), False
            if self._round == 2:
                self._server.set_client_final(text)
                return self._server.get_server_final().encode(), True
        except AuthenticationFailed:
            raise
        except (ScramException, UnicodeDecodeError, ValueError, KeyError):
            raise failed from None
        raise failed


@dataclass(slots=True)
class Step:
    """What the connection does with one frame."""

    response: list[bytes | memoryview] | None = None  # write this
    dispatch: bool = False  # hand the frame to the dispatcher (ApiVersions)
    delay_ms: int = 0  # wait this long after writing, before closing (a failed login)
    close: str | None = None  # then close the connection, for this reason
    principal: str | None = None  # authentication complete: the connection's principal
    session_end_ms: int | None = None  # and its session ends then (epoch ms; None: never)


class SaslAuthenticator:
    def __init__(self, mechanisms: Mapping[str, Callable[[], MechanismServer]], failed_delay_ms: int = 100,
                 max_reauth_ms: Mapping[str, int] | None = None, now_ms: Callable[[], int] = wall_ms,
                 reauth_of: tuple[str, str] | None = None) -> None:
        self.mechanisms = mechanisms  # enabled mechanism name -> a new server for one exchange
        self.failed_delay_ms = failed_delay_ms
        self.max_reauth_ms = max_reauth_ms or {}  # mechanism -> connections.max.reauth.ms (0: unset)
        self.now_ms = now_ms
        # a re-authentication: (the mechanism, the principal) of the session it renews
        self.reauth_of = reauth_of
        self.state = State.REAUTH_HANDSHAKE if reauth_of is not None else State.HANDSHAKE_OR_VERSIONS
        self._server: MechanismServer | None = None
        self._bad_reauth_mechanism: str | None = None
        self.mechanism = ""
        self.session_lifetime_ms = 0  # as answered in SaslAuthenticate v1+
        self.session_end_ms: int | None = None  # when the session ends (epoch ms), None: never

    def _go(self, event: Event) -> bool:
        nxt = TABLE.get((self.state, event))
        if nxt is None:
            self.state = State.FAILED
            return False
        self.state = nxt
        return True

    def receive(self, frame: bytes) -> Step:
        if self.state is State.RAW_TOKENS:
            return self._raw_token(frame)
        try:
            header, offset = parse_request_header(frame)
        except ProtocolError as e:
            self.state = State.FAILED
            return Step(close=f"bad request header during SASL authentication: {e}")
        key, version = header.api_key, header.api_version
        illegal = Step(close=f"unexpected request (api key {key}) in SASL state {self.state.value}")
        if key == API_VERSIONS_KEY:
            if version > API_VERSIONS_MAX and self.state is State.HANDSHAKE_OR_VERSIONS:
                # answered UNSUPPORTED_VERSION with the served range; the client asks again (Kafka keeps
                # the state for that retry)
                return Step(dispatch=True)
            return Step(dispatch=True) if self._go(Event.API_VERSIONS) else illegal
        if key == SASL_HANDSHAKE_KEY and version in (0, 1):
            request = self._decode(header, frame, offset)
            if request is None:
                return Step(close="undecodable SaslHandshake")
            mechanism = request.mechanism
            R = response_module(key, version)
            if mechanism not in self.mechanisms:
                if not self._go(Event.BAD_MECHANISM):
                    return illegal
                body = build(R.SaslHandshakeResponse, error_code=ErrorCode.unsupported_sasl_mechanism,
                             mechanisms=tuple(self.mechanisms))
                return Step(encode_response(key, version, header.correlation_id, body),
                            close=f"unsupported SASL mechanism {mechanism[:40]!r}")
            if not self._go(Event.HANDSHAKE_V0 if version == 0 else Event.HANDSHAKE_V1):
                return illegal
            if self.reauth_of is not None and mechanism != self.reauth_of[0]:
                # Kafka's REAUTH_BAD_MECHANISM: the handshake succeeds, the next token fails
                self._bad_reauth_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported "
                                              f"for re-authentication of mechanism '{self.reauth_of[0]}'")
            self.mechanism = mechanism
            self._server = self.mechanisms[mechanism]()
            body = build(R.SaslHandshakeResponse, error_code=ErrorCode.none, mechanisms=tuple(self.mechanisms))
            return Step(encode_response(key, version, header.correlation_id, body))
        if key == SASL_AUTHENTICATE_KEY and version in (0, 1, 2) and self.state is State.AUTHENTICATE:
            request = self._decode(header, frame, offset)
            if request is None:
                return Step(close="undecodable SaslAuthenticate")
            R = response_module(key, version)
            try:
                challenge, done = self._evaluate(request.auth_bytes)
                lifetime = self._session_lifetime() if done else 0
            except AuthenticationFailed as e:
                self._go(Event.TOKEN_FAILED)
                body = build(R.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                             error_message=str(e), auth_bytes=b"")
                return Step(encode_response(key, version, header.correlation_id, body),
                            delay_ms=self.failed_delay_ms, close=f"SASL authentication failed ({self.mechanism})")
            body = build(R.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None,
                         auth_bytes=challenge,
                         session_lifetime=datetime.timedelta(milliseconds=lifetime))
            out = encode_response(key, version, header.correlation_id, body)
            return self._advance(out, done)
        self.state = State.FAILED
        return illegal

    def _raw_token(self, token: bytes) -> Step:
        try:
            challenge, done = self._evaluate(token)
            if done:
                self._session_lifetime()
        except AuthenticationFailed:
            self._go(Event.TOKEN_FAILED)
            return Step(delay_ms=self.failed_delay_ms, close=f"SASL authentication failed ({self.mechanism})")
        return self._advance([_SIZE.pack(len(challenge)), challenge], done)

    def _advance(self, out: list[bytes | memoryview], done: bool) -> Step:
        self._go(Event.TOKEN_DONE if done else Event.TOKEN_CHALLENGE)
        if not done:
            return Step(out)
        assert self._server is not None
        return Step(out, principal=f"User:{self._server.user}", session_end_ms=self.session_end_ms)

    def _evaluate(self, token: bytes) -> tuple[bytes, bool]:
        assert self._server is not None
        if self._bad_reauth_mechanism is not None:
            raise AuthenticationFailed(self._bad_reauth_mechanism)
        challenge, done = self._server.evaluate(token)
        if done and self.reauth_of is not None and f"User:{self._server.user}" != self.reauth_of[1]:
            raise AuthenticationFailed(f"Cannot change principals during re-authentication from "
                                       f"{self.reauth_of[1]}: User:{self._server.user}")
        return challenge, done

    def _session_lifetime(self) -> int:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the smaller of connections.max.reauth.ms
        (when > 0) and the credential's remaining life (when it has one); 0 when neither is set."""
        credential_end = getattr(self._server, "expiry_ms", None)
        max_reauth = self.max_reauth_ms.get(self.mechanism, 0)
        now = self.now_ms()
        if credential_end is None and max_reauth <= 0:
            self.session_lifetime_ms, self.session_end_ms = 0, None
            return 0
        if credential_end is None:
            lifetime = max_reauth
        elif max_reauth <= 0:
            lifetime = max(0, credential_end - now)
        else:
            lifetime = max(0, min(credential_end - now, max_reauth))
        # a lifetime of 0 (a token within the clock skew of its exp) is a session that has ended (Kafka)
        self.session_lifetime_ms, self.session_end_ms = lifetime, now + lifetime
        return lifetime

    def _decode(self, header: Any, frame: bytes, offset: int) -> Any:
        try:
            return decode_request(header, frame, offset)
        except ProtocolError:
            self.state = State.FAILED
            return None


class SessionGate:
    """What an authenticated SASL connection with a session lifetime does with each request (Kafka's
    SocketServer: a SaslHandshake may begin a re-authentication, anything else after the session's end
    closes the connection). Pure: the clock is injected."""

    SERVE = "serve"
    REAUTHENTICATE = "reauthenticate"
    EXPIRED = "expired"

    def __init__(self, end_ms: int, mechanism: str, principal: str, now_ms: Callable[[], int] = wall_ms) -> None:
        self.end_ms = end_ms
        self.mechanism = mechanism
        self.principal = principal
        self.now_ms = now_ms
        self._last_start: int | None = None

    def check(self, api_key: int) -> str:
        now = self.now_ms()
        if api_key == SASL_HANDSHAKE_KEY and (self._last_start is None or
                                              now - self._last_start >= MIN_REAUTH_INTERVAL_MS):
            self._last_start = now
            return self.REAUTHENTICATE
        return self.EXPIRED if now > self.end_ms else self.SERVE
