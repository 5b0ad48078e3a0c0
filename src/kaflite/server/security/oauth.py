"""SASL/OAUTHBEARER on the server (RFC 7628 as Kafka's OAuthBearerSaslServer serves it) and Kafka's two
token validators: the unsecured one for development (OAuthBearerUnsecuredValidatorCallbackHandler) and the
signed-JWT one (OAuthBearerValidatorCallbackHandler: keys from a JWKS file or HTTPS URL).

Rules (tests/security/test_oauth.py):
- the client's first message is `n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01]...\\x01`
  with Kafka's grammar (keys `[A-Za-z]+`, values `[\\x21-\\x7E \\t\\r\\n]+`, `auth` not an extension, scheme
  `bearer` in any case); anything else fails the login at once;
- a token that does not validate is answered `{"status":"invalid_token"}` (`insufficient_scope` with the
  required scope when a required scope is missing), not yet a failure: the client answers `\\x01` and the
  login then fails with that text, as Kafka's server does;
- an authorization id, when given, must equal the token's principal name; extensions are accepted (both
  of Kafka's validators accept every extension);
- the principal is `User:<the principal claim>`; the token's `exp` bounds the session (KIP-368);
- no message, exception text or log line carries the token: a rejection names the failed check only;
- JWKS keys are fetched (file or HTTPS) in a thread of their own, never on the event loop; a key id that
  is not known asks for an early refresh, at most once per `sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "JwksKeys",
    "JwtValidator",
    "OAuthBearerServer",
    "Token",
    "TokenRejected",
    "TokenValidator",
    "UnsecuredValidator",
    "parse_client_first",
]

log = logging.getLogger("kaflite.server.security")

_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # [\x01-\x7F] but = and ,
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kv>(?:{_KEY}={_VALUE}\x01)*)\x01", re.S)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_SCOPE_ITEM = re.compile(r"[\x23-\x5B\x5D-\x7E\x21]+")


class AuthFailed(Exception):
    """The login fails (sasl.AuthenticationFailed is raised from it by the mechanism server)."""


def parse_client_first(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(authorization id, token, extensions) of a client's first message, as Kafka's
    OAuthBearerClientInitialResponse parses it; AuthFailed (without the message's text) otherwise."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthFailed("Invalid OAUTHBEARER client first message") from None
    m = _FIRST.fullmatch(text)
    if m is None:
        raise AuthFailed("Invalid OAUTHBEARER client first message")
    props: dict[str, str] = {}
    for pair in m.group("kv").split("\x01"):
        if pair:
            k, _, v = pair.partition("=")
            props[k] = v
    auth = props.pop("auth", None)
    if auth is None:
        raise AuthFailed("Invalid OAUTHBEARER client first message: 'auth' not specified")
    a = _AUTH.fullmatch(auth)
    if a is None:
        raise AuthFailed("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if a.group("scheme").lower() != "bearer":
        raise AuthFailed("Invalid scheme in OAUTHBEARER client first message")
    authzid = (m.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return authzid, a.group("token"), props


@dataclass(frozen=True, slots=True)
class Token:
    principal: str
    lifetime_ms: int  # the token's expiry, epoch milliseconds
    scope: frozenset[str] = frozenset()
    start_ms: int | None = None


class TokenRejected(Exception):
    """The token does not validate: answered with Kafka's JSON error, then the login fails. `str(e)` names
    the failed check (for DEBUG logs), never the token or a claim's value."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope

    def json(self) -> str:
        # Kafka's jsonErrorResponse, byte for byte (its text has a space before "scope")
        out = f'{{"status":"{self.status}"'
        if self.scope is not None:
            out += f', "scope":"{self.scope}"'
        return out + "}"


class TokenValidator(Protocol):
    def validate(self, token: str) -> Token:
        """The validated token; raises TokenRejected."""
        ...


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (ValueError, TypeError):
        raise TokenRejected("malformed Base64 URL encoded value") from None
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise TokenRejected("malformed JSON") from None
    if not isinstance(obj, dict):
        raise TokenRejected("malformed JSON")
    return obj


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset([value.strip()]) if value.strip() else frozenset()
    if isinstance(value, list):
        return frozenset(str(v).strip() for v in value if str(v).strip())
    return frozenset()


def parse_scope(text: str) -> list[str]:
    """Kafka's OAuthBearerScopeUtils.parseScope: space-delimited items of RFC 6749's scope characters."""
    items = [s for s in text.split(" ") if s]
    for s in items:
        if not _SCOPE_ITEM.fullmatch(s):
            raise ValueError("invalid scope value")
    return items


