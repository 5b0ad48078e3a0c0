"""The tools a Kafka user reaches for, against a real broker: cluster info (rpk cluster info +
kafka-broker-api-versions.sh), topics describe --offsets (kafka-get-offsets.sh), delete-records
(kafka-delete-records.sh), configs alter (kafka-configs.sh --alter) and dump-log (kafka-dump-log.sh)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from kaflite.cli.cluster_cmd import api_versions
from kaflite.cli.topics import split_config_list
from kaflite.server.embedded import EmbeddedBroker


def _produce(bootstrap: str, topic: str, n: int, partition: int = 0, pad: int = 0, **config: object) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **config})
    for i in range(n):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode() + b"z" * pad, partition=partition)
    assert producer.flush(20) == 0


def test_cluster_info(cli, cli_bootstrap: str) -> None:
    result = cli("cluster", "info", "--bootstrap-server", cli_bootstrap)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    admin = AdminClient({"bootstrap.servers": cli_bootstrap})  # kept: the future needs its client alive
    md = admin.describe_cluster(request_timeout=10).result(10)
    assert lines[:3] == ["CLUSTER", "=======", md.cluster_id]
    assert lines[4:6] == ["BROKERS", "======="]
    assert lines[6].split() == ["ID", "HOST", "PORT", "RACK"]
    host, port = cli_bootstrap.rsplit(":", 1)
    assert lines[7].split() == [f"{md.controller.id}*", host, port, "-"]  # * = the controller
    assert f"CONTROLLER: {md.controller.id}" in lines
    block = lines[lines.index(f"{cli_bootstrap} (id: {md.controller.id} rack: null) -> (") + 1 :]
    entries = dict(re.fullmatch(r"\t(\w+)\((\d+)\): (\d+ to \d+) \[.*\],?", ln).group(1, 3)  # type: ignore[union-attr]
                   for ln in block[: block.index(")")])
    # the table is the broker's own ApiVersions answer
    served = {r.api_key: r for r in api_versions(host, int(port))}
    assert entries["ApiVersions"] == f"{served[18].min_version} to {served[18].max_version}"
    assert entries["Produce"] == f"{served[0].min_version} to {served[0].max_version}"
    assert len(entries) == len(served)
    short = cli("cluster", "info", "--no-api-versions", "-b", cli_bootstrap)
    assert short.exit_code == 0 and "->" not in short.output


def test_topics_describe_offsets_and_delete_records(cli, cli_bootstrap: str, topic_name: str, tmp_path: Path) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    assert cli("topics", "create", topic_name, "-p", "2", *b).exit_code == 0
    _produce(cli_bootstrap, topic_name, 5, partition=0)
    _produce(cli_bootstrap, topic_name, 2, partition=1)

    def offsets() -> list[list[str]]:
        result = cli("topics", "describe", "--topic", topic_name, "--offsets", *b)
        assert result.exit_code == 0, result.output
        return [ln.split() for ln in result.output.splitlines()]

    assert offsets() == [
        ["TOPIC", "PARTITION", "EARLIEST", "LATEST", "HIGH-WATERMARK"],
        [topic_name, "0", "0", "5", "5"],
        [topic_name, "1", "0", "2", "2"],
    ]
    simple = cli("delete-records", "--topic", topic_name, "--partition", "0", "--offset", "3", *b)
    assert simple.exit_code == 0, simple.output
    assert simple.output.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {topic_name}-0\tlow_watermark: 3",
    ]
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 1, "offset": -1}], "version": 1}))
    from_file = cli("delete-records", "--offset-json-file", str(spec), *b)
    assert from_file.exit_code == 0, from_file.output
    assert f"partition: {topic_name}-1\tlow_watermark: 2" in from_file.output  # -1 = the high watermark
    assert offsets()[1:] == [[topic_name, "0", "3", "5", "5"], [topic_name, "1", "2", "2", "2"]]
    as_json = cli("topics", "describe", topic_name, "--offsets", "--json", *b)
    assert json.loads(as_json.output.splitlines()[0]) == {
        "topic": topic_name, "partition": 0, "earliest": 3, "latest": 5, "high_watermark": 5}

    beyond = cli("delete-records", "--topic", topic_name, "--partition", "0", "--offset", "99", *b)
    assert beyond.exit_code == 1
    assert f"partition: {topic_name}-0\terror: " in beyond.stdout and "OFFSET_OUT_OF_RANGE" in beyond.stdout
    assert beyond.stderr.strip() == "error: deleting records failed for 1 of 1 partition(s)"
    missing = cli("delete-records", "--topic", topic_name, "--partition", "7", "--offset", "0", *b)
    assert missing.exit_code == 1 and "has partitions 0..1" in missing.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ('{"partitions": []}', 'expected {"partitions": [{"topic": T'),
        ('{"partitions": [{"topic": "t", "partition": 0, "offset": -2}]}', "an offset >= -1"),
        ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}], "version": 2}', "allowed: 1"),
    ],
)
def test_delete_records_bad_json_is_a_usage_error(cli, cli_bootstrap: str, tmp_path: Path, content: str,
                                                  message: str) -> None:
    spec = tmp_path / "d.json"
    spec.write_text(content)
    result = cli("delete-records", "--offset-json-file", str(spec), "-b", cli_bootstrap)
    assert result.exit_code == 2 and message in result.output
    partial = cli("delete-records", "--topic", "t", "-b", cli_bootstrap)
    assert partial.exit_code == 2 and "missing: --partition, --offset" in partial.output


def test_split_config_list() -> None:
    assert split_config_list("a=1,b=[x,y],c=", "--add-config") == {"a": "1", "b": "x,y", "c": ""}


def test_configs_alter(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    assert cli("topics", "create", topic_name, *b).exit_code == 0
    added = cli("configs", "alter", "--entity-type", "topics", "--entity-name", topic_name,
                "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete]", *b)
    assert added.exit_code == 0, added.output
    assert added.output.strip() == f"Completed updating config for topic {topic_name}."
    admin = AdminClient({"bootstrap.servers": cli_bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic_name)

    def configs() -> dict[str, str]:
        entries = admin.describe_configs([resource])[resource].result(10)
        return {k: e.value for k, e in entries.items() if not e.is_default}

    assert configs()["retention.ms"] == "5000" and configs()["cleanup.policy"] == "compact,delete"
    deleted = cli("configs", "alter", "--topic", topic_name, "--delete-config", "retention.ms", *b)
    assert deleted.exit_code == 0, deleted.output
    assert "retention.ms" not in configs() and configs()["cleanup.policy"] == "compact,delete"
    described = cli("configs", "describe", "--entity-type", "topics", "--entity-name", topic_name, *b)
    assert described.output.splitlines()[0] == f"Dynamic configs for topic {topic_name} are:"

    bad_value = cli("configs", "alter", "--topic", topic_name, "--add-config", "retention.ms=soon", *b)
    assert bad_value.exit_code == 1 and "retention.ms" in bad_value.output
    assert len(bad_value.output.strip().splitlines()) == 1
    broker = cli("configs", "alter", "--entity-type", "brokers", "--entity-name", "0",
                 "--add-config", "log.dirs=/elsewhere", *b)
    assert broker.exit_code == 1 and broker.output.startswith("error: altering the configuration of broker 0: ")
    assert "Cannot update these configs dynamically: Set(log.dirs)" in broker.output
    # a dynamic key (KIP-226) is accepted, and removed again (its value here is the default's: no effect)
    dynamic = cli("configs", "alter", "--entity-type", "brokers", "--entity-name", "0",
                  "--add-config", "log.cleaner.backoff.ms=15000", *b)
    assert dynamic.exit_code == 0, dynamic.output
    assert dynamic.output.strip() == "Completed updating config for broker 0."
    removed = cli("configs", "alter", "--entity-type", "brokers", "--entity-name", "0",
                  "--delete-config", "log.cleaner.backoff.ms", *b)
    assert removed.exit_code == 0, removed.output
    for args, message in [
        ([], "nothing to change"),
        (["--add-config", "novalue"], "expected KEY=VALUE"),
        (["--add-config", "a=1", "--delete-config", "a"], "both added and deleted"),
    ]:
        usage = cli("configs", "alter", "--topic", topic_name, *args, *b)
        assert usage.exit_code == 2 and message in usage.output, usage.output
    kind = cli("configs", "alter", "--entity-type", "groups", "--entity-name", "g", "--add-config", "a=1", *b)
    assert kind.exit_code == 2 and "expected topics or brokers" in kind.output


def test_dump_log(cli, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data_dir=data) as broker:
        b = ["-b", broker.bootstrap]
        created = cli("topics", "create", "dumped", "-p", "1", "--config", "index.interval.bytes=1",
                      "--config", "segment.bytes=1500", *b)
        assert created.exit_code == 0, created.output
        for i in range(3):  # one batch each, so the index has entries
            # librdkafka sends a batch uncompressed unless compressing makes it smaller: pad the gzip ones
            _produce(broker.bootstrap, "dumped", 2, partition=0, pad=300 if i else 0,
                     **{"enable.idempotence": True, "compression.type": "gzip" if i else "none"})
        plain = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(30):  # one batch each (flushed one by one): enough to roll a 1500-byte segment
            plain.produce("dumped", value=f"more-{i}".encode(), partition=0)
            assert plain.flush(20) == 0
    files = sorted((data / "dumped-0").glob("*.log"))
    assert len(files) >= 2
    first = files[0]
    result = cli("dump-log", str(first), str(first.with_suffix(".index")), str(first.with_suffix(".timeindex")),
                 "--print-data-log")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [f"Dumping {first}", "Log starting offset: 0"]
    batches = [ln for ln in lines if ln.startswith("baseOffset:")]
    fields = [dict(re.findall(r"(\w+): (\S+)", ln)) for ln in batches]
    assert [(f["baseOffset"], f["lastOffset"], f["count"]) for f in fields[:3]] == [
        ("0", "1", "2"), ("2", "3", "2"), ("4", "5", "2")]
    assert [f["compresscodec"] for f in fields[:3]] == ["none", "gzip", "gzip"]
    assert all(f["isvalid"] == "true" and f["magic"] == "2" for f in fields)
    assert int(fields[0]["producerId"]) >= 0 and fields[0]["producerEpoch"] == "0"
    assert (fields[0]["baseSequence"], fields[0]["lastSequence"]) == ("0", "1")
    assert fields[0]["isTransactional"] == "false" and fields[0]["position"] == "0"
    assert int(fields[1]["position"]) == int(fields[0]["size"])
    records = [ln for ln in lines if ln.startswith("| offset:")]
    assert records[0].startswith("| offset: 0 CreateTime: ") and records[0].endswith(
        "keySize: 2 valueSize: 2 sequence: 0 headerKeys: [] key: k0 payload: v0")
    assert records[3].startswith("| offset: 3 ") and records[3].endswith("key: k1 payload: v1" + "z" * 300)  # gunzipped
    index = lines[lines.index(f"Dumping {first.with_suffix('.index')}") + 1:
                  lines.index(f"Dumping {first.with_suffix('.timeindex')}")]
    assert index and all(re.fullmatch(r"offset: \d+ position: \d+", ln) for ln in index)
    positions = {f["position"] for f in fields}
    assert all(ln.split()[-1] in positions for ln in index)  # each entry points at a batch start
    timeindex = lines[lines.index(f"Dumping {first.with_suffix('.timeindex')}") + 1:]
    assert timeindex and all(re.fullmatch(r"timestamp: \d+ offset: \d+", ln) for ln in timeindex)

    snapshots = sorted((data / "dumped-0").glob("*.snapshot"))  # written at the clean shutdown
    assert snapshots
    state = cli("dump-log", str(snapshots[-1]))
    assert state.exit_code == 0, state.output
    producers = [dict(re.findall(r"(\w+): (\S+)", ln)) for ln in state.output.splitlines()[1:]]
    # three idempotent producers (one per _produce), each with its last batch: sequences 0-1
    assert [p["producerId"] for p in producers] == [f["producerId"] for f in fields[:3]]
    assert [(p["firstSequence"], p["lastSequence"], p["lastOffset"]) for p in producers] == [
        ("0", "1", "1"), ("0", "1", "3"), ("0", "1", "5")]

    # a flipped byte inside a batch: isvalid false; a cut batch at the end: reported, not a traceback
    broken = tmp_path / "00000000000000000000.log"
    raw = bytearray(first.read_bytes())
    raw[70] ^= 0xFF
    broken.write_bytes(bytes(raw[: int(fields[2]["position"]) + 30]))
    damaged = cli("dump-log", str(broken))
    assert damaged.exit_code == 0, damaged.output
    out = damaged.output.splitlines()
    assert "isvalid: false" in out[2] and "isvalid: true" in out[3]
    assert out[-1] == "Found 30 invalid bytes at the end of the file"


def test_dump_log_errors(cli, tmp_path: Path) -> None:
    wrong = cli("dump-log", str(tmp_path / "x.txt"))
    assert wrong.exit_code == 2 and "allowed: *.log, *.index, *.timeindex, *.snapshot" in wrong.output
    missing = cli("dump-log", str(tmp_path / "00000000000000000000.log"))
    assert missing.exit_code == 1 and "No such file or directory" in missing.output
