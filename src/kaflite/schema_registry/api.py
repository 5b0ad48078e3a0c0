"""Confluent Schema Registry's REST API as a function: (method, path, query, body) -> (status, JSON body).

Rules (tests/schema_registry/test_api.py):
- Routes and answers are Confluent's, as confluent-kafka's SchemaRegistryClient uses them; errors are
  {"error_code": ..., "message": ...} with Confluent's codes (model.RegistryError), unknown routes 404
  with error_code 404, bodies that are not JSON objects 422 with 42201 (schema routes) or 422.
- A write plans its records from the state under the registry's lock, appends them to the log (which
  returns once they are applied to the state), then answers from the state: the answer is what any
  instance replaying the topic would answer. Writes are serialized by `write_lock`, held until the
  records are applied: the log's wait releases `lock` (so its reader can apply), and without
  write_lock a second writer could plan from a state missing the first write and reuse its id.
- Reads take the lock only for the time of a copy-free lookup; nothing here does I/O except `log.append`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import unquote

from kaflite.schema_registry import schema_types
from kaflite.schema_registry.model import Record, RegistryError, State, invalid_schema

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class Log(Protocol):
    def append(self, records: list[Record]) -> None:
        """Write the records and return once they are applied to the registry's state."""


class MemoryLog:
    """A log that applies records at once: for tests and for a registry with nothing to persist."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.records: list[Record] = []

    def append(self, records: list[Record]) -> None:
        for key, value in records:
            self.records.append((key, value))
            self.state.apply(key, value)


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "false").lower() == "true"


Handler = Callable[..., tuple[int, Any]]


class Registry:
    def __init__(self, state: State, log: Log, lock: threading.RLock | None = None) -> None:
        self.state = state
        self.log = log
        self.lock = lock if lock is not None else threading.RLock()  # the store's reader applies under it
        self.write_lock = threading.Lock()
        # several instances (election.py): a write goes to the elected writer; None answers it here
        self.forward: Callable[[str, str, dict[str, str], Any], tuple[int, Any] | None] | None = None
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = []
        for method, pattern, handler in (
            ("GET", r"/", self._root),
            ("GET", r"/subjects", self._subjects),
            ("GET", r"/subjects/(?P<s>[^/]+)/versions", self._versions),
            ("POST", r"/subjects/(?P<s>[^/]+)/versions", self._register),
            ("GET", r"/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)", self._version),
            ("GET", r"/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)/schema", self._version_schema),
            ("GET", r"/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)/referencedby", self._referenced_by),
            ("DELETE", r"/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)", self._delete_version),
            ("POST", r"/subjects/(?P<s>[^/]+)", self._lookup),
            ("DELETE", r"/subjects/(?P<s>[^/]+)", self._delete_subject),
            ("GET", r"/schemas/types", self._types),
            ("GET", r"/schemas/ids/(?P<i>[^/]+)", self._by_id),
            ("GET", r"/schemas/ids/(?P<i>[^/]+)/schema", self._by_id_schema),
            ("GET", r"/schemas/ids/(?P<i>[^/]+)/subjects", self._id_subjects),
            ("GET", r"/schemas/ids/(?P<i>[^/]+)/versions", self._id_versions),
            ("GET", r"/config", self._get_config),
            ("PUT", r"/config", self._put_config),
            ("DELETE", r"/config", self._delete_config),
            ("GET", r"/config/(?P<s>[^/]+)", self._get_config),
            ("PUT", r"/config/(?P<s>[^/]+)", self._put_config),
            ("DELETE", r"/config/(?P<s>[^/]+)", self._delete_config),
            ("GET", r"/mode", self._get_mode),
            ("PUT", r"/mode", self._put_mode),
            ("GET", r"/mode/(?P<s>[^/]+)", self._get_mode),
            ("PUT", r"/mode/(?P<s>[^/]+)", self._put_mode),
            ("DELETE", r"/mode/(?P<s>[^/]+)", self._delete_mode),
            ("POST", r"/compatibility/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)", self._compat),
            ("POST", r"/compatibility/subjects/(?P<s>[^/]+)/versions", self._compat),
            ("GET", r"/contexts", self._contexts),
        ):
            self.routes.append((method, re.compile(pattern + "/?$"), handler))

    # ---- dispatch -------------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        allowed = False
        for route_method, pattern, handler in self.routes:
            match = pattern.match(path)
            if match is None:
                continue
            allowed = True
            if route_method != method:
                continue
            args = {k: unquote(v) for k, v in match.groupdict().items()}
            if self.forward is not None and _is_write(method, path):
                forwarded = self.forward(method, path, query, body)
                if forwarded is not None:
                    return forwarded
            try:
                return handler(query=query, body=body, **args)
            except RegistryError as err:
                return err.status, err.body()
        if allowed:
            return 405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}
        return 404, {"error_code": 404, "message": "HTTP 404 Not Found"}

    def _write(self, records: list[Record]) -> None:
        if records:
            self.log.append(records)

    # ---- subjects and versions -----------------------------------------------------------------------

    def _root(self, query: dict[str, str], body: Any) -> tuple[int, Any]:
        return 200, {}

    def _subjects(self, query: dict[str, str], body: Any) -> tuple[int, Any]:
        prefix = query.get("subjectPrefix", "")
        with self.lock:
            return 200, [s for s in self.state.list_subjects(_flag(query, "deleted")) if s.startswith(prefix)]

    def _versions(self, query: dict[str, str], body: Any, s: str) -> tuple[int, Any]:
        with self.lock:
            return 200, self.state.list_versions(s, _flag(query, "deleted"))

    def _version(self, query: dict[str, str], body: Any, s: str, v: str) -> tuple[int, Any]:
        with self.lock:
            return 200, self.state.get_version(s, v, _flag(query, "deleted"), query.get("format"))

    def _version_schema(self, query: dict[str, str], body: Any, s: str, v: str) -> tuple[int, Any]:
        with self.lock:
            return 200, _raw(self.state.get_version(s, v, _flag(query, "deleted"))["schema"])

    def _referenced_by(self, query: dict[str, str], body: Any, s: str, v: str) -> tuple[int, Any]:
        with self.lock:
            return 200, self.state.referenced_by(s, self.state.resolve_version(s, v, deleted=True))

    def _register(self, query: dict[str, str], body: Any, s: str) -> tuple[int, Any]:
        body = _schema_body(body)
        with self.write_lock, self.lock:
            records, answer = self.state.plan_register(s, body, _flag(query, "normalize"))
            self._write(records)
            return 200, {"id": answer["id"], "version": answer["version"], "subject": s,
                         **self.state.schema_json(answer["id"])}

    def _lookup(self, query: dict[str, str], body: Any, s: str) -> tuple[int, Any]:
        body = _schema_body(body)
        with self.lock:
            return 200, self.state.lookup(s, body, _flag(query, "normalize"), _flag(query, "deleted"))

    def _delete_version(self, query: dict[str, str], body: Any, s: str, v: str) -> tuple[int, Any]:
        with self.write_lock, self.lock:
            records, number = self.state.plan_delete_version(s, v, _flag(query, "permanent"))
            self._write(records)
            return 200, number

    def _delete_subject(self, query: dict[str, str], body: Any, s: str) -> tuple[int, Any]:
        with self.write_lock, self.lock:
            records, versions = self.state.plan_delete_subject(s, _flag(query, "permanent"))
            self._write(records)
            return 200, versions

    # ---- schemas by id --------------------------------------------------------------------------------

    def _types(self, query: dict[str, str], body: Any) -> tuple[int, Any]:
        return 200, list(schema_types.TYPES)

    def _by_id(self, query: dict[str, str], body: Any, i: str) -> tuple[int, Any]:
        with self.lock:
            return 200, self.state.schema_json(_schema_id(i), query.get("format"))

    def _by_id_schema(self, query: dict[str, str], body: Any, i: str) -> tuple[int, Any]:
        with self.lock:
            return 200, _raw(self.state.schema_json(_schema_id(i))["schema"])

    def _id_subjects(self, query: dict[str, str], body: Any, i: str) -> tuple[int, Any]:
        with self.lock:
            return 200, sorted({s for s, _ in self.state.id_usages(_schema_id(i), _flag(query, "deleted"))})

    def _id_versions(self, query: dict[str, str], body: Any, i: str) -> tuple[int, Any]:
        with self.lock:
            return 200, [{"subject": s, "version": n}
                         for s, n in self.state.id_usages(_schema_id(i), _flag(query, "deleted"))]

    # ---- config, mode, compatibility -----------------------------------------------------------------

    def _get_config(self, query: dict[str, str], body: Any, s: str | None = None) -> tuple[int, Any]:
        with self.lock:
            if s is not None and s not in self.state.config and not _flag(query, "defaultToGlobal"):
                raise RegistryError(404, 40408, f"Subject '{s}' does not have subject-level compatibility "
                                                "configured")
            return 200, {"compatibilityLevel": self.state.compatibility(s)}

    def _put_config(self, query: dict[str, str], body: Any, s: str | None = None) -> tuple[int, Any]:
        level = body.get("compatibility") if isinstance(body, dict) else None
        with self.write_lock, self.lock:
            self._write(self.state.plan_config(s, level))
            return 200, {"compatibility": self.state.compatibility(s)}

    def _delete_config(self, query: dict[str, str], body: Any, s: str | None = None) -> tuple[int, Any]:
        with self.write_lock, self.lock:
            records, previous = self.state.plan_delete_config(s)
            self._write(records)
            return 200, {"compatibilityLevel": previous}

    def _get_mode(self, query: dict[str, str], body: Any, s: str | None = None) -> tuple[int, Any]:
        with self.lock:
            if s is not None and s not in self.state.modes and not _flag(query, "defaultToGlobal"):
                raise RegistryError(404, 40409, f"Subject '{s}' does not have subject-level mode configured")
            return 200, {"mode": self.state.mode(s)}

    def _put_mode(self, query: dict[str, str], body: Any, s: str | None = None) -> tuple[int, Any]:
        mode = body.get("mode") if isinstance(body, dict) else None
        with self.write_lock, self.lock:
            self._write(self.state.plan_mode(s, mode, _flag(query, "force")))
            return 200, {"mode": self.state.mode(s)}

    def _delete_mode(self, query: dict[str, str], body: Any, s: str) -> tuple[int, Any]:
        with self.write_lock, self.lock:
            records, previous = self.state.plan_delete_mode(s)
            self._write(records)
            return 200, {"mode": previous}

    def _compat(self, query: dict[str, str], body: Any, s: str, v: str | None = None) -> tuple[int, Any]:
        body = _schema_body(body)
        with self.lock:
            state = self.state
            text = state.canonical(body, _flag(query, "normalize"))
            level = state.compatibility(s)
            live = state.live_texts(s)
            if v is None or (v in ("latest", "-1") and level.endswith("_TRANSITIVE")):
                previous = live  # every version, as the level says (non-transitive levels use the last)
            else:
                number = state.resolve_version(s, v)
                previous = [state.schemas[state.subjects[s][number].id]]
                level = level.removesuffix("_TRANSITIVE")
            problems = state.incompatibilities(level, text, previous)
        answer: dict[str, Any] = {"is_compatible": not problems}
        if _flag(query, "verbose"):
            answer["messages"] = problems
        return 200, answer

    def _contexts(self, query: dict[str, str], body: Any) -> tuple[int, Any]:
        return 200, ["."]


class _RawSchema(str):
    """A /schema route's answer: the schema itself as the body, not a JSON string of it."""


def _is_write(method: str, path: str) -> bool:
    """Routes that change the topic: PUT, DELETE, and POST but lookups and compatibility tests."""
    if method in ("PUT", "DELETE"):
        return True
    return method == "POST" and path.startswith("/subjects/") and path.rstrip("/").endswith("/versions")


def _raw(schema: str) -> _RawSchema:
    return _RawSchema(schema)


def _schema_body(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid_schema("the request body must be a JSON object with a \"schema\" field")
    return body


def _schema_id(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise RegistryError(404, 40403, "Schema not found") from None
