"""The broker's own client side (server/security/client.py): the one BrokerConnector every broker-to-broker
sender uses, built from Kafka's inter-broker keys, against the secured test broker's listeners; and the
inter-broker settings refused at load."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import pytest
from seckit import KEY_PASSWORD, PLAIN_USERS, SCRAM_USERS, Certs, Secured

from kaflite.server.broker_connection import BrokerConnection
from kaflite.server.config import BrokerConfig
from kaflite.server.config.definitions import ConfigError
from kaflite.server.security.certs import issue, write_private
from kaflite.server.security.client import BrokerConnector, InterBrokerAuthenticationError, broker_connector

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def cluster_config(certs: Certs, protocol: str, mechanism: str, jaas: str, **extra: str) -> BrokerConfig:
    """A cluster member whose only listener (named after its protocol) is the inter-broker one."""
    overrides = {
        "listeners": f"{protocol}://127.0.0.1:0", "zookeeper.connect": "127.0.0.1:2181",
        "security.inter.broker.protocol": protocol,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.key.password": KEY_PASSWORD, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_file),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        f"listener.name.{protocol.lower()}.{mechanism.lower()}.sasl.jaas.config": jaas,
        **extra,
    }
    if mechanism != "PLAIN":  # PLAIN listeners need their users even when the broker logs in with SCRAM
        overrides[f"listener.name.{protocol.lower()}.plain.sasl.jaas.config"] = \
            f'{PLAIN} required user_alice="{PLAIN_USERS["alice"]}";'
    return BrokerConfig.load(overrides=overrides)


async def _api_versions(connector: BrokerConnector, port: int, host: str = "127.0.0.1") -> int:
    """Opens a connection through `connector` and sends Metadata (refused before a login): the number of
    brokers answered."""
    from kio.schema.metadata.v9.request import MetadataRequest
    from kio.schema.metadata.v9.response import MetadataResponse

    conn = await BrokerConnection.open(host, port, "broker-test", 10, connector)
    try:
        resp = await conn.request(MetadataRequest(topics=(), include_cluster_authorized_operations=False,
                                                  include_topic_authorized_operations=False), MetadataResponse, 10)
        return len(resp.brokers)
    finally:
        conn.close()


def test_plain_over_sasl_ssl_logs_in_and_serves_requests(secured: Secured, certs: Certs) -> None:
    cfg = cluster_config(certs, "SASL_SSL", "PLAIN",
                         f'{PLAIN} required username="alice" password="{PLAIN_USERS["alice"]}" user_alice="a";')
    connector = broker_connector(cfg)
    assert connector.protocol == "SASL_SSL" and connector.ssl_context is not None
    assert connector.ssl_context.check_hostname  # ssl.endpoint.identification.algorithm=https by default
    assert "alice-secret" not in repr(connector)
    assert asyncio.run(_api_versions(connector, secured.ports["SASL_SSL"])) == 1
    assert asyncio.run(_api_versions(connector, secured.ports["SASL_SSL"], "localhost")) == 1


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_over_sasl_plaintext_logs_in(secured: Secured, certs: Certs, mechanism: str) -> None:
    cfg = cluster_config(certs, "SASL_PLAINTEXT", mechanism,
                         f'{SCRAM} required username="carol" password="{SCRAM_USERS["carol"]}";')
    connector = broker_connector(cfg)
    assert connector.ssl_context is None and connector.mechanism == mechanism
    assert asyncio.run(_api_versions(connector, secured.ports["SASL_PLAINTEXT"])) == 1


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_wrong_password_is_refused_without_naming_it(secured: Secured, certs: Certs, mechanism: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    module, user = (PLAIN, "alice") if mechanism == "PLAIN" else (SCRAM, "carol")
    extra = ' user_alice="a"' if mechanism == "PLAIN" else ""
    cfg = cluster_config(certs, "SASL_PLAINTEXT", mechanism,
                         f'{module} required username="{user}" password="not-the-secret-42"{extra};')
    caplog.set_level(logging.DEBUG, logger="kaflite")
    with pytest.raises(InterBrokerAuthenticationError) as err:
        asyncio.run(_api_versions(broker_connector(cfg), secured.ports["SASL_PLAINTEXT"]))
    assert "SASL_AUTHENTICATION_FAILED" in str(err.value) or "exchange failed" in str(err.value)
    assert "not-the-secret-42" not in str(err.value) and "not-the-secret-42" not in caplog.text


def test_ssl_verifies_the_peer_certificate(secured: Secured, certs: Certs) -> None:
    # a trust store of another CA: the broker's certificate is refused (the chain is always verified)
    rogue = {"listeners": "SSL://127.0.0.1:0", "zookeeper.connect": "127.0.0.1:2181",
             "inter.broker.listener.name": "SSL", "ssl.keystore.type": "PEM",
             "ssl.keystore.location": str(certs.broker_keystore), "ssl.key.password": KEY_PASSWORD,
             "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.rogue_ca_file)}
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        asyncio.run(_api_versions(broker_connector(BrokerConfig.load(overrides=rogue)), secured.ports["SSL"]))
    # the broker's own CA: accepted; its certificate is presented, so the MTLS listener (required) takes it
    good = BrokerConfig.load(overrides={**rogue, "ssl.truststore.location": str(certs.ca_file)})
    assert asyncio.run(_api_versions(broker_connector(good), secured.ports["MTLS"])) == 1


def test_host_name_verification_follows_the_endpoint_identification_key(certs: Certs, tmp_path: Path) -> None:
    # a peer whose certificate (from the trusted CA) names other.example only, reached as 127.0.0.1
    other = issue(certs.ca, "CN=other,O=kaflite", hosts=("other.example",))
    write_private(tmp_path / "other.pem", other.keystore_pem())
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "other.pem")

    def connector(algorithm: str) -> BrokerConnector:
        return broker_connector(BrokerConfig.load(overrides={
            "listeners": "SSL://127.0.0.1:0", "zookeeper.connect": "127.0.0.1:2181",
            "inter.broker.listener.name": "SSL", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.broker_keystore), "ssl.key.password": KEY_PASSWORD,
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_file),
            "ssl.endpoint.identification.algorithm": algorithm}))

    async def handshake(c: BrokerConnector) -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        try:
            _, writer = await c.open_stream("127.0.0.1", port, 10)
            writer.close()
        finally:
            server.close()

    assert connector("https").ssl_context.check_hostname  # type: ignore[union-attr]
    with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch|doesn't match"):
        asyncio.run(handshake(connector("https")))  # Kafka's default
    asyncio.run(handshake(connector("")))  # the chain is still verified: only the name is not


def test_plaintext_inter_broker_listener_has_no_security() -> None:
    cfg = BrokerConfig.load(overrides={"zookeeper.connect": "127.0.0.1:2181"})
    c = broker_connector(cfg)
    assert c.protocol == "PLAINTEXT" and c.ssl_context is None and c.mechanism is None


# --- refused at load ------------------------------------------------------------------------------------


def refused(overrides: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(overrides=overrides)
    return err.value


SASL_CLUSTER = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "zookeeper.connect": "127.0.0.1:2181",
                "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "SCRAM-SHA-256"}


def test_kafkas_default_gssapi_inter_broker_mechanism_is_refused_in_a_cluster() -> None:
    err = refused(SASL_CLUSTER)
    assert err.key == "sasl.mechanism.inter.broker.protocol" and "SCRAM-SHA-256" in str(err)
    # a single node makes no inter-broker connections: the same listener loads without it
    BrokerConfig.load(overrides={k: v for k, v in SASL_CLUSTER.items() if k != "zookeeper.connect"})


def test_inter_broker_mechanism_not_enabled_on_the_listener_is_refused() -> None:
    err = refused({**SASL_CLUSTER, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
    assert err.key == "sasl.mechanism.inter.broker.protocol"


def test_inter_broker_login_without_credentials_is_refused_naming_the_jaas_key() -> None:
    base = {**SASL_CLUSTER, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}
    key = "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"
    assert refused(base).key == key
    err = refused({**base, key: f'{SCRAM} required username="broker";'})
    assert err.key == key and "password" in str(err)
    err = refused({**base, key: f'{PLAIN} required username="broker" password="pw-secret-9";'})
    assert err.key == key and "ScramLoginModule" in str(err) and "pw-secret-9" not in str(err)
    cfg = BrokerConfig.load(overrides={**base, "sasl.jaas.config": f'{SCRAM} required username="b" password="p";'})
    assert broker_connector(cfg).username == "b"  # the broker-wide JAAS entry is the fallback, as in Kafka


def test_security_inter_broker_protocol_names_the_listener_and_excludes_the_listener_name() -> None:
    both = refused({"listeners": "PLAINTEXT://127.0.0.1:0", "inter.broker.listener.name": "PLAINTEXT",
                    "security.inter.broker.protocol": "PLAINTEXT"})
    assert both.key == "security.inter.broker.protocol" and "only one" in str(both)
    missing = refused({"listeners": "PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol": "SSL"})
    assert missing.key == "security.inter.broker.protocol"
    cfg = BrokerConfig.load(overrides={"listeners": "INTERNAL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                                       "listener.security.protocol.map": "INTERNAL:PLAINTEXT,SASL_PLAINTEXT:"
                                                                         "SASL_PLAINTEXT",
                                       "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                                       "security.inter.broker.protocol": "SASL_PLAINTEXT"})
    assert cfg.inter_broker_listener_name == "SASL_PLAINTEXT"
