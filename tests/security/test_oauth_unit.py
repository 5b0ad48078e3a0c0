"""OAUTHBEARER without sockets (server/security/oauth.py): the client first message as Kafka parses it,
Kafka's two validators with an injected clock, and the exchange through the SASL state machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from oauthkit import Issuer, client_first, unsecured, write_jwks
from test_sasl_state import frame, response

from kaflite.protocol.errors import ErrorCode
from kaflite.server.security.oauth import (
    AuthFailed,
    JwksKeys,
    JwtValidator,
    OAuthBearerServer,
    TokenRejected,
    UnsecuredValidator,
    parse_client_first,
)
from kaflite.server.security.sasl import AuthenticationFailed, SaslAuthenticator, State

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000


def clock() -> int:
    return NOW_MS


# --- the client first message -------------------------------------------------------------------------

def test_client_first_message_with_extensions_and_authzid() -> None:
    assert parse_client_first(client_first("abc.def.", "alice", traceId="42", x="a b")) == \
        ("alice", "abc.def.", {"traceId": "42", "x": "a b"})
    assert parse_client_first(b"n,,\x01auth=bEaReR  tok~+/=\x01\x01") == ("", "tok~+/=", {})


@pytest.mark.parametrize("message", [
    b"n,,\x01auth=Bearer tok\x01",  # no final \x01
    b"y,,\x01auth=Bearer tok\x01\x01",  # channel binding flag other than n
    b"n,,\x01host=h\x01\x01",  # no auth
    b"n,,\x01auth=Basic tok\x01\x01",  # not bearer
    b"n,,\x01auth=Bearer to ken\x01\x01",  # a space in the token
    b"n,,\x01auth=Bearer tok\x01a1=v\x01\x01",  # extension key not [A-Za-z]+
    b"n,,\x01auth=Bearer tok\x01k=\x00\x01\x01",  # extension value outside its characters
    b"n,a=x,y,\x01auth=Bearer tok\x01\x01",  # a comma in the authzid
    b"\xff",
])
def test_malformed_client_first_messages_fail(message: bytes) -> None:
    with pytest.raises(AuthFailed) as e:
        parse_client_first(message)
    assert "tok" not in str(e.value)


# --- Kafka's unsecured validator -------------------------------------------------------------------

def test_unsecured_token_gives_its_sub_and_expiry() -> None:
    v = UnsecuredValidator({}, clock)
    tok = v.validate(unsecured({"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 60.5, "scope": ["a", " b "]}))
    assert (tok.principal, tok.lifetime_ms, tok.scope, tok.start_ms) == \
        ("alice", NOW_MS + 60_500, frozenset({"a", "b"}), NOW_MS - 10_000)


def test_unsecured_principal_claim_name_scope_and_skew_options() -> None:
    v = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "user",
                            "unsecuredValidatorScopeClaimName": "perms",
                            "unsecuredValidatorRequiredScope": "read write",
                            "unsecuredValidatorAllowableClockSkewMs": "5000"}, clock)
    claims = {"user": "bob", "exp": NOW_S - 4, "perms": ["read", "write", "x"]}  # expired 4 s ago, skew 5 s
    assert v.validate(unsecured(claims)).principal == "bob"
    with pytest.raises(TokenRejected) as e:
        v.validate(unsecured({**claims, "perms": "read"}))
    assert (e.value.status, e.value.json()) == \
        ("insufficient_scope", '{"status":"insufficient_scope", "scope":"[read, write]"}')
    with pytest.raises(TokenRejected):
        v.validate(unsecured({**claims, "exp": NOW_S - 5}))  # on the skewed edge: expired


@pytest.mark.parametrize("claims,header", [
    ({"sub": "alice", "exp": NOW_S}, None),  # exp == now: expired (Kafka: now - skew >= exp)
    ({"sub": "alice"}, None),  # exp required
    ({"sub": "alice", "exp": "soon"}, None),
    ({"exp": NOW_S + 60}, None),  # no principal
    ({"sub": "  ", "exp": NOW_S + 60}, None),
    ({"sub": 7, "exp": NOW_S + 60}, None),
    ({"sub": "alice", "exp": NOW_S + 60, "iat": NOW_S + 1}, None),  # issued in the future
    ({"sub": "alice", "exp": NOW_S + 60, "iat": NOW_S + 60}, {"alg": "none"}),  # iat >= exp (and future)
    ({"sub": "alice", "exp": NOW_S + 60}, {"alg": "HS256"}),  # not alg none
])
def test_unsecured_refusals(claims: dict[str, object], header: dict[str, object] | None) -> None:
    with pytest.raises(TokenRejected) as e:
        UnsecuredValidator({}, clock).validate(unsecured(claims, header))
    assert e.value.json() == '{"status":"invalid_token"}'


def test_unsecured_token_with_a_signature_or_bad_shape_is_refused() -> None:
    v = UnsecuredValidator({}, clock)
    good = unsecured({"sub": "alice", "exp": NOW_S + 60})
    for token in (good + "sig", good[:-1], "a..b", "!!!.e30."):
        with pytest.raises(TokenRejected):
            v.validate(token)


# --- signed JWTs against a JWKS ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def idp() -> Issuer:
    return Issuer.new("k1")


@pytest.fixture(scope="module")
def other() -> Issuer:
    return Issuer.new("k2")


def jwt_validator(idp: Issuer, tmp_path: Path, **kw: object) -> JwtValidator:
    keys = JwksKeys(write_jwks(tmp_path / "jwks.json", idp).as_uri())
    keys.start()
    opts: dict[str, object] = {"audience": ["kafka"], "issuer": "https://idp.test", "now_ms": clock}
    opts.update(kw)
    return JwtValidator(keys, **opts)  # type: ignore[arg-type]


def test_signed_token_accepted(idp: Issuer, tmp_path: Path) -> None:
    v = jwt_validator(idp, tmp_path)
    tok = v.validate(idp.sign("alice", now=NOW_S, scope="produce"))
    assert (tok.principal, tok.lifetime_ms, tok.scope) == ("alice", NOW_MS + 3_600_000, frozenset({"produce"}))
    # another subject claim, several audiences
    v2 = jwt_validator(idp, tmp_path, sub_claim="client_id", audience=["x", "kafka"])
    assert v2.validate(idp.sign("ignored", now=NOW_S, client_id="svc")).principal == "svc"


@pytest.mark.parametrize("case", ["expired", "beyond-skew", "wrong-audience", "no-audience-expected",
                                  "wrong-issuer", "bad-signature", "unknown-kid", "no-iat", "no-sub",
                                  "not-before", "alg-none"])
def test_signed_token_refusals(idp: Issuer, other: Issuer, tmp_path: Path, case: str) -> None:
    v = jwt_validator(idp, tmp_path, audience=[] if case == "no-audience-expected" else ["kafka"])
    token = {
        "expired": lambda: idp.sign(now=NOW_S - 3600 - 30),  # expired exactly the skew (30 s) ago
        "beyond-skew": lambda: idp.sign(now=NOW_S - 7200),
        "wrong-audience": lambda: idp.sign(now=NOW_S, aud="other"),
        "no-audience-expected": lambda: idp.sign(now=NOW_S),  # jose4j: an aud nobody expects is refused
        "wrong-issuer": lambda: idp.sign(now=NOW_S, iss="https://evil.test"),
        "bad-signature": lambda: other.sign(now=NOW_S, kid="k1"),
        "unknown-kid": lambda: other.sign(now=NOW_S),
        "no-iat": lambda: idp.sign(now=NOW_S, iat=None),
        "no-sub": lambda: idp.sign(now=NOW_S, sub=None),
        "not-before": lambda: idp.sign(now=NOW_S, nbf=NOW_S + 31),
        "alg-none": lambda: unsecured({"sub": "alice", "iat": NOW_S, "exp": NOW_S + 60, "aud": "kafka",
                                       "iss": "https://idp.test"}, {"alg": "none", "kid": "k1"}),
    }[case]()
    with pytest.raises(TokenRejected) as e:
        v.validate(token)
    assert e.value.json() == '{"status":"invalid_token"}'
    assert token not in str(e.value) and "alice" not in str(e.value)


def test_signed_token_within_the_clock_skew_is_accepted(idp: Issuer, tmp_path: Path) -> None:
    v = jwt_validator(idp, tmp_path)
    assert v.validate(idp.sign(now=NOW_S - 3600 - 29)).principal == "alice"


def test_https_jwks_fetched_off_the_caller_and_refreshed_for_an_unknown_kid(idp: Issuer, other: Issuer) -> None:
    import threading

    served = [idp]
    callers: list[str] = []

    def fetch(url: str) -> bytes:
        callers.append(threading.current_thread().name)
        return json.dumps({"keys": [i.jwk() for i in served]}).encode()

    keys = JwksKeys("https://idp.test/jwks", refresh_ms=3_600_000, retry_backoff_ms=0, fetch=fetch)
    keys.start()
    try:
        assert keys.loaded.wait(5)
        v = JwtValidator(keys, audience=["kafka"], now_ms=clock)
        assert v.validate(idp.sign(now=NOW_S)).principal == "alice"
        served.append(other)  # the provider rotates in a new key
        with pytest.raises(TokenRejected):
            v.validate(other.sign("bob", now=NOW_S))  # unknown now: refused, and a refresh is asked for
        for _ in range(100):
            if "k2" in keys.keys:
                break
            threading.Event().wait(0.05)
        assert v.validate(other.sign("bob", now=NOW_S)).principal == "bob"
        assert set(callers) == {"kaflite-jwks-refresh"} and len(callers) == 2
    finally:
        keys.close()


# --- the exchange through the SASL state machine ---------------------------------------------------

def oauth_auth() -> SaslAuthenticator:
    return SaslAuthenticator({"OAUTHBEARER": lambda: OAuthBearerServer(UnsecuredValidator({}, clock))})


def test_exchange_valid_token_gives_the_principal() -> None:
    auth = oauth_auth()
    assert auth.receive(frame(17, 1, mechanism="OAUTHBEARER")).close is None
    tok = unsecured({"sub": "alice", "exp": NOW_S + 60})
    step = auth.receive(frame(36, 2, auth_bytes=client_first(tok, "alice", traceId="1")))
    assert response(step.response, 36, 2).error_code == ErrorCode.none
    assert step.principal == "User:alice" and auth.state is State.COMPLETE


def test_exchange_invalid_token_answers_json_then_fails_on_the_clients_control_a() -> None:
    auth = oauth_auth()
    auth.receive(frame(17, 1, mechanism="OAUTHBEARER"))
    tok = unsecured({"sub": "alice", "exp": NOW_S - 1})
    step = auth.receive(frame(36, 1, auth_bytes=client_first(tok)))
    r = response(step.response, 36, 1)
    assert (r.error_code, r.auth_bytes, step.close) == (ErrorCode.none, b'{"status":"invalid_token"}', None)
    step = auth.receive(frame(36, 1, auth_bytes=b"\x01"))
    r = response(step.response, 36, 1)
    assert r.error_code == ErrorCode.sasl_authentication_failed
    assert r.error_message == '{"status":"invalid_token"}' and step.close is not None
    assert auth.state is State.FAILED


def test_exchange_authzid_other_than_the_principal_fails() -> None:
    server = OAuthBearerServer(UnsecuredValidator({}, clock))
    with pytest.raises(AuthenticationFailed):
        server.evaluate(client_first(unsecured({"sub": "alice", "exp": NOW_S + 60}), "admin"))


def test_jwks_fetched_over_http_by_the_refresh_thread(idp: Issuer) -> None:
    """The URL path (no injected fetch): a JWKS served over HTTP on loopback, fetched by urllib in the
    refresh thread."""
    import http.server
    import threading

    body = json.dumps({"keys": [idp.jwk()]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    keys = JwksKeys(f"http://127.0.0.1:{server.server_address[1]}/jwks.json")
    try:
        keys.start()
        assert keys.loaded.wait(10)
        assert JwtValidator(keys, audience=["kafka"], now_ms=clock).validate(idp.sign(now=NOW_S)).principal == "alice"
    finally:
        keys.close()
        server.shutdown()
        server.server_close()
