"""The console's pure parts: lag math, record display/search/export, the lab, the SVG charts."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from kaflite.assign.simulate import Group, Member, balance, moves, rebalance
from kaflite.console.lab import (
    LAB_STRATEGIES,
    Change,
    key_placements,
    key_skew,
    parse_change,
    parse_members,
    parse_topics,
    run_lab,
)
from kaflite.console.lag import LagHistory, drain_seconds, partition_lag, rate
from kaflite.console.records import Record, export, matches, parse_time, show
from kaflite.console.svg import assignment_grid, bar_chart, line_chart


def test_rate_over_window() -> None:
    assert rate([], 60) is None and rate([(0.0, 5)], 60) is None
    assert rate([(0.0, 0), (10.0, 100), (20.0, 300)], 60) == 15.0
    # only the last 10 s count
    assert rate([(0.0, 0), (10.0, 100), (20.0, 300)], 10) == 20.0


def test_drain_time() -> None:
    assert drain_seconds(0, None, None) == 0.0
    assert drain_seconds(100, 30.0, 10.0) == 5.0
    assert drain_seconds(100, 10.0, 10.0) is None  # keeping up, not draining
    assert drain_seconds(100, None, 1.0) is None


def test_partition_lag_is_log_end_minus_committed() -> None:
    assert partition_lag("t", 0, 10, 25).lag == 15
    assert partition_lag("t", 0, None, 25).lag is None
    assert partition_lag("t", 0, -1, 25).lag is None
    assert partition_lag("t", 0, 30, 25).lag == 0


def test_lag_history_series_and_rates() -> None:
    h = LagHistory(max_samples=3, window_s=100)
    tp = ("t", 0)
    for i, (end, committed) in enumerate([(100, 10), (200, 60), (300, 160), (400, 260)]):
        h.record_ends(float(i * 10), {tp: end})
        h.record_group(float(i * 10), "g", {tp: committed}, {tp: end})
    series = h.group_series("g")
    assert [v for _t, v in series["total"]] == [140.0, 140.0, 140.0]  # bounded to 3 samples
    assert h.produce_rate(tp) == 10.0 and h.consume_rate("g", tp) == 10.0
    rows = [partition_lag("t", 0, 260, 400)]
    h.enrich("g", rows)
    assert rows[0].drain_seconds is None  # consuming exactly as fast as producing
    assert h.group_total_lag("g") == 140


def test_show_formats_and_hiding() -> None:
    assert show(b'{"a": 1}', "json") == '{\n  "a": 1\n}'
    assert show(b'{"a": 1}', "auto") == '{"a": 1}'
    assert show(b"\xff\x00", "auto") == "ff 00"
    assert show(b"abc", "hex") == "61 62 63"
    assert show(b"abc", "text", hidden=True) == "(hidden, 3 bytes)"
    assert show(None, "text") == "(null)"


def test_search_matching() -> None:
    r = Record("t", 0, 5, 0, b"k1", b"hello world", [("trace", b"abc-123")])
    assert matches(r, b"k1", "key") and not matches(r, b"k", "key")
    assert matches(r, b"world", "value") and not matches(r, b"world", "value", hidden=True)
    assert matches(r, b"abc", "header") and matches(r, b"trace", "header")
    assert matches(r, b"k1", "any")


def test_parse_time() -> None:
    assert parse_time("1767225600000") == 1767225600000
    assert parse_time("2026-01-01T00:00:00Z") == 1767225600000
    assert parse_time("2026-01-01T01:00:00+01:00") == 1767225600000
    with pytest.raises(ValueError, match="epoch milliseconds or ISO-8601"):
        parse_time("yesterday")


def test_exports() -> None:
    recs = [Record("t", 1, 7, 1000, b"k", b'{"x": 1}', [("h", b"v")]), Record("t", 1, 8, 2000, None, None)]
    body, media = export(recs, "json")
    rows = json.loads(body)
    assert media == "application/json" and rows[0]["headers"] == {"h": "v"} and rows[1]["key"] is None
    body, _ = export(recs, "csv")
    table = list(csv.DictReader(io.StringIO(body.decode())))
    assert table[0]["offset"] == "7" and table[0]["value"] == '{"x": 1}'
    pq = pytest.importorskip("pyarrow.parquet")
    body, _ = export(recs, "parquet", hidden=True)
    t = pq.read_table(io.BytesIO(body))
    assert t.column("key").to_pylist() == [b"k", None] and t.column("value").to_pylist() == [None, None]
    with pytest.raises(ValueError, match="unknown format"):
        export(recs, "xml")


def test_shape_parsing_errors_name_the_field() -> None:
    assert parse_topics("a:3, b:1\nc:2") == {"a": 3, "b": 1, "c": 2}
    with pytest.raises(ValueError, match="topics: expected NAME:PARTITIONS"):
        parse_topics("a:0")
    members = parse_members("C0: a,b @r1\nC1: a", {"a": 3, "b": 1})
    assert members["C0"].rack == "r1" and members["C1"].topics == ["a"]
    with pytest.raises(ValueError, match="unknown topic"):
        parse_members("C0: zzz", {"a": 3})
    with pytest.raises(ValueError, match="given twice"):
        parse_members("C0: a\nC0: a")
    with pytest.raises(ValueError, match="can only grow"):
        parse_change(grow="a:1").apply(Group({"a": 3}, {"C0": Member(["a"])}))


def test_lab_equals_kaflite_assign() -> None:
    group = Group({"t0": 3, "t1": 2}, {"C0": Member(["t0", "t1"]), "C1": Member(["t0", "t1"]), "C2": Member(["t1"])})
    change = Change(leave=["C0"], join={"C3": Member(["t0"])}, grow={"t1": 4})
    runs, after = run_lab(group, change)
    assert [r.strategy for r in runs] == list(LAB_STRATEGIES)
    assert after is not None and after.topics == {"t0": 3, "t1": 4} and list(after.members) == ["C1", "C2", "C3"]
    for run in runs:
        first = rebalance(run.strategy, group)
        assert run.assignment == first.final
        assert run.balance == balance(group, first.final)
        second = rebalance(run.strategy, after, first.final)
        assert run.after == second.final and run.moved == moves(first.final, second.final)
        assert len(run.after_rounds) == len(second.rounds)
        assert run.svg.startswith("<svg") and 'class="owned' in run.svg
        # every moved partition is outlined in its new owner's row
        assert run.after_rounds[-1].svg.count('class="owned moved"') == sum(1 for _tp, _a, b in run.moved if b)


def test_key_skew_and_placements() -> None:
    ks = key_skew("t", [10, 30, 20], [b"a", b"a", b"b", None, b"a"])
    assert ks.heaviest[0] == (b"a", 3) and ks.null_keys == 1 and ks.sampled == 5
    assert ks.skew == pytest.approx(30 / 20)
    placed = {c: p for c, _how, p in key_placements(b"hot", 6)}
    assert placed["java"] == placed["librdkafka-murmur2"]
    assert key_placements(b"", 6)[1][2] is None  # librdkafka: empty key is random


def test_svg_charts_escape_and_draw() -> None:
    svg = line_chart({"<evil>": [(0.0, 1.0), (10.0, 5.0)]}, title="a & b")
    assert "<evil>" not in svg and "&lt;evil&gt;" in svg and "a &amp; b" in svg and "<polyline" in svg
    assert "no samples yet" in line_chart({}, title="x")
    bar = bar_chart(["p0", "p1"], [3, 0], title="t")
    assert bar.count("<rect") == 2
    grid = assignment_grid(["A", "B"], [("t", 0), ("t", 1)], {("t", 0): "A", ("t", 1): "B"}, title="g",
                           previous_owner={("t", 0): "A", ("t", 1): "A"})
    assert grid.count('class="owned') == 2 and grid.count('class="owned moved"') == 1 and 'class="lost"' in grid
    big = assignment_grid(["A"] * 2, [("t", i) for i in range(5000)], {}, title="big")
    assert "too large to draw" in big


def test_long_bodies_are_clipped_on_the_page_only() -> None:
    pytest.importorskip("starlette")
    from kaflite.console.app import MAX_SHOWN_CHARS, _clip

    assert _clip("abc") == "abc"
    long = "x" * (MAX_SHOWN_CHARS + 10)
    assert _clip(long).startswith("x" * MAX_SHOWN_CHARS) and _clip(long).endswith("(10 more characters; export to see all)")


# ---- the schema registry pages' reads (kaflite.console.schemas), against kaflite's registry API in memory ----

def _registry_view() -> tuple[Any, Any]:
    """A RegistryView whose fetch calls kaflite's registry API directly (no sockets), and that API."""
    from urllib.parse import parse_qsl, urlsplit

    from kaflite.console.schemas import RegistryView
    from kaflite.schema_registry.api import MemoryLog, Registry
    from kaflite.schema_registry.model import State

    state = State()
    api = Registry(state, MemoryLog(state))

    def fetch(path: str) -> tuple[int, bytes]:
        url = urlsplit(path)
        status, body = api.handle("GET", url.path, dict(parse_qsl(url.query)), None)
        return status, json.dumps(body).encode()

    return RegistryView("http://registry.invalid", fetch=fetch), api


