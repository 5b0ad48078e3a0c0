"""The security checks of a configuration that need no file (Kafka refuses these at start-up): each
message names the key and what is allowed.

Rules:
- SSL and SASL_SSL listeners need a PEM key store (`ssl.keystore.location`, or `ssl.keystore.key` with
  `ssl.keystore.certificate.chain`; per listener `listener.name.<l>.ssl.*`);
- SASL_* listeners need `sasl.enabled.mechanisms` (per listener `listener.name.<l>.sasl.enabled.mechanisms`)
  within PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; PLAIN needs a JAAS configuration
  (`listener.name.<l>.plain.sasl.jaas.config`, else `sasl.jaas.config`) of PlainLoginModule with at least
  one `user_<name>` option;
- OAUTHBEARER's `sasl.server.callback.handler.class` (per listener and mechanism) is Kafka's unsecured
  validator (the default) or its signed-JWT one, which needs `sasl.oauthbearer.jwks.endpoint.url`, a
  file: or https: (http:) URL; a JAAS entry, when given, names OAuthBearerLoginModule;
- `ssl.principal.mapping.rules` must parse;
- in a cluster (`check_inter_broker`), a SASL inter-broker listener needs
  `sasl.mechanism.inter.broker.protocol` among that listener's enabled mechanisms and the broker's own
  login (`username`, `password`) in the JAAS entry of that mechanism on that listener (Kafka's checks).
"""

from __future__ import annotations

from typing import Any, Protocol

from kaflite.server.config.definitions import ConfigError
from kaflite.server.config.jaas import parse_jaas
from kaflite.server.config.keys_security import SASL_MECHANISMS
from kaflite.server.config.principal_rules import KEY as MAPPING_KEY
from kaflite.server.config.principal_rules import PrincipalMapper


class BrokerConfig(Protocol):
    """What these checks read of broker_config.BrokerConfig (not imported: it imports this module)."""

    def for_listener(self, listener_name: str, key: str) -> Any: ...

    def listener_source(self, listener_name: str, key: str) -> str: ...

    def for_mechanism(self, listener_name: str, mechanism: str, key: str) -> Any: ...

    def __getitem__(self, key: str) -> Any: ...

    def __contains__(self, key: object) -> bool: ...

__all__ = ["OAUTH_MODULE", "PLAIN_MODULE", "SCRAM_MODULE", "check_inter_broker", "check_listener_security",
           "enabled_mechanisms", "inter_broker_credentials", "oauth_settings", "plain_users"]

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_HANDLER = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                     "OAuthBearerUnsecuredValidatorCallbackHandler")
SIGNED_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                   "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")


def enabled_mechanisms(cfg: BrokerConfig, listener: str) -> list[str]:
    key = cfg.listener_source(listener, "sasl.enabled.mechanisms")
    names = [str(m).strip().upper() for m in cfg.for_listener(listener, "sasl.enabled.mechanisms") or []]
    bad = [m for m in names if m not in SASL_MECHANISMS]
    if not names or bad:
        raise ConfigError(
            f"{key}: listener {listener} is SASL: expected one or more of {', '.join(SASL_MECHANISMS)}, got "
            f"{','.join(names) or 'an empty list'}"
            + (" (GSSAPI is Kafka's default; kaflite has no Kerberos)" if "GSSAPI" in bad else ""), key)
    return names


def jaas_key(cfg: BrokerConfig, listener: str, mechanism: str, fallback: str = "sasl.jaas.config") -> str:
    own = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    return own if own in cfg and cfg[own] is not None else fallback


