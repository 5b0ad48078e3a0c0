"""The broker's own client side (Kafka's ChannelBuilders for the inter-broker listener): how this broker
connects to another broker's inter-broker listener. One `BrokerConnector` per broker, shared by every
broker-to-broker sender (replica fetchers, the transaction marker channel): built once at start-up from
the configuration (files read then), then only used.

Rules:
- the security protocol is the inter-broker listener's (`inter.broker.listener.name`, or the listener
  named by `security.inter.broker.protocol`); PLAINTEXT connects with no TLS and no SASL;
- SSL and SASL_SSL: TLS with the listener's trust store (`ssl.truststore.location` /
  `ssl.truststore.certificates`, per listener first; none: the system's CAs, as Kafka falls back on the
  JVM's), the listener's key store as the client certificate when one is set (a peer listener with
  `ssl.client.auth=required` accepts it), `ssl.enabled.protocols`, `ssl.cipher.suites`; the peer's
  certificate chain is always verified, its host name only with `ssl.endpoint.identification.algorithm`
  = https (Kafka's default; empty disables it);
- SASL_PLAINTEXT and SASL_SSL: SaslHandshake v1 naming `sasl.mechanism.inter.broker.protocol`, then
  SaslAuthenticate v2 carrying the tokens, before the connection's first request; PLAIN sends
  `\\0username\\0password`, SCRAM-SHA-256/512 runs scramp's client; the username and password are the
  `username`/`password` options of the JAAS entry `listener.name.<l>.<mechanism>.sasl.jaas.config`
  (else `sasl.jaas.config`), as Kafka's broker logs in;
- a refused login is an `InterBrokerAuthenticationError` (a ConnectionError: every sender already closes
  the connection and retries after its backoff) carrying the peer's error message, never a password;
- the connector's repr names the protocol and mechanism only.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kaflite.server.config.definitions import ConfigError
from kaflite.server.config.security_checks import inter_broker_credentials

if TYPE_CHECKING:
    from kaflite.server.config import BrokerConfig

__all__ = ["BrokerConnector", "InterBrokerAuthenticationError", "broker_connector", "client_context",
           "inter_broker_credentials"]


class InterBrokerAuthenticationError(ConnectionError):
    """The peer refused this broker's login (or the exchange broke): retried like a lost connection."""



class Requester(Protocol):
    """What the SASL exchange needs of a connection (server/broker_connection.py's BrokerConnection; a
    Protocol so that this module does not import the one that imports it)."""

    async def request(self, req: Any, response_schema: Any, timeout_s: float) -> Any: ...

@dataclass(frozen=True)
class BrokerConnector:
    """How to open one connection to another broker's inter-broker listener."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)

    def __repr__(self) -> str:  # never the password
        return f"BrokerConnector(protocol={self.protocol}, mechanism={self.mechanism}, user={self.username!r})"

    async def open_stream(self, host: str, port: int,
                          timeout_s: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The TCP (and TLS) stream to host:port; the SASL exchange is `authenticate`'s."""
        if self.ssl_context is None:
            return await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        return await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=self.ssl_context, server_hostname=host,
                                    ssl_handshake_timeout=timeout_s), timeout_s)

    async def authenticate(self, conn: Requester, timeout_s: float) -> None:
        """SaslHandshake + SaslAuthenticate on a fresh connection (nothing for PLAINTEXT and SSL)."""
        if self.mechanism is None:
            return
        from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
        from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
        from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

        shake = await conn.request(SaslHandshakeRequest(mechanism=self.mechanism), SaslHandshakeResponse, timeout_s)
        if shake.error_code.value != 0:
            raise InterBrokerAuthenticationError(
                f"SASL mechanism {self.mechanism} refused by the peer ({shake.error_code.name.upper()}; it enables "
                f"{', '.join(shake.mechanisms) or 'none'})")
        exchange = _exchange(self.mechanism, self.username, self.password)
        token = next(exchange)
        while True:
            resp = await conn.request(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse,
                                      timeout_s)
            if resp.error_code.value != 0:
                raise InterBrokerAuthenticationError(
                    f"SASL {self.mechanism} login as {self.username!r} refused by the peer "
                    f"({resp.error_code.name.upper()}: {resp.error_message})")
            try:
                token = exchange.send(bytes(resp.auth_bytes))
            except StopIteration:
                return


def _exchange(mechanism: str, username: str, password: str) -> Any:
    """A generator of client tokens: yields a token, receives the server's answer; returns when done."""
    if mechanism == "PLAIN":
        yield f"\x00{username}\x00{password}".encode()
        return
    from scramp import ScramClient, ScramException

    client = ScramClient([mechanism], username, password)
    server_first = yield client.get_client_first().encode()
    try:
        client.set_server_first(server_first.decode())
        server_final = yield client.get_client_final().encode()
        client.set_server_final(server_final.decode())  # the peer proves it knows the credential too
    except (ScramException, UnicodeDecodeError) as e:
        raise InterBrokerAuthenticationError(f"SASL {mechanism} exchange failed: {type(e).__name__}") from None


def client_context(cfg: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The client SSLContext for connections to other brokers' `listener`; ConfigError naming the key."""
    from kaflite.server.security.tls import _ORDER, _VERSIONS, _load_keystore, _load_truststore

    def named(key: str) -> str:
        return cfg.listener_source(listener, key)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    enabled = [p for p in _ORDER if p in list(cfg.for_listener(listener, "ssl.enabled.protocols") or [])]
    if not enabled:
        raise ConfigError(f"{named('ssl.enabled.protocols')}: expected one or more of {', '.join(_ORDER)}, "
                          f"got an empty list", named("ssl.enabled.protocols"))
    ctx.minimum_version = _VERSIONS[enabled[0]]
    ctx.maximum_version = _VERSIONS[enabled[-1]]
    if cfg.for_listener(listener, "ssl.truststore.location") is None and \
            cfg.for_listener(listener, "ssl.truststore.certificates") is None:
        ctx.load_default_certs()
    else:
        _load_truststore(ctx, cfg, listener, "required")
    if cfg.for_listener(listener, "ssl.keystore.location") is not None or \
            cfg.for_listener(listener, "ssl.keystore.key") is not None:
        _load_keystore(ctx, cfg, listener)
    algorithm = str(cfg.for_listener(listener, "ssl.endpoint.identification.algorithm") or "").strip().lower()
    if algorithm not in ("", "https"):
        key = named("ssl.endpoint.identification.algorithm")
        raise ConfigError(f"{key}: expected https or an empty value, got {algorithm}", key)
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    ciphers = list(cfg.for_listener(listener, "ssl.cipher.suites") or [])
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            key = named("ssl.cipher.suites")
            raise ConfigError(f"{key}: none of {','.join(ciphers)} is known to this OpenSSL", key) from None
    return ctx


def broker_connector(cfg: BrokerConfig) -> BrokerConnector:
    """The connector of the inter-broker listener (files read here: call it at start-up)."""
    listener = cfg.inter_broker_listener_name
    protocol = next((li.security_protocol for li in cfg.client_listeners if li.name == listener), None) \
        or "PLAINTEXT"
    context = client_context(cfg, listener) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_"):
        return BrokerConnector(protocol, context)
    mechanism = str(cfg["sasl.mechanism.inter.broker.protocol"]).strip().upper()
    user, password, _ = inter_broker_credentials(cfg, listener, mechanism)
    return BrokerConnector(protocol, context, mechanism, user, password)