def _register(api: Any, subject: str, schema: Any, kind: str = "AVRO", refs: list[Any] | None = None) -> int:
    body = {"schema": schema if isinstance(schema, str) else json.dumps(schema), "schemaType": kind,
            "references": refs or []}
    status, answer = api.handle("POST", f"/subjects/{subject}/versions", {}, body)
    assert status == 200, answer
    return int(answer["id"])


def test_registry_view_subject_rows_levels_and_deleted_subjects() -> None:
    view, api = _registry_view()
    v1 = {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]}
    _register(api, "a", v1)
    _register(api, "a", {**v1, "fields": v1["fields"] + [{"name": "y", "type": "int", "default": 0}]})
    _register(api, "gone", '"string"')  # an Avro primitive
    assert api.handle("DELETE", "/subjects/gone", {}, None)[0] == 200  # soft: still listed, marked
    assert api.handle("PUT", "/config/a", {}, {"compatibility": "FULL"})[0] == 200
    assert api.handle("PUT", "/config", {}, {"compatibility": "NONE"})[0] == 200
    assert view.global_settings() == ("NONE", "READWRITE")
    assert view.subject_names() == ["a", "gone"]
    a, gone = view.subjects(["a", "gone"])
    assert (a.versions, a.latest, a.schema_id, a.schema_type, a.compatibility, a.own_compatibility, a.deleted) == \
        (2, 2, 2, "AVRO", "FULL", True, False)
    assert (gone.versions, gone.latest, gone.schema_id, gone.compatibility, gone.own_compatibility, gone.deleted) == \
        (1, None, None, "NONE", False, True)


