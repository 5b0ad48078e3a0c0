"""The REST API and the state behind it, without sockets or a broker (kaflite.schema_registry.api/model):
answers and error codes as Confluent's, and a state replayed from the records equal to the live one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kaflite.schema_registry.api import MemoryLog, Registry
from kaflite.schema_registry.model import State


def avro(*fields: tuple[str, Any, Any], name: str = "R") -> str:
    out = []
    for fname, ftype, default in fields:
        field = {"name": fname, "type": ftype}
        if default is not ...:
            field["default"] = default
        out.append(field)
    return json.dumps({"type": "record", "name": name, "fields": out})


V1 = avro(("a", "int", ...))
V2 = avro(("a", "int", ...), ("b", "string", "x"))
BAD = avro(("a", "int", ...), ("c", "string", ...))  # a field without default: not BACKWARD


class Client:
    def __init__(self) -> None:
        self.state = State()
        self.log = MemoryLog(self.state)
        self.registry = Registry(self.state, self.log)

    def __call__(self, method: str, path: str, body: Any = None, **query: str) -> tuple[int, Any]:
        return self.registry.handle(method, path, {k: str(v).lower() if isinstance(v, bool) else str(v)
                                                   for k, v in query.items()}, body)

    def ok(self, method: str, path: str, body: Any = None, **query: str) -> Any:
        status, answer = self(method, path, body, **query)
        assert status == 200, answer
        return answer

    def error(self, method: str, path: str, body: Any = None, **query: str) -> tuple[int, int]:
        status, answer = self(method, path, body, **query)
        assert set(answer) == {"error_code", "message"}, answer
        return status, answer["error_code"]


@pytest.fixture
def sr() -> Client:
    return Client()


def test_register_and_read_back(sr: Client) -> None:
    first = sr.ok("POST", "/subjects/orders-value/versions", {"schema": V1})
    assert (first["id"], first["version"]) == (1, 1)
    assert sr.ok("POST", "/subjects/orders-value/versions", {"schema": V1})["id"] == 1  # same schema: no new version
    assert sr.ok("POST", "/subjects/orders-value/versions", {"schema": V2})["version"] == 2
    assert sr.ok("GET", "/subjects") == ["orders-value"]
    assert sr.ok("GET", "/subjects/orders-value/versions") == [1, 2]
    latest = sr.ok("GET", "/subjects/orders-value/versions/latest")
    assert latest == {"subject": "orders-value", "version": 2, "id": 2, "schema": json.dumps(json.loads(V2),
                                                                                             separators=(",", ":"))}
    assert sr.ok("GET", "/subjects/orders-value/versions/-1") == latest
    assert json.loads(sr.ok("GET", "/subjects/orders-value/versions/1/schema")) == json.loads(V1)
    assert json.loads(sr.ok("GET", "/schemas/ids/1")["schema"]) == json.loads(V1)
    assert json.loads(sr.ok("GET", "/schemas/ids/2/schema")) == json.loads(V2)
    assert sr.ok("GET", "/schemas/ids/2/versions") == [{"subject": "orders-value", "version": 2}]
    assert sr.ok("GET", "/schemas/types") == ["AVRO", "JSON", "PROTOBUF"]


def test_same_schema_in_another_subject_shares_its_id_and_whitespace_does_not_matter(sr: Client) -> None:
    sr.ok("POST", "/subjects/a/versions", {"schema": V1})
    spaced = json.dumps(json.loads(V1), indent=4)
    assert sr.ok("POST", "/subjects/b/versions", {"schema": spaced})["id"] == 1
    assert sr.ok("GET", "/schemas/ids/1/subjects") == ["a", "b"]
    assert sr.ok("POST", "/subjects/b", {"schema": spaced})["version"] == 1  # lookup


def test_errors_carry_confluent_codes(sr: Client) -> None:
    sr.ok("POST", "/subjects/s/versions", {"schema": V1})
    assert sr.error("GET", "/subjects/nope/versions") == (404, 40401)
    assert sr.error("GET", "/subjects/s/versions/7") == (404, 40402)
    assert sr.error("GET", "/schemas/ids/99") == (404, 40403)
    assert sr.error("POST", "/subjects/s", {"schema": V2}) == (404, 40403)
    assert sr.error("POST", "/subjects/nope", {"schema": V1}) == (404, 40401)
    assert sr.error("POST", "/subjects/s/versions", {"schema": "{not json"}) == (422, 42201)
    assert sr.error("POST", "/subjects/s/versions", {"schema": '{"type": "record", "name": "R"}'}) == (422, 42201)
    assert sr.error("POST", "/subjects/s/versions", {"schema": V1, "schemaType": "XML"}) == (422, 42201)
    assert sr.error("GET", "/subjects/s/versions/0") == (422, 42202)
    assert sr.error("GET", "/subjects/s/versions/first") == (422, 42202)
    assert sr.error("PUT", "/config", {"compatibility": "SIDEWAYS"}) == (422, 42203)
    assert sr.error("PUT", "/mode", {"mode": "FAST"}) == (422, 42204)
    assert sr.error("POST", "/subjects/s/versions", {"schema": BAD}) == (409, 409)
    assert sr.error("GET", "/nowhere") == (404, 404)
    assert sr.error("PATCH", "/subjects") == (405, 405)


def test_compatibility_levels_decide_registration(sr: Client) -> None:
    sr.ok("POST", "/subjects/s/versions", {"schema": V1})
    assert sr.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    assert sr.ok("POST", "/compatibility/subjects/s/versions/latest", {"schema": BAD}) == {"is_compatible": False}
    verbose = sr.ok("POST", "/compatibility/subjects/s/versions/latest", {"schema": BAD}, verbose=True)
    assert verbose["messages"] and "/fields/c" in verbose["messages"][0]
    assert sr.ok("PUT", "/config/s", {"compatibility": "forward"}) == {"compatibility": "FORWARD"}
    assert sr.ok("GET", "/config/s") == {"compatibilityLevel": "FORWARD"}
    assert sr.ok("POST", "/compatibility/subjects/s/versions", {"schema": BAD}) == {"is_compatible": True}
    assert sr.ok("POST", "/subjects/s/versions", {"schema": BAD})["version"] == 2
    assert sr.ok("DELETE", "/config/s") == {"compatibilityLevel": "FORWARD"}
    assert sr.error("GET", "/config/s") == (404, 40408)
    assert sr.ok("GET", "/config/s", defaultToGlobal=True) == {"compatibilityLevel": "BACKWARD"}
    sr.ok("PUT", "/config", {"compatibility": "NONE"})
    assert sr.ok("POST", "/subjects/s/versions", {"schema": '"string"'})["version"] == 3


def test_soft_and_permanent_deletes(sr: Client) -> None:
    sr.ok("POST", "/subjects/s/versions", {"schema": V1})
    sr.ok("POST", "/subjects/s/versions", {"schema": V2})
    assert sr.error("DELETE", "/subjects/s/versions/2", permanent=True) == (404, 40407)
    assert sr.ok("DELETE", "/subjects/s/versions/2") == 2
    assert sr.error("DELETE", "/subjects/s/versions/2") == (404, 40406)
    assert sr.ok("GET", "/subjects/s/versions") == [1]
    assert sr.ok("GET", "/subjects/s/versions", deleted=True) == [1, 2]
    assert sr.error("GET", "/subjects/s/versions/2") == (404, 40402)
    assert sr.ok("GET", "/subjects/s/versions/2", deleted=True)["id"] == 2
    assert sr.ok("GET", "/schemas/ids/2")  # a soft-deleted version's schema is still served by id
    assert sr.ok("DELETE", "/subjects/s/versions/2", permanent=True) == 2
    assert sr.error("GET", "/schemas/ids/2") == (404, 40403)
    assert sr.error("DELETE", "/subjects/s", permanent=True) == (404, 40405)
    assert sr.ok("DELETE", "/subjects/s") == [1]
    assert sr.error("DELETE", "/subjects/s") == (404, 40404)
    assert sr.ok("GET", "/subjects") == [] and sr.ok("GET", "/subjects", deleted=True) == ["s"]
    assert sr.ok("DELETE", "/subjects/s", permanent=True) == [1]
    assert sr.ok("GET", "/subjects", deleted=True) == []
    # ids are never reused while the history holds them: a new schema takes max id + 1
    assert sr.ok("POST", "/subjects/t/versions", {"schema": avro(("z", "long", ...))})["id"] == 3


def test_re_registering_a_soft_deleted_schema_makes_a_new_version_with_the_same_id(sr: Client) -> None:
    sr.ok("POST", "/subjects/s/versions", {"schema": V1})
    sr.ok("DELETE", "/subjects/s/versions/1")
    again = sr.ok("POST", "/subjects/s/versions", {"schema": V1})
    assert (again["id"], again["version"]) == (1, 2)


def test_references_are_stored_returned_and_protect_what_they_name(sr: Client) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "shop",
                          "fields": [{"name": "city", "type": "string"}]})
    sr.ok("POST", "/subjects/address/versions", {"schema": address})
    customer = json.dumps({"type": "record", "name": "Customer", "namespace": "shop",
                           "fields": [{"name": "home", "type": "shop.Address"}]})
    refs = [{"name": "shop.Address", "subject": "address", "version": 1}]
    assert sr.error("POST", "/subjects/customer/versions", {"schema": customer}) == (422, 42201)
    got = sr.ok("POST", "/subjects/customer/versions", {"schema": customer, "references": refs})
    assert sr.ok("GET", f"/schemas/ids/{got['id']}")["references"] == refs
    assert sr.ok("GET", "/subjects/customer/versions/1")["references"] == refs
    assert sr.ok("GET", "/subjects/address/versions/1/referencedby") == [got["id"]]
    assert sr.error("DELETE", "/subjects/address/versions/1") == (422, 42206)
    missing = [{"name": "shop.Address", "subject": "address", "version": 5}]
    assert sr.error("POST", "/subjects/c2/versions", {"schema": customer, "references": missing}) == (422, 42201)


def test_modes(sr: Client) -> None:
    assert sr.ok("GET", "/mode") == {"mode": "READWRITE"}
    sr.ok("POST", "/subjects/s/versions", {"schema": V1})
    assert sr.ok("PUT", "/mode", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert sr.error("POST", "/subjects/s/versions", {"schema": V2}) == (422, 42205)
    assert sr.error("DELETE", "/subjects/s") == (422, 42205)
    assert sr.ok("GET", "/subjects/s/versions/1")["id"] == 1  # reads still served
    assert sr.error("PUT", "/mode", {"mode": "IMPORT"}) == (422, 42205)  # not empty
    sr.ok("PUT", "/mode", {"mode": "IMPORT"}, force=True)
    imported = sr.ok("POST", "/subjects/imp/versions", {"schema": V2, "id": 100, "version": 7})
    assert (imported["id"], imported["version"]) == (100, 7)
    assert sr.error("POST", "/subjects/other/versions", {"schema": V1, "id": 100}) == (422, 42205)  # id taken
    sr.ok("PUT", "/mode", {"mode": "READWRITE"})
    assert sr.error("POST", "/subjects/s/versions", {"schema": V2, "id": 5}) == (422, 42205)
    assert sr.ok("POST", "/subjects/new/versions", {"schema": avro(("q", "int", ...))})["id"] == 101
    assert sr.error("GET", "/mode/s") == (404, 40409)
    sr.ok("PUT", "/mode/s", {"mode": "READONLY"})
    assert sr.error("POST", "/subjects/s/versions", {"schema": V2}) == (422, 42205)
    assert sr.ok("POST", "/subjects/t/versions", {"schema": V2})["version"] == 1
    assert sr.ok("DELETE", "/mode/s") == {"mode": "READONLY"}
    assert sr.ok("POST", "/subjects/s/versions", {"schema": V2})["version"] == 2


def test_json_and_protobuf_schemas_are_stored_with_their_type(sr: Client) -> None:
    js = sr.ok("POST", "/subjects/j/versions", {"schemaType": "JSON", "schema": '{"type": "object"}'})
    assert sr.ok("GET", f"/schemas/ids/{js['id']}") == {"schema": '{"type":"object"}', "schemaType": "JSON"}
    proto = 'syntax = "proto3";\nmessage M { int32 a = 1; }\n'
    pb = sr.ok("POST", "/subjects/p/versions", {"schemaType": "PROTOBUF", "schema": proto})
    assert sr.ok("GET", "/subjects/p/versions/1")["schemaType"] == "PROTOBUF"
    assert sr.ok("GET", f"/schemas/ids/{pb['id']}")["schema"] == proto.strip()
    assert sr.error("POST", "/subjects/j/versions", {"schemaType": "JSON", "schema": "[1]"}) == (422, 42201)


def test_records_use_confluent_keys_and_a_replay_rebuilds_the_same_state(sr: Client) -> None:
    sr.ok("POST", "/subjects/s/versions", {"schema": V1})
    sr.ok("PUT", "/config/s", {"compatibility": "FULL"})
    sr.ok("POST", "/subjects/s/versions", {"schema": V2})
    sr.ok("DELETE", "/subjects/s/versions/1")
    sr.ok("POST", "/subjects/t/versions", {"schema": V1})
    sr.ok("DELETE", "/subjects/t")
    sr.ok("PUT", "/mode", {"mode": "READONLY"})
    keys = [json.loads(k) for k, _ in sr.log.records]
    assert keys[0] == {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}
    assert sr.log.records[0][0] == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    assert keys[1] == {"keytype": "CONFIG", "subject": "s", "magic": 0}
    assert json.loads(sr.log.records[1][1] or b"") == {"compatibilityLevel": "FULL"}
    assert {"keytype": "DELETE_SUBJECT", "subject": "t", "magic": 0} in keys
    assert keys[-1] == {"keytype": "MODE", "subject": None, "magic": 0}
    value = json.loads(sr.log.records[0][1] or b"")
    assert value["subject"] == "s" and value["version"] == 1 and value["id"] == 1 and value["deleted"] is False
    replayed = State()
    for key, val in sr.log.records:
        replayed.apply(key, val)
    assert replayed == sr.state


def test_replay_skips_foreign_and_malformed_records_and_honours_tombstones() -> None:
    state = State()
    state.apply(b'{"keytype":"NOOP","magic":0}', None)
    state.apply(b"not json", b"{}")
    state.apply(b'{"keytype":"SOMETHING_NEW","magic":0}', b"{}")
    state.apply(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
                b'{"subject":"s","version":1,"id":4,"schema":"\\"int\\"","deleted":false}')
    state.apply(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"broken": true}')
    assert state.skipped == 3 and state.max_id == 4 and state.list_versions("s") == [1]
    state.apply(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', None)
    assert state.list_subjects(deleted=True) == [] and state.max_id == 4


class SlowLog:
    """A log like KafkaStore: records are applied by another thread, and append waits on a condition over
    the registry's lock (releasing it) until they are."""

    def __init__(self, state: State, lock: Any) -> None:
        import threading

        self.state = state
        self.applied = threading.Condition(lock)
        self.threading = threading

    def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        import time

        done = self.threading.Event()

        def apply_later() -> None:
            time.sleep(0.05)  # the broker's round trip
            with self.applied:
                for key, value in records:
                    self.state.apply(key, value)
                done.set()
                self.applied.notify_all()

        self.threading.Thread(target=apply_later).start()
        with self.applied:
            assert self.applied.wait_for(done.is_set, 5)


