"""The web console: a Starlette app with server-rendered Jinja2 pages and server-drawn SVG charts.

    app = create_app(ConsoleSettings(bootstrap="127.0.0.1:9092"))   # then uvicorn.run(app, ...)

Pages: / (cluster overview), /topics, /topics/{t} (partitions, offsets, configs, produce),
/topics/{t}/messages (browser and export), /topics/{t}/skew (key skew), /groups, /groups/{g} (lag),
/lab (assignment lab), /access (ACLs and client quotas, per principal with ?principal=), and with a schema registry given /schemas and /schemas/{subject} (console.schemas). Endpoints are plain functions: Starlette runs them on worker threads, where the
blocking librdkafka calls belong.

Rules:
- read-only unless `allow_writes`: the produce form and its POST exist only then, and a POST must carry
  the per-process form token (so another site cannot make the browser produce);
- with `hide_values`, record values and header values are never rendered nor exported, and searching
  by value is refused;
- every cluster error becomes a one-line message on the page (HTTP 502 when the cluster cannot answer,
  400 for bad input, 404 for an unknown topic or group), never a traceback; so does every registry error
  (404 for an unknown subject or version, 502 for a registry that cannot answer, 404 on /schemas when no
  registry was given); a fault of the console's own (a template that fails to render) is its error page
  with status 500 and one line naming the exception, never Starlette's bare 500.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kaflite.console.access import acls_by_principal, acls_for, entity_label, quota_value, quotas_for
from kaflite.console.cluster import ClusterView, ConsoleError, GroupInfo, TopicInfo, is_spark_query
from kaflite.console.framed import FramedDecoder
from kaflite.console.lab import (
    LAB_STRATEGIES,
    key_placements,
    key_skew,
    parse_change,
    parse_members,
    parse_topics,
    run_lab,
)
from kaflite.console.lag import LagHistory, PartitionLag, drain_seconds, partition_lag
from kaflite.console.records import EXPORTS, FORMATS, export, parse_time, show
from kaflite.console.render import HERE, template_env
from kaflite.console.sampler import Sampler
from kaflite.console.schemas import RegistryAnswerError, RegistryView
from kaflite.console.svg import line_chart

__all__ = ["ConsoleSettings", "create_app", "template_env"]

MAX_LIMIT = 1000
MAX_LAG_SECONDS_PARTITIONS = 64
TOPICS_PER_PAGE = 100
SUBJECTS_PER_PAGE = 100
MAX_SHOWN_CHARS = 16_384


# Who uses each default partitioner of kaflite.console.lab.CLIENT_PARTITIONERS, as the key search says it.
PARTITIONER_USERS = {
    "java": "Java client, kafka-python (murmur2)",
    "librdkafka": "confluent-kafka, librdkafka, kaflite produce (consistent_random CRC32)",
    "librdkafka-murmur2": "librdkafka murmur2_random",
    "librdkafka-fnv1a": "librdkafka fnv1a_random",
    "sarama": "Sarama (FNV-1a)",
}


def key_search_note(key: str, n: int, placed: dict[int, list[str]], held: set[int]) -> str:
    """What a key search read and where the key was: the partitions of the common partitioners, and for
    each partition that held the key, the clients whose default partitioner puts it there."""
    read = "; ".join(f"{p} ({', '.join(clients)})" for p, clients in sorted(placed.items()))
    if not held:
        return (f"key {key!r} not found in partitions {read} of {n} (where each client's default partitioner "
                "puts it); a custom partitioner may have put it elsewhere: search 'any' to read every partition.")
    found = "; ".join(f"partition {p} ({', '.join(placed.get(p, ['?']))})" for p in sorted(held))
    return f"key {key!r} found in {found}; read partitions {read} of {n}."


@dataclass(slots=True)
class ConsoleSettings:
    bootstrap: str
    allow_writes: bool = False
    hide_values: bool = False
    sample_interval: float = 5.0
    timeout: float = 10.0
    max_scan: int = 100_000
    schema_registry: str | None = None  # http://host:port of a schema registry: the /schemas pages


class _Page(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _int(request: Request, name: str, default: int, lo: int = 0, hi: int | None = None) -> int:
    raw = request.query_params.get(name, "")
    if raw.strip() == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise _Page(400, f"{name}: expected an integer, got {raw!r}") from None
    if v < lo or (hi is not None and v > hi):
        raise _Page(400, f"{name}: expected {lo}..{hi if hi is not None else ''}, got {v}")
    return v


def _clip(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """A long body is cut on the page (exports keep it whole)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters; export to see all)"