def test_registry_view_subject_versions_text_diff_and_references() -> None:
    from kaflite.console.schemas import RegistryAnswerError

    view, api = _registry_view()
    base = {"type": "record", "name": "B", "fields": [{"name": "x", "type": "int"}]}
    _register(api, "b", base)
    _register(api, "b", {**base, "fields": base["fields"] + [{"name": "z", "type": "long", "default": 0}]})
    _register(api, "b", {**base, "doc": "same fields"})
    assert api.handle("DELETE", "/subjects/b/versions/1", {}, None)[0] == 200
    assert api.handle("DELETE", "/subjects/b/versions/1", {"permanent": "true"}, None)[0] == 200  # gone
    s = view.subject("b")
    assert [(r.version, r.schema_id, r.deleted) for r in s.versions] == [(2, 2, False), (3, 3, False)]
    assert s.shown.version == 3 and s.previous == 2 and (s.compatibility, s.own_compatibility) == ("BACKWARD", False)
    assert s.mode == "READWRITE"
    assert json.loads(s.text) == {**base, "doc": "same fields"} and s.text.startswith('{\n  "type": "record"')
    assert s.diff[:2] == ["--- version 2", "+++ version 3"]
    assert any(line.startswith("-") and '"z"' in line for line in s.diff)
    assert any(line.startswith("+") and '"doc"' in line for line in s.diff)
    first = view.subject("b", 2)
    assert first.previous is None and first.diff == []  # the first version left: nothing before it
    # a reference is listed with the schema that holds it
    _register(api, "c", {"type": "record", "name": "C", "fields": [{"name": "b", "type": "B"}]}, refs=[
        {"name": "B", "subject": "b", "version": 3}])
    assert view.subject("c").references == [{"name": "B", "subject": "b", "version": 3}]
    for call, code in ((lambda: view.subject("nope"), 40401), (lambda: view.subject("b", 1), 40402)):
        with pytest.raises(RegistryAnswerError) as err:
            call()
        assert err.value.status == 404 and err.value.code == code


