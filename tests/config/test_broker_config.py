"""BrokerConfig: Kafka's server.properties keys, defaults, precedence, validation and error messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaflite.server.config import (
    BROKER_CONFIGS,
    DEV_PROFILE,
    DEV_PROFILE_WARNING,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigErrors,
    Listener,
    UnknownConfigKey,
    parse_listeners,
)
from kaflite.server.config.definitions import kafka_release

# Kafka's documented defaults (kafka.server.KafkaConfig / ServerLogConfigs), written out independently of
# the table so that a typo in the table fails here.
KAFKA_DEFAULTS = {
    "num.partitions": 1,
    "default.replication.factor": 1,
    "auto.create.topics.enable": True,
    "delete.topic.enable": True,
    "log.retention.hours": 168,
    "log.retention.minutes": None,
    "log.retention.ms": None,
    "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300000,
    "log.segment.bytes": 1073741824,
    "log.roll.hours": 168,
    "log.index.interval.bytes": 4096,
    "log.index.size.max.bytes": 10485760,
    "log.flush.interval.messages": 9223372036854775807,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": 9223372036854775807,
    "log.cleanup.policy": ["delete"],
    "log.cleaner.delete.retention.ms": 86400000,
    "log.message.timestamp.type": "CreateTime",
    "message.max.bytes": 1048588,
    "offsets.topic.num.partitions": 50,
    "offsets.retention.minutes": 10080,
    "offsets.commit.timeout.ms": 5000,
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.max.size": 2147483647,
    "socket.request.max.bytes": 104857600,
    "compression.type": "producer",
    "min.insync.replicas": 1,
    "advertised.listeners": None,
    "zookeeper.connect": None,
}


def test_defaults_are_kafkas() -> None:
    cfg = BrokerConfig.load()
    for key, expected in KAFKA_DEFAULTS.items():
        assert cfg[key] == expected, key
        assert cfg.source(key) == "default"


def test_kaflite_specific_defaults() -> None:
    cfg = BrokerConfig.load()
    assert cfg["broker.id"] == 0 and cfg.broker_id == 0
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.advertised_listeners is None
    assert cfg.log_dirs == [Path("./kaflite-data")]
    assert cfg.retention_ms == 168 * 3600 * 1000
    # Kafka's 3 (what a cluster creates __consumer_offsets with); a single node ignores it (1 replica)
    assert cfg["offsets.topic.replication.factor"] == 3
    assert cfg["transaction.state.log.replication.factor"] == 3


def test_items_cover_every_key_typed() -> None:
    cfg = BrokerConfig.load()
    items = dict(cfg.items())
    assert set(items) == set(BROKER_CONFIGS)
    assert isinstance(items["num.partitions"], int) and isinstance(items["auto.create.topics.enable"], bool)


def test_file_then_overrides_precedence(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nlog.retention.hours=1\nauto.create.topics.enable=false\n")
    cfg = BrokerConfig.load(props, overrides={"num.partitions": "6"})
    assert cfg["num.partitions"] == 6 and cfg.source("num.partitions") == "override"
    assert cfg["log.retention.hours"] == 1 and cfg.source("log.retention.hours") == "file"
    assert cfg["auto.create.topics.enable"] is False
    assert cfg.retention_ms == 3_600_000
    assert cfg.source("message.max.bytes") == "default"


def test_dev_profile_below_file_and_overrides(tmp_path: Path) -> None:
    cfg = BrokerConfig.load(dev=True)
    assert 0 < cfg["group.initial.rebalance.delay.ms"] < 3000
    assert cfg.source("group.initial.rebalance.delay.ms") == "dev-profile"
    assert cfg["log.segment.bytes"] < 1073741824
    assert set(DEV_PROFILE) <= set(BROKER_CONFIGS)
    assert "durab" in DEV_PROFILE_WARNING.lower()
    props = tmp_path / "p.properties"
    props.write_text("group.initial.rebalance.delay.ms=250\n")
    cfg2 = BrokerConfig.load(props, dev=True)
    assert (
        cfg2["group.initial.rebalance.delay.ms"] == 250
        and cfg2.source("group.initial.rebalance.delay.ms") == "file"
    )


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert BrokerConfig.load(overrides={"log.retention.minutes": "5"}).retention_ms == 300_000
    cfg = BrokerConfig.load(overrides={"log.retention.minutes": "5", "log.retention.ms": "1234"})
    assert cfg.retention_ms == 1234
    assert BrokerConfig.load(overrides={"log.retention.hours": "-1"}).retention_ms == -1


def test_roll_and_flush_derived() -> None:
    cfg = BrokerConfig.load(overrides={"log.roll.hours": "2"})
    assert cfg.roll_ms == 7_200_000
    assert BrokerConfig.load(overrides={"log.roll.ms": "10", "log.roll.hours": "2"}).roll_ms == 10
    assert BrokerConfig.load().flush_interval_ms == 2**63 - 1
    assert BrokerConfig.load(overrides={"log.flush.interval.ms": "50"}).flush_interval_ms == 50


def test_log_dirs_wins_over_log_dir(tmp_path: Path) -> None:
    cfg = BrokerConfig.load(
        overrides={"log.dir": str(tmp_path / "a"), "log.dirs": f"{tmp_path}/b, {tmp_path}/c"}
    )
    assert cfg.log_dirs == [tmp_path / "b", tmp_path / "c"] and cfg.log_dir == tmp_path / "b"
    assert BrokerConfig.load(overrides={"log.dir": str(tmp_path)}).log_dir == tmp_path


def test_typed_overrides_accepted() -> None:
    cfg = BrokerConfig.load(
        overrides={"num.partitions": 4, "auto.create.topics.enable": False, "log.dirs": Path("/tmp/x")}
    )
    assert cfg["num.partitions"] == 4 and cfg["auto.create.topics.enable"] is False
    assert cfg.log_dir == Path("/tmp/x")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("log.retention.hours", "abc", "log.retention.hours: expected an int >= -1, got 'abc'"),
        ("log.retention.ms", "-2", "log.retention.ms: expected a long >= -1, got '-2'"),
        ("num.partitions", "0", "num.partitions: expected an int >= 1, got '0'"),
        ("num.partitions", "2147483648", "num.partitions: expected an int >= 1, got '2147483648'"),
        (
            "auto.create.topics.enable",
            "yes",
            "auto.create.topics.enable: expected a boolean (true or false), got 'yes'",
        ),
        (
            "log.message.timestamp.type",
            "createtime",
            "log.message.timestamp.type: expected one of CreateTime, LogAppendTime, got 'createtime'",
        ),
        (
            "log.cleanup.policy",
            "delete,zap",
            "log.cleanup.policy: expected a comma-separated list of delete, compact, got 'delete,zap'",
        ),
        ("compression.type", "brotli", "compression.type: expected one of uncompressed, zstd"),
        (
            "log.cleaner.min.cleanable.ratio",
            "1.5",
            "log.cleaner.min.cleanable.ratio: expected a double between 0 and 1, got '1.5'",
        ),
        ("listeners", "localhost:9092", "listeners: expected NAME://host:port"),
        ("listeners", "PLAINTEXT://:70000", "listeners: port must be between 0 and 65535"),
    ],
)
def test_bad_values_name_key_and_allowed(key: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(overrides={key: value})
    assert str(err.value).startswith(expected)
    assert err.value.key == key


def test_unknown_key_lists_close_matches() -> None:
    with pytest.raises(UnknownConfigKey) as err:
        BrokerConfig.load(overrides={"num.partition": "3"})
    assert str(err.value).startswith(
        "num.partition: unknown broker configuration key; did you mean num.partitions"
    )
    with pytest.raises(ConfigError) as err2:
        BrokerConfig.load(overrides={"retention.hours": "3"})
    assert "log.retention.hours" in str(err2.value)
    with pytest.raises(ConfigError) as err3:
        BrokerConfig.load(overrides={"zzzzzz": "3"})
    assert "zzzzzz: unknown broker configuration key" in str(err3.value)


def test_getitem_and_get_of_an_unknown_key_raise_keyerror() -> None:
    # issue 16: a misspelled key fails in every code path, `get` included (no silent default)
    cfg = BrokerConfig.load()
    with pytest.raises(KeyError):
        cfg["nope.nope"]
    with pytest.raises(KeyError):
        cfg.get("nope.nope", 7)
    assert cfg.get("broker.rack", 7) == 7  # a known key left unset
    assert "num.partitions" in cfg and "nope" not in cfg


def test_file_errors_carry_file_and_line(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# comment\nnum.partitions=3\nlog.segment.bytes=big\n")
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(props)
    assert str(err.value) == f"{props}:3: log.segment.bytes: expected an int >= 14, got 'big'"
    with pytest.raises(ConfigError) as err2:
        BrokerConfig.load(tmp_path / "missing.properties")
    assert "cannot read configuration file" in str(err2.value)


def test_every_bad_key_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    """Issue 32: a file with several typos names them all, each with its line, the key and what is allowed
    (only the first was reported, so a user fixed them one start at a time). One error alone keeps its
    one-line form and type (test_file_errors_carry_file_and_line, test_unknown_key_lists_close_matches)."""
    props = tmp_path / "server.properties"
    props.write_text("num.partition=3\nlog.segment.bytes=big\nlog.retention.hours=24\nauto.create.topics=false\n")
    with pytest.raises(ConfigErrors) as err:
        BrokerConfig.load(props, overrides={"log.cleaner.min.cleanable.ratio": "1.5"})
    assert str(err.value).splitlines() == [
        "4 configuration errors:",
        f"  {props}:1: num.partition: unknown broker configuration key; did you mean num.partitions, "
        "offsets.topic.num.partitions?",
        f"  {props}:2: log.segment.bytes: expected an int >= 14, got 'big'",
        f"  {props}:4: auto.create.topics: unknown broker configuration key; did you mean "
        "auto.create.topics.enable?",
        "  log.cleaner.min.cleanable.ratio: expected a double between 0 and 1, got '1.5'",
    ]
    assert [e.key for e in err.value.errors] == ["num.partition", "log.segment.bytes", "auto.create.topics",
                                                 "log.cleaner.min.cleanable.ratio"]
    assert isinstance(err.value.errors[0], UnknownConfigKey) and err.value.key == "num.partition"


def test_cross_key_rules() -> None:
    with pytest.raises(ConfigError, match="group.min.session.timeout.ms: must be <="):
        BrokerConfig.load(
            overrides={"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"}
        )
    with pytest.raises(ConfigError, match="node.id: must equal broker.id"):
        BrokerConfig.load(overrides={"node.id": "2", "broker.id": "3"})
    assert BrokerConfig.load(overrides={"node.id": "2"}).broker_id == 2
    with pytest.raises(ConfigError, match="advertised.listeners: listener EXTERNAL is not in listeners"):
        BrokerConfig.load(overrides={"advertised.listeners": "EXTERNAL://h:1"})
    with pytest.raises(ConfigError, match="listener.security.protocol.map"):
        BrokerConfig.load(overrides={"listeners": "FOO://:1"})


def test_listeners_parsing() -> None:
    assert parse_listeners("PLAINTEXT://:9092, CONTROLLER://localhost:9093") == [
        Listener("PLAINTEXT", "", 9092),
        Listener("CONTROLLER", "localhost", 9093),
    ]
    assert parse_listeners("PLAINTEXT://[::1]:0") == [Listener("PLAINTEXT", "::1", 0)]
    assert str(Listener("PLAINTEXT", "::1", 5)) == "PLAINTEXT://[::1]:5"
    with pytest.raises(ConfigError, match="appears more than once"):
        parse_listeners("PLAINTEXT://:1,PLAINTEXT://:2")
    cfg = BrokerConfig.load(overrides={"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert cfg.listeners[0].port == 0


def test_describe_broker_entries() -> None:
    cfg = BrokerConfig.load(overrides={"num.partitions": "3"})
    entries = {e.name: e for e in cfg.describe()}
    assert set(entries) == set(BROKER_CONFIGS)
    assert entries["num.partitions"].value == "3"
    assert entries["num.partitions"].source_code == SOURCE_STATIC_BROKER_CONFIG
    assert entries["message.max.bytes"].value == "1048588" and entries["message.max.bytes"].is_default
    assert entries["auto.create.topics.enable"].value == "true"
    assert entries["log.retention.ms"].value is None
    assert [e.name for e in cfg.describe(["num.partitions"])] == ["num.partitions"]
    with pytest.raises(ConfigError):
        cfg.describe(["num.partitionz"])


def test_describe_topic_entries_and_synonyms() -> None:
    cfg = BrokerConfig.load(overrides={"log.retention.minutes": "10"})
    entries = {e.name: e for e in cfg.describe_topic({"segment.bytes": "2048"})}
    assert set(entries) == set(TOPIC_CONFIGS)
    assert (
        entries["segment.bytes"].value == "2048"
        and entries["segment.bytes"].source_code == SOURCE_DYNAMIC_TOPIC_CONFIG
    )
    assert entries["segment.bytes"].synonyms[0] == ("segment.bytes", "2048", SOURCE_DYNAMIC_TOPIC_CONFIG)
    assert entries["retention.ms"].value == "600000"
    assert entries["retention.ms"].source_code == SOURCE_STATIC_BROKER_CONFIG
    assert [s[0] for s in entries["retention.ms"].synonyms] == [
        "log.retention.minutes",
        "log.retention.hours",
    ]
    assert (
        entries["cleanup.policy"].value == "delete"
        and entries["cleanup.policy"].source_code == SOURCE_DEFAULT_CONFIG
    )
    assert entries["max.message.bytes"].value == "1048588"


def test_to_properties_round_trip_with_awkward_values(tmp_path: Path) -> None:
    cfg = BrokerConfig.load(
        overrides={
            "log.dir": " C:\\data\tdir",
            "broker.rack": "rack #1 = a:b",
            "log.cleanup.policy": "delete,compact",
        },
        dev=True,
    )
    props = tmp_path / "out.properties"
    props.write_text(cfg.to_properties())
    again = BrokerConfig.load(props)
    assert dict(again.items()) == dict(cfg.items())
    assert (
        again["log.dir"] == "C:\\data\tdir"
    )  # a backslash and a tab survive; surrounding blanks are trimmed
    assert again["broker.rack"] == "rack #1 = a:b"
    assert again["log.retention.ms"] is None and again.source("log.retention.ms") == "default"


@pytest.mark.parametrize(
    "value, release",
    [("0.10.0.0", "0.10.0"), ("0.10.0", "0.10.0"), ("0.10.0-IV1", "0.10.0"), ("0.8.2.2", "0.8.2"),
     ("2.8", "2.8"), ("2.8.1", "2.8"), ("2.8-IV1", "2.8"), ("2.8.1-IV0", "2.8"), ("3.0-IV1", "3.0"),
     ("3.9", "3.9"), ("1.0.0", "1.0"),
     ("0.10", None), ("4.0", None), ("banana", None), ("", None), ("2.8-beta", None), ("0.10.3", None)],
)
def test_version_strings_are_read_as_kafkas_metadata_version(value: str, release: str | None) -> None:
    # Kafka's MetadataVersion.fromVersionString: three parts of a 0.x version, two of a later one
    assert kafka_release(value) == release


def test_inter_broker_protocol_version_takes_kafkas_spellings_and_names_the_key_otherwise() -> None:
    assert BrokerConfig.load(overrides={"inter.broker.protocol.version": "3.7"})
    assert BrokerConfig.load(overrides={"inter.broker.protocol.version": "0.10.2.1"})
    with pytest.raises(ConfigError, match="inter.broker.protocol.version"):
        BrokerConfig.load(overrides={"inter.broker.protocol.version": "9.1"})