def _choice(request: Request, name: str, allowed: tuple[str, ...], default: str) -> str:
    v = request.query_params.get(name, default) or default
    if v not in allowed:
        raise _Page(400, f"{name}: expected one of {', '.join(allowed)}, got {v!r}")
    return v


class Console:
    """The app's state: one cluster view, the lag history and its sampler, the templates."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.view = ClusterView(settings.bootstrap, timeout=settings.timeout)
        self.history = LagHistory(window_s=max(30.0, settings.sample_interval * 6))
        self.sampler = Sampler(self.view, self.history, settings.sample_interval)
        self.env = template_env()
        self.token = secrets.token_urlsafe(16)
        self.started = time.time()
        self.registry = (RegistryView(settings.schema_registry, settings.timeout)
                         if settings.schema_registry else None)

    # -- rendering ----------------------------------------------------------------------------------

    def render(self, request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        t0 = time.perf_counter()
        base = {"request": request, "settings": self.settings, "sampler": self.sampler, "nav": name.split(".")[0],
                "token": self.token, "path": request.url.path}
        html = self.env.get_template(name).render(**base, **ctx)
        return HTMLResponse(html, status_code=status,
                            headers={"Server-Timing": f"render;dur={(time.perf_counter() - t0) * 1000:.1f}"})

    def error(self, request: Request, status: int, message: str) -> HTMLResponse:
        return self.render(request, "error.html", status=status, message=message)

    def guard(self, request: Request, fn: Any) -> Response:
        try:
            result: Response = fn()
            return result
        except _Page as p:
            return self.error(request, p.status, p.message)
        except ValueError as err:
            return self.error(request, 400, str(err))
        except ConsoleError as err:
            status = 404 if "does not exist" in str(err) or "unknown group" in str(err) else 502
            return self.error(request, status, str(err))
        except RegistryAnswerError as err:
            return self.error(request, 404 if err.status == 404 else 502, str(err))

    # -- pages --------------------------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        def page() -> Response:
            md = self.view.metadata()
            cluster_id, brokers = self.view.cluster()
            groups = self.view.list_groups()
            by_state: dict[str, int] = {}
            by_type: dict[str, int] = {}
            for _g, typ, state, _s in groups:
                by_state[state] = by_state.get(state, 0) + 1
                by_type[typ] = by_type.get(typ, 0) + 1
            # counted from the metadata directly: this page must stay cheap on a cluster of many topics
            parts = [p for t in md.topics.values() for p in t.partitions.values()]
            partitions = len(parts)
            under = sum(1 for p in parts if len(p.isrs) < len(p.replicas))
            offline = sum(1 for p in parts if p.leader < 0)
            internal = sum(1 for name in md.topics if name.startswith("__"))
            controllers = sum(b.controller for b in brokers)
            health = "healthy" if not under and not offline and controllers == 1 else "degraded"
            return self.render(request, "overview.html", cluster_id=cluster_id, brokers=brokers,
                               topics=len(md.topics) - internal, internal_topics=internal, partitions=partitions,
                               under=under, offline=offline, controllers=controllers, health=health,
                               groups=len(groups), by_state=sorted(by_state.items()), by_type=sorted(by_type.items()))
        return self.guard(request, page)

    def topics(self, request: Request) -> Response:
        def page() -> Response:
            show_internal = request.query_params.get("internal") == "1"
            q = request.query_params.get("q", "").strip()
            page_no = _int(request, "page", 1, 1)
            md = self.view.metadata()
            everything = self.view.topics(md, with_internal=show_internal)
            matching = [t for t in everything if q.lower() in t.name.lower()] if q else everything
            pages = max(1, -(-len(matching) // TOPICS_PER_PAGE))
            page_no = min(page_no, pages)
            topics = matching[(page_no - 1) * TOPICS_PER_PAGE:page_no * TOPICS_PER_PAGE]
            # a list of every partition uses the sampler's last round when it is recent (a large cluster
            # would otherwise pay two ListOffsets rounds and DescribeLogDirs on every load)
            cached = self.sampler.cached_offsets(max(15.0, 3 * self.settings.sample_interval))
            age = None
            if cached is not None and self.sampler.sampled_at is not None:
                self.view.fill_offsets(topics, cached)
                sizes = self.sampler.sizes
                age = time.time() - self.sampler.sampled_at
            else:
                self.view.fill_offsets(topics)
                _cid, brokers = self.view.cluster()
                sizes = self.view.log_dir_sizes(brokers)
            if sizes is not None:
                self.view.apply_sizes(topics, sizes)
            rates = {t.name: self.history.topic_rate(t.name) for t in topics}
            return self.render(request, "topics.html", topics=topics, rates=rates, sizes_served=sizes is not None,
                               show_internal=show_internal, age=age, q=q, page=page_no, pages=pages,
                               matching=len(matching), total=len(everything))
        return self.guard(request, page)

    def topic(self, request: Request) -> Response:
        name = request.path_params["name"]

        def page() -> Response:
            t = self.view.topic(name)
            _cid, brokers = self.view.cluster()
            self.view.fill_offsets([t])
            self.view.fill_sizes([t], brokers)
            configs = self.view.topic_configs(name)
            prefill = self._prefill(t, request.query_params.get("from", ""))
            return self.render(request, "topic.html", topic=t, configs=configs,
                               rate=self.history.topic_rate(name),
                               rates={p.id: self.history.produce_rate((name, p.id)) for p in t.partitions},
                               prefill=prefill, produced=request.query_params.get("produced", ""))
        return self.guard(request, page)

    def _prefill(self, t: TopicInfo, source: str) -> dict[str, str]:
        """The produce form filled with an existing record (re-produce), from "PARTITION:OFFSET"."""
        empty = {"key": "", "value": "", "headers": "", "encoding": "text", "partition": ""}
        if not source or not self.settings.allow_writes or self.settings.hide_values:
            return empty
        p_s, _, o_s = source.partition(":")
        if not p_s.isdigit() or not o_s.isdigit():
            raise _Page(400, f"from: expected PARTITION:OFFSET, got {source!r}")
        p, o = int(p_s), int(o_s)
        if p >= len(t.partitions):
            raise _Page(400, f"from: {t.name} has no partition {p}")
        recs, _ = self.view.read(t.name, {p: o}, {p: o + 1}, 1)
        if not recs:
            raise _Page(404, f"no record at {t.name}-{p} offset {o}")
        r = recs[0]
        parts = [r.key or b"", r.value or b"", *[v or b"" for _, v in r.headers]]
        try:
            for b in parts:
                b.decode()
            enc = "text"
        except UnicodeDecodeError:
            enc = "hex"

        def txt(b: bytes | None) -> str:
            return (b or b"").decode() if enc == "text" else (b or b"").hex()

        key, value = txt(r.key), txt(r.value)
        headers = "\n".join(f"{h}={txt(v)}" for h, v in r.headers)
        return {"key": key, "value": value, "headers": headers, "encoding": enc, "partition": ""}

    async def produce(self, request: Request) -> Response:
        name = request.path_params["name"]
        if not self.settings.allow_writes:
            return self.error(request, 403, "this console is read-only (start it with --allow-writes to produce)")
        form = await request.form()
        if not secrets.compare_digest(str(form.get("token", "")), self.token):
            return self.error(request, 403, "produce: missing or stale form token; reload the page")
        from starlette.concurrency import run_in_threadpool

        def do() -> Response:
            enc = str(form.get("encoding", "text"))
            if enc not in ("text", "hex"):
                raise _Page(400, f"encoding: expected text or hex, got {enc!r}")

            def data(field: str, allow_null: bool = True) -> bytes | None:
                raw = str(form.get(field, ""))
                if raw == "" and allow_null:
                    return None
                try:
                    return bytes.fromhex(raw) if enc == "hex" else raw.encode()
                except ValueError:
                    raise _Page(400, f"{field}: not hex: {raw[:40]!r}") from None

            headers: list[tuple[str, bytes]] = []
            for line in str(form.get("headers", "")).splitlines():
                if not line.strip():
                    continue
                h, sep, v = line.partition("=")
                if not sep or not h.strip():
                    raise _Page(400, f"headers: expected NAME=VALUE a line, got {line!r}")
                try:
                    headers.append((h.strip(), bytes.fromhex(v) if enc == "hex" else v.encode()))
                except ValueError:
                    raise _Page(400, f"headers: {h.strip()} is not hex") from None
            part_raw = str(form.get("partition", "")).strip()
            partition = None
            if part_raw:
                if not part_raw.isdigit():
                    raise _Page(400, f"partition: expected a partition number or empty, got {part_raw!r}")
                partition = int(part_raw)
            p, o = self.view.produce(name, data("key"), data("value"), partition, headers)
            return RedirectResponse(f"/topics/{quote(name)}?produced={p}:{o}", status_code=303)

        return await run_in_threadpool(self.guard, request, do)

    def messages(self, request: Request) -> Response:
        name = request.path_params["name"]

        def page() -> Response:
            s = self.settings
            t = self.view.topic(name)
            self.view.fill_offsets([t])
            n = len(t.partitions)
            part_raw = request.query_params.get("partition", "all") or "all"
            mode = _choice(request, "mode", ("earliest", "latest", "offset", "timestamp"), "earliest")
            fmt = _choice(request, "format", FORMATS, "auto")
            where = _choice(request, "where", ("any", "key", "value", "header"), "any")
            limit = _int(request, "limit", 50, 1, MAX_LIMIT)
            q = request.query_params.get("q", "")
            kind = request.query_params.get("export", "")
            if kind and kind not in EXPORTS:
                raise _Page(400, f"export: expected one of {', '.join(EXPORTS)}, got {kind!r}")
            if q and s.hide_values and where == "value":
                raise _Page(400, "search by value is disabled: this console hides message values (--hide-values)")
            note = ""
            placed: dict[int, list[str]] = {}
            if q and where == "key":
                # where each client's default partitioner puts the key (Java and kafka-python: murmur2,
                # confluent-kafka / librdkafka: CRC32, Sarama: FNV-1a, ...): those partitions are read
                for client, _how, kp in key_placements(q.encode(), n):
                    if kp is not None:
                        placed.setdefault(kp, []).append(PARTITIONER_USERS.get(client, client))
                parts = sorted(placed)
            elif part_raw == "all":
                parts = [p.id for p in t.partitions]
            else:
                if not part_raw.isdigit() or int(part_raw) >= n:
                    raise _Page(400, f"partition: expected all or 0..{n - 1}, got {part_raw!r}")
                parts = [int(part_raw)]
            info = {p.id: p for p in t.partitions}
            lows = {p: info[p].earliest or 0 for p in parts}
            ends = {p: info[p].latest or 0 for p in parts}
            offset = _int(request, "offset", 0, 0)
            ts_raw = request.query_params.get("timestamp", "")
            if mode == "earliest":
                starts = dict(lows)
            elif mode == "latest":
                per = limit if q == "" else s.max_scan
                starts = {p: max(lows[p], ends[p] - per) for p in parts}
            elif mode == "offset":
                starts = {p: min(max(offset, lows[p]), ends[p]) for p in parts}
            else:
                if not ts_raw.strip():
                    raise _Page(400, "timestamp: give a time (epoch ms or ISO-8601) to start from")
                found = self.view.offsets_for_time(name, parts, parse_time(ts_raw))
                starts = {p: (ends[p] if o < 0 else o) for p, o in found.items()}
            records, scanned = self.view.read(name, starts, ends, limit, q.encode() if q else None, where,
                                              s.hide_values, max_scan=s.max_scan, newest=mode == "latest")
            if placed:
                note = key_search_note(q, n, placed, {r.partition for r in records})
            if kind:
                body, media = export(records, kind, "text" if fmt == "auto" else fmt, s.hide_values)
                fname = f"{name}-messages.{kind}"
                return Response(body, media_type=media,
                                headers={"Content-Disposition": f'attachment; filename="{fname}"'})
            # Confluent-framed bodies decoded through the registry (console.framed), unless hex or text was
            # asked for, or values are hidden
            decoder = (FramedDecoder(self.registry.schema_info, name)
                       if self.registry is not None and fmt in ("auto", "json") and not s.hide_values else None)
            rows = []
            for r in records:
                row: dict[str, Any] = {
                    "r": r, "key": _clip(show(r.key, fmt)), "value": _clip(show(r.value, fmt, s.hide_values)),
                    "headers": [(h, _clip(show(v, fmt, s.hide_values))) for h, v in r.headers],
                    "key_schema": None, "value_schema": None}
                if decoder is not None:
                    for part, raw in (("key", r.key), ("value", r.value)):
                        decoded = decoder.decode(raw, is_key=part == "key")
                        row[f"{part}_schema"] = decoded
                        if decoded is not None and decoded.text is not None:
                            row[part] = _clip(decoded.text)
                rows.append(row)
            params = {k: v for k, v in request.query_params.items() if k != "export"}
            return self.render(request, "messages.html", topic=t, rows=rows, scanned=scanned, note=note,
                               q=q, where=where, mode=mode, fmt=fmt, limit=limit, part=part_raw, offset=offset,
                               timestamp=ts_raw, formats=FORMATS, exports=EXPORTS,
                               export_base=f"/topics/{quote(name)}/messages?" + urlencode(params))
        return self.guard(request, page)

    def skew(self, request: Request) -> Response:
        name = request.path_params["name"]

        def page() -> Response:
            t = self.view.topic(name)
            self.view.fill_offsets([t])
            sample = _int(request, "sample", 5000, 1, 200_000)
            n = len(t.partitions)
            per = max(1, sample // max(1, n))
            ends = {p.id: p.latest or 0 for p in t.partitions}
            starts = {p.id: max(p.earliest or 0, (p.latest or 0) - per) for p in t.partitions}
            records, _ = self.view.read(name, starts, ends, sample, max_scan=sample)
            ks = key_skew(name, [p.records or 0 for p in t.partitions], (r.key for r in records))
            key = request.query_params.get("key", "")
            placements = key_placements(key.encode(), n) if key else []
            clients = [c for c, _h, _p in key_placements(b"x", n)]
            heavy = [(k, c, [p for _c, _h, p in key_placements(k, n)]) for k, c in ks.heaviest if k is not None]
            return self.render(request, "skew.html", topic=t, ks=ks, key=key, placements=placements,
                               clients=clients, heavy=heavy, sample=sample)
        return self.guard(request, page)

    def groups(self, request: Request) -> Response:
        def page() -> Response:
            listed = self.view.list_groups()
            described = self.view.describe_groups([g for g, typ, *_ in listed if typ != "share"])
            # DescribeGroups answers Dead for a share group: ShareGroupDescribe, batched per coordinator
            share_members = self.view.share_group_member_counts([g for g, typ, *_ in listed if typ == "share"])
            rows = []
            for gid, typ, state, simple in listed:
                if typ == "share":
                    members = share_members.get(gid, 0)
                    rows.append({"id": gid, "type": "share", "state": state, "simple": False, "members": members,
                                 "assignor": "simple", "lag": None, "spark": False})
                    continue
                d = described.get(gid)
                rows.append({"id": gid, "type": d.type if d and d.type != "unknown" else typ,
                             "state": d.state if d else state, "simple": simple,
                             "members": len(d.members) if d else 0, "assignor": d.assignor if d else "",
                             "lag": self.sampler.group_lag.get(gid), "spark": gid in self.sampler.spark_queries})
            return self.render(request, "groups.html", groups=rows)
        return self.guard(request, page)

    def group_lag(self, gid: str, g: GroupInfo) -> tuple[list[PartitionLag], dict[str, Any]]:
        entries = self.view.committed_with_metadata(gid)
        committed = {tp: offset for tp, (offset, _meta) in entries.items()}
        owners = {tp: m for m in g.members for tp in m.assignment}
        tps = sorted(set(committed) | set(owners))
        ends = self.view.latest_offsets(tps)
        rows = []
        for tp in tps:
            row = partition_lag(tp[0], tp[1], committed.get(tp), ends.get(tp, 0))
            m = owners.get(tp)
            if m is not None:
                row.member, row.host, row.client_id = m.member_id, m.host, m.client_id
            rows.append(row)
        self.history.enrich(gid, rows)
        lagging = {(r.topic, r.partition): r.committed for r in rows if r.lag and r.committed is not None}
        stamps = self.view.timestamps_at(dict(list(lagging.items())[:MAX_LAG_SECONDS_PARTITIONS]))
        now_ms = time.time() * 1000
        for r in rows:
            if r.lag == 0:
                r.lag_seconds = 0.0
            elif (r.topic, r.partition) in stamps:
                r.lag_seconds = max(0.0, (now_ms - stamps[(r.topic, r.partition)]) / 1000)
        total = sum(r.lag or 0 for r in rows)
        consume = [r.consume_rate for r in rows if r.consume_rate is not None]
        produce = [r.produce_rate for r in rows if r.produce_rate is not None]
        totals = {"lag": total, "max_seconds": max((r.lag_seconds or 0.0 for r in rows), default=0.0),
                  "consume": sum(consume) if consume else None, "produce": sum(produce) if produce else None}
        totals["drain"] = drain_seconds(total, totals["consume"], totals["produce"])
        totals["spark"] = is_spark_query(entries)
        return rows, totals

    def group(self, request: Request) -> Response:
        gid = request.path_params["gid"]

        def page() -> Response:
            listed = gid in {g for g, *_ in self.view.list_groups()}
            g = self.view.describe_groups([gid])[gid]
            if g.state == "dead":
                # DescribeGroups answers Dead for a share group id (KIP-932), and librdkafka's ListGroups
                # leaves share groups out: ask the group's coordinator for a share group of that id
                share, _why = self.view.share_group(g)
                if share is not None:
                    return self._share_group_page(request, g, share)
            if not listed:
                raise ConsoleError(f"unknown group {gid!r}: the cluster does not list it")
            subs = self.view.subscriptions(g)
            rows, totals = self.group_lag(gid, g)
            chart = line_chart(self.history.group_series(gid), title=f"lag of {gid} (records)",
                               y_label="records", now=time.time())
            timeline, timeline_note = self.view.rebalance_history(g)
            return self.render(request, "group.html", g=g, rows=rows, totals=totals, chart=chart, subs=subs,
                               timeline=timeline, timeline_note=timeline_note)
        return self.guard(request, page)

    def _share_group_page(self, request: Request, g: GroupInfo, share: dict[str, Any]) -> Response:
        """A share group: its members, each share partition's start offset and records in flight (delivery
        count, holder, lock expiry in seconds from the coordinator's clock), and its rebalance timeline."""
        info = share["group"]
        now_ms = int(info.get("now_ms", 0))
        partitions = []
        for p in share["partitions"]:
            ranges = [{"first": r[0], "last": r[1], "state": r[2], "count": r[3], "member": r[4],
                       "expires": (r[5] - now_ms) / 1000 if r[2] == "ACQUIRED" else None}
                      for r in p["in_flight"]]
            partitions.append({**p, "ranges": ranges,
                               "acquired": sum(r["last"] - r["first"] + 1 for r in ranges if r["state"] == "ACQUIRED")})
        timeline, timeline_note = self.view.rebalance_history(g)
        return self.render(request, "share_group.html", g=g, info=info, partitions=partitions, timeline=timeline,
                           timeline_note=timeline_note)

    def lab(self, request: Request) -> Response:
        def page() -> Response:
            qp = request.query_params
            gid = qp.get("group", "")
            live: dict[str, list[tuple[str, int]]] | None = None
            topics_text, members_text = qp.get("topics", ""), qp.get("members", "")
            names: dict[str, str] = {}
            subs_known = False
            if gid and not topics_text:
                topics_text, members_text, live, names, subs_known = self._live_shape(gid)
            runs: list[Any] = []
            after, change, error = None, None, ""
            strategies = [s for s in LAB_STRATEGIES if qp.get(f"s_{s}", "1" if "topics" not in qp else "") == "1"]
            notice = ""
            if live is not None and not live:
                notice = f"group {gid} has no active members: add members to the shape to compare the assignors"
            elif topics_text:
                try:
                    topics = parse_topics(topics_text)
                    from kaflite.assign.simulate import Group

                    group = Group(topics, parse_members(members_text, topics))
                    if not group.members:
                        raise ValueError("members: give at least one NAME: TOPIC[,TOPIC...]")
                    change = parse_change(qp.get("leave", ""), qp.get("join", ""), qp.get("grow", ""))
                    runs, after = run_lab(group, change or None, strategies or LAB_STRATEGIES)
                except ValueError as err:
                    error = str(err)
            return self.render(request, "lab.html", gid=gid, topics_text=topics_text, members_text=members_text,
                               leave=qp.get("leave", ""), join=qp.get("join", ""), grow=qp.get("grow", ""),
                               runs=runs, change=change, after=after, error=error, live=live, names=names,
                               strategies=LAB_STRATEGIES, chosen=set(strategies or LAB_STRATEGIES), notice=notice, subs_known=subs_known,
                               status=400 if error else 200)
        return self.guard(request, page)

    def _live_shape(self, gid: str) -> tuple[str, str, dict[str, list[tuple[str, int]]], dict[str, str], bool]:
        """A live group as a lab shape: its members (in member-id order, named by client id) subscribed to
        the topics the group consumes (confluent-kafka does not expose each member's subscription, so the
        union of the assigned topics stands for it), with the topics' partition counts."""
        if gid not in {g for g, *_ in self.view.list_groups()}:
            raise ConsoleError(f"unknown group {gid!r}: the cluster does not list it")
        g = self.view.describe_groups([gid])[gid]
        subs = self.view.subscriptions(g)
        topics_used = sorted({tp[0] for m in g.members for tp in m.assignment} |
                             {tp[0] for tp in self.view.committed(gid)} | {t for s in subs.values() for t in s.topics})
        md = self.view.metadata()
        counts = {t: len(md.topics[t].partitions) for t in topics_used if t in md.topics}
        names: dict[str, str] = {}
        live: dict[str, list[tuple[str, int]]] = {}
        lines = []
        for m in sorted(g.members, key=lambda m: m.member_id):
            base = (m.instance_id or m.client_id or "member").replace(":", "_").replace(" ", "_").replace("@", "_")
            label = base
            i = 1
            while label in live:
                i += 1
                label = f"{base}#{i}"
            names[label] = m.member_id
            live[label] = m.assignment
            sub = subs.get(m.member_id)
            # the member's own subscription when the coordinator told it; else the topics the group consumes
            topics = [t for t in sub.topics if t in counts] if sub is not None else list(counts)
            rack = f" @{sub.rack}" if sub is not None and sub.rack else ""
            lines.append(f"{label}: {','.join(topics) or '-'}{rack}")
        topics_text = ", ".join(f"{t}:{n}" for t, n in counts.items())
        return topics_text, "\n".join(lines), live, names, bool(subs)

    def access(self, request: Request) -> Response:
        """Every ACL binding by principal and every client quota; with ?principal=P only those that apply
        to P (its own ACLs and its type's wildcard's; the quotas of its user, the default user and
        client ids, in Kafka's precedence order)."""
        def page() -> Response:
            principal = request.query_params.get("principal", "").strip()
            if principal and ":" not in principal:
                raise _Page(400, f"principal: expected TYPE:NAME (e.g. User:alice), got {principal!r}")
            acls, acl_note = self.view.acls()
            quotas, quota_note = self.view.client_quotas()
            principals = sorted({r.principal for r in acls or ()} |
                                {f"User:{name}" for q in quotas or () for kind, name in q.entity
                                 if kind == "user" and name is not None})
            if principal:
                groups = [(principal, acls_for(acls, principal))] if acls is not None else []
                quotas = quotas_for(quotas, principal) if quotas is not None else None
            else:
                groups = acls_by_principal(acls) if acls is not None else []
            quota_rows = [{"label": entity_label(q.entity), "entity": q.entity,
                           "pairs": [(k, quota_value(v)) for k, v in q.values]} for q in quotas or ()]
            return self.render(request, "access.html", principal=principal, principals=principals, groups=groups,
                               rows=[r for _p, rs in groups for r in rs], acl_count=len(acls or ()), acl_note=acl_note, quotas=quota_rows,
                               quotas_known=quotas is not None, quota_note=quota_note)
        return self.guard(request, page)

    def _registry(self) -> RegistryView:
        if self.registry is None:
            raise _Page(404, "no schema registry: start the console with --schema-registry http://host:port")
        return self.registry

    def schemas(self, request: Request) -> Response:
        def page() -> Response:
            registry = self._registry()
            q = request.query_params.get("q", "").strip()
            page_no = _int(request, "page", 1, 1)
            level, mode = registry.global_settings()
            names = registry.subject_names()
            matching = [n for n in names if q.lower() in n.lower()] if q else names
            pages = max(1, -(-len(matching) // SUBJECTS_PER_PAGE))
            page_no = min(page_no, pages)
            # three registry calls a subject: only the page shown is read
            shown = registry.subjects(matching[(page_no - 1) * SUBJECTS_PER_PAGE:page_no * SUBJECTS_PER_PAGE])
            return self.render(request, "schemas.html", subjects=shown, level=level, mode=mode, q=q,
                               page=page_no, pages=pages, matching=len(matching), total=len(names))
        return self.guard(request, page)

    def subject(self, request: Request) -> Response:
        name = request.path_params["subject"]

        def page() -> Response:
            registry = self._registry()
            raw = request.query_params.get("version", "")
            version = _int(request, "version", 0, 1) if raw.strip() else None
            return self.render(request, "subject.html", s=registry.subject(name, version))
        return self.guard(request, page)

    async def healthz(self, request: Request) -> Response:
        return Response("ok\n", media_type="text/plain")


def create_app(settings: ConsoleSettings, start_sampler: bool = True) -> Starlette:
    console = Console(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if start_sampler:
            console.sampler.start()
        try:
            yield
        finally:
            console.sampler.stop()
            console.view.close()

    routes = [
        Route("/", console.overview),
        Route("/topics", console.topics),
        Route("/topics/{name}", console.topic),
        Route("/topics/{name}/messages", console.messages),
        Route("/topics/{name}/skew", console.skew),
        Route("/topics/{name}/produce", console.produce, methods=["POST"]),
        Route("/groups", console.groups),
        Route("/groups/{gid}", console.group),
        Route("/lab", console.lab),
        Route("/access", console.access),
        Route("/schemas", console.schemas),
        Route("/schemas/{subject:path}", console.subject),  # a subject may hold a '/'
        Route("/healthz", console.healthz),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    async def internal_error(request: Request, exc: Exception) -> Response:
        # a fault of the console's own (a template error, a bug): its error page with one line naming the
        # exception, not Starlette's bare "Internal Server Error"; the traceback goes to the log (Starlette
        # raises the exception again after this answer, and the server logs it)
        message = f"the console failed: {type(exc).__name__}: {str(exc)[:300]}"
        try:
            return console.error(request, 500, message)
        except Exception:  # the error page itself cannot render: the same line as text
            return PlainTextResponse(message + "\n", status_code=500)

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={Exception: internal_error})
    app.state.console = console
    return app

