"""Each listener's security, from the configuration: what a connection of the listener needs (its TLS
context, its principal mapper, its SASL mechanisms). The checks that need no file run when the
configuration loads (config/security_checks.py); the files are read here, at start-up.

Rules:
- PLAINTEXT listeners get no ListenerSecurity at all: their connections pay nothing for security;
- SSL and SASL_SSL listeners need a PEM key store; SASL_* listeners need `sasl.enabled.mechanisms`
  (per listener: `listener.name.<l>.sasl.enabled.mechanisms`) within PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512, and PLAIN needs a JAAS configuration (`listener.name.<l>.plain.sasl.jaas.config`, else
  `sasl.jaas.config`) of PlainLoginModule with at least one `user_<name>` option;
- SCRAM users come from the credential store (AlterUserScramCredentials), not from JAAS;
- OAUTHBEARER validates tokens with Kafka's unsecured validator (its options from the mechanism's JAAS
  entry) or, with OAuthBearerValidatorCallbackHandler, against the JWKS of
  `sasl.oauthbearer.jwks.endpoint.url` (a file is read here; an https URL is fetched by a thread that
  `ListenerSecurity.close` stops).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from kaflite.server.config.definitions import ConfigError
from kaflite.server.config.principal_rules import KEY as MAPPING_KEY
from kaflite.server.config.principal_rules import PrincipalMapper
from kaflite.server.config.security_checks import jaas_key, oauth_settings, plain_users
from kaflite.server.security.oauth import (
    JwksKeys,
    JwtValidator,
    OAuthBearerServer,
    TokenValidator,
    UnsecuredValidator,
)
from kaflite.server.security.sasl import MechanismServer, PlainServer, SaslAuthenticator, ScramServer
from kaflite.server.security.scram import CredentialStore

if TYPE_CHECKING:
    from kaflite.server.config import BrokerConfig, Listener

__all__ = ["ListenerSecurity", "listener_security"]

@dataclass
class ListenerSecurity:
    """What a connection of one SSL / SASL_* listener needs."""

    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    mechanisms: dict[str, Callable[[], MechanismServer]] = field(default_factory=dict)
    failed_delay_ms: int = 100
    closers: list[Callable[[], None]] = field(default_factory=list)  # stopped with the listener
    max_reauth_ms: dict[str, int] = field(default_factory=dict)  # mechanism -> connections.max.reauth.ms

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def new_authenticator(self) -> SaslAuthenticator:
        return SaslAuthenticator(self.mechanisms, self.failed_delay_ms, self.max_reauth_ms)

    def reauthenticator(self, mechanism: str, principal: str) -> SaslAuthenticator:
        """The authenticator of a re-authentication (KIP-368) of a session of `mechanism` and `principal`."""
        return SaslAuthenticator(self.mechanisms, self.failed_delay_ms, self.max_reauth_ms,
                                 reauth_of=(mechanism, principal))

    def close(self) -> None:
        for close in self.closers:
            close()


def listener_security(cfg: BrokerConfig, li: Listener, store: CredentialStore) -> ListenerSecurity | None:
    """None for PLAINTEXT; else the listener's TLS context and SASL mechanisms (ConfigError on bad files)."""
    proto = li.security_protocol or "PLAINTEXT"
    if proto == "PLAINTEXT":
        return None
    from kaflite.server.security.tls import server_context

    sec = ListenerSecurity(
        proto,
        mapper=PrincipalMapper(str(cfg.for_listener(li.name, "ssl.principal.mapping.rules")),
                               cfg.listener_source(li.name, MAPPING_KEY)),
        failed_delay_ms=int(cfg.for_listener(li.name, "connection.failed.authentication.delay.ms")),
    )
    if proto in ("SSL", "SASL_SSL"):
        sec.ssl_context = server_context(cfg, li.name)
    if sec.sasl:
        # validated when the configuration loaded (config/security_checks.py)
        for mechanism in (str(m).strip().upper() for m in cfg.for_listener(li.name, "sasl.enabled.mechanisms")):
            sec.max_reauth_ms[mechanism] = int(cfg.for_mechanism(li.name, mechanism, "connections.max.reauth.ms"))
            if mechanism == "PLAIN":
                users = plain_users(cfg, li.name, jaas_key(cfg, li.name, "PLAIN", "sasl.jaas.config"))
                sec.mechanisms[mechanism] = partial(PlainServer, users)
            elif mechanism == "OAUTHBEARER":
                sec.mechanisms[mechanism] = partial(OAuthBearerServer, _token_validator(cfg, li.name, sec))
            else:
                sec.mechanisms[mechanism] = partial(ScramServer, mechanism, store)
    return sec


def _token_validator(cfg: BrokerConfig, listener: str, sec: ListenerSecurity) -> TokenValidator:
    handler = cfg.for_mechanism(listener, "OAUTHBEARER", "sasl.server.callback.handler.class")
    signed, options = oauth_settings(cfg, listener, handler)
    if not signed:
        try:
            return UnsecuredValidator(options)
        except ValueError as e:
            key = jaas_key(cfg, listener, "OAUTHBEARER", "sasl.jaas.config")
            raise ConfigError(f"{key}: {e}", key) from None

    keys = JwksKeys(str(cfg.for_mechanism(listener, "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url")),
                    refresh_ms=int(cfg.for_mechanism(listener, "OAUTHBEARER",
                                                     "sasl.oauthbearer.jwks.endpoint.refresh.ms")),
                    retry_backoff_ms=int(cfg.for_mechanism(listener, "OAUTHBEARER",
                                                           "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")),
                    retry_backoff_max_ms=int(cfg.for_mechanism(
                        listener, "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")))
    try:
        keys.start()  # a file is read now (start-up); an https URL by the refresh thread
    except (OSError, ValueError) as e:
        key = "sasl.oauthbearer.jwks.endpoint.url"
        raise ConfigError(f"{key}: cannot read the JWKS of listener {listener}: {type(e).__name__}: {e}", key) from None
    sec.closers.append(keys.close)
    issuer = cfg.for_mechanism(listener, "OAUTHBEARER", "sasl.oauthbearer.expected.issuer")
    return JwtValidator(
        keys,
        audience=[str(a) for a in cfg.for_mechanism(listener, "OAUTHBEARER", "sasl.oauthbearer.expected.audience")],
        issuer=str(issuer) if issuer is not None else None,
        sub_claim=str(cfg.for_mechanism(listener, "OAUTHBEARER", "sasl.oauthbearer.sub.claim.name")),
        scope_claim=str(cfg.for_mechanism(listener, "OAUTHBEARER", "sasl.oauthbearer.scope.claim.name")),
        clock_skew_s=int(cfg.for_mechanism(listener, "OAUTHBEARER", "sasl.oauthbearer.clock.skew.seconds")),
    )
