"""Security keys (Kafka's listener security protocol map, SSL and SASL keys).

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems. Every key
of `LISTENER_KEYS` may also be given per listener as `listener.name.<listener>.<key>` (Kafka's
per-listener override, the listener name in lower case); `<mechanism>.sasl.jaas.config` likewise
(`listener.name.sasl_plaintext.plain.sasl.jaas.config`). docs/security.md describes each key.
"""

from __future__ import annotations

from kaflite.server.config.definitions import (
    PER_BROKER,
    AtLeast,
    ConfigKey,
    ListOf,
    OneOf,
    _k,
)

__all__ = ["KEYS", "LISTENER_KEYS", "MECHANISM_KEYS", "NOT_READ", "SASL_MECHANISMS", "TLS_PROTOCOLS"]

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")  # the mechanisms kaflite serves
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")  # what Python's ssl offers of Kafka's names (TLSv1/1.1 are unsafe)

KEYS: list[ConfigKey] = [
    _k(
        "listener.security.protocol.map",
        "string",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "Listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); controller "
        "listeners not named here are PLAINTEXT while the map is at its default.",
        mode=PER_BROKER,
    ),
    # --- TLS ---------------------------------------------------------------------------------------
    _k("ssl.keystore.type", "string", "JKS",
       "Format of the key store; kaflite reads PEM only (set ssl.keystore.type=PEM).",
       OneOf(("JKS", "PKCS12", "PEM")), mode=PER_BROKER),
    _k("ssl.keystore.location", "string", None,
       "PEM file with the listener's private key and its certificate chain.", mode=PER_BROKER),
    _k("ssl.keystore.password", "password", None,
       "Not used with PEM key stores (Kafka refuses it with PEM); ssl.key.password decrypts the key.",
       mode=PER_BROKER),
    _k("ssl.key.password", "password", None, "Password of an encrypted private key (PEM).", mode=PER_BROKER),
    _k("ssl.keystore.key", "password", None, "The private key in PEM, inline (instead of a file).",
       mode=PER_BROKER),
    _k("ssl.keystore.certificate.chain", "password", None,
       "The certificate chain in PEM, inline (with ssl.keystore.key).", mode=PER_BROKER),
    _k("ssl.truststore.type", "string", "JKS",
       "Format of the trust store; kaflite reads PEM only (set ssl.truststore.type=PEM).",
       OneOf(("JKS", "PKCS12", "PEM")), mode=PER_BROKER),
    _k("ssl.truststore.location", "string", None,
       "PEM file of the CA certificates that client certificates must chain to.", mode=PER_BROKER),
    _k("ssl.truststore.password", "password", None, "Not used with PEM trust stores.", mode=PER_BROKER),
    _k("ssl.truststore.certificates", "password", None, "Trusted CA certificates in PEM, inline.",
       mode=PER_BROKER),
    _k("ssl.client.auth", "string", "none",
       "Client certificates: none (not asked), requested (asked, optional), required (refused without).",
       OneOf(("none", "requested", "required")), mode=PER_BROKER),
    _k("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions accepted.",
       ListOf(TLS_PROTOCOLS), mode=PER_BROKER),
    _k("ssl.protocol", "string", "TLSv1.3", "Kafka's SSLContext protocol; Python negotiates the highest "
       "of ssl.enabled.protocols, so this is accepted and not read.", mode=PER_BROKER),
    _k("ssl.cipher.suites", "list", [],
       "TLS 1.2 cipher suites allowed (OpenSSL or IANA names); empty means Python's defaults.",
       mode=PER_BROKER),
    _k("ssl.principal.mapping.rules", "string", "DEFAULT",
       "Rules mapping a client certificate's distinguished name to a principal name "
       "(RULE:pattern/replacement/[LU], DEFAULT)."),
    _k("ssl.endpoint.identification.algorithm", "string", "https",
       "Host name verification on the broker's own client side (connections to other brokers' "
       "inter-broker listener): https checks the peer certificate's names against its address, empty "
       "does not (the chain is verified either way).", OneOf(("https", "HTTPS", "")), mode=PER_BROKER),
    # --- SASL --------------------------------------------------------------------------------------
    _k("sasl.enabled.mechanisms", "list", ["GSSAPI"],
       "SASL mechanisms served on SASL listeners; kaflite serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
       "OAUTHBEARER.",
       mode=PER_BROKER),
    _k("sasl.jaas.config", "password", None,
       "JAAS login module configuration for every mechanism of every listener without a "
       "listener.name.<l>.<mechanism>.sasl.jaas.config; PLAIN reads its user_<name>=\"password\" entries.",
       mode=PER_BROKER),
    _k("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI",
       "SASL mechanism this broker logs in with on other brokers' inter-broker listener (PLAIN, "
       "SCRAM-SHA-256, SCRAM-SHA-512; one of that listener's sasl.enabled.mechanisms); its username and "
       "password are those of listener.name.<l>.<mechanism>.sasl.jaas.config.", mode=PER_BROKER),
    # Kafka's GSSAPI (Kerberos) login keys: GSSAPI is not served (sasl.enabled.mechanisms refuses it), so
    # nothing reads them; accepted, stored and described as a Kafka broker without a GSSAPI listener does.
    _k("sasl.kerberos.service.name", "string", None,
       "The Kerberos principal name Kafka's GSSAPI runs as.", mode=PER_BROKER),
    _k("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", "Kerberos kinit command path.", mode=PER_BROKER),
    _k("sasl.kerberos.ticket.renew.window.factor", "double", 0.8,
       "Share of a Kerberos ticket's lifetime after which Kafka's login thread renews it.", mode=PER_BROKER),
    _k("sasl.kerberos.ticket.renew.jitter", "double", 0.05,
       "Random jitter added to the Kerberos renewal time.", mode=PER_BROKER),
    _k("sasl.kerberos.min.time.before.relogin", "long", 60000,
       "Kerberos login thread sleep time between refresh attempts (ms).", mode=PER_BROKER),
    _k("sasl.kerberos.principal.to.local.rules", "list", ["DEFAULT"],
       "Rules mapping Kerberos principal names to short names.", mode=PER_BROKER),
    _k("security.inter.broker.protocol", "string", None,
       "Security protocol between brokers: the inter-broker listener is the one named after it (Kafka's "
       "rule); only one of it and inter.broker.listener.name may be set. Unset: inter.broker.listener.name, "
       "else the first PLAINTEXT client listener.",
       OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")), kafka_default="PLAINTEXT",
       differs="unset by default: a broker without a listener named PLAINTEXT uses its first PLAINTEXT "
               "client listener (Kafka refuses the configuration)"),
    _k("connection.failed.authentication.delay.ms", "int", 100,
       "Delay of the answer to a failed authentication before the connection is closed.", AtLeast(0)),
    _k("connections.max.reauth.ms", "long", 0,
       "Longest SASL session before the client must re-authenticate (KIP-368); 0 or less: no limit (a "
       "credential's own expiry, an OAUTHBEARER token's exp, still ends the session). Per listener and "
       "mechanism: listener.name.<l>.<mechanism>.connections.max.reauth.ms."),
    _k("sasl.server.callback.handler.class", "string", None,
       "OAUTHBEARER's token validator (per listener and mechanism: listener.name.<l>.oauthbearer.sasl.server."
       "callback.handler.class): Kafka's unsecured validator (the default) or "
       "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler (signed JWTs)."),
    _k("sasl.oauthbearer.jwks.endpoint.url", "string", None,
       "file: or https: URL of the JSON Web Key Set that signed OAUTHBEARER tokens are verified with."),
    _k("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3_600_000,
       "Interval between fetches of an https JWKS (a file is read once).", AtLeast(1)),
    _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "long", 100,
       "First wait before retrying a failed JWKS fetch; doubles up to the maximum.", AtLeast(0)),
    _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "long", 10_000,
       "Longest wait between retries of a failed JWKS fetch.", AtLeast(0)),
    _k("sasl.oauthbearer.expected.audience", "list", [],
       "Audiences a signed token must name one of (its aud claim); empty: a token with an aud is refused."),
    _k("sasl.oauthbearer.expected.issuer", "string", None, "The issuer (iss claim) a signed token must name."),
    _k("sasl.oauthbearer.sub.claim.name", "string", "sub", "The claim that holds a signed token's principal."),
    _k("sasl.oauthbearer.scope.claim.name", "string", "scope", "The claim that holds a signed token's scope."),
    _k("sasl.oauthbearer.clock.skew.seconds", "int", 30,
       "Clock difference allowed when checking a signed token's exp and nbf.", AtLeast(0)),
]

# Keys that may also be given per listener and mechanism as listener.name.<listener>.<mechanism>.<key>
# (Kafka's mechanism prefix, which wins over listener.name.<listener>.<key>, which wins over <key>).
MECHANISM_KEYS = frozenset(["sasl.jaas.config", "sasl.server.callback.handler.class", "connections.max.reauth.ms"]
                           + [k.name for k in KEYS if k.name.startswith("sasl.oauthbearer.")])

# Keys that may be given per listener as listener.name.<listener>.<key>.
LISTENER_KEYS = frozenset(k.name for k in KEYS if k.name.startswith(("ssl.", "sasl.")) or
                          k.name in ("connection.failed.authentication.delay.ms", "connections.max.reauth.ms"))

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {
    "ssl.keystore.password": "PEM key stores have no store password (ssl.key.password decrypts the key)",
    "ssl.truststore.password": "PEM trust stores have no password",
    "ssl.protocol": "Python negotiates the highest version of ssl.enabled.protocols",
    **{k.name: "GSSAPI (Kerberos) is not served" for k in KEYS if k.name.startswith("sasl.kerberos.")},
}
