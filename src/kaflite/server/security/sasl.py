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
"""

from __future__ import annotations

import enum
import hmac
import struct
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
    "State",
    "Step",
]

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
_SIZE = struct.Struct(">i")
API_VERSIONS_MAX = 4  # the highest ApiVersions version served (handlers/api_versions.py; a test checks it)


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake_or_versions"  # first request: ApiVersions or SaslHandshake
    HANDSHAKE = "handshake"  # ApiVersions answered: SaslHandshake next
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
        from scramp import ScramMechanism

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


class SaslAuthenticator:
    def __init__(self, mechanisms: Mapping[str, Callable[[], MechanismServer]], failed_delay_ms: int = 100) -> None:
        self.mechanisms = mechanisms  # enabled mechanism name -> a new server for one exchange
        self.failed_delay_ms = failed_delay_ms
        self.state = State.HANDSHAKE_OR_VERSIONS
        self._server: MechanismServer | None = None
        self.mechanism = ""

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
            except AuthenticationFailed as e:
                self._go(Event.TOKEN_FAILED)
                body = build(R.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                             error_message=str(e), auth_bytes=b"")
                return Step(encode_response(key, version, header.correlation_id, body),
                            delay_ms=self.failed_delay_ms, close=f"SASL authentication failed ({self.mechanism})")
            body = build(R.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None,
                         auth_bytes=challenge)
            out = encode_response(key, version, header.correlation_id, body)
            return self._advance(out, done)
        self.state = State.FAILED
        return illegal

    def _raw_token(self, token: bytes) -> Step:
        try:
            challenge, done = self._evaluate(token)
        except AuthenticationFailed:
            self._go(Event.TOKEN_FAILED)
            return Step(delay_ms=self.failed_delay_ms, close=f"SASL authentication failed ({self.mechanism})")
        return self._advance([_SIZE.pack(len(challenge)), challenge], done)

    def _advance(self, out: list[bytes | memoryview], done: bool) -> Step:
        self._go(Event.TOKEN_DONE if done else Event.TOKEN_CHALLENGE)
        if not done:
            return Step(out)
        assert self._server is not None
        return Step(out, principal=f"User:{self._server.user}")

    def _evaluate(self, token: bytes) -> tuple[bytes, bool]:
        assert self._server is not None
        return self._server.evaluate(token)

    def _decode(self, header: Any, frame: bytes, offset: int) -> Any:
        try:
            return decode_request(header, frame, offset)
        except ProtocolError:
            self.state = State.FAILED
            return None
