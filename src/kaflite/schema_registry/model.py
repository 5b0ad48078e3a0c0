"""The registry's state, rebuilt by replaying the `_schemas` topic, and the records each change writes.

Rules (tests/schema_registry/test_model.py checks them):
- The state is a function of the records applied, in order: `apply(key, value)` for each record of the
  `_schemas` topic. Keys and values are Confluent's JSON: keytype SCHEMA (magic 1, with subject and
  version), CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP (magic 0). A null value is a tombstone: it
  removes the schema version, subject config or subject mode its key names. Unknown or malformed records
  are skipped, so a topic written by a newer registry still replays.
- Ids are never reused: a new schema gets max(id seen in any applied SCHEMA record) + 1; the same schema
  (type, canonical text, references) registered again, in any subject, gets the id it already has.
- Versions in a subject only grow: a new version is 1 + the highest version the subject holds,
  soft-deleted ones included.
- A change is planned from the state (`plan_*` returns the records to write, or the answer when nothing
  needs writing) and takes effect only when its records come back through `apply`: the topic is the
  only source of truth, so every instance replaying it agrees.
- Soft delete marks versions deleted (a SCHEMA record with deleted=true, or DELETE_SUBJECT for a whole
  subject); a permanent delete (tombstones) needs a soft delete first; a version other schemas
  reference cannot be deleted.
- Errors are Confluent's (http status, error_code): see `RegistryError` constructors.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kaflite.schema_registry import avro_compat, compat_levels, json_compat, protobuf_compat, schema_types
from kaflite.schema_registry.schema_types import InvalidSchema, Reference, SchemaText

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1

Record = tuple[bytes, bytes | None]


class RegistryError(Exception):
    """An error answered with Confluent's body {"error_code": code, "message": message}."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: Any) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_version(version: Any) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed values "
                                     f"are between [1, 2^31-1] and the string \"latest\"")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def _key(keytype: str, subject: str | None, version: int | None = None) -> bytes:
    # Confluent's layout and field order, so compaction sees the same key bytes Confluent would write
    obj: dict[str, Any] = {"keytype": keytype, "subject": subject}
    if keytype == "SCHEMA":
        obj["version"] = version
        obj["magic"] = 1
    else:
        obj["magic"] = 0
    return json.dumps(obj, separators=(",", ":")).encode()


