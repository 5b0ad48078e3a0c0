"""Each listener's security, from the configuration: what a connection of the listener needs (its TLS
context, its principal mapper, its SASL mechanisms). The checks that need no file run when the
configuration loads (config/security_checks.py); the files are read here, at start-up.

Rules:
- PLAINTEXT listeners get no ListenerSecurity at all: their connections pay nothing for security;
- SSL and SASL_SSL listeners need a PEM key store; SASL_* listeners need `sasl.enabled.mechanisms`
  (per listener: `listener.name.<l>.sasl.enabled.mechanisms`) within PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512, and PLAIN needs a JAAS configuration (`listener.name.<l>.plain.sasl.jaas.config`, else
  `sasl.jaas.config`) of PlainLoginModule with at least one `user_<name>` option;
- SCRAM users come from the credential store (AlterUserScramCredentials), not from JAAS.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from kaflite.server.config.principal_rules import KEY as MAPPING_KEY
from kaflite.server.config.principal_rules import PrincipalMapper
from kaflite.server.config.security_checks import jaas_key, plain_users
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

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def new_authenticator(self) -> SaslAuthenticator:
        return SaslAuthenticator(self.mechanisms, self.failed_delay_ms)


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
            if mechanism == "PLAIN":
                users = plain_users(cfg, li.name, jaas_key(cfg, li.name, "PLAIN", "sasl.jaas.config"))
                sec.mechanisms[mechanism] = partial(PlainServer, users)
            else:
                sec.mechanisms[mechanism] = partial(ScramServer, mechanism, store)
    return sec