def test_registry_view_failures_are_console_errors() -> None:
    from kaflite.console.cluster import ConsoleError
    from kaflite.console.schemas import RegistryView, shown_schema

    def refused(path: str) -> tuple[int, bytes]:
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(ConsoleError, match="cannot reach the schema registry at http://r:1"):
        RegistryView("http://r:1", fetch=refused).global_settings()
    with pytest.raises(ConsoleError, match="answered HTTP 503 without JSON"):
        RegistryView("http://r:1", fetch=lambda path: (503, b"<html>busy</html>")).global_settings()
    with pytest.raises(ValueError, match="expected http://host:port"):
        RegistryView("r:1")
    assert shown_schema('syntax = "proto3";\nmessage M {}') == 'syntax = "proto3";\nmessage M {}'
    assert shown_schema('{"b": 1, "a": [2]}') == '{\n  "b": 1,\n  "a": [\n    2\n  ]\n}'  # key order kept


# --- the Access page's pure part (kaflite.console.access) ----------------------------------------------

def _acl(principal: str, op: str = "READ", name: str = "orders", perm: str = "ALLOW") -> Any:
    from kaflite.console.access import AclRow

    return AclRow(principal, "*", op, perm, "TOPIC", "LITERAL", name)


def test_acl_rows_name_kafkas_codes() -> None:
    from kaflite.console.access import (
        OPERATIONS,
        PATTERN_TYPES,
        PERMISSIONS,
        RESOURCE_TYPES,
        AclRow,
        acl_row,
    )
    from kaflite.server.acl.model import PatternType, Permission
    from kaflite.server.authorizer import AclOperation, ResourceType

    # the console's tables (it may not import the broker) say what the broker's enums say (the broker's
    # ResourceType has no UNKNOWN / ANY codes: those are the filter's)
    for table, enum in ((OPERATIONS, AclOperation), (PERMISSIONS, Permission), (RESOURCE_TYPES, ResourceType),
                        (PATTERN_TYPES, PatternType)):
        assert {int(e): table[int(e)] for e in enum} == {int(e): e.name for e in enum}
    assert RESOURCE_TYPES[:2] == ("UNKNOWN", "ANY")
    assert acl_row("User:alice", "10.0.0.1", 3, 2, 3, 4, "billing-") == AclRow(
        "User:alice", "10.0.0.1", "READ", "DENY", "GROUP", "PREFIXED", "billing-")
    assert acl_row("User:bob", "*", 8, 3, 4, 3, "kafka-cluster").resource_type == "CLUSTER"
    assert acl_row("User:bob", "*", 99, 3, 2, 3, "t").operation == "UNKNOWN(99)"


def test_acls_grouped_by_principal_and_those_applying_to_one() -> None:
    from kaflite.console.access import acls_by_principal, acls_for

    rows = [_acl("User:bob"), _acl("User:alice", "WRITE"), _acl("User:*", "DESCRIBE"), _acl("User:alice"),
            _acl("Group:ops")]
    grouped = acls_by_principal(rows)
    assert [p for p, _ in grouped] == ["Group:ops", "User:*", "User:alice", "User:bob"]
    assert [r.operation for r in dict(grouped)["User:alice"]] == ["READ", "WRITE"]
    # alice's own bindings, then the wildcard's (they apply to every User); bob's and Group:ops' do not
    assert [(r.principal, r.operation) for r in acls_for(rows, "User:alice")] == [
        ("User:alice", "READ"), ("User:alice", "WRITE"), ("User:*", "DESCRIBE")]
    assert acls_for(rows, "User:carol") == [_acl("User:*", "DESCRIBE")]
    assert acls_for(rows, "User:*") == [_acl("User:*", "DESCRIBE")]  # not listed twice
    # Kafka's wildcard principal User:* matches principals of every type
    assert acls_for(rows, "Group:ops") == [_acl("Group:ops"), _acl("User:*", "DESCRIBE")]