def _wall_ms() -> int:
    return int(time.time() * 1000)


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: an unsigned JWS (`alg` none, empty signature),
    `exp` required, the principal claim (`unsecuredValidatorPrincipalClaimName`, default `sub`) a non-blank
    string, `iat` optional, both against the clock with `unsecuredValidatorAllowableClockSkewMs`, and every
    item of `unsecuredValidatorRequiredScope` in the scope claim (`unsecuredValidatorScopeClaimName`)."""

    def __init__(self, options: Mapping[str, str], now_ms: Callable[[], int] = _wall_ms) -> None:
        self.principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub"
        self.scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope"
        self.required_scope = parse_scope((options.get("unsecuredValidatorRequiredScope") or "").strip())
        skew = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip()
        self.skew_ms = int(skew) if skew else 0
        if self.skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must not be negative")
        self.now_ms = now_ms

    def validate(self, token: str) -> Token:
        if ".." in token:
            raise TokenRejected("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenRejected("Unsecured JWS compact serializations must have 3 dot-separated values")
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if header.get("alg") != "none":
            raise TokenRejected("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise TokenRejected("Unsecured JWS must not contain a digital signature")
        exp, iat = claims.get("exp"), claims.get("iat")
        if exp is None:
            raise TokenRejected("No expiration time in JWT")
        if not _is_number(exp) or (iat is not None and not _is_number(iat)):
            raise TokenRejected("The 'exp' or 'iat' claim was not of type Number")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenRejected(f"No principal name in JWT claim: {self.principal_claim}")
        scope = _scope(claims, self.scope_claim)
        now = self.now_ms()
        if iat is not None and 1000 * iat > now + self.skew_ms:
            raise TokenRejected("The Issued At value was after the indicated time plus allowable clock skew")
        if now - self.skew_ms >= 1000 * exp:
            raise TokenRejected("The indicated time minus allowable clock skew was on or after the Expiration Time")
        if iat is not None and exp <= iat:
            raise TokenRejected("The Expiration Time was not after the Issued At time")
        for item in self.required_scope:
            if item not in scope:
                raise TokenRejected("The provided scope was missing a required scope", "insufficient_scope",
                                    str(self.required_scope).replace("'", ""))
        return Token(principal, round(exp * 1000), scope, round(iat * 1000) if iat is not None else None)


# algorithms a key type may sign with (the JWS header's alg must be one of them; never none nor HMAC:
# a public JWKS key used as an HMAC secret would let anyone sign)
_ALGS = {"RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"), "EC": ("ES256", "ES384", "ES512"),
         "OKP": ("EdDSA",)}


@dataclass
class JwksKeys:
    """The JSON Web Key Set of `sasl.oauthbearer.jwks.endpoint.url`: a `file:` URL is read once, at
    start-up (Kafka's JwksFileVerificationKeyResolver); an `https:` (or `http:`) URL is fetched by a
    thread of its own every `refresh_ms` (Kafka's RefreshingHttpsJwks), and early when a token names a key
    id not in the set. `fetch` is injectable for tests."""

    url: str
    refresh_ms: int = 3_600_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    fetch: Callable[[str], bytes] | None = None
    keys: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    _wake: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _last_expedite: float = 0.0
    loaded: threading.Event = field(default_factory=threading.Event)

    @property
    def is_file(self) -> bool:
        return self.url.lower().startswith("file:")

    def _read(self) -> bytes:
        if self.fetch is not None:
            return self.fetch(self.url)
        if self.is_file:
            from urllib.parse import unquote, urlparse

            with open(unquote(urlparse(self.url).path), "rb") as f:
                return f.read()
        with urllib.request.urlopen(self.url, timeout=10) as r:  # noqa: S310 - https or http, checked at load
            data: bytes = r.read()
            return data

    def load(self) -> None:
        """Read and replace the key set (blocking: called at start-up for a file, in the thread otherwise)."""
        doc = json.loads(self._read())
        found = doc.get("keys") if isinstance(doc, dict) else None
        if not isinstance(found, list):
            raise ValueError("a JWKS document has a 'keys' list")
        keys: dict[str | None, dict[str, Any]] = {}
        for k in found:
            if isinstance(k, dict) and k.get("kty") in _ALGS and k.get("use", "sig") == "sig":
                keys[k.get("kid")] = k
        self.keys = keys  # one assignment: readers see the old set or the new one
        self.loaded.set()

    def start(self) -> None:
        if self.is_file:
            self.load()
            return
        self._thread = threading.Thread(target=self._run, name="kaflite-jwks-refresh", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        backoff = self.retry_backoff_ms
        while not self._stop.is_set():
            try:
                self.load()
                backoff = self.retry_backoff_ms
                wait = self.refresh_ms
            except Exception as e:  # a refresh that fails keeps the old keys; retried with backoff
                log.warning("JWKS refresh from %s failed: %s", self.url, type(e).__name__)
                wait = backoff
                backoff = min(backoff * 2, self.retry_backoff_max_ms)
            self._wake.wait(wait / 1000)
            self._wake.clear()

    def expedite(self) -> None:
        """A token named a key id not in the set: refresh now, at most once per retry backoff."""
        now = time.monotonic()
        if self._thread is not None and now - self._last_expedite >= self.retry_backoff_ms / 1000:
            self._last_expedite = now
            self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()


class JwtValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler (jose4j's JwtConsumer as Kafka builds it): a signature
    by a JWKS key (never `alg` none), `exp` and `iat` required, `nbf` honoured, `clock_skew_s` either way,
    the audience (one of `expected.audience`; a token with an `aud` is refused when none is expected, as
    jose4j does) and the issuer when configured, the subject claim a non-blank string."""

    def __init__(self, keys: JwksKeys, *, audience: list[str] | None = None, issuer: str | None = None,
                 sub_claim: str = "sub", scope_claim: str = "scope", clock_skew_s: int = 30,
                 now_ms: Callable[[], int] = _wall_ms) -> None:
        self.keys = keys
        self.audience = audience or None
        self.issuer = issuer
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.clock_skew_s = clock_skew_s
        self.now_ms = now_ms

    def validate(self, token: str) -> Token:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejected("Could not validate the access token: malformed") from None
        alg, kid = header.get("alg"), header.get("kid")
        keys = self.keys.keys
        jwk = keys.get(kid) if kid is not None else (next(iter(keys.values())) if len(keys) == 1 else None)
        if jwk is None:
            self.keys.expedite()
            raise TokenRejected("Could not validate the access token: no key for the token's key id")
        allowed = (jwk["alg"],) if "alg" in jwk else _ALGS[jwk["kty"]]
        if not isinstance(alg, str) or alg not in allowed:
            raise TokenRejected("Could not validate the access token: algorithm not allowed for the key")
        try:
            key = jwt.PyJWK(jwk, algorithm=alg)
            claims = jwt.decode(
                token, key, algorithms=[alg], audience=self.audience, issuer=self.issuer,
                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False,
                         "require": ["exp", "iat"]})
        except jwt.PyJWTError as e:
            # the exception's class names the check (InvalidSignatureError, InvalidAudienceError, ...)
            raise TokenRejected(f"Could not validate the access token: {type(e).__name__}") from None
        exp, iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf")
        if not _is_number(exp) or not _is_number(iat) or (nbf is not None and not _is_number(nbf)):
            raise TokenRejected("Could not validate the access token: a time claim is not a number")
        assert exp is not None and iat is not None  # numbers, checked above
        now_s = self.now_ms() / 1000
        if now_s >= exp + self.clock_skew_s:
            raise TokenRejected("Could not validate the access token: expired")
        if nbf is not None and now_s + self.clock_skew_s < nbf:
            raise TokenRejected("Could not validate the access token: not yet valid")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise TokenRejected(f"Could not validate the access token: no {self.sub_claim} claim")
        scope = _scope(claims, self.scope_claim)
        return Token(sub.strip(), math.floor(exp * 1000), scope, math.floor(iat * 1000))


class OAuthBearerServer:
    """One OAUTHBEARER exchange (Kafka's OAuthBearerSaslServer)."""

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._error: str | None = None
        self.user = ""
        self.token: Token | None = None
        self.extensions: dict[str, str] = {}

    @property
    def expiry_ms(self) -> int | None:
        """When the credential stops being valid (epoch ms), for the session's lifetime (KIP-368)."""
        return self.token.lifetime_ms if self.token is not None else None

    def evaluate(self, response: bytes) -> tuple[bytes, bool]:
        from kaflite.server.security.sasl import AuthenticationFailed

        if response == b"\x01" and self._error is not None:
            raise AuthenticationFailed(self._error)
        self._error = None
        try:
            authzid, value, extensions = parse_client_first(response)
        except AuthFailed as e:
            raise AuthenticationFailed(str(e)) from None
        try:
            token = self._validator.validate(value)
        except TokenRejected as e:
            log.debug("OAUTHBEARER token refused: %s", e)
            self._error = e.json()
            return self._error.encode(), False
        if authzid and authzid != token.principal:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from the token's principal name")
        self.token = token
        self.extensions = extensions
        self.user = token.principal
        return b"", True
