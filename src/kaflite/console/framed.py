"""Record bodies in Confluent's wire format, decoded through a schema registry for the message browser
(pure: the registry is reached through the `Lookup` given).

Rules (tests/console/test_units.py without sockets, tests/console/test_pages.py over HTTP):
- a body is framed when it has at least 5 bytes and starts with the magic byte 0; bytes 1-4 are the schema
  id (big-endian, unsigned), the rest is the payload; anything else is not framed and shown as before;
- the id's schema is asked of the registry once per id and page (`/schemas/ids/{id}` and
  `/schemas/ids/{id}/versions`); an id the registry does not know, or a payload its schema does not
  decode, leaves the body shown as before, with the reason beside it; a registry that cannot be asked
  is asked once a page, every framed body then shown as before with the reason;
- AVRO: the payload is one datum of the writer schema (the id's), decoded with fastavro; a schema with
  references is not decoded (the referenced schemas are not fetched);
- JSON: the payload is a JSON document;
- PROTOBUF: the message indexes name the message in the id's schema (the registry's FileDescriptorProto,
  `format=serialized`), which decodes the rest (kaflite.protocol.confluent: framing, indexes, descriptors,
  values); the message's full name is shown beside it; schemas with references are not decoded;
- the decoded datum is shown as JSON: bytes as their hex, times and decimals as text;
- the subject and version shown are the id's first (subject, version) pair, preferring the topic's own
  subject under Confluent's default TopicNameStrategy (`<topic>-key` / `<topic>-value`).
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kaflite.protocol.confluent import (
    proto_file,
    proto_message,
    proto_to_python,
    read_message_indexes,
    split_frame,
)

__all__ = ["Decoded", "Lookup", "SchemaInfo", "FramedDecoder", "split_frame"]



@dataclass(frozen=True, slots=True)
class SchemaInfo:
    schema_type: str  # AVRO, JSON, PROTOBUF
    schema: str
    references: bool
    subjects: tuple[tuple[str, int], ...]  # (subject, version) pairs that hold the id
    serialized: str | None = None  # PROTOBUF: the base64 FileDescriptorProto (format=serialized)


# schema id -> its SchemaInfo; None when the registry does not know the id (40403)
Lookup = Callable[[int], SchemaInfo | None]


@dataclass(frozen=True, slots=True)
class Decoded:
    schema_id: int
    schema_type: str | None  # None: the id is unknown
    subject: str | None
    version: int | None
    text: str | None  # the decoded datum as JSON; None when not decoded
    note: str = ""  # why it was not decoded, or what was not

    @property
    def label(self) -> str:
        where = f" · {self.subject} v{self.version}" if self.subject is not None else ""
        kind = f" ({self.schema_type})" if self.schema_type else ""
        return f"schema id {self.schema_id}{where}{kind}"




def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")




class FramedDecoder:
    """Decodes the framed bodies of one page: each id looked up once (`lookup`), parsed schemas kept."""

    def __init__(self, lookup: Lookup, topic: str) -> None:
        self.lookup = lookup
        self.topic = topic
        self._schemas: dict[int, SchemaInfo | None] = {}
        self._parsed: dict[int, Any] = {}
        self._failed: str | None = None

    def decode(self, body: bytes | None, is_key: bool = False) -> Decoded | None:
        """The decoded body, or None when it is not framed (module rules)."""
        framed = split_frame(body)
        if framed is None:
            return None
        schema_id, payload = framed
        if self._failed is not None:  # asked once per page: a registry that is down is not waited for again
            return Decoded(schema_id, None, None, None, None, self._failed)
        if schema_id not in self._schemas:
            try:
                self._schemas[schema_id] = self.lookup(schema_id)
            except Exception as err:  # noqa: BLE001 - the registry down or answering garbage: said, shown raw
                self._failed = f"the schema registry could not be asked: {err}"
                return Decoded(schema_id, None, None, None, None, self._failed)
        info = self._schemas[schema_id]
        if info is None:
            return Decoded(schema_id, None, None, None, None, "not a schema id of the registry")
        subject, version = self._subject_of(info, is_key)
        try:
            text, note = self._decode(schema_id, info, payload)
        except Exception as err:  # noqa: BLE001 - any payload the schema does not decode: said, shown raw
            text, note = None, f"does not decode with its schema: {err}"
        return Decoded(schema_id, info.schema_type, subject, version, text, note)

    def _subject_of(self, info: SchemaInfo, is_key: bool) -> tuple[str | None, int | None]:
        own = f"{self.topic}-{'key' if is_key else 'value'}"
        for subject, version in info.subjects:
            if subject == own:
                return subject, version
        return info.subjects[0] if info.subjects else (None, None)

    def _decode(self, schema_id: int, info: SchemaInfo, payload: bytes) -> tuple[str | None, str]:
        if info.schema_type == "AVRO":
            if info.references:
                return None, "its schema has references (not fetched by the console): not decoded"
            import fastavro

            parsed = self._parsed.get(schema_id)
            if parsed is None:
                parsed = self._parsed[schema_id] = fastavro.parse_schema(json.loads(info.schema))
            reader = io.BytesIO(payload)
            datum = fastavro.schemaless_reader(reader, parsed, None)
            if reader.tell() != len(payload):
                raise ValueError(f"{len(payload) - reader.tell()} bytes left after the datum")
            return json.dumps(datum, indent=2, ensure_ascii=False, default=_json_default), ""
        if info.schema_type == "JSON":
            return json.dumps(json.loads(payload), indent=2, ensure_ascii=False), ""
        if info.schema_type == "PROTOBUF":
            from google.protobuf import message_factory

            indexes, pos = read_message_indexes(payload)
            file_desc = self._parsed.get(schema_id)
            if file_desc is None:
                if info.serialized is None:
                    return None, f"message index {indexes}: the registry gave no serialized descriptor"
                file_desc = self._parsed[schema_id] = proto_file(schema_id, info.serialized, info.references)
            desc = proto_message(file_desc, indexes)
            datum = proto_to_python(message_factory.GetMessageClass(desc).FromString(payload[pos:]))
            return json.dumps(datum, indent=2, ensure_ascii=False, default=_json_default), f"message {desc.full_name}"
        return None, f"schema type {info.schema_type}: not decoded"
