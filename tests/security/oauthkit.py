"""Tokens for the OAUTHBEARER tests: unsecured JWS as librdkafka and Kafka's unsecured login make them, and
signed JWTs from RSA keys made with `cryptography`, with their JSON Web Key Set."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


def b64(obj: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}."


def client_first(token: str, authzid: str = "", **extensions: str) -> bytes:
    ext = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}\x01{ext}\x01".encode()


@dataclass
class Issuer:
    """An identity provider: an RSA key with its key id, signing JWTs."""

    kid: str
    key: rsa.RSAPrivateKey

    @classmethod
    def new(cls, kid: str) -> Issuer:
        return cls(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def jwk(self) -> dict[str, Any]:
        d: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        d.update(kid=self.kid, use="sig", alg="RS256")
        return d

    def sign(self, sub: str = "alice", *, lifetime_s: float = 3600, now: float | None = None,
             kid: str | None = None, **claims: Any) -> str:
        now = time.time() if now is None else now
        payload: dict[str, Any] = {"sub": sub, "iat": int(now), "exp": int(now + lifetime_s),
                                   "iss": "https://idp.test", "aud": "kafka"}
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(payload, self.key, algorithm="RS256", headers={"kid": kid or self.kid})


def write_jwks(path: Path, *issuers: Issuer) -> Path:
    path.write_text(json.dumps({"keys": [i.jwk() for i in issuers]}))
    return path
