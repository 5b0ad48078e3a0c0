"""The configuration machinery shared by every subsystem's key table: Kafka's config types, validators
(ConfigDef's validators), `ConfigKey` (one key: name, type, default, doc, validator, whether it applies),
value parsing and formatting, the listener syntax, and the errors (`ConfigError`, `UnknownConfigKey`).
Pure: nothing here reads a file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
SHORT_MAX = 2**15 - 1
SHORT_MIN = -(2**15)

# "dynamic-broker" / "dynamic-default": set with AlterConfigs on this broker's id / on the cluster's default
# entity (Kafka's DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG)
Source = Literal["default", "dev-profile", "file", "override", "dynamic-broker", "dynamic-default"]
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
ConfigType = Literal["boolean", "string", "int", "short", "long", "double", "list", "class", "password"]
# Kafka's dynamic update mode of a broker key (DynamicBrokerConfig, KIP-226): "read-only" keys change only
# with a restart; "per-broker" keys may be set dynamically for one broker id only; "cluster-wide" keys for
# one broker id or for the cluster's default entity. Kafka's docs print the same three words.
UpdateMode = Literal["read-only", "per-broker", "cluster-wide"]
READ_ONLY: UpdateMode = "read-only"
PER_BROKER: UpdateMode = "per-broker"
CLUSTER_WIDE: UpdateMode = "cluster-wide"

# Kafka's DescribeConfigs `config_source` codes (org.apache.kafka.common.requests.DescribeConfigsResponse).
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
SOURCE_CODES: dict[str, int] = {
    "default": SOURCE_DEFAULT_CONFIG,
    "dev-profile": SOURCE_STATIC_BROKER_CONFIG,
    "file": SOURCE_STATIC_BROKER_CONFIG,
    "override": SOURCE_STATIC_BROKER_CONFIG,
    "topic": SOURCE_DYNAMIC_TOPIC_CONFIG,
    "dynamic-broker": SOURCE_DYNAMIC_BROKER_CONFIG,
    "dynamic-default": SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
}
# Kafka's DescribeConfigs v3+ `config_type` codes (ConfigEntry.ConfigType).
TYPE_CODES: dict[str, int] = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}

_TYPE_PHRASE: dict[str, str] = {
    "boolean": "a boolean (true or false)",
    "string": "a string",
    "int": "an int",
    "short": "a short",
    "long": "a long",
    "double": "a double",
    "list": "a comma-separated list",
    "class": "a class name",
    "password": "a password",
}


class ConfigError(ValueError):
    """A configuration key or value that is refused; the message names the key and what is allowed."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.message = message

    def __str__(self) -> str:
        return self.message


class UnknownConfigKey(ConfigError, KeyError):
    """An unknown key (also a KeyError, so `in` behaves as for any mapping; BrokerConfig.get raises it)."""