def plain_users(cfg: BrokerConfig, listener: str, key: str | None = None) -> dict[str, str]:
    key = key or jaas_key(cfg, listener, "PLAIN")
    text = cfg[key]
    if text is None:
        raise ConfigError(
            f"{key}: listener {listener} enables PLAIN and needs its users: set "
            f"listener.name.{listener.lower()}.plain.sasl.jaas.config (or sasl.jaas.config) to "
            f'\'{PLAIN_MODULE} required user_alice="alice-secret";\'', key)
    entry = parse_jaas(str(text), key)
    if entry.login_module != PLAIN_MODULE:
        raise ConfigError(f"{key}: PLAIN needs the login module {PLAIN_MODULE}, got {entry.login_module}", key)
    users = {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_") and len(k) > 5}
    if not users:
        raise ConfigError(f'{key}: PLAIN needs at least one user_<name>="<password>" option', key)
    return users


def oauth_settings(cfg: Any, listener: str, handler: str | None) -> tuple[bool, dict[str, str]]:
    """(signed, JAAS options) of OAUTHBEARER on one listener, given its `sasl.server.callback.handler.class`:
    signed when that is Kafka's OAuthBearerValidatorCallbackHandler (then the JWKS URL is checked), else the
    unsecured validator, whose options come from the JAAS entry."""
    handler_key = f"listener.name.{listener.lower()}.oauthbearer.sasl.server.callback.handler.class"
    if handler is not None and handler not in SIGNED_HANDLERS + (UNSECURED_HANDLER,):
        raise ConfigError(f"{handler_key}: kaflite validates OAUTHBEARER tokens with {UNSECURED_HANDLER} (the "
                          f"default) or {SIGNED_HANDLERS[0]}, got {handler}", handler_key)
    key = jaas_key(cfg, listener, "OAUTHBEARER", "sasl.jaas.config")
    options: dict[str, str] = {}
    if cfg[key] is not None:
        entry = parse_jaas(str(cfg[key]), key)
        if entry.login_module != OAUTH_MODULE:
            raise ConfigError(f"{key}: OAUTHBEARER needs the login module {OAUTH_MODULE}, got "
                              f"{entry.login_module}", key)
        options = dict(entry.options)
    signed = handler in SIGNED_HANDLERS
    if signed:
        url = cfg.for_mechanism(listener, "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url")
        if not url or str(url).split(":", 1)[0].lower() not in ("file", "https", "http"):
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: listener {listener} validates signed "
                              f"OAUTHBEARER tokens and needs the JWKS as a file: or https: URL, got "
                              f"{url or 'nothing'}", "sasl.oauthbearer.jwks.endpoint.url")
    return signed, options


def check_listener_security(cfg: BrokerConfig, li: Any) -> None:
    """The checks that need no file: refuse at load what cannot serve (files are read at start)."""
    proto = li.security_protocol
    PrincipalMapper(str(cfg.for_listener(li.name, MAPPING_KEY)), cfg.listener_source(li.name, MAPPING_KEY))
    if proto in ("SSL", "SASL_SSL"):
        named = cfg.listener_source(li.name, "ssl.keystore.location")
        if cfg.for_listener(li.name, "ssl.keystore.location") is None and \
                cfg.for_listener(li.name, "ssl.keystore.key") is None:
            raise ConfigError(
                f"{named}: listener {li.name} is {proto} and needs a key store: set ssl.keystore.type=PEM "
                f"with ssl.keystore.location (PEM: key and certificate chain) or ssl.keystore.key and "
                f"ssl.keystore.certificate.chain (per listener: listener.name.{li.name.lower()}.ssl.*)", named)
        kind = str(cfg.for_listener(li.name, "ssl.keystore.type")).upper()
        if kind != "PEM":
            key = cfg.listener_source(li.name, "ssl.keystore.type")
            raise ConfigError(f"{key}: kaflite reads PEM key stores only, expected PEM, got {kind}", key)
    if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanisms = enabled_mechanisms(cfg, li.name)
        if "PLAIN" in mechanisms:
            plain_users(cfg, li.name)
        if "OAUTHBEARER" in mechanisms:
            oauth_settings(cfg, li.name, cfg.for_mechanism(li.name, "OAUTHBEARER",
                                                           "sasl.server.callback.handler.class"))


def check_inter_broker(cfg: BrokerConfig, listener: str, protocol: str) -> None:
    """A cluster's inter-broker listener: what the broker's own client side needs (files are read at
    start, server/security/client.py)."""
    if not protocol.startswith("SASL_"):
        return
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = str(cfg[key]).strip().upper()
    enabled = enabled_mechanisms(cfg, listener)
    if mechanism not in enabled:
        raise ConfigError(
            f"{key}: the inter-broker listener {listener} is {protocol} and enables {', '.join(enabled)}, "
            f"got {mechanism} (Kafka's default GSSAPI needs Kerberos, which kaflite does not have)", key)
    inter_broker_credentials(cfg, listener, mechanism)


def inter_broker_credentials(cfg: BrokerConfig, listener: str, mechanism: str) -> tuple[str, str, str]:
    """(username, password, the JAAS key they came from) of the broker's own login; ConfigError naming the
    key when the entry is missing, of the wrong login module, or without username/password."""
    key = jaas_key(cfg, listener, mechanism)
    text = cfg[key]
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    example = f'\'{module} required username="broker" password="broker-secret";\''
    if text is None:
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"  # the one to set
        raise ConfigError(
            f"{key}: the inter-broker listener {listener} uses SASL {mechanism} and the broker needs its own "
            f"credentials: set listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config to "
            f"{example}", key)
    entry = parse_jaas(str(text), key)
    if entry.login_module != module:
        raise ConfigError(f"{key}: {mechanism} needs the login module {module}, got {entry.login_module}", key)
    user, password = entry.options.get("username"), entry.options.get("password")
    if not user or password is None:
        raise ConfigError(f"{key}: the broker's inter-broker login needs the username and password options "
                          f"({example})", key)
    return user, password, key
