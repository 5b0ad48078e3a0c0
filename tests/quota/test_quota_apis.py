"""DescribeClientQuotas / AlterClientQuotas on the wire, as Kafka's ZkAdminManager answers them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_client_quotas.v1 import request as areq
from kio.schema.describe_client_quotas.v1 import request as dreq
from kio.schema.errors import ErrorCode
from kwire import WireClient

from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.quota import DEFAULT, QuotaEntity
from kaflite.server.quota.store import QuotaFile, parse_path


def _alter(*entries: tuple[dict[str, str | None], dict[str, float | None]], validate_only: bool = False) -> Any:
    return areq.AlterClientQuotasRequest(validate_only=validate_only, entries=tuple(
        areq.EntryData(entity=tuple(areq.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()),
                       ops=tuple(areq.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
                                 for k, v in ops.items()))
        for entity, ops in entries))


def _describe(*components: tuple[str, int, str | None], strict: bool = False) -> Any:
    return dreq.DescribeClientQuotasRequest(strict=strict, components=tuple(
        dreq.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components))


def _entities(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert response.error_code == ErrorCode.none, response.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


@pytest.fixture
def client(broker: EmbeddedBroker) -> Iterator[WireClient]:
    with WireClient(broker.bootstrap) as c:
        yield c
    broker.call(broker.server.broker.quotas.replace_all, {})


def test_alter_then_describe_with_kafkas_filters(broker: EmbeddedBroker, client: WireClient) -> None:
    r = client.request(_alter(
        ({"user": "alice"}, {"producer_byte_rate": 1024.0}),
        ({"user": None, "client-id": None}, {"consumer_byte_rate": 2048.0}),
        ({"client-id": "app"}, {"request_percentage": 50.5, "controller_mutation_rate": 10.0}),
        ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 4096.0}),
    ))
    assert [e.error_code for e in r.entries] == [ErrorCode.none] * 4
    # every entity (no component, not strict)
    assert len(_entities(client.request(_describe()))) == 4
    # strict with no component: nothing
    assert _entities(client.request(_describe(strict=True))) == {}
    # EXACT user alice: alice alone and alice/app (not strict)
    assert set(_entities(client.request(_describe(("user", 0, "alice"))))) == {
        (("user", "alice"),), (("user", "alice"), ("client-id", "app"))}
    # ... strict: alice alone
    assert _entities(client.request(_describe(("user", 0, "alice"), strict=True))) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0}}
    # DEFAULT user: the <default>/<default> entity
    assert _entities(client.request(_describe(("user", 1, None)))) == {
        (("user", None), ("client-id", None)): {"consumer_byte_rate": 2048.0}}
    # SPECIFIED client-id, strict: only entities that are exactly a client id
    assert _entities(client.request(_describe(("client-id", 2, None), strict=True))) == {
        (("client-id", "app"),): {"request_percentage": 50.5, "controller_mutation_rate": 10.0}}
    # SPECIFIED user + client-id: both-part entities, the default one included
    assert len(_entities(client.request(_describe(("user", 2, None), ("client-id", 2, None))))) == 2
    # in force at once: alice/app's own quota, bob falls to <default>/<default> for consume
    q = broker.server.broker.quotas
    assert q.quota("producer_byte_rate", "User:alice", "app") == 4096.0
    assert q.quota("consumer_byte_rate", "User:bob", "x") == 2048.0
    # removing a key; an entity left without keys disappears
    r = client.request(_alter(({"user": "alice"}, {"producer_byte_rate": None})))
    assert r.entries[0].error_code == ErrorCode.none
    assert (("user", "alice"),) not in _entities(client.request(_describe()))
    # durable: the file is Kafka's paths and config strings
    doc = json.loads((Path(broker.data_dir or "") / "quotas.json").read_text())
    assert doc["entities"]["/config/users/alice/clients/app"] == {"producer_byte_rate": "4096"}
    assert doc["entities"]["/config/users/<default>/clients/<default>"] == {"consumer_byte_rate": "2048"}
    assert "/config/users/alice" not in doc["entities"]


def test_invalid_alterations_and_filters(broker: EmbeddedBroker, client: WireClient) -> None:
    r = client.request(_alter(
        ({"user": "a"}, {"bytes_per_second": 1.0}),
        ({"user": "a"}, {"producer_byte_rate": 1.5}),
        ({"ip": "1.2.3.4"}, {"connection_creation_rate": 1.0}),
        ({}, {"producer_byte_rate": 1.0}),
        ({"user": "ok"}, {"producer_byte_rate": 100.0}),
    ))
    assert [e.error_code for e in r.entries] == [ErrorCode.invalid_request] * 4 + [ErrorCode.none]
    assert r.entries[0].error_message == "Invalid configuration key bytes_per_second"
    # validate_only stores nothing
    r = client.request(_alter(({"user": "v"}, {"producer_byte_rate": 5.0}), validate_only=True))
    assert r.entries[0].error_code == ErrorCode.none
    assert set(_entities(client.request(_describe()))) == {(("user", "ok"),)}
    for components, code in [
        ((("user", 0, "a"), ("user", 0, "b")), ErrorCode.invalid_request),
        ((("group", 0, "a"),), ErrorCode.unsupported_version),
        ((("ip", 2, None), ("user", 2, None)), ErrorCode.invalid_request),
    ]:
        resp = client.request(_describe(*components))
        assert resp.error_code == code and resp.entries is None
    assert _entities(client.request(_describe(("ip", 2, None)))) == {}


def test_refused_without_configs_permissions(tmp_path: Path) -> None:
    # Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster; ANONYMOUS has no ACL, nothing is open
    overrides = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b, WireClient(b.bootstrap) as c:
        d = c.request(_describe())
        assert d.error_code == ErrorCode.cluster_authorization_failed and d.entries is None
        a = c.request(_alter(({"user": "x"}, {"producer_byte_rate": 1.0})))
        assert a.entries[0].error_code == ErrorCode.cluster_authorization_failed
        assert b.server.broker.quotas.entities() == {}


def test_quota_file_round_trip(tmp_path: Path) -> None:
    configs = {QuotaEntity("<default>", None): {"producer_byte_rate": 1.0},  # a user literally so named
               QuotaEntity(DEFAULT, "c/1"): {"request_percentage": 12.5},
               QuotaEntity(None, DEFAULT): {"consumer_byte_rate": 3.0}}
    f = QuotaFile(tmp_path / "quotas.json")
    assert f.load() == {}
    f.save(configs)
    assert f.load() == configs
    assert parse_path("/config/users/%3Cdefault%3E") == QuotaEntity("<default>", None)
    assert parse_path("/config/clients/a%20b%2A%7E") == QuotaEntity(None, "a b*~")
    with pytest.raises(ValueError):
        parse_path("/config/topics/t")


def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path) as b, WireClient(b.bootstrap) as c:
        r = c.request(_alter(({"user": "alice", "client-id": None}, {"producer_byte_rate": 512.0})))
        assert r.entries[0].error_code == ErrorCode.none
    with EmbeddedBroker(data_dir=tmp_path) as b, WireClient(b.bootstrap) as c:
        assert _entities(c.request(_describe())) == {
            (("user", "alice"), ("client-id", None)): {"producer_byte_rate": 512.0}}
        assert b.server.broker.quotas.quota("producer_byte_rate", "User:alice", "any") == 512.0
