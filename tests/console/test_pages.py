"""The console's pages over real HTTP against a real kaflite broker (no browser: see test_browser.py)."""

from __future__ import annotations

import csv
import io
import json
import re
import time
from typing import Any
from urllib.parse import quote

import pytest
from console_harness import (
    BASE_TS,
    KNOWN_IDS,
    ORDER_V2,
    ORDER_V3,
    ORDERS_PARTITIONS,
    ORDERS_RECORDS,
    USER_PROTO,
    ConsoleCluster,
    ConsoleServer,
)

from kaflite.assign.murmur2 import partition_for_key


def _cells(html: str, table_id: str) -> list[list[str]]:
    """Rows of a table's body as lists of cell texts (tags stripped)."""
    m = re.search(rf'<table id="{table_id}"[^>]*>.*?<tbody>(.*?)</tbody>', html, re.S)
    assert m, f"no table {table_id}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", m.group(1), re.S)
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in rows]


def test_overview_shows_the_cluster(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    status, html, _ = console.get("/")
    assert status == 200
    assert 'id="health">healthy' in html
    brokers = _cells(html, "brokers")
    assert len(brokers) == 1 and brokers[0][1] == "127.0.0.1"
    assert brokers[0][2] == console_cluster.bootstrap.rsplit(":", 1)[1] and "controller" in brokers[0][4]
    assert re.search(r'id="n-groups">(\d+)<', html) and int(re.search(r'id="n-groups">(\d+)<', html).group(1)) >= 2


def test_topics_list_counts_records_and_sizes(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    status, html, _ = console.get("/topics")
    assert status == 200
    rows = {r[0]: r for r in _cells(html, "topics")}
    orders = rows[console_cluster.orders]
    assert orders[1] == str(ORDERS_PARTITIONS) and orders[3] == f"{ORDERS_RECORDS:,}"
    assert orders[4].endswith("B") and orders[4] != "-"  # DescribeLogDirs answered
    assert "__consumer_offsets" not in rows
    _, html_all, _ = console.get("/topics?internal=1")
    assert "__consumer_offsets" in html_all
    # the name filter (and a page past the end shows the last page)
    _, html, _ = console.get(f"/topics?q={console_cluster.events.upper()}&page=99")
    assert [r[0] for r in _cells(html, "topics")] == [console_cluster.events]


def test_topic_page_partitions_offsets_configs(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    status, html, _ = console.get(f"/topics/{console_cluster.events}")
    assert status == 200
    parts = _cells(html, "partitions")
    assert [p[0] for p in parts] == ["0", "1"]
    assert all(p[1] == "0" and p[2] == "0" and p[3] == "0" for p in parts)  # leader, replicas, ISR
    assert sum(int(p[5]) for p in parts) == 40  # latest offsets
    configs = {c[0]: c for c in _cells(html, "configs")}
    assert configs["retention.ms"][1] == "3600000"
    # the source by its name (confluent-kafka 2.16 hands over DescribeConfigs' int code)
    assert configs["retention.ms"][2] == "dynamic_topic" and configs["cleanup.policy"][2] == "default"
    assert "Produce a record" not in html  # read-only


def test_message_browser_by_offset(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    p, o, key, value, ts = console_cluster.produced[17]
    status, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?partition={p}&mode=offset"
                                  f"&offset={o}&limit=1&format=text")
    assert status == 200
    rows = _cells(html, "messages")
    assert len(rows) == 1
    assert rows[0][:2] == [str(p), str(o)]
    assert rows[0][3] == key.decode() and json.loads(rows[0][4].replace("&#34;", '"')) == json.loads(value)
    assert "source" in rows[0][5]


def test_message_browser_by_timestamp(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    # record i has timestamp BASE_TS + i s: from the time of record 42 on, partition by partition
    target = BASE_TS + 42_000
    p42 = next(r for r in console_cluster.produced if r[4] == target)
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(target / 1000)) + "Z"
    status, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?partition={p42[0]}"
                                  f"&mode=timestamp&timestamp={quote(iso)}&limit=1")
    assert status == 200
    rows = _cells(html, "messages")
    assert rows[0][:2] == [str(p42[0]), str(p42[1])]
    # every partition: the earliest record at or after the time, per partition
    _, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?mode=timestamp&timestamp={target}&limit=100")
    got = {(int(r[0]), int(r[1])) for r in _cells(html, "messages")}
    want = {(p, o) for p, o, _k, _v, ts in console_cluster.produced if ts >= target}
    assert got == want


def test_key_search_reads_the_partitions_of_the_common_partitioners(console: ConsoleServer,
                                                                     console_cluster: ConsoleCluster) -> None:
    from kaflite.console.lab import key_placements

    key = b"customer-3"
    expect_p = partition_for_key(key, ORDERS_PARTITIONS)
    status, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?q=customer-3&where=key&limit=100")
    assert status == 200
    assert f"found in partition {expect_p} (Java client, kafka-python (murmur2)" in html
    rows = _cells(html, "messages")
    want = [(p, o) for p, o, k, _v, _t in console_cluster.produced if k == key]
    assert sorted((int(r[0]), int(r[1])) for r in rows) == sorted(want)
    # what was read: the partitions where some client's default partitioner puts the key, no other
    candidates = {p for _c, _h, p in key_placements(key, ORDERS_PARTITIONS) if p is not None}
    n_read = int(re.search(r"record\(s\) shown, (\d+) read", html).group(1))
    assert n_read == sum(1 for p, *_ in console_cluster.produced if p in candidates)


def test_key_search_finds_keys_of_confluent_kafka_kafka_python_and_java(console: ConsoleServer,
                                                                        console_cluster: ConsoleCluster) -> None:
    """Each client's default partitioner puts a key elsewhere: the search reads each one's partition and
    says which held the key (keys chosen so that CRC32 and murmur2 disagree)."""
    import uuid

    import kafka
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kaflite.assign.partitioners import librdkafka_consistent as crc32_partition

    n = 6
    topic = f"keys-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": console_cluster.bootstrap})
    admin.create_topics([NewTopic(topic, n, 1)])[topic].result(10)
    keys = [f"k{i}".encode() for i in range(50)]
    differ = [k for k in keys if crc32_partition(k, n) != partition_for_key(k, n)]
    ck, kp, jv = differ[:3]
    confluent = Producer({"bootstrap.servers": console_cluster.bootstrap})  # default: consistent_random
    confluent.produce(topic, key=ck, value=b"from confluent-kafka")
    assert confluent.flush(10) == 0
    java = Producer({"bootstrap.servers": console_cluster.bootstrap, "partitioner": "murmur2_random"})
    java.produce(topic, key=jv, value=b"as the Java client")
    assert java.flush(10) == 0
    kp_producer = kafka.KafkaProducer(bootstrap_servers=console_cluster.bootstrap)
    kp_producer.send(topic, key=kp, value=b"from kafka-python").get(timeout=20)
    kp_producer.close()
    for key, expect_p, who in ((ck, crc32_partition(ck, n), "confluent-kafka"),
                               (kp, partition_for_key(kp, n), "kafka-python"),
                               (jv, partition_for_key(jv, n), "Java client")):
        _, html, _ = console.get(f"/topics/{topic}/messages?q={key.decode()}&where=key")
        rows = _cells(html, "messages")
        assert [(int(r[0]), r[3]) for r in rows] == [(expect_p, key.decode())], (key, rows)
        note = re.search(r'id="note">(.*?)</p>', html, re.S).group(1)
        assert f"found in partition {expect_p} (" in note and who in note.split("found in", 1)[1].split(";")[0]