def test_concurrent_writers_never_share_an_id_or_a_version() -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    state = State()
    lock = threading.RLock()
    registry = Registry(state, SlowLog(state, lock), lock)

    def register(i: int) -> tuple[int, Any]:
        return registry.handle("POST", "/subjects/s/versions", {}, {"schema": avro((f"f{i}", "int", 0))})

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(register, range(4)))
    assert all(status == 200 for status, _ in answers), answers
    assert sorted(a["id"] for _, a in answers) == [1, 2, 3, 4]
    assert sorted(a["version"] for _, a in answers) == [1, 2, 3, 4]
    assert state.list_versions("s") == [1, 2, 3, 4]


def test_json_and_protobuf_compatibility_is_checked(sr: Client) -> None:
    # adding a property to an open content model is not BACKWARD-compatible (test_json_compat.py)
    j1 = '{"type": "object", "properties": {"a": {"type": "string"}}}'
    j2 = '{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}'
    sr.ok("POST", "/subjects/j/versions", {"schemaType": "JSON", "schema": j1})
    assert sr.ok("POST", "/compatibility/subjects/j/versions/latest",
                 {"schemaType": "JSON", "schema": j2}) == {"is_compatible": False}
    assert sr.error("POST", "/subjects/j/versions", {"schemaType": "JSON", "schema": j2}) == (409, 409)
    sr.ok("PUT", "/config/j", {"compatibility": "FORWARD"})
    assert sr.ok("POST", "/subjects/j/versions", {"schemaType": "JSON", "schema": j2})["version"] == 2
    # an int64 field turned string is not compatible at any level but NONE (test_protobuf_compat.py)
    p1 = 'syntax = "proto3";\nmessage M { int64 a = 1; }'
    p2 = 'syntax = "proto3";\nmessage M { string a = 1; }'
    sr.ok("POST", "/subjects/p/versions", {"schemaType": "PROTOBUF", "schema": p1})
    answer = sr.ok("POST", "/compatibility/subjects/p/versions/latest",
                   {"schemaType": "PROTOBUF", "schema": p2}, verbose="true")
    assert answer["is_compatible"] is False and "FIELD_SCALAR_KIND_CHANGED at M.a" in answer["messages"][0]
    assert sr.error("POST", "/subjects/p/versions", {"schemaType": "PROTOBUF", "schema": p2}) == (409, 409)
    p3 = 'syntax = "proto3";\nmessage M { int64 a = 1; string b = 2; }'
    assert sr.ok("POST", "/subjects/p/versions", {"schemaType": "PROTOBUF", "schema": p3})["version"] == 2