def test_quotas_applying_to_a_principal_in_kafkas_precedence_order() -> None:
    from kaflite.console.access import QuotaEntry, principal_user, quotas_for

    def q(*entity: tuple[str, str | None]) -> QuotaEntry:
        return QuotaEntry(tuple(entity), (("producer_byte_rate", 1024.0),))

    U, C = "user", "client-id"
    entries = [q((C, None)), q((C, "app")), q((U, None)), q((U, None), (C, None)), q((U, None), (C, "app")),
               q((U, "alice")), q((U, "alice"), (C, None)), q((U, "alice"), (C, "app")), q((U, "bob")),
               q((U, "bob"), (C, "app"))]
    got = [e.entity for e in quotas_for(reversed(entries), "User:alice")]
    # Kafka's order: user+client, user+default client, user, default user+client, default user+default
    # client, default user, client, default client; bob's never apply to alice
    assert got == [((U, "alice"), (C, "app")), ((U, "alice"), (C, None)), ((U, "alice"),),
                   ((U, None), (C, "app")), ((U, None), (C, None)), ((U, None),), ((C, "app"),), ((C, None),)]
    assert principal_user("User:alice") == "alice" and principal_user("Group:ops") is None
    assert quotas_for(entries, "Group:ops") == []  # quotas are per user principal


def test_quota_entity_labels_and_values() -> None:
    from kaflite.console.access import entity_label, quota_value

    assert entity_label([("user", "alice"), ("client-id", "app")]) == "user 'alice', client-id 'app'"
    assert entity_label([("user", None)]) == "the default user"
    assert entity_label([("user", "alice"), ("client-id", None)]) == "user 'alice', the default client-id"
    assert quota_value(1048576.0) == "1048576" and quota_value(12.5) == "12.5" and quota_value(0.0) == "0"


# --- console.framed: Confluent-framed bodies decoded through a registry lookup ---------------------------
def _avro_body(schema_id: int, schema: dict[str, Any], datum: dict[str, Any]) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), datum)
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                        {"name": "blob", "type": "bytes"}]}


