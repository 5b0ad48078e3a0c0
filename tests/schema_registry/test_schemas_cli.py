"""`kaflite schemas list | get | register | check | delete | config` against a running registry (a
RegistryService over a kaflite broker): Confluent-style output, and refusals naming the registry's error
code and message with exit 1 (bad usage exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kaflite.cli.main import app

V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
V2 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                               {"name": "qty", "type": "int", "default": 1}]})
BAD = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                                {"name": "price", "type": "double"}]})


@pytest.fixture(scope="module")
def run(registry: Any) -> Any:
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
        result = runner.invoke(app, ["schemas", *args], env={"KAFLITE_SCHEMA_REGISTRY": registry.url, **(env or {})})
        return result.exit_code, result.output
    return invoke


def test_register_get_list_and_reuse_an_id(run: Any, tmp_path: Path) -> None:
    schema_file = tmp_path / "order.avsc"
    schema_file.write_text(V1)
    code, out = run("register", "orders-value", "--schema", str(schema_file))
    assert code == 0 and out.startswith("Successfully registered schema with ID: ")
    first_id = int(out.split("ID: ")[1].split()[0])
    assert out.strip().endswith("(subject orders-value, version 1)")
    code, out = run("register", "copy-value", "--schema-string", V1)
    assert code == 0 and f"ID: {first_id} " in out  # the same schema keeps its id across subjects
    code, out = run("list")
    assert code == 0 and out.split() == ["copy-value", "orders-value"]
    code, out = run("list", "--prefix", "ord")
    assert out.split() == ["orders-value"]
    code, out = run("get", "orders-value")
    got = json.loads(out)
    assert code == 0 and got["version"] == 1 and got["id"] == first_id and json.loads(got["schema"]) == json.loads(V1)
    code, out = run("get", "--id", str(first_id))
    assert code == 0 and json.loads(out)["id"] == first_id
    code, out = run("get", "orders-value", "--versions")
    assert json.loads(out) == [1]


def test_check_and_config(run: Any) -> None:
    run("register", "checked-value", "--schema-string", V1)
    code, out = run("check", "checked-value", "--schema-string", V2)
    assert code == 0 and out.strip() == "Schema is compatible with subject checked-value."
    code, out = run("check", "checked-value", "--schema-string", BAD)
    assert code == 1 and out.startswith("Schema is incompatible with subject checked-value:")
    assert "/fields/price" in out
    code, out = run("config", "checked-value")
    assert code == 0 and out.strip() == "Compatibility level of subject checked-value: BACKWARD"
    code, out = run("config", "checked-value", "--set", "none")
    assert code == 0 and out.strip() == "Compatibility level of subject checked-value set to NONE."
    code, out = run("register", "checked-value", "--schema-string", BAD)
    assert code == 0 and out.strip().endswith("version 2)")
    code, out = run("config", "checked-value", "--delete")
    assert code == 0 and "(NONE) deleted" in out
    code, out = run("config")
    assert code == 0 and out.strip() == "Compatibility level of the global level: BACKWARD"


def test_json_and_protobuf_types(run: Any) -> None:
    proto = 'syntax = "proto3";\nmessage M { int64 a = 1; }'
    code, out = run("register", "proto-value", "--schema-string", proto, "--type", "protobuf")
    assert code == 0
    code, out = run("check", "proto-value", "--type", "PROTOBUF",
                    "--schema-string", 'syntax = "proto3";\nmessage M { string a = 1; }')
    assert code == 1 and "FIELD_SCALAR_KIND_CHANGED" in out
    assert json.loads(run("get", "proto-value")[1])["schemaType"] == "PROTOBUF"


def test_delete_soft_then_permanent(run: Any) -> None:
    run("register", "gone-value", "--schema-string", V1)
    code, out = run("delete", "gone-value", "--version", "1", "--permanent")
    assert code == 1 and "40407" in out  # not soft-deleted first, as Confluent's registry refuses
    code, out = run("delete", "gone-value")
    assert code == 0 and out.strip() == "Deleted subject gone-value, versions 1."
    code, out = run("delete", "gone-value", "--permanent")
    assert code == 0 and out.strip() == "Permanently deleted subject gone-value, versions 1."


def test_errors_name_the_code_and_message(run: Any) -> None:
    code, out = run("get", "nowhere-value")
    assert code == 1 and "error: 40401 Subject 'nowhere-value' not found." in out
    code, out = run("register", "x-value", "--schema-string", "{not json")
    assert code == 1 and "error: 42201 " in out
    code, out = run("config", "x-value", "--set", "SIDEWAYS")
    assert code == 1 and "error: 42203 " in out
    code, out = run("register", "x-value")
    assert code == 2 and "exactly one of --schema FILE or --schema-string" in out
    code, out = run("register", "x-value", "--schema-string", V1, "--type", "XML")
    assert code == 2 and "--type must be one of AVRO, JSON, PROTOBUF" in out
    code, out = run("list", "--registry-url", "http://127.0.0.1:9")
    assert code == 1 and "cannot reach the schema registry at http://127.0.0.1:9" in out
