"""The console's view of a schema registry: Confluent Schema Registry's REST API read over HTTP (kaflite's
registry or Confluent's), for the /schemas pages.

Rules (tests/console/test_units.py without sockets, tests/console/test_pages.py over HTTP):
- Only GETs: the console never changes the registry.
- An answer with Confluent's error body becomes RegistryAnswerError carrying its HTTP status and
  error_code (40401 unknown subject: the page answers 404); a registry that cannot be reached, or answers
  something that is not JSON, becomes ConsoleError (the page answers 502) naming the URL.
- A subject without a compatibility level of its own (40408) shows the global level, marked as such.
- Soft-deleted versions are listed (Confluent's `?deleted=true`) and marked; a hard-deleted one is gone.
- The message browser's lookup of a schema id (`schema_info`): `/schemas/ids/{id}` (Protobuf also with
  `format=serialized`) and its versions; an
  unknown id (40403) is None, any other error as above.
- The schema text is shown pretty-printed when it is JSON (Avro, JSON Schema), else as registered
  (Protobuf); the diff of a version is against the version listed before it, on those shown texts.
"""

from __future__ import annotations

import difflib
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kaflite.console.cluster import ConsoleError
from kaflite.console.framed import SchemaInfo

__all__ = ["RegistryAnswerError", "RegistryView", "SubjectRow", "SubjectView", "VersionRow", "diff_lines",
           "shown_schema"]

ACCEPT = "application/vnd.schemaregistry.v1+json"

# (path with its query) -> (HTTP status, body bytes); raises OSError when the registry cannot be reached
Fetch = Callable[[str], tuple[int, bytes]]