def _user_proto() -> tuple[str, Any]:
    """A serialized FileDescriptorProto (what the registry answers with format=serialized) of
    `package shop; message User {string name = 1; int64 id = 2; message Inner {int32 x = 1;}}`, and the pool
    file to make messages of it."""
    import base64

    from google.protobuf import descriptor_pb2, descriptor_pool

    fdp = descriptor_pb2.FileDescriptorProto(name="user.proto", package="shop", syntax="proto3")
    user = fdp.message_type.add(name="User")
    user.field.add(name="name", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                   label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    user.field.add(name="id", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                   label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    inner = user.nested_type.add(name="Inner")
    inner.field.add(name="x", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return base64.b64encode(fdp.SerializeToString()).decode(), pool.FindFileByName("user.proto")


def _lookup(asked: list[int]) -> Any:
    from kaflite.console.framed import SchemaInfo

    known = {7: SchemaInfo("AVRO", json.dumps(ORDER), False, (("other", 1), ("t-value", 3))),
             8: SchemaInfo("JSON", "{}", False, (("t-key", 1),)),
             9: SchemaInfo("PROTOBUF", "syntax = 'proto3';", False, (), _user_proto()[0]),
             11: SchemaInfo("PROTOBUF", "syntax = 'proto3';", False, ()),
             10: SchemaInfo("AVRO", json.dumps(ORDER), True, ())}

    def lookup(schema_id: int) -> Any:
        asked.append(schema_id)
        return known.get(schema_id)
    return lookup


def test_framed_bodies_are_split_only_with_the_magic_byte_and_an_id() -> None:
    from kaflite.console.framed import split_frame

    assert split_frame(b"\x00\x00\x00\x01\x02rest") == (258, b"rest")
    assert split_frame(b"\x00\xff\xff\xff\xff") == (2**32 - 1, b"")  # unsigned
    for body in (None, b"", b"\x00\x00\x00\x01", b"\x01\x00\x00\x00\x01x", b'{"a": 1}'):
        assert split_frame(body) is None


def test_framed_decoder_decodes_avro_and_json_and_names_the_topics_subject() -> None:
    from kaflite.console.framed import FramedDecoder

    asked: list[int] = []
    d = FramedDecoder(_lookup(asked), "t")
    got = d.decode(_avro_body(7, ORDER, {"id": 5, "blob": b"\x01\xff"}))
    assert got is not None and json.loads(got.text or "") == {"id": 5, "blob": "01ff"}  # bytes as hex
    assert (got.subject, got.version, got.label) == ("t-value", 3, "schema id 7 · t-value v3 (AVRO)")
    key = d.decode(b"\x00\x00\x00\x00\x08" + b'{"k": [1, 2]}', is_key=True)
    assert key is not None and json.loads(key.text or "") == {"k": [1, 2]} and key.subject == "t-key"
    assert d.decode(b'{"not": "framed"}') is None
    d.decode(_avro_body(7, ORDER, {"id": 6, "blob": b""}))
    assert asked == [7, 8]  # each id asked once a page


def test_framed_decoder_says_why_a_body_is_not_decoded() -> None:
    from kaflite.console.framed import FramedDecoder

    d = FramedDecoder(_lookup([]), "t")
    unknown = d.decode(b"\x00\x00\x00\x00\x63payload")
    assert unknown is not None and unknown.text is None and "not a schema id" in unknown.note
    assert unknown.label == "schema id 99"
    bad = d.decode(b"\x00\x00\x00\x00\x07\x02")  # a long, then no bytes field
    assert bad is not None and bad.text is None and "does not decode" in bad.note
    extra = d.decode(_avro_body(7, ORDER, {"id": 1, "blob": b""}) + b"\x00")
    assert extra is not None and extra.text is None and "1 bytes left" in extra.note
    refs = d.decode(_avro_body(10, ORDER, {"id": 1, "blob": b""}))
    assert refs is not None and refs.text is None and "references" in refs.note
    # Protobuf: the message indexes name the message in the id's descriptor, which decodes the rest
    from google.protobuf import message_factory

    _b64, file_desc = _user_proto()
    user_cls = message_factory.GetMessageClass(file_desc.message_types_by_name["User"])
    inner_cls = message_factory.GetMessageClass(file_desc.message_types_by_name["User"].nested_types[0])
    user = d.decode(b"\x00\x00\x00\x00\x09" + b"\x00" + user_cls(name="ann", id=7).SerializeToString())
    assert user is not None and json.loads(user.text or "") == {"name": "ann", "id": 7}
    assert user.note == "message shop.User"
    # indexes [0, 0] (zigzag: count 2 -> 4, then 0, 0): the first message's first nested type
    nested = d.decode(b"\x00\x00\x00\x00\x09" + b"\x04\x00\x00" + inner_cls(x=-3).SerializeToString())
    assert nested is not None and json.loads(nested.text or "") == {"x": -3} and nested.note == "message shop.User.Inner"
    no_such = d.decode(b"\x00\x00\x00\x00\x09" + b"\x02\x0a" + b"")  # indexes [5]: no such message
    assert no_such is not None and no_such.text is None and "names no message" in no_such.note
    bare = d.decode(b"\x00\x00\x00\x00\x0b" + b"\x00\x08\x01")  # no serialized descriptor given
    assert bare is not None and bare.text is None and "no serialized descriptor" in bare.note


def test_framed_decoder_asks_a_failing_registry_once_a_page() -> None:
    from kaflite.console.framed import FramedDecoder

    calls: list[int] = []

    def down(schema_id: int) -> Any:
        calls.append(schema_id)
        raise OSError("connection refused")

    d = FramedDecoder(down, "t")
    for schema_id in (1, 2, 3):
        got = d.decode(b"\x00" + schema_id.to_bytes(4, "big") + b"x")
        assert got is not None and got.text is None and "connection refused" in got.note
    assert calls == [1]


def test_a_template_that_fails_is_the_console_error_page_not_a_bare_500() -> None:
    """A fault of the console's own (here the lab's template raises while rendering) answers the console's
    error page with status 500 and one line naming the exception; the other pages are still served."""
    from jinja2 import Template
    from starlette.testclient import TestClient

    from kaflite.console.app import ConsoleSettings, create_app

    app = create_app(ConsoleSettings(bootstrap="127.0.0.1:1"), start_sampler=False)
    env = app.state.console.env
    real = env.get_template

    def get_template(name: str, *args: Any, **kwargs: Any) -> Template:
        if name == "lab.html":
            return env.from_string("{{ no_such_helper() }}")
        return real(name, *args, **kwargs)

    env.get_template = get_template
    client = TestClient(app, raise_server_exceptions=False)
    got = client.get("/lab?topics=t:1&members=a:t")
    assert got.status_code == 500
    assert "Cannot show this page" in got.text
    assert "the console failed: UndefinedError: &#39;no_such_helper&#39; is undefined" in got.text
    assert client.get("/healthz").text == "ok\n"
