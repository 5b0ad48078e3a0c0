"""TLS for SSL and SASL_SSL listeners with Python's `ssl`: the server context built from Kafka's ssl.* keys
(PEM key and trust stores, in files or inline), and the principal of a client certificate.

Rules:
- a listener's value of a key is `listener.name.<listener>.<key>` when set, else `<key>`;
- the key store is PEM only: `ssl.keystore.location` (one file with the private key and its chain, as
  Kafka's PEM key store) or `ssl.keystore.key` with `ssl.keystore.certificate.chain` inline; a key store
  that cannot be read or whose key does not match is refused at start-up naming the key;
- `ssl.client.auth`: none -> no certificate asked (principal User:ANONYMOUS), requested -> asked and
  optional, required -> the handshake fails without a certificate that chains to the trust store;
  requested and required need `ssl.truststore.location` or `ssl.truststore.certificates`;
- the principal of a client certificate is `User:` + its subject as RFC 2253 writes it (the last RDN
  first: "CN=client,O=x", Kafka's X500Principal.getName()), mapped by `ssl.principal.mapping.rules`.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import TYPE_CHECKING

from kaflite.server.config.definitions import ConfigError
from kaflite.server.config.principal_rules import PrincipalMapper

if TYPE_CHECKING:
    from kaflite.server.config import BrokerConfig

__all__ = ["certificate_principal", "server_context"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_ORDER = ["TLSv1.2", "TLSv1.3"]


def server_context(cfg: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The server SSLContext of one SSL or SASL_SSL listener; ConfigError (naming the key) when the
    settings cannot make one."""

    def get(key: str) -> object:
        return cfg.for_listener(listener, key)

    def named(key: str) -> str:
        return cfg.listener_source(listener, key)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [p for p in _ORDER if p in list(get("ssl.enabled.protocols") or [])]  # type: ignore[call-overload]
    if not enabled:
        raise ConfigError(f"{named('ssl.enabled.protocols')}: expected one or more of {', '.join(_ORDER)}, "
                          f"got an empty list", named("ssl.enabled.protocols"))
    ctx.minimum_version = _VERSIONS[enabled[0]]
    ctx.maximum_version = _VERSIONS[enabled[-1]]
    _load_keystore(ctx, cfg, listener)
    auth = str(get("ssl.client.auth"))
    if auth != "none":
        _load_truststore(ctx, cfg, listener, auth)
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[auth]
    ciphers = list(get("ssl.cipher.suites") or [])  # type: ignore[call-overload]
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise ConfigError(
                f"{named('ssl.cipher.suites')}: expected OpenSSL cipher suite names such as "
                f"ECDHE-RSA-AES128-GCM-SHA256, none of {','.join(ciphers)} is known to this OpenSSL",
                named("ssl.cipher.suites")) from None
    return ctx


def _load_keystore(ctx: ssl.SSLContext, cfg: BrokerConfig, listener: str) -> None:
    def named(key: str) -> str:
        return cfg.listener_source(listener, key)

    kind = str(cfg.for_listener(listener, "ssl.keystore.type")).upper()
    location = cfg.for_listener(listener, "ssl.keystore.location")
    key = cfg.for_listener(listener, "ssl.keystore.key")
    chain = cfg.for_listener(listener, "ssl.keystore.certificate.chain")
    password = cfg.for_listener(listener, "ssl.key.password")
    if location is None and key is None:
        raise ConfigError(
            f"{named('ssl.keystore.location')}: listener {listener} is SSL and needs a key store: set "
            f"ssl.keystore.type=PEM with ssl.keystore.location (a PEM file with the key and its certificate "
            f"chain) or ssl.keystore.key and ssl.keystore.certificate.chain (kaflite certs makes them)",
            named("ssl.keystore.location"))
    if kind != "PEM":
        raise ConfigError(
            f"{named('ssl.keystore.type')}: kaflite reads PEM key stores only, expected PEM, got {kind}",
            named("ssl.keystore.type"))
    if location is not None and key is not None:
        raise ConfigError(f"{named('ssl.keystore.key')}: set either ssl.keystore.location or "
                          f"ssl.keystore.key, not both", named("ssl.keystore.key"))
    try:
        if location is not None:
            ctx.load_cert_chain(str(location), password=password)
            return
        if chain is None:
            raise ConfigError(f"{named('ssl.keystore.certificate.chain')}: expected the certificate chain in "
                              f"PEM with ssl.keystore.key", named("ssl.keystore.certificate.chain"))
        # load_cert_chain reads files only: the inline PEM goes through a private file removed at once
        with tempfile.TemporaryDirectory(prefix="kaflite-tls-") as tmp:
            path = os.path.join(tmp, "keystore.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(str(key).strip() + "\n" + str(chain).strip() + "\n")
            ctx.load_cert_chain(path, password=password)
    except FileNotFoundError:
        raise ConfigError(f"{named('ssl.keystore.location')}: no such file {location}",
                          named("ssl.keystore.location")) from None
    except (ssl.SSLError, OSError) as err:
        what = named("ssl.keystore.location") if location is not None else named("ssl.keystore.key")
        raise ConfigError(
            f"{what}: cannot load the private key and certificate chain (PEM; an encrypted key needs "
            f"ssl.key.password): {getattr(err, 'reason', None) or err}", what) from None


def _load_truststore(ctx: ssl.SSLContext, cfg: BrokerConfig, listener: str, auth: str) -> None:
    def named(key: str) -> str:
        return cfg.listener_source(listener, key)

    location = cfg.for_listener(listener, "ssl.truststore.location")
    inline = cfg.for_listener(listener, "ssl.truststore.certificates")
    if location is None and inline is None:
        raise ConfigError(
            f"{named('ssl.client.auth')}: ssl.client.auth={auth} on listener {listener} needs a trust store "
            f"(ssl.truststore.type=PEM with ssl.truststore.location or ssl.truststore.certificates)",
            named("ssl.client.auth"))
    if str(cfg.for_listener(listener, "ssl.truststore.type")).upper() != "PEM":
        raise ConfigError(f"{named('ssl.truststore.type')}: kaflite reads PEM trust stores only, expected "
                          f"PEM, got {cfg.for_listener(listener, 'ssl.truststore.type')}",
                          named("ssl.truststore.type"))
    try:
        if location is not None:
            ctx.load_verify_locations(cafile=str(location))
        if inline is not None:
            ctx.load_verify_locations(cadata=str(inline))
    except FileNotFoundError:
        raise ConfigError(f"{named('ssl.truststore.location')}: no such file {location}",
                          named("ssl.truststore.location")) from None
    except (ssl.SSLError, OSError) as err:
        what = named("ssl.truststore.location") if location is not None else named("ssl.truststore.certificates")
        raise ConfigError(f"{what}: cannot load the trusted certificates (PEM): {err}", what) from None


def certificate_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None, mapper: PrincipalMapper) -> str:
    """`User:<name>` of the client certificate of a finished handshake, User:ANONYMOUS without one."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return "User:ANONYMOUS"
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    return "User:" + mapper.map(subject)