def _value(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class Version:
    id: int
    deleted: bool


@dataclass
class State:
    schemas: dict[int, SchemaText] = field(default_factory=dict)
    ids: dict[SchemaText, int] = field(default_factory=dict)
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    config: dict[str | None, str] = field(default_factory=dict)  # None: the global level
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    applied: int = 0  # records applied (skipped ones included)
    skipped: int = 0

    # ---- replay ---------------------------------------------------------------------------------------

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        self.applied += 1
        try:
            k = json.loads(key) if key else None
            v = json.loads(value) if value is not None else None
        except ValueError:
            self.skipped += 1
            return
        if not isinstance(k, dict) or (v is not None and not isinstance(v, dict)):
            self.skipped += 1
            return
        keytype = k.get("keytype")
        subject = k.get("subject")
        if keytype in ("SCHEMA", "DELETE_SUBJECT", "CLEAR_SUBJECT") and not isinstance(subject, str):
            self.skipped += 1
            return
        try:
            if keytype == "SCHEMA":
                self._apply_schema(str(subject), int(k["version"]), v)
            elif keytype == "CONFIG":
                self._apply_setting(self.config, subject, None if v is None else v.get("compatibilityLevel"))
            elif keytype == "MODE":
                self._apply_setting(self.modes, subject, None if v is None else v.get("mode"))
            elif keytype == "DELETE_SUBJECT" and v is not None:
                for number, ver in self.subjects.get(str(subject), {}).items():
                    if number <= int(v["version"]):
                        ver.deleted = True
            elif keytype == "CLEAR_SUBJECT" and v is not None:
                versions = self.subjects.get(str(subject), {})
                for number in [n for n, ver in versions.items() if ver.deleted and n <= int(v["version"])]:
                    self._remove_version(str(subject), number)
            elif keytype != "NOOP":
                self.skipped += 1
        except (KeyError, TypeError, ValueError, InvalidSchema):
            self.skipped += 1

    @staticmethod
    def _apply_setting(table: dict[str | None, str], subject: str | None, setting: Any) -> None:
        if setting is None:
            table.pop(subject, None)
        else:
            table[subject] = str(setting)

    def _apply_schema(self, subject: str, version: int, v: dict[str, Any] | None) -> None:
        if v is None:
            self._remove_version(subject, version)
            return
        schema_id = int(v["id"])
        text = SchemaText(str(v.get("schemaType") or "AVRO"), str(v["schema"]),
                          schema_types.parse_references(v.get("references")))
        self.schemas.setdefault(schema_id, text)
        self.ids.setdefault(text, schema_id)
        self.max_id = max(self.max_id, schema_id)
        self.subjects.setdefault(subject, {})[version] = Version(schema_id, bool(v.get("deleted", False)))

    def _remove_version(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject, {})
        gone = versions.pop(version, None)
        if not versions:
            self.subjects.pop(subject, None)
        if gone is not None and not self._id_used(gone.id):
            text = self.schemas.pop(gone.id, None)
            if text is not None and self.ids.get(text) == gone.id:
                del self.ids[text]

    def _id_used(self, schema_id: int) -> bool:
        return any(v.id == schema_id for versions in self.subjects.values() for v in versions.values())

    # ---- reads ----------------------------------------------------------------------------------------

    def list_subjects(self, deleted: bool = False) -> list[str]:
        return sorted(s for s, versions in self.subjects.items()
                      if deleted or any(not v.deleted for v in versions.values()))

    def _versions(self, subject: str, deleted: bool) -> dict[int, Version]:
        versions = {n: v for n, v in self.subjects.get(subject, {}).items() if deleted or not v.deleted}
        if not versions:
            raise subject_not_found(subject)
        return versions

    def list_versions(self, subject: str, deleted: bool = False) -> list[int]:
        return sorted(self._versions(subject, deleted))

    def resolve_version(self, subject: str, version: str | int, deleted: bool = False) -> int:
        """The version number `version` ("latest", -1 or a number) denotes in `subject`."""
        number = parse_version(version)
        versions = self._versions(subject, deleted)
        if number == -1:
            return max(versions)
        if number not in versions:
            raise version_not_found(subject, number)
        return number

    def get_version(self, subject: str, version: str | int, deleted: bool = False, fmt: str | None = None
                    ) -> dict[str, Any]:
        number = self.resolve_version(subject, version, deleted)
        schema_id = self.subjects[subject][number].id
        return {"subject": subject, "version": number, "id": schema_id, **self.schema_json(schema_id, fmt)}

    def schema_json(self, schema_id: int, fmt: str | None = None) -> dict[str, Any]:
        """A schema's JSON answer; `fmt` "serialized" gives a Protobuf schema as a base64
        FileDescriptorProto (what confluent-kafka's Protobuf serdes ask for), other types as stored."""
        text = self.schemas.get(schema_id)
        if text is None:
            raise schema_not_found()
        schema = text.schema
        if fmt == "serialized" and text.schema_type == "PROTOBUF":
            schema = protobuf_compat.parse(schema).serialized()
        out: dict[str, Any] = {"schema": schema}
        if text.schema_type != "AVRO":
            out["schemaType"] = text.schema_type
        if text.references:
            out["references"] = [r.to_json() for r in text.references]
        return out

    def id_usages(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        if schema_id not in self.schemas:
            raise schema_not_found()
        return sorted((s, n) for s, versions in self.subjects.items() for n, v in versions.items()
                      if v.id == schema_id and (deleted or not v.deleted))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted({i for i, text in self.schemas.items() if self._id_used_live(i)
                       and any(r.subject == subject and r.version == version for r in text.references)})

    def _id_used_live(self, schema_id: int) -> bool:
        return any(v.id == schema_id and not v.deleted for versions in self.subjects.values()
                   for v in versions.values())

    def compatibility(self, subject: str | None) -> str:
        return self.config.get(subject) or self.config.get(None) or compat_levels.DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or "READWRITE"

    def resolver(self) -> schema_types.Resolver:
        def resolve(ref: Reference) -> SchemaText:
            versions = self.subjects.get(ref.subject, {})
            number = max(versions) if ref.version == -1 and versions else ref.version
            found = versions.get(number)
            if found is None:
                raise InvalidSchema(f"Invalid schema: reference {ref.name} to subject {ref.subject} version "
                                    f"{ref.version} not found")
            return self.schemas[found.id]
        return resolve

    # ---- schema parsing and compatibility ------------------------------------------------------------

    def canonical(self, body: dict[str, Any], normalize: bool = False) -> SchemaText:
        try:
            refs = schema_types.parse_references(body.get("references"))
            schema = body.get("schema")
            if not isinstance(schema, str):
                raise InvalidSchema("Invalid schema: \"schema\" must be a string")
            return schema_types.canonical(str(body.get("schemaType") or "AVRO"), schema, refs,
                                          self.resolver(), normalize)
        except InvalidSchema as err:
            raise invalid_schema(str(err)) from err

    def incompatibilities(self, level: str, new: SchemaText, previous: Sequence[SchemaText]) -> list[str]:
        """Why `new` may not follow `previous` (oldest first) at `level`; [] when it may. Versions of
        another schema type are not compared with (Confluent: a type change is checked by no rule set)."""
        if level == "NONE":
            return []
        previous = [p for p in previous if p.schema_type == new.schema_type]
        try:
            if new.schema_type == "JSON":
                return json_compat.check(level, schema_types.parse_json(new),
                                         [schema_types.parse_json(p) for p in previous])
            if new.schema_type == "PROTOBUF":
                return protobuf_compat.check(level, schema_types.parse_protobuf(new),
                                             [schema_types.parse_protobuf(p) for p in previous])
            resolve = self.resolver()
            return avro_compat.check(level, schema_types.parse_avro(new, resolve),
                                     [schema_types.parse_avro(p, resolve) for p in previous])
        except InvalidSchema as err:
            raise invalid_schema(str(err)) from err

    def live_texts(self, subject: str) -> list[SchemaText]:
        versions = self.subjects.get(subject, {})
        return [self.schemas[versions[n].id] for n in sorted(versions) if not versions[n].deleted]

    # ---- planned changes ------------------------------------------------------------------------------

    def _writable(self, subject: str | None) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise not_permitted(f"Subject {subject} is in read-only mode" if subject else
                                "The registry is in read-only mode")

    def plan_register(self, subject: str, body: dict[str, Any], normalize: bool = False
                      ) -> tuple[list[Record], dict[str, Any]]:
        """Records registering `body` under `subject` (none when that schema is already a live version)
        and the answer {"id": ..., "version": ...} once they are applied."""
        self._writable(subject)
        text = self.canonical(body, normalize)
        versions = self.subjects.get(subject, {})
        importing = self.mode(subject) == "IMPORT"
        wanted_id = body.get("id")
        wanted_version = body.get("version") if importing else None  # chosen by the registry otherwise
        if wanted_id is not None and not importing and self.ids.get(text) != wanted_id:
            raise not_permitted(f"Subject {subject} is not in import mode")
        for number in sorted(versions, reverse=True):
            ver = versions[number]
            if not ver.deleted and self.schemas.get(ver.id) == text and wanted_version in (None, number):
                return [], {"id": ver.id, "version": number}
        if not importing:
            problems = self.incompatibilities(self.compatibility(subject), text, self.live_texts(subject))
            if problems:
                raise RegistryError(409, 409, "Schema being registered is incompatible with an earlier schema for "
                                              f"subject \"{subject}\", details: {problems}")
        if importing and wanted_id is not None:
            schema_id = _positive(wanted_id, "id")
            existing = self.schemas.get(schema_id)
            if existing is not None and existing != text:
                raise not_permitted(f"Overwrite new schema with id {schema_id} is not permitted.")
        else:
            schema_id = self.ids.get(text, self.max_id + 1)
        if importing and wanted_version is not None:
            version = _positive(wanted_version, "version")
            if version in versions:
                raise not_permitted(f"Overwrite of version {version} of subject {subject} is not permitted.")
        else:
            version = max(versions, default=0) + 1
        value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id}
        if text.schema_type != "AVRO":
            value["schemaType"] = text.schema_type
        value["references"] = [r.to_json() for r in text.references]
        value["schema"] = text.schema
        value["deleted"] = False
        return [(_key("SCHEMA", subject, version), _value(value))], {"id": schema_id, "version": version}

    def lookup(self, subject: str, body: dict[str, Any], normalize: bool = False,
               deleted: bool = False) -> dict[str, Any]:
        if subject not in self.subjects:
            raise subject_not_found(subject)
        text = self.canonical(body, normalize)
        versions = self.subjects[subject]
        for number in sorted(versions, reverse=True):
            ver = versions[number]
            if (deleted or not ver.deleted) and self.schemas.get(ver.id) == text:
                return {"subject": subject, "version": number, "id": ver.id, **self.schema_json(ver.id)}
        raise schema_not_found()

    def plan_delete_version(self, subject: str, version: str | int, permanent: bool) -> tuple[list[Record], int]:
        self._writable(subject)
        number = self.resolve_version(subject, version, deleted=True)
        ver = self.subjects[subject][number]
        if self.referenced_by(subject, number):
            raise RegistryError(422, 42206, f"One or more references exist to the schema {{subject={subject}, "
                                            f"version={number}}}.")
        if permanent:
            if not ver.deleted:
                raise RegistryError(404, 40407, f"Subject '{subject}' Version {number} was not deleted first "
                                                "before being permanently deleted")
            return [(_key("SCHEMA", subject, number), None)], number
        if ver.deleted:
            raise RegistryError(404, 40406, f"Subject '{subject}' Version {number} was soft deleted. Set "
                                            "permanent=true to delete permanently")
        value = {"subject": subject, "version": number, "id": ver.id, **self._stored(ver.id), "deleted": True}
        return [(_key("SCHEMA", subject, number), _value(value))], number

    def _stored(self, schema_id: int) -> dict[str, Any]:
        text = self.schemas[schema_id]
        out: dict[str, Any] = {}
        if text.schema_type != "AVRO":
            out["schemaType"] = text.schema_type
        out["references"] = [r.to_json() for r in text.references]
        out["schema"] = text.schema
        return out

    def plan_delete_subject(self, subject: str, permanent: bool) -> tuple[list[Record], list[int]]:
        self._writable(subject)
        versions = self.subjects.get(subject)
        if not versions:
            raise subject_not_found(subject)
        for number in versions:
            if self.referenced_by(subject, number):
                raise RegistryError(422, 42206, f"One or more references exist to the schema {{subject={subject}, "
                                                f"version={number}}}.")
        live = sorted(n for n, v in versions.items() if not v.deleted)
        if permanent:
            if live:
                raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                                "permanently deleted")
            return [(_key("SCHEMA", subject, n), None) for n in sorted(versions)], sorted(versions)
        if not live:
            raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                                            "permanently")
        records: list[Record] = [(_key("DELETE_SUBJECT", subject),
                                  _value({"subject": subject, "version": max(versions)}))]
        # Confluent drops a deleted subject's own config and mode with it
        if subject in self.config:
            records.append((_key("CONFIG", subject), None))
        if subject in self.modes:
            records.append((_key("MODE", subject), None))
        return records, live

    def plan_config(self, subject: str | None, level: Any) -> list[Record]:
        self._writable(subject)
        if not isinstance(level, str) or level.upper() not in compat_levels.LEVELS:
            raise RegistryError(422, 42203, f"Invalid compatibility level. Valid values are none, backward, "
                                            f"forward, full, backward_transitive, forward_transitive, and "
                                            f"full_transitive (got {level!r})")
        return [(_key("CONFIG", subject), _value({"compatibilityLevel": level.upper()}))]

    def plan_delete_config(self, subject: str | None) -> tuple[list[Record], str]:
        self._writable(subject)
        if subject is not None and subject not in self.subjects:
            raise subject_not_found(subject)
        previous = self.compatibility(subject)
        return ([(_key("CONFIG", subject), None)] if subject in self.config else []), previous

    def plan_mode(self, subject: str | None, mode: Any, force: bool = False) -> list[Record]:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(422, 42204, f"Invalid mode. Valid values are READWRITE, READONLY, "
                                            f"READONLY_OVERRIDE and IMPORT (got {mode!r})")
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            holds = self.subjects.get(subject) if subject is not None else self.subjects
            if holds:
                raise not_permitted("Cannot import since found existing subjects")
        return [(_key("MODE", subject), _value({"mode": mode}))]

    def plan_delete_mode(self, subject: str) -> tuple[list[Record], str]:
        previous = self.mode(subject)
        return ([(_key("MODE", subject), None)] if subject in self.modes else []), previous


def parse_version(version: str | int) -> int:
    """-1 for latest, else the version number; 42202 for anything else."""
    if isinstance(version, str):
        if version == "latest":
            return -1
        try:
            number = int(version)
        except ValueError:
            raise invalid_version(version) from None
    else:
        number = version
    if number == -1:
        return -1
    if not 1 <= number <= MAX_VERSION:
        raise invalid_version(version)
    return number


def _positive(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_VERSION:
        raise RegistryError(422, 42202 if what == "version" else 42205, f"invalid {what} {value!r}")
    return value