class RegistryAnswerError(Exception):
    """The registry answered with an error body (Confluent's {"error_code", "message"})."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(f"schema registry: {code} {message}")
        self.status = status
        self.code = code


@dataclass(slots=True)
class SubjectRow:
    name: str
    versions: int
    latest: int | None
    schema_id: int | None
    schema_type: str
    compatibility: str
    own_compatibility: bool  # False: the global level applies
    deleted: bool  # every version soft-deleted


@dataclass(slots=True)
class VersionRow:
    version: int
    schema_id: int
    schema_type: str
    deleted: bool


@dataclass(slots=True)
class SubjectView:
    name: str
    versions: list[VersionRow]
    compatibility: str
    own_compatibility: bool
    mode: str
    shown: VersionRow
    text: str
    references: list[dict[str, Any]] = field(default_factory=list)
    previous: int | None = None  # the version the diff is against
    diff: list[str] = field(default_factory=list)


def shown_schema(schema: str) -> str:
    """JSON (Avro, JSON Schema) pretty-printed with two-space indents and its key order kept; anything
    else (Protobuf text) as it was registered."""
    try:
        return json.dumps(json.loads(schema), indent=2, ensure_ascii=False)
    except ValueError:
        return schema


def diff_lines(old: str, new: str, old_name: str, new_name: str) -> list[str]:
    """A unified diff of two shown schemas (three lines of context), without the trailing newlines."""
    return [line.rstrip("\n") for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_name,
                                                                new_name, lineterm="")]


def _urlopen_fetch(base: str, timeout: float) -> Fetch:
    def fetch(path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(base + path, headers={"Accept": ACCEPT})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()
    return fetch


class RegistryView:
    """Blocking reads of a registry at `url` (the console's endpoints run on worker threads). `fetch`
    replaces the HTTP call in tests."""

    def __init__(self, url: str, timeout: float = 10.0, fetch: Fetch | None = None) -> None:
        self.url = url.rstrip("/")
        if fetch is None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"schema registry: expected http://host:port, got {url!r}")
        self.fetch = fetch if fetch is not None else _urlopen_fetch(self.url, timeout)

    def get(self, *parts: str | int, **query: str) -> Any:
        path = "/" + "/".join(urllib.parse.quote(str(p), safe="") for p in parts)
        if query:
            path += "?" + urllib.parse.urlencode(query)
        try:
            status, body = self.fetch(path)
        except OSError as err:
            raise ConsoleError(f"cannot reach the schema registry at {self.url}: "
                               f"{getattr(err, 'reason', None) or err}") from None
        try:
            answer = json.loads(body or b"null")
        except ValueError:
            raise ConsoleError(f"the schema registry at {self.url} answered HTTP {status} without JSON") from None
        if status >= 400:
            if isinstance(answer, dict) and "error_code" in answer:
                raise RegistryAnswerError(status, int(answer["error_code"]), str(answer.get("message", "")))
            raise ConsoleError(f"the schema registry at {self.url} answered HTTP {status}")
        return answer

    def _level(self, subject: str | None) -> tuple[str, bool]:
        """The compatibility level in force and whether it is the subject's own."""
        if subject is not None:
            try:
                return str(self.get("config", subject)["compatibilityLevel"]), True
            except RegistryAnswerError as err:
                if err.code != 40408:
                    raise
        return str(self.get("config")["compatibilityLevel"]), False

    def global_settings(self) -> tuple[str, str]:
        """(global compatibility level, global mode)."""
        return self._level(None)[0], str(self.get("mode")["mode"])

    def subjects(self, names: list[str]) -> list[SubjectRow]:
        """One row per subject: its versions (soft-deleted ones counted), latest live version, level."""
        global_level = self._level(None)[0]
        rows = []
        for name in names:
            versions = [int(v) for v in self.get("subjects", name, "versions", deleted="true")]
            try:
                latest = self.get("subjects", name, "versions", "latest")
            except RegistryAnswerError as err:
                if err.code not in (40401, 40402, 40404):  # every version soft-deleted
                    raise
                latest = None
            try:
                level, own = str(self.get("config", name)["compatibilityLevel"]), True
            except RegistryAnswerError as err:
                if err.code != 40408:
                    raise
                level, own = global_level, False
            rows.append(SubjectRow(name, len(versions), latest["version"] if latest else None,
                                   latest["id"] if latest else None,
                                   (latest or {}).get("schemaType", "AVRO"), level, own, latest is None))
        return rows

    def subject_names(self) -> list[str]:
        """Every subject with a version, soft-deleted ones too (they are still readable)."""
        return sorted(str(s) for s in self.get("subjects", deleted="true"))

    def subject(self, name: str, version: int | None = None) -> SubjectView:
        every = [int(v) for v in self.get("subjects", name, "versions", deleted="true")]
        try:
            live = {int(v) for v in self.get("subjects", name, "versions")}
        except RegistryAnswerError as err:
            if err.code not in (40401, 40404):
                raise
            live = set()
        answers = {v: self.get("subjects", name, "versions", v, deleted="true") for v in every}
        rows = [VersionRow(v, int(answers[v]["id"]), str(answers[v].get("schemaType", "AVRO")), v not in live)
                for v in every]
        if not rows:
            raise RegistryAnswerError(404, 40401, f"Subject '{name}' not found.")
        if version is None:
            shown = next((r for r in reversed(rows) if not r.deleted), rows[-1])
        else:
            found = [r for r in rows if r.version == version]
            if not found:
                raise RegistryAnswerError(404, 40402, f"Version {version} not found.")
            shown = found[0]
        level, own = self._level(name)
        try:
            mode = str(self.get("mode", name)["mode"])
        except RegistryAnswerError as err:
            if err.code != 40409:
                raise
            mode = str(self.get("mode")["mode"])
        text = shown_schema(str(answers[shown.version]["schema"]))
        view = SubjectView(name, rows, level, own, mode, shown, text,
                           list(answers[shown.version].get("references") or []))
        index = rows.index(shown)
        if index > 0:
            before = rows[index - 1]
            view.previous = before.version
            view.diff = diff_lines(shown_schema(str(answers[before.version]["schema"])), text,
                                   f"version {before.version}", f"version {shown.version}")
        return view

    def schema_info(self, schema_id: int) -> SchemaInfo | None:
        """The schema of an id and the (subject, version) pairs holding it, for the message browser
        (console.framed); None when the registry does not know the id (40403)."""
        try:
            answer = self.get("schemas", "ids", schema_id)
        except RegistryAnswerError as err:
            if err.code == 40403:
                return None
            raise
        try:
            pairs = [(str(p["subject"]), int(p["version"])) for p in self.get("schemas", "ids", schema_id, "versions")]
        except RegistryAnswerError as err:
            if err.code != 40403:
                raise
            pairs = []
        schema_type = str(answer.get("schemaType", "AVRO"))
        serialized = None
        if schema_type == "PROTOBUF":
            serialized = str(self.get("schemas", "ids", schema_id, format="serialized")["schema"])
        return SchemaInfo(schema_type, str(answer["schema"]), bool(answer.get("references")), tuple(pairs),
                          serialized)
