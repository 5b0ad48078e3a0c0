"""Security settings refused at start-up with the key and what is allowed; JAAS parsing; principal
mapping; per-listener overrides; passwords never in the config's repr."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from seckit import KEY_PASSWORD, Certs, jaas_plain

from kaflite.server.config import BrokerConfig
from kaflite.server.config.definitions import ConfigError
from kaflite.server.config.jaas import parse_jaas
from kaflite.server.config.principal_rules import NoMatchingRule, PrincipalMapper
from kaflite.server.security.scram import CredentialStore
from kaflite.server.security.settings import listener_security

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def load(**overrides: str) -> BrokerConfig:
    return BrokerConfig.load(overrides={k.replace("_", "."): v for k, v in overrides.items()})


def refused(overrides: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(overrides=overrides)
    return err.value


def test_ssl_listener_without_a_keystore_is_refused() -> None:
    err = refused({"listeners": "SSL://127.0.0.1:0"})
    assert err.key == "ssl.keystore.location"
    assert "listener SSL is SSL and needs a key store" in str(err) and "ssl.keystore.type=PEM" in str(err)


def test_jks_keystore_is_refused_naming_the_per_listener_key() -> None:
    err = refused({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/x.jks",
                   "listener.name.ssl.ssl.keystore.type": "JKS"})
    assert err.key == "listener.name.ssl.ssl.keystore.type"
    assert "kaflite reads PEM key stores only, expected PEM, got JKS" in str(err)


def test_sasl_listener_with_kafkas_default_gssapi_is_refused() -> None:
    err = refused({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"})
    assert err.key == "sasl.enabled.mechanisms"
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in str(err) and "GSSAPI" in str(err)


def test_plain_without_users_is_refused() -> None:
    err = refused({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"})
    assert err.key == "sasl.jaas.config" and "user_alice" in str(err)


def test_per_listener_mechanisms_override_the_broker_wide_list() -> None:
    cfg = BrokerConfig.load(overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    sec = listener_security(cfg, cfg.client_listeners[0], CredentialStore(None))
    assert sec is not None and list(sec.mechanisms) == ["SCRAM-SHA-512"]


def test_malformed_jaas_value_names_the_key_and_not_the_secret() -> None:
    key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    err = refused({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                   key: f'{PLAIN} required user_alice="topsecret'})
    assert err.key == key and "unterminated quoted value" in str(err)
    assert "topsecret" not in str(err)


def test_listener_key_for_an_unknown_listener_is_refused() -> None:
    err = refused({"listener.name.nope.ssl.client.auth": "required"})
    assert err.key == "listener.name.nope.ssl.client.auth" and "not in listeners" in str(err)


def test_unknown_per_listener_key_is_an_unknown_key() -> None:
    err = refused({"listener.name.plaintext.log.retention.ms": "1"})
    assert "listener.name.plaintext.log.retention.ms" in str(err)


def test_passwords_are_hidden_in_the_configs_repr() -> None:
    cfg = BrokerConfig.load(overrides={"ssl.key.password": "hunter2", "sasl.jaas.config": jaas_plain({"a": "pw1"})})
    assert "hunter2" not in repr(cfg) and "pw1" not in repr(cfg)
    assert cfg.explicit()["ssl.key.password"] == "[hidden]"
    (entry,) = cfg.describe(["ssl.key.password"])  # DescribeConfigs: null, in the synonyms too
    assert entry.is_sensitive and entry.value is None and entry.synonyms[0][1] is None


def _start_refused(cfg: BrokerConfig) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        listener_security(cfg, cfg.client_listeners[0], CredentialStore(None))
    return err.value


def test_unreadable_keystore_refused_at_start(tmp_path: Path) -> None:
    cfg = BrokerConfig.load(overrides={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                       "ssl.keystore.location": str(tmp_path / "missing.pem")})
    err = _start_refused(cfg)
    assert err.key == "ssl.keystore.location" and "no such file" in str(err)


def test_encrypted_key_without_its_password_refused_at_start(certs: Certs) -> None:
    cfg = BrokerConfig.load(overrides={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                       "ssl.keystore.location": str(certs.broker_keystore),
                                       "ssl.key.password": "wrong"})
    err = _start_refused(cfg)
    assert err.key == "ssl.keystore.location" and "ssl.key.password" in str(err)
    assert "wrong" not in str(err)


def test_client_auth_without_truststore_refused(certs: Certs) -> None:
    cfg = BrokerConfig.load(overrides={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                       "ssl.keystore.location": str(certs.broker_keystore),
                                       "ssl.key.password": KEY_PASSWORD, "ssl.client.auth": "required"})
    err = _start_refused(cfg)
    assert err.key == "ssl.client.auth" and "needs a trust store" in str(err)


def test_unknown_cipher_suite_refused(certs: Certs) -> None:
    cfg = BrokerConfig.load(overrides={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                       "ssl.keystore.location": str(certs.broker_keystore),
                                       "ssl.key.password": KEY_PASSWORD, "ssl.cipher.suites": "NOT-A-CIPHER"})
    err = _start_refused(cfg)
    assert err.key == "ssl.cipher.suites"


def test_inline_pem_keystore_and_truststore(certs: Certs) -> None:
    from kaflite.server.security.certs import issue

    broker = issue(certs.ca, "CN=inline", hosts=("127.0.0.1",))
    cfg = BrokerConfig.load(overrides={
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
        "ssl.keystore.key": broker.key_pem, "ssl.keystore.certificate.chain": broker.cert_pem,
        "ssl.truststore.certificates": certs.ca.cert_pem, "ssl.client.auth": "required",
        "ssl.enabled.protocols": "TLSv1.3"})
    sec = listener_security(cfg, cfg.client_listeners[0], CredentialStore(None))
    assert sec is not None and sec.ssl_context is not None
    import ssl

    assert sec.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert sec.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_tls12_only_listener_refuses_a_tls13_only_client(certs: Certs) -> None:
    import ssl

    cfg = BrokerConfig.load(overrides={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                       "ssl.keystore.location": str(certs.broker_keystore),
                                       "ssl.key.password": KEY_PASSWORD, "ssl.enabled.protocols": "TLSv1.2"})
    sec = listener_security(cfg, cfg.client_listeners[0], CredentialStore(None))
    assert sec is not None and sec.ssl_context is not None

    async def handshake(client: ssl.SSLContext) -> str:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0, ssl=sec.ssl_context)
        port = server.sockets[0].getsockname()[1]
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
            version = writer.get_extra_info("ssl_object").version()
            writer.close()
            return str(version)
        finally:
            server.close()

    client = ssl.create_default_context(cafile=str(certs.ca_file))
    assert asyncio.run(handshake(client)) == "TLSv1.2"
    client.minimum_version = ssl.TLSVersion.TLSv1_3
    with pytest.raises((ssl.SSLError, ConnectionError)):  # the broker's alert, or its reset
        asyncio.run(handshake(client))


# --- JAAS ---------------------------------------------------------------------------------------------

def test_jaas_quoted_values_escapes_and_comments() -> None:
    entry = parse_jaas(f'{PLAIN} required /* c */ username="admin" password=bare '
                       f'user_bob="a \\"quoted\\" \\\\ value" // trailing\n;')
    assert entry.login_module == PLAIN and entry.flag == "required"
    assert entry.options == {"username": "admin", "password": "bare", "user_bob": 'a "quoted" \\ value'}


@pytest.mark.parametrize("text,message", [
    ("", "expected a login module"),
    (f"{PLAIN} mandatory a=b;", "expected a control flag"),
    (f"{PLAIN} required a=b", "a JAAS entry ends with ';'"),
    (f"{PLAIN} required a b;", "expected '=' after option a"),
    (f"{PLAIN} required a=;", "expected a value of option a"),
    (f"{PLAIN} required a=b; {PLAIN} required c=d;", "exactly one login module"),
])
def test_jaas_malformed(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_jaas(text, "k")
    assert err.value.key == "k" and message in str(err.value)


# --- ssl.principal.mapping.rules ------------------------------------------------------------------------

def test_principal_mapping_rules() -> None:
    mapper = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,]*),.*$/$1/U, DEFAULT")
    assert mapper.map("CN=Kafka-Svc,OU=ServiceUsers,O=x") == "kafka-svc"
    assert mapper.map("CN=app,O=x") == "APP"
    assert mapper.map("O=only") == "O=only"
    assert PrincipalMapper("DEFAULT").map("CN=client,O=x") == "CN=client,O=x"
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").map("O=x")


def test_principal_mapping_rules_malformed() -> None:
    err = refused({"ssl.principal.mapping.rules": "RULE:nope"})
    assert err.key == "ssl.principal.mapping.rules"