def test_invalid_json_and_protobuf_schemas_are_refused_with_42201(sr: Client) -> None:
    assert sr.error("POST", "/subjects/j/versions", {"schemaType": "JSON", "schema": '{"type": "strung"}'}) \
        == (422, 42201)
    assert sr.error("POST", "/subjects/p/versions", {"schemaType": "PROTOBUF", "schema": "message {"}) \
        == (422, 42201)


def test_protobuf_text_is_served_as_a_serialized_descriptor_on_request(sr: Client) -> None:
    import base64

    from google.protobuf import descriptor_pb2
    proto = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; map<string, string> tags = 2; }'
    pb = sr.ok("POST", "/subjects/p/versions", {"schemaType": "PROTOBUF", "schema": proto})
    assert sr.ok("GET", f"/schemas/ids/{pb['id']}")["schema"] == proto
    for path in (f"/schemas/ids/{pb['id']}", "/subjects/p/versions/1"):
        raw = sr.ok("GET", path, format="serialized")["schema"]
        descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(raw))
        assert descriptor.package == "shop" and [m.name for m in descriptor.message_type] == ["Order"]
    # the serialized form registers as the same-compatible schema: FULL between the two forms holds
    sr.ok("PUT", "/config/p", {"compatibility": "FULL"})
    assert sr.ok("POST", "/compatibility/subjects/p/versions/latest",
                 {"schemaType": "PROTOBUF", "schema": raw}) == {"is_compatible": True}


def test_forward_hook_takes_writes_only(sr: Client) -> None:
    seen: list[tuple[str, str]] = []

    def forward(method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any] | None:
        seen.append((method, path))
        return 200, {"forwarded": True}

    sr.registry.forward = forward
    for method, path, body in (("POST", "/subjects/s/versions", {"schema": V1}), ("PUT", "/config", {}),
                               ("PUT", "/mode/s", {}), ("DELETE", "/subjects/s", None),
                               ("DELETE", "/subjects/s/versions/1", None), ("DELETE", "/config/s", None)):
        assert sr.ok(method, path, body) == {"forwarded": True}
    assert len(seen) == 6
    # reads, lookups and compatibility tests are answered here
    assert sr.ok("GET", "/subjects") == []
    assert sr.error("POST", "/subjects/s", {"schema": V1}) == (404, 40401)
    assert sr.ok("POST", "/compatibility/subjects/s/versions", {"schema": V1}) == {"is_compatible": True}
    assert len(seen) == 6
    sr.registry.forward = lambda *args: None  # the writer itself: handled here
    assert sr.ok("POST", "/subjects/s/versions", {"schema": V1})["id"] == 1