def test_all_partitions_are_merged_by_timestamp(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    """partition=all: the first (earliest mode) or last (latest mode) records of the whole topic by
    timestamp, from every partition, not the first partition fetched."""
    by_time = sorted(console_cluster.produced, key=lambda r: r[4])
    _, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?partition=all&limit=30")
    rows = [(int(r[0]), int(r[1])) for r in _cells(html, "messages")]
    assert rows == [(p, o) for p, o, *_ in by_time[:30]]
    assert {p for p, _ in rows} == set(range(ORDERS_PARTITIONS))
    _, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?mode=latest&limit=10")
    assert [(int(r[0]), int(r[1])) for r in _cells(html, "messages")] == [(p, o) for p, o, *_ in by_time[-10:]]


def test_value_and_header_search(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    needle = quote('"order": 7,')
    _, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?q={needle}&where=value")
    rows = _cells(html, "messages")
    p, o, *_ = console_cluster.produced[7]
    assert [(int(r[0]), int(r[1])) for r in rows] == [(p, o)]
    _, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?q=test-59&where=header")
    rows = _cells(html, "messages")
    assert [(int(r[0]), int(r[1])) for r in rows] == [console_cluster.produced[59][:2]]


def test_formats_and_exports(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    p, o, key, value, ts = console_cluster.produced[0]
    base = f"/topics/{console_cluster.orders}/messages?partition={p}&mode=offset&offset={o}&limit=3"
    _, html, _ = console.get(base + "&format=hex")
    assert value.hex(" ") in html
    status, body, headers = console.get_bytes(base + "&export=json")
    rows = json.loads(body)
    assert status == 200 and len(rows) == 3 and rows[0]["offset"] == o and rows[0]["timestamp"] == ts
    assert json.loads(rows[0]["value"]) == json.loads(value)
    _, body, headers = console.get_bytes(base + "&export=csv")
    assert headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(body.decode())))
    assert [int(r["offset"]) for r in table] == [o, o + 1, o + 2] and table[0]["key"] == key.decode()
    pq = pytest.importorskip("pyarrow.parquet")
    _, body, _ = console.get_bytes(base + "&export=parquet")
    t = pq.read_table(io.BytesIO(body))
    assert t.num_rows == 3 and t.column("value")[0].as_py() == value


def test_groups_list_both_protocols(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    status, html, _ = console.get("/groups")
    assert status == 200
    rows = {r[0]: r for r in _cells(html, "groups")}
    assert rows[console_cluster.billing][1] == "classic" and rows[console_cluster.billing][2] == "stable"
    assert rows[console_cluster.audit][1] == "consumer" and rows[console_cluster.audit][2] == "stable"
    assert rows[console_cluster.billing][3] == "1"


def _lag_rows(html: str) -> dict[str, list[str]]:
    return {r[0] + "-" + r[1]: r for r in _cells(html, "lag")}


def test_group_page_lag_per_partition(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    status, html, _ = console.get(f"/groups/{console_cluster.billing}")
    assert status == 200
    ends = {p: 0 for p in range(ORDERS_PARTITIONS)}
    for p, o, *_ in console_cluster.produced:
        ends[p] = max(ends[p], o + 1)
    rows = _lag_rows(html)
    for p in range(ORDERS_PARTITIONS):
        r = rows[f"{console_cluster.orders}-{p}"]
        assert (r[2], r[3], r[4]) == ("10", str(ends[p]), str(ends[p] - 10))
        assert r[5].endswith((" s", "min", " h", " d"))  # lag in seconds: the record at offset 10 is from 2026-01-01
        assert r[10] == "/127.0.0.1" and r[11] == "billing-app"
    assert f'id="total-lag">{sum(ends.values()) - 30:,}<' in html
    assert 'id="group-type">classic' in html and "<svg" in html
    member = _cells(html, "members")[0]
    assert member[2:6] == ["billing-app", "/127.0.0.1", console_cluster.orders, "rack-a"]
    _, html, _ = console.get(f"/groups/{console_cluster.audit}")
    assert 'id="group-type">consumer' in html
    rows = _lag_rows(html)
    assert {k: v[4] for k, v in rows.items()} == {
        f"{console_cluster.events}-{p}": str(max(0, console_cluster.events_ends.get(p, 0) - 5)) for p in range(2)}


def test_group_page_shows_the_rebalance_timeline(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    """The coordinator's timeline, newest first: the classic group's member joined and its first rebalance
    completed with its 3 partitions moved to it; the KIP-848 group's the same at group epoch 1."""
    for group, partitions, protocol_generation in ((console_cluster.billing, ORDERS_PARTITIONS, "1"),
                                                   (console_cluster.audit, 2, "1")):
        status, html, _ = console.get(f"/groups/{group}")
        assert status == 200
        rows = _cells(html, "timeline")
        oldest_first = list(reversed(rows))
        assert [(r[1], r[2]) for r in oldest_first[:2]] == [("member-joined", "new-member"),
                                                            ("rebalance-started", "new-member")], rows
        done = next(r for r in oldest_first if r[1] == "rebalance-completed")
        assert done[2] == "new-member" and done[3] == protocol_generation and done[5].endswith("s")
        moved = done[6].replace("&gt;", ">")  # the page escapes it
        assert moved.startswith(f"{partitions} (") and moved.count(" - -> ") == partitions, moved
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", done[0])


def test_groups_committed_by_a_spark_query_are_marked(console: ConsoleServer,
                                                       console_cluster: ConsoleCluster) -> None:
    """A group whose offsets carry kaflite.spark's query metadata (commitOffsetsToGroup) is marked as a
    Spark query on its page and, once sampled, in the groups list; other groups are not."""
    from confluent_kafka import Consumer, TopicPartition

    group = f"spark-query-{time.monotonic_ns()}"
    c = Consumer({"bootstrap.servers": console_cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        meta = 'kaflite.spark query {"run":"0123abcd","commit":1}'  # what kaflite.spark.group_commit writes
        c.commit(offsets=[TopicPartition(console_cluster.orders, 0, 1, metadata=meta)], asynchronous=False)
    finally:
        c.close()
    status, html, _ = console.get(f"/groups/{group}")
    assert status == 200 and 'id="spark-query"' in html
    _, html, _ = console.get(f"/groups/{console_cluster.billing}")
    assert 'id="spark-query"' not in html
    sampler = console.app.state.console.sampler
    end = time.monotonic() + 15
    while group not in sampler.spark_queries and time.monotonic() < end:
        time.sleep(0.1)
    _, html, _ = console.get("/groups")
    rows = {r[0]: r for r in _cells(html, "groups")}
    # a group that only takes commits is listed as simple too; billing (a live consumer group) is not marked
    assert f"{group} simple spark query" in rows and console_cluster.billing in rows


def test_lag_chart_is_sampled_over_time(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    sampler = console.app.state.console.sampler
    end = time.monotonic() + 15
    while sampler.samples < 3 and time.monotonic() < end:
        time.sleep(0.1)
    assert sampler.samples >= 3, sampler.last_error
    series = console.app.state.console.history.group_series(console_cluster.billing)
    assert len(series["total"]) >= 3
    ends = {}
    for p, o, *_ in console_cluster.produced:
        ends[p] = max(ends.get(p, 0), o + 1)
    assert series["total"][-1][1] == sum(ends.values()) - 30
    _, html, _ = console.get(f"/groups/{console_cluster.billing}")
    assert html.count("<polyline") >= 2


def test_lab_live_group_and_described_shape(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    from kaflite.assign.simulate import Group, Member, rebalance

    status, html, _ = console.get(f"/lab?group={console_cluster.billing}")
    assert status == 200
    assert f"{console_cluster.orders}:{ORDERS_PARTITIONS}" in html and 'id="live"' in html
    # the member's own subscription and rack, from the coordinator (DescribeGroups member metadata)
    members = re.search(r'<textarea name="members"[^>]*>(.*?)</textarea>', html, re.S).group(1)
    assert members == f"billing-app: {console_cluster.orders} @rack-a"
    assert "as its coordinator reports them" in html
    _, html, _ = console.get(f"/lab?group={console_cluster.audit}")  # KIP-848: ConsumerGroupDescribe
    members = re.search(r'<textarea name="members"[^>]*>(.*?)</textarea>', html, re.S).group(1)
    # (kaflite's ConsumerGroupDescribe does not return the member's rack yet, so only the subscription)
    assert members.split(" @")[0] == f"audit-app: {console_cluster.events}"
    shape = "topics=t0:3,t1:4&members=" + quote("C0: t0,t1\nC1: t0,t1\nC2: t1") + "&leave=C0&grow=t1:6"
    status, html, _ = console.get("/lab?" + shape + "".join(f"&s_{s}=1" for s in ("range", "sticky", "uniform")))
    assert status == 200
    group = Group({"t0": 3, "t1": 4}, {"C0": Member(["t0", "t1"]), "C1": Member(["t0", "t1"]), "C2": Member(["t1"])})
    for s in ("range", "sticky", "uniform"):
        section = re.search(rf'<section class="lab-run" id="run-{s}".*?</section>', html, re.S).group(0)
        table = re.search(r'<table class="assignment">.*?</table>', section, re.S).group(0)
        shown = {m: tps for m, _n, tps in (
            [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr data-member[^>]*>(.*?)</tr>", table, re.S))}
        want = {m: ", ".join(str(tp) for tp in tps) for m, tps in rebalance(s, group).final.items()}
        assert shown == want, s
    assert "run-roundrobin" not in html
    assert "C0 leaves, t1 grows to 6 partitions" in html


def test_key_skew_page(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    from kaflite.assign.partitioners import client_partition

    status, html, _ = console.get(f"/topics/{console_cluster.events}/skew?key=hot")
    assert status == 200
    heavy = _cells(html, "heavy")
    assert heavy[0][0] == "hot" and heavy[0][1] == "30"
    placed = {r[0]: r[1] for r in _cells(html, "placements")}
    assert placed["java"] == str(client_partition("java", b"hot", 2))
    assert placed["librdkafka"] == str(client_partition("librdkafka", b"hot", 2))


def test_bad_input_and_unknown_things(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    status, html, _ = console.get("/topics/no-such-topic")
    assert status == 404 and "does not exist" in html
    _, html, _ = console.get("/topics?internal=1")
    assert "no-such-topic" not in html  # looking did not auto-create it
    status, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?limit=abc")
    assert status == 400 and "limit: expected an integer" in html
    status, html, _ = console.get(f"/topics/{console_cluster.orders}/messages?mode=timestamp&timestamp=yesterday")
    assert status == 400 and "timestamp" in html
    status, html, _ = console.get("/groups/no-such-group")
    assert status == 404
    status, html, _ = console.get("/lab?topics=t0:x&members=C0:t0")
    assert status == 400 and "NAME:PARTITIONS" in html


def test_read_only_refuses_produce(console: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    status, html, _ = console.post(f"/topics/{console_cluster.orders}/produce", {"value": "x"})
    assert status == 403 and "read-only" in html


def test_produce_and_reproduce_with_writes(console_rw: ConsoleServer, console_cluster: ConsoleCluster) -> None:
    topic = console_cluster.events
    status, _, _ = console_rw.post(f"/topics/{topic}/produce", {"key": "k", "value": "v"})
    assert status == 403  # no form token
    _, page, _ = console_rw.get(f"/topics/{topic}")
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    status, _, headers = console_rw.post(f"/topics/{topic}/produce",
                                         {"token": token, "key": "from-page", "value": "hello", "partition": "1",
                                          "headers": "origin=console", "encoding": "text"})
    assert status == 303
    p, o = re.search(r"produced=(\d+):(\d+)", headers["location"]).groups()
    assert p == "1"
    _, html, _ = console_rw.get(f"/topics/{topic}/messages?partition=1&mode=offset&offset={o}&limit=1&format=text")
    row = _cells(html, "messages")[0]
    assert row[3:5] == ["from-page", "hello"] and "origin" in row[5]
    _, html, _ = console_rw.get(f"/topics/{topic}?from=1:{o}")
    assert 'name="key" value="from-page"' in html and ">hello</textarea>" in html


def test_hide_values(console_cluster: ConsoleCluster) -> None:
    srv = ConsoleServer(console_cluster.bootstrap, hide_values=True, sample_interval=0).start()
    try:
        p, o, _k, value, _t = console_cluster.produced[3]
        _, html, _ = srv.get(f"/topics/{console_cluster.orders}/messages?partition={p}&mode=offset&offset={o}&limit=1")
        assert value.decode() not in html and f"(hidden, {len(value)} bytes)" in html
        _, body, _ = srv.get_bytes(f"/topics/{console_cluster.orders}/messages?export=json&limit=5")
        assert all(r["value"].startswith("(hidden") for r in json.loads(body))
        status, html, _ = srv.get(f"/topics/{console_cluster.orders}/messages?q=order&where=value")
        assert status == 400 and "hides message values" in html
    finally:
        srv.stop()




def _text(html: str, element_id: str) -> str:
    """The text of the element with this id (tags stripped, entities of quotes undone)."""
    m = re.search(rf'<(\w+)[^>]*\bid="{element_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert m, f"no element {element_id}"
    return re.sub(r"<[^>]+>", "", m.group(2)).replace("&#34;", '"').replace("&#39;", "'")


def test_schemas_page_lists_subjects_versions_and_levels(console: ConsoleServer, console_registry: Any) -> None:
    status, html, _ = console.get("/schemas")
    assert status == 200 and 'id="nav-schemas"' in html
    assert _text(html, "registry-url") == console_registry.url
    assert _text(html, "global-compatibility") == "BACKWARD" and _text(html, "global-mode") == "READWRITE"
    rows = {r[0].split()[0]: r for r in _cells(html, "subjects")}
    assert sorted(rows) == sorted(KNOWN_IDS)
    # orders-value: 3 versions (the third soft-deleted), so the latest live one is 2 with id 2
    assert rows["orders-value"][1:] == ["3", "2", "2", "AVRO", "BACKWARD (global)"]
    assert rows["events-value"][1:] == ["1", "1", "4", "JSON", "NONE"]  # its own level
    assert rows["shop-users"][1:] == ["1", "1", "5", "PROTOBUF", "BACKWARD (global)"]
    _, html, _ = console.get("/schemas?q=ORDERS")
    assert [r[0] for r in _cells(html, "subjects")] == ["orders-value"]


def test_subject_page_versions_schema_text_and_diff(console: ConsoleServer) -> None:
    status, html, _ = console.get("/schemas/orders-value")
    assert status == 200
    assert _cells(html, "versions") == [["1", "1", "AVRO", ""], ["2", "2", "AVRO", ""], ["3", "3", "AVRO", "soft-deleted"]]
    assert _text(html, "compatibility") == "BACKWARD" and "(global)" in html
    # the latest live version is shown, pretty-printed, with its changes from version 1
    assert _text(html, "shown-version") == "2"
    assert json.loads(_text(html, "schema-text")) == ORDER_V2 and '\n  "fields": [' in _text(html, "schema-text")
    diff = _text(html, "schema-diff").splitlines()
    assert diff[:2] == ["--- version 1", "+++ version 2"]
    assert [line for line in diff if line.startswith("+") and "qty" in line]
    # a soft-deleted version is still readable
    _, html, _ = console.get("/schemas/orders-value?version=3")
    assert json.loads(_text(html, "schema-text")) == ORDER_V3 and _text(html, "shown-version") == "3"
    _, html, _ = console.get("/schemas/events-value")
    assert _text(html, "compatibility") == "NONE" and "(global)" not in html.split('id="compatibility"')[1][:80]
    assert 'id="schema-diff"' not in html  # one version: nothing to compare with
    _, html, _ = console.get("/schemas/shop-users")
    assert _text(html, "schema-text").rstrip("\n") == USER_PROTO.rstrip("\n")  # Protobuf text as registered


def test_schemas_pages_errors(console: ConsoleServer, console_rw: ConsoleServer) -> None:
    status, html, _ = console.get("/schemas/no-such-subject")
    assert status == 404 and "40401" in html
    status, html, _ = console.get("/schemas/orders-value?version=9")
    assert status == 404 and "40402" in html
    status, html, _ = console.get("/schemas/orders-value?version=x")
    assert status == 400 and "version: expected an integer" in html
    # a console given no registry has no Schemas link, and says how to give one
    status, html, _ = console_rw.get("/")
    assert status == 200 and 'id="nav-schemas"' not in html
    status, html, _ = console_rw.get("/schemas")
    assert status == 404 and "--schema-registry" in html


def test_schemas_page_with_the_registry_down(console_cluster: ConsoleCluster) -> None:
    from helpers import free_port

    url = f"http://127.0.0.1:{free_port()}"
    srv = ConsoleServer(console_cluster.bootstrap, sample_interval=0, schema_registry=url).start()
    try:
        status, html, _ = srv.get("/schemas")
        assert status == 502 and f"cannot reach the schema registry at {url}" in html
        assert srv.get("/topics")[0] == 200  # the rest of the console does not depend on it
    finally:
        srv.stop()


def test_message_browser_decodes_registry_framed_records(console: ConsoleServer, console_cluster: ConsoleCluster,
                                                         console_registry: Any) -> None:
    """Records written by confluent-kafka's Avro and JSON serializers against the registry are shown
    decoded, with their schema id, subject and version; other bodies as before."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from console_harness import EVENT_SCHEMA

    topic = f"framed-{console_cluster.orders}"
    admin = AdminClient({"bootstrap.servers": console_cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    client = SchemaRegistryClient({"url": console_registry.url})
    no_register = {"auto.register.schemas": False}
    avro = AvroSerializer(client, json.dumps(ORDER_V2),
                          conf={**no_register, "subject.name.strategy": lambda _ctx, _name: "orders-value"})
    as_json = JSONSerializer(json.dumps(EVENT_SCHEMA), client,
                             conf={**no_register, "subject.name.strategy": lambda _ctx, _name: "events-value"})
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": console_cluster.bootstrap})
    p.produce(topic, key=b"o1", value=avro({"id": 42, "qty": 3}, ctx))
    p.produce(topic, key=b"e1", value=as_json({"kind": "click"}, ctx))
    p.produce(topic, key=b"u1", value=b"\x00\x00\x00\x03\xe7payload")  # id 999: not the registry's
    p.produce(topic, key=b"plain", value=b'{"plain": true}')
    # shop.User {name: "bo", id: 3} under id 5 (shop-users, registered as .proto text): indexes [0], then
    # field 1 (string "bo") and field 2 (int64 3)
    p.produce(topic, key=b"p1", value=b"\x00\x00\x00\x00\x05" + b"\x00" + b"\x0a\x02bo\x10\x03")
    assert p.flush(10) == 0
    del p, admin  # their threads stop before the module's broker does (no reconnect noise)

    status, html, _ = console.get(f"/topics/{quote(topic)}/messages")
    assert status == 200
    cells = _cells(html, "messages")
    values = {r[3]: r[4] for r in cells}
    order = values["o1"]
    assert json.loads(order.split("schema id")[0].replace("&#34;", '"')) == {"id": 42, "qty": 3}
    assert "schema id 2 · orders-value v2 (AVRO)" in order
    event = values["e1"]
    assert json.loads(event.split("schema id")[0].replace("&#34;", '"')) == {"kind": "click"}
    assert "schema id 4 · events-value v1 (JSON)" in event
    assert "schema id 999: not a schema id of the registry" in values["u1"]
    user = values["p1"]
    assert json.loads(user.split("schema id")[0].replace("&#34;", '"')) == {"name": "bo", "id": 3}
    assert "schema id 5 · shop-users v1 (PROTOBUF): message shop.User" in user
    assert "schema id" not in values["plain"]
    # hex shows the bytes as written, not decoded
    _, html, _ = console.get(f"/topics/{quote(topic)}/messages?format=hex")
    assert "schema id" not in html and "00 00 00 00 02" in html