class ConfigErrors(ConfigError):
    """Several refused keys or values of one configuration (a file with more than one typo), all reported
    at once: one line each, after a count. `errors` holds them in file order, then the overrides; `key` is
    the first one's."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        self.errors = list(errors)
        lines = "\n".join(f"  {e.message}" for e in self.errors)
        super().__init__(f"{len(self.errors)} configuration errors:\n{lines}", self.errors[0].key)


# --------------------------------------------------------------------------------------------------
# Validators: each checks a parsed value and describes what is allowed, for the error message.


class Validator:
    def check(self, value: Any) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self, type_phrase: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class AtLeast(Validator):
    minimum: float

    def check(self, value: Any) -> bool:
        return value is None or value >= self.minimum

    def describe(self, type_phrase: str) -> str:
        return f"{type_phrase} >= {_num(self.minimum)}"


@dataclass(frozen=True)
class Between(Validator):
    low: float
    high: float

    def check(self, value: Any) -> bool:
        return value is None or self.low <= value <= self.high

    def describe(self, type_phrase: str) -> str:
        return f"{type_phrase} between {_num(self.low)} and {_num(self.high)}"


@dataclass(frozen=True)
class OneOf(Validator):
    allowed: tuple[str, ...]

    def check(self, value: Any) -> bool:
        return value is None or value in self.allowed

    def describe(self, type_phrase: str) -> str:
        return "one of " + ", ".join(self.allowed)


@dataclass(frozen=True)
class ListOf(Validator):
    """Every element of a list value is one of `allowed` (Kafka's ValidList)."""

    allowed: tuple[str, ...]
    allow_empty: bool = False

    def check(self, value: Any) -> bool:
        if value is None:
            return True
        if not value and not self.allow_empty:
            return False
        return all(v in self.allowed for v in value)

    def describe(self, type_phrase: str) -> str:
        return "a comma-separated list of " + ", ".join(self.allowed)


@dataclass(frozen=True)
class Custom(Validator):
    predicate: Callable[[Any], bool]
    text: str

    def check(self, value: Any) -> bool:
        return value is None or self.predicate(value)

    def describe(self, type_phrase: str) -> str:
        return self.text


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# --------------------------------------------------------------------------------------------------
# Listeners: `NAME://host:port`, comma separated (Kafka's listener syntax).


@dataclass(frozen=True)
class Listener:
    """One endpoint (Kafka's EndPoint): a listener name, where it listens, and its security protocol
    (from listener.security.protocol.map; None while only parsed). Two listeners are equal when name,
    host and port are."""

    name: str  # listener name, e.g. PLAINTEXT or CONTROLLER
    host: str  # "" means every interface, as in Kafka
    port: int
    security_protocol: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER_RE = re.compile(
    r"^(?P<name>[A-Za-z][A-Za-z0-9_]*)://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\[\]\s]*):(?P<port>\d+)$"
)


def parse_listeners(value: str, key: str = "listeners") -> list[Listener]:
    """Parse Kafka's `listeners` syntax; raises ConfigError naming `key` on the first bad entry."""
    out: list[Listener] = []
    for part in [p.strip() for p in value.split(",") if p.strip()]:
        m = _LISTENER_RE.match(part)
        if not m:
            raise ConfigError(
                f"{key}: expected NAME://host:port entries such as PLAINTEXT://127.0.0.1:9092, got {part!r}",
                key,
            )
        port = int(m["port"])
        if port > 65535:
            raise ConfigError(f"{key}: port must be between 0 and 65535, got {part!r}", key)
        host = m["host"][1:-1] if m["host"].startswith("[") else m["host"]
        out.append(Listener(m["name"].upper(), host, port))
    names = [li.name for li in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(
            f"{key}: each listener name may appear once, {', '.join(dupes)} appears more than "
            f"once in {value!r}",
            key,
        )
    return out


def _metrics_listener(value: str) -> tuple[str, int]:
    from kaflite.server.metrics import parse_metrics_listener

    try:
        return parse_metrics_listener(value)
    except ValueError as err:
        raise ConfigError(str(err), "metrics.listener") from None


def _listeners_validator(key: str) -> Validator:
    # parse_listeners raises its own precise message (bad port, duplicate name); an empty list is refused.
    return Custom(
        lambda value: bool(parse_listeners(value, key)),
        "NAME://host:port entries such as PLAINTEXT://127.0.0.1:9092",
    )


# --------------------------------------------------------------------------------------------------
# Key definitions.


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None
    applies: bool = True  # False: accepted for compatibility with Kafka's files, changes nothing here
    kafka_default: Any = field(default=None)  # set when kaflite's default differs from Kafka's
    differs: str = ""  # why kaflite's default or behaviour differs from Kafka's
    mode: UpdateMode = READ_ONLY  # Kafka's dynamic update mode of this broker key

    def parse(self, raw: Any) -> Any:
        """Parse a string (or already-typed value) to this key's type and validate it."""
        value = _parse_typed(self.name, self.type, raw, self.validator)
        if self.validator is not None and not self.validator.check(value):
            raise _bad_value(self.name, self.type, raw, self.validator)
        return value


def _bad_value(key: str, type_: str, raw: Any, validator: Validator | None) -> ConfigError:
    phrase = _TYPE_PHRASE[type_]
    want = validator.describe(phrase) if validator is not None else phrase
    return ConfigError(f"{key}: expected {want}, got {_show(raw)}", key)


def _show(raw: Any) -> str:
    return repr(raw) if isinstance(raw, str) else repr(format_value(raw))


def _parse_typed(key: str, type_: str, raw: Any, validator: Validator | None) -> Any:
    if raw is None:
        return None
    if not isinstance(raw, str):
        # Already typed (EmbeddedBroker(overrides={"num.partitions": 3})): check the type, keep the value.
        if type_ == "boolean" and isinstance(raw, bool):
            return raw
        if type_ in ("int", "short", "long") and isinstance(raw, int) and not isinstance(raw, bool):
            return _int_in_range(key, type_, raw, raw, validator)
        if type_ == "double" and isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if type_ == "list" and isinstance(raw, list | tuple):
            return [str(v) for v in raw]
        if isinstance(raw, Path):
            raw = str(raw)
        else:
            raw = format_value(raw)
    text = raw.strip()
    if type_ == "boolean":
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        raise _bad_value(key, type_, raw, None)
    if type_ in ("int", "short", "long"):
        if not re.fullmatch(r"[+-]?\d+", text):
            raise _bad_value(key, type_, raw, validator)
        return _int_in_range(key, type_, int(text), raw, validator)
    if type_ == "double":
        try:
            return float(text)
        except ValueError:
            raise _bad_value(key, type_, raw, validator) from None
    if type_ == "list":
        # Kafka splits on commas with surrounding whitespace; an empty string is an empty list.
        return [] if not text else [p for p in re.split(r"\s*,\s*", text) if p != ""]
    return text


def _int_in_range(key: str, type_: str, value: int, raw: Any, validator: Validator | None) -> int:
    lo, hi = {"int": (INT_MIN, INT_MAX), "short": (SHORT_MIN, SHORT_MAX), "long": (LONG_MIN, LONG_MAX)}[type_]
    if not lo <= value <= hi:
        raise _bad_value(key, type_, raw, validator)
    return value


def _k(
    name: str,
    type_: ConfigType,
    default: Any,
    doc: str,
    validator: Validator | None = None,
    applies: bool = True,
    kafka_default: Any = None,
    differs: str = "",
    mode: UpdateMode = READ_ONLY,
) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, validator, applies, kafka_default, differs, mode)


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TS_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP = ("delete", "compact")
_NOT_HERE = "accepted for compatibility; kaflite is one asyncio process, so this changes nothing"


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs entry."""

    name: str
    value: str | None
    source: str  # a Source or "topic"
    source_code: int  # Kafka's config_source
    config_type: int  # Kafka's config_type (DescribeConfigs v3+)
    documentation: str
    read_only: bool
    is_sensitive: bool = False
    synonyms: tuple[tuple[str, str | None, int], ...] = ()  # (name, value, source_code), first wins

    @property
    def is_default(self) -> bool:
        return self.source_code == SOURCE_DEFAULT_CONFIG


def format_value(value: Any) -> str | None:
    """A typed value as Kafka writes it in DescribeConfigs (true/false, comma-joined lists, null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return str(value)


# Kafka's MetadataVersion releases (the short versions of IBP_0_8_0 ... IBP_3_9_IV0): the values
# message.format.version and log.message.format.version take, each optionally with an -IV<n> suffix.
_KAFKA_RELEASES = frozenset(
    ["0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1"]
    + [f"2.{minor}" for minor in range(9)]
    + [f"3.{minor}" for minor in range(10)]
)
_RELEASE_KEY = re.compile(r"(?P<release>\d+(\.\d+)+)(-IV\d+)?")


def kafka_release(value: object) -> str | None:
    """The release a version string names, read as Kafka's MetadataVersion.fromVersionString reads it:
    a 0.x version keeps its first three dot-separated parts and a later one its first two (the rest is
    dropped, an -IV suffix with it), so `0.10.0.0`, `0.10.0-IV1`, `2.8.1` and `2.8-IV1` name 0.10.0,
    0.10.0, 2.8 and 2.8; None for anything Kafka refuses. Any -IV<n> of a known release is accepted
    (Kafka knows one to five per release; the suffix has no effect on magic-2 batches)."""
    text = str(value).strip()
    segments = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    key = ".".join(segments[:keep]) if len(segments) > keep else text
    shape = _RELEASE_KEY.fullmatch(key)
    if shape is None or shape.group("release") not in _KAFKA_RELEASES:
        return None
    return shape.group("release")


# message.format.version, log.message.format.version and inter.broker.protocol.version (Kafka's
# MetadataVersionValidator): every spelling Kafka reads as one of its releases.
KAFKA_RELEASE = Custom(lambda v: kafka_release(v) is not None,
                       "a Kafka release from 0.8.0 to 3.9 such as 2.8, 0.10.2, 0.10.0.0, 2.8.1 or 3.0-IV1")
