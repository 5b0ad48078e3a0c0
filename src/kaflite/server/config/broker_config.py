"""The broker's configuration: every subsystem's key table assembled into `BROKER_CONFIGS` (as Kafka
assembles KafkaConfig from the ConfigDefs of its subsystems), the dev profile, and `BrokerConfig`, the
validated and typed configuration the broker runs with.

Precedence, lowest first: Kafka's default < the `--dev` profile < the properties file < overrides (CLI
flags, EmbeddedBroker arguments). `BrokerConfig.source(key)` says which one supplied a value, which is
what DescribeConfigs reports. Files are read in `BrokerConfig.load` and nowhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from kaflite.server.config import (
    keys_authorizer,
    keys_groups,
    keys_kraft,
    keys_network,
    keys_replication,
    keys_security,
    keys_server,
    keys_storage,
    keys_transactions,
    keys_zookeeper,
)
from kaflite.server.config.definitions import (
    _NOT_HERE,
    SECURITY_PROTOCOLS,
    SOURCE_CODES,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    TYPE_CODES,
    ConfigEntry,
    ConfigError,
    ConfigErrors,
    ConfigKey,
    Listener,
    Source,
    UnknownConfigKey,
    format_value,
    parse_listeners,
)
from kaflite.server.config.properties import _escape_value, parse_properties
from kaflite.server.config.security_checks import check_inter_broker, check_listener_security
from kaflite.server.config.topic_keys import TOPIC_CONFIGS, _unknown, validate_topic_configs

__all__ = ["BROKER_CONFIGS", "DEV_PROFILE", "DEV_PROFILE_WARNING", "SUBSYSTEMS", "BrokerConfig"]

# Every subsystem's key table, in the order --print-config, DescribeConfigs and the docs list them.
SUBSYSTEMS: tuple[ModuleType, ...] = (
    keys_server,
    keys_network,
    keys_security,
    keys_authorizer,
    keys_storage,
    keys_groups,
    keys_replication,
    keys_transactions,
    keys_zookeeper,
    keys_kraft,
)


def _assemble(subsystems: Sequence[ModuleType]) -> dict[str, ConfigKey]:
    """One table from the subsystems' tables; a key defined twice is a programming error. Keys a subsystem
    validates but does not read are marked applies=False with its reason (tests/config/test_keys_read.py)."""
    table: dict[str, ConfigKey] = {}
    for module in subsystems:
        for key in module.KEYS:
            if key.name in table:
                raise ValueError(f"config key {key.name} defined twice ({module.__name__})")
            reason = module.NOT_READ.get(key.name)
            if reason is not None:
                key = dataclasses.replace(key, applies=False, differs="accepted for compatibility, no effect: " + reason)
            if not key.applies and not key.differs:
                key = dataclasses.replace(key, differs=_NOT_HERE)
            table[key.name] = key
        unknown = set(module.NOT_READ) - {k.name for k in module.KEYS}
        if unknown:
            raise ValueError(f"{module.__name__}: NOT_READ names keys it does not define: {sorted(unknown)}")
    return table


BROKER_CONFIGS: dict[str, ConfigKey] = _assemble(SUBSYSTEMS)
LISTENER_PREFIX = "listener.name."
# `kaflite serve`'s co-hosted schema registry's Kafka client settings (schema.registry.listener), as
# Confluent's registry reads its `kafkastore.`-prefixed keys: Java client property names
REGISTRY_CLIENT_PREFIX = "schema.registry.kafkastore."
_JAAS = "sasl.jaas.config"


def _registry_client_key(key: str) -> ConfigKey | None:
    tail = key[len(REGISTRY_CLIENT_PREFIX):]
    if not tail or tail.startswith(".") or tail.endswith("."):
        return None
    secret = "password" in tail or tail == _JAAS
    return ConfigKey(key, "password" if secret else "string", None,
                     f"The co-hosted schema registry's Kafka client property {tail} (schema.registry.listener; "
                     "docs/schema-registry.md).", differs="kaflite-only key (Confluent's registry: kafkastore.*).")


def _definition(key: str) -> ConfigKey | None:
    """The definition of a broker key, including Kafka's per-listener forms
    `listener.name.<listener>.<key>` (a key of keys_security.LISTENER_KEYS) and
    `listener.name.<listener>.<mechanism>.<key>` (a key of keys_security.MECHANISM_KEYS)."""
    definition = BROKER_CONFIGS.get(key)
    if definition is None and key.startswith(REGISTRY_CLIENT_PREFIX):
        return _registry_client_key(key)
    if definition is not None or not key.startswith(LISTENER_PREFIX):
        return definition
    name, _, rest = key[len(LISTENER_PREFIX):].partition(".")
    if not name:
        return None
    if rest in keys_security.LISTENER_KEYS:
        return dataclasses.replace(BROKER_CONFIGS[rest], name=key)
    mechanism, _, tail = rest.partition(".")
    if tail in keys_security.MECHANISM_KEYS and mechanism.upper() in keys_security.SASL_MECHANISMS + ("GSSAPI",):
        return dataclasses.replace(BROKER_CONFIGS[tail], name=key)
    return None
_BROKER_KEYS: list[ConfigKey] = list(BROKER_CONFIGS.values())

# The dev profile: fast feedback on a laptop, at the price of durability.
# The group delay is short rather than 0: with 0 the first consumer forms a generation alone and the others'
# joins each start another rebalance that the earlier members only notice on their next heartbeat (~1 s with
# librdkafka); 100 ms lets a group that starts together join one generation (bench/group_bench.py).
DEV_PROFILE: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "100",
    "log.segment.bytes": str(1024 * 1024),
    "log.retention.check.interval.ms": "30000",
    "zookeeper.session.timeout.ms": "6000",
}
DEV_PROFILE_WARNING = (
    "DEV PROFILE - no durability guarantee: records are acknowledged before they are fsynced (as with "
    "Kafka's defaults; log.flush.interval.messages=1 fsyncs before acknowledging), so a crash of the machine "
    "can lose acknowledged records. group.initial.rebalance.delay.ms=100 and 1 MiB log segments. Do not use "
    "the dev profile for data you need to keep."
)


class BrokerConfig(Mapping[str, Any]):
    """The validated, typed broker configuration. `cfg[key]` is the typed value (None when unset)."""

    def __init__(
        self,
        values: Mapping[str, Any],
        sources: Mapping[str, Source],
        path: Path | None = None,
        dev: bool = False,
    ) -> None:
        self._values = dict(values)
        self._sources = dict(sources)
        self.path = path
        self.dev = dev
        # the static configuration under the dynamic layers (with_dynamic), and those layers, for synonyms
        self._static: BrokerConfig = self
        self._dynamic_default: dict[str, str] = {}
        self._dynamic_broker: dict[str, str] = {}

    # --- construction -----------------------------------------------------------------------------
    @classmethod
    def load(
        cls, path: Path | str | None = None, overrides: Mapping[str, Any] | None = None, dev: bool = False
    ) -> BrokerConfig:
        """Defaults, then the dev profile, then the properties file at `path`, then `overrides`.

        Every unknown key and bad value is collected before anything is raised, so a file with several
        typos names them all at once (ConfigErrors); one alone is raised as itself (UnknownConfigKey or
        ConfigError). The cross-key rules are checked only once every value parsed."""
        values: dict[str, Any] = {k.name: k.default for k in _BROKER_KEYS}
        sources: dict[str, Source] = {k.name: "default" for k in _BROKER_KEYS}
        errors: list[ConfigError] = []

        def apply(key: str, raw: Any, source: Source, where: str = "") -> None:
            definition = _definition(key)
            if definition is None:
                err = _unknown(key, list(BROKER_CONFIGS), "broker")
                errors.append(UnknownConfigKey(where + err.message, key))
                return
            try:
                values[key] = definition.parse(raw)
            except ConfigError as err:
                errors.append(ConfigError(where + err.message, key))
                return
            sources[key] = source

        if dev:
            for key, raw in DEV_PROFILE.items():
                apply(key, raw, "dev-profile")
        file_path = Path(path) if path is not None else None
        if file_path is not None:
            try:
                data = file_path.read_bytes()
            except OSError as err:
                raise ConfigError(
                    f"cannot read configuration file {file_path}: {err.strerror or err}"
                ) from None
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:  # Java reads .properties as ISO-8859-1
                text = data.decode("latin-1")
            for key, raw, line in parse_properties(text):
                apply(key, raw, "file", f"{file_path}:{line}: ")
        for key, raw in (overrides or {}).items():
            apply(key, raw, "override")
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ConfigErrors(errors)
        cfg = cls(values, sources, file_path, dev)
        cfg._check_consistency()
        return cfg

    def with_overrides(self, overrides: Mapping[str, Any]) -> BrokerConfig:
        """A copy with more overrides applied (validated the same way)."""
        values = dict(self._values)
        sources = dict(self._sources)
        for key, raw in overrides.items():
            definition = _definition(key)
            if definition is None:
                raise _unknown(key, list(BROKER_CONFIGS), "broker")
            values[key] = definition.parse(raw)
            sources[key] = "override"
        cfg = BrokerConfig(values, sources, self.path, self.dev)
        cfg._check_consistency()
        return cfg

    def with_dynamic(
        self, default: Mapping[str, str], per_broker: Mapping[str, str]
    ) -> tuple[BrokerConfig, dict[str, str]]:
        """This (static) configuration under the dynamic layers, Kafka's precedence: this broker's dynamic
        value, else the cluster default's, else the static one. Returns the configuration and the keys
        skipped ({key: why}): unknown or bad values stored by another version are ignored, as Kafka's
        DynamicBrokerConfig ignores invalid stored configs rather than failing the broker."""
        static = self._static
        values = dict(static._values)
        sources = dict(static._sources)
        skipped: dict[str, str] = {}
        kept: list[dict[str, str]] = [{}, {}]
        for index, (layer, source) in enumerate(
            ((default, "dynamic-default"), (per_broker, "dynamic-broker"))
        ):
            for key, raw in layer.items():
                definition = BROKER_CONFIGS.get(key)
                if definition is None or definition.mode == "read-only":
                    skipped[key] = "not a dynamic broker config"
                    continue
                try:
                    values[key] = definition.parse(raw)
                except ConfigError as err:
                    skipped[key] = err.message
                    continue
                sources[key] = cast(Source, source)
                kept[index][key] = raw
        cfg = BrokerConfig(values, sources, static.path, static.dev)
        cfg._static = static
        cfg._dynamic_default, cfg._dynamic_broker = kept
        return cfg, skipped

    @property
    def static(self) -> BrokerConfig:
        """The configuration the broker started with (no dynamic layer)."""
        return self._static

    @property
    def dynamic_default(self) -> dict[str, str]:
        return dict(self._dynamic_default)

    @property
    def dynamic_broker(self) -> dict[str, str]:
        return dict(self._dynamic_broker)

    def _check_consistency(self) -> None:
        v = self._values
        if (
            v["node.id"] is not None
            and self._sources["broker.id"] != "default"
            and v["node.id"] != v["broker.id"]
        ):
            raise ConfigError(
                f"node.id: must equal broker.id when both are set, got node.id={v['node.id']} "
                f"and broker.id={v['broker.id']}",
                "node.id",
            )
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise ConfigError(
                "group.min.session.timeout.ms: must be <= group.max.session.timeout.ms, got "
                f"{v['group.min.session.timeout.ms']} > {v['group.max.session.timeout.ms']}",
                "group.min.session.timeout.ms",
            )
        if v["log.dirs"] is not None and not v["log.dirs"]:
            raise ConfigError("log.dirs: expected at least one directory, got ''", "log.dirs")
        if not v["log.dir"]:
            raise ConfigError("log.dir: expected a directory, got ''", "log.dir")
        self._check_listeners()

    def _check_listeners(self) -> None:
        """Kafka's listener rules (KafkaConfig.validateValues) for a broker that serves PLAINTEXT only."""
        v = self._values
        protocols = self.security_protocol_map  # raises on a malformed map
        controller = self.controller_listener_names
        for li in self.listeners:
            proto = li.security_protocol
            if proto is None:
                raise ConfigError(
                    f"listeners: listener name {li.name} has no entry in listener.security.protocol.map "
                    f"({', '.join(f'{n}:{p}' for n, p in protocols.items())})",
                    "listeners",
                )
        clients = self.client_listeners
        if not clients:
            raise ConfigError(
                f"listeners: expected at least one listener for clients, got {v['listeners']!r}",
                "listeners",
            )
        for key in self._values:
            if key.startswith(LISTENER_PREFIX):
                name = key[len(LISTENER_PREFIX):].split(".", 1)[0].upper()
                if name not in {li.name for li in self.listeners}:
                    raise ConfigError(
                        f"{key}: names listener {name}, which is not in listeners ({v['listeners']})", key
                    )
        for li in clients:
            check_listener_security(self, li)
        names = {li.name for li in clients}
        inter = v["inter.broker.listener.name"]
        if inter is not None and inter.strip().upper() not in names:
            raise ConfigError(
                f"inter.broker.listener.name: must be the name of a client listener in listeners "
                f"({', '.join(sorted(names))}), got {inter!r}",
                "inter.broker.listener.name",
            )
        sibp = v["security.inter.broker.protocol"]
        if sibp is not None:
            if inter is not None:
                raise ConfigError(
                    "security.inter.broker.protocol: only one of inter.broker.listener.name and "
                    "security.inter.broker.protocol may be set", "security.inter.broker.protocol")
            if sibp.strip().upper() not in names:
                raise ConfigError(
                    f"security.inter.broker.protocol: names the listener {sibp.strip().upper()}, which is not "
                    f"in listeners ({', '.join(sorted(names))}); or set inter.broker.listener.name",
                    "security.inter.broker.protocol")
        if v["zookeeper.connect"]:
            # in a cluster the brokers connect to each other's inter-broker listener as clients
            ibl = self.inter_broker_listener_name
            check_inter_broker(self, ibl, protocols.get(ibl) or "PLAINTEXT")
        if v["advertised.listeners"] is not None:
            for li in parse_listeners(v["advertised.listeners"], "advertised.listeners"):
                if li.name in controller:
                    # Kafka 3.9+ (KIP-853): a KRaft controller's own advertised address; kaflite binds no
                    # controller listener, so the entry is accepted and unused (never given to clients)
                    continue
                if li.name not in names:
                    raise ConfigError(
                        f"advertised.listeners: listener {li.name} is not in listeners ({v['listeners']})",
                        "advertised.listeners",
                    )

    def for_listener(self, listener_name: str, key: str) -> Any:
        """`key`'s value for one listener: `listener.name.<listener>.<key>` when set (Kafka's
        per-listener override), else the broker-wide `key`."""
        own = self._values.get(f"{LISTENER_PREFIX}{listener_name.lower()}.{key}")
        return own if own is not None else self._values[key]

    def for_mechanism(self, listener_name: str, mechanism: str, key: str) -> Any:
        """`key`'s value for one mechanism of one listener: `listener.name.<listener>.<mechanism>.<key>`
        when set (Kafka's mechanism prefix), else `for_listener(listener_name, key)`."""
        own = self._values.get(f"{LISTENER_PREFIX}{listener_name.lower()}.{mechanism.lower()}.{key}")
        return own if own is not None else self.for_listener(listener_name, key)

    def registry_client_properties(self) -> dict[str, str]:
        """The co-hosted schema registry's client properties: every `schema.registry.kafkastore.<key>` set,
        by `<key>` (Java client property names)."""
        n = len(REGISTRY_CLIENT_PREFIX)
        return {k[n:]: str(v) for k, v in self._values.items() if k.startswith(REGISTRY_CLIENT_PREFIX) and v is not None}

    def listener_source(self, listener_name: str, key: str) -> str:
        """The key that supplies `for_listener(listener_name, key)` (for error messages)."""
        own = f"{LISTENER_PREFIX}{listener_name.lower()}.{key}"
        return own if self._values.get(own) is not None else key

    # --- Mapping ----------------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            raise _unknown(key, list(BROKER_CONFIGS), "broker")
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        """`config[key]`: unlike a plain mapping's, an unknown key raises UnknownConfigKey ("did you
        mean ..."), so a misspelled key fails in every code path instead of yielding `default`; a known
        key that is unset is None."""
        value = self[key]
        return default if value is None else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        explicit = self.explicit()
        return f"BrokerConfig({explicit!r}, path={self.path!s}, dev={self.dev})"

    def source(self, key: str) -> Source:
        """Where the value of `key` came from: "default", "dev-profile", "file" or "override"."""
        if key not in self._sources:
            raise _unknown(key, list(BROKER_CONFIGS), "broker")
        return self._sources[key]

    def explicit(self) -> dict[str, str | None]:
        """The keys not at their default, as strings (to log at startup): passwords (keys of type
        password: ssl.key.password, sasl.jaas.config, ...) as [hidden], as Kafka logs them."""
        out: dict[str, str | None] = {}
        for k, v in self._values.items():
            if self._sources[k] != "default":
                definition = _definition(k)
                hidden = definition is not None and definition.type == "password" and v is not None
                out[k] = "[hidden]" if hidden else format_value(v)
        return out

    def to_properties(self) -> str:
        """The effective configuration as a .properties file that `load` reads back to the same values.

        Keys are grouped by source (override, file, dev-profile, default) under a comment line; unset
        keys are written commented out (`#key=`), since an empty value is not "unset" for most types.
        """
        lines = ["# kaflite broker configuration (kaflite serve --print-config)"]
        for source in ("override", "file", "dev-profile", "default"):
            keys = [k for k in self._values if self._sources[k] == source]
            if not keys:
                continue
            lines.append(f"# source: {source}")
            for key in keys:
                text = format_value(self._values[key])
                lines.append(f"#{key}=" if text is None else f"{key}={_escape_value(text)}")
        return "\n".join(lines) + "\n"

    # --- derived values (Kafka's precedence between related keys) --------------------------------
    @property
    def broker_id(self) -> int:
        node_id = self._values["node.id"]
        return int(node_id if node_id is not None else self._values["broker.id"])

    @property
    def listeners(self) -> list[Listener]:
        """Every listener of `listeners`, with its security protocol (None when the map has none)."""
        protocols = self.security_protocol_map
        return [
            dataclasses.replace(li, security_protocol=protocols.get(li.name))
            for li in parse_listeners(self._values["listeners"])
        ]

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map; as Kafka, when the map is left at its default, a controller
        listener it does not name is PLAINTEXT (KafkaConfig.effectiveListenerSecurityProtocolMap)."""
        key = "listener.security.protocol.map"
        out: dict[str, str] = {}
        raw = self._values["listener.security.protocol.map"]
        for part in [p.strip() for p in str(raw).split(",") if p.strip()]:
            name, sep, proto = part.partition(":")
            proto = proto.strip().upper()
            if not sep or not name.strip() or proto not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"{key}: expected NAME:PROTOCOL entries with a protocol among "
                    f"{', '.join(SECURITY_PROTOCOLS)}, got {part!r}",
                    key,
                )
            out[name.strip().upper()] = proto
        if self._sources[key] == "default":
            for name in sorted(self.controller_listener_names):
                out.setdefault(name, "PLAINTEXT")
        return out

    @property
    def controller_listener_names(self) -> set[str]:
        raw = self._values["controller.listener.names"] or ""
        return {n.strip().upper() for n in raw.split(",") if n.strip()}

    @property
    def client_listeners(self) -> list[Listener]:
        """The listeners the broker binds for clients: every listener except the KRaft controller
        listeners (`controller.listener.names`), each with its security protocol."""
        controller = self.controller_listener_names
        return [li for li in self.listeners if li.name not in controller]

    @property
    def inter_broker_listener_name(self) -> str:
        """inter.broker.listener.name, else (Kafka's security.inter.broker.protocol=PLAINTEXT) the first
        client listener whose protocol is PLAINTEXT."""
        inter = self._values["inter.broker.listener.name"]
        if inter is not None:
            return str(inter).strip().upper()
        protocol = self._values["security.inter.broker.protocol"]
        if protocol is not None:  # Kafka: the listener named after the protocol
            return str(protocol).strip().upper()
        clients = self.client_listeners
        return next((li.name for li in clients if li.security_protocol == "PLAINTEXT"), clients[0].name)

    @property
    def advertised_listeners(self) -> list[Listener] | None:
        """The configured advertised listeners of clients (Kafka's effectiveAdvertisedBrokerListeners: a
        controller listener's entry left out), or None: advertise what was actually bound."""
        raw = self._values["advertised.listeners"]
        if raw is None:
            return None
        controller = self.controller_listener_names
        return [li for li in parse_listeners(raw, "advertised.listeners") if li.name not in controller]

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self._values["log.dirs"]
        return [Path(d) for d in dirs] if dirs is not None else [Path(self._values["log.dir"])]

    @property
    def log_dir(self) -> Path:
        """The data directory kaflite uses (the first of log.dirs)."""
        return self.log_dirs[0]

    @property
    def retention_ms(self) -> int:
        """log.retention.ms, else minutes, else hours, in ms; -1 (any negative) means keep forever."""
        v = self._values
        if v["log.retention.ms"] is not None:
            ms = int(v["log.retention.ms"])
        elif v["log.retention.minutes"] is not None:
            ms = int(v["log.retention.minutes"]) * 60_000
        else:
            ms = int(v["log.retention.hours"]) * 3_600_000
        return -1 if ms < 0 else ms

    @property
    def roll_ms(self) -> int:
        v = self._values
        return int(v["log.roll.ms"]) if v["log.roll.ms"] is not None else int(v["log.roll.hours"]) * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        v = self._values
        if v["log.roll.jitter.ms"] is not None:
            return int(v["log.roll.jitter.ms"])
        return int(v["log.roll.jitter.hours"]) * 3_600_000

    @property
    def flush_interval_ms(self) -> int:
        v = self._values
        ms = v["log.flush.interval.ms"]
        return int(ms) if ms is not None else int(v["log.flush.scheduler.interval.ms"])

    # --- topic-level defaults and DescribeConfigs --------------------------------------------------
    def topic_default(self, key: str) -> Any:
        """The broker-wide default of a topic-level key (what a topic without an override uses)."""
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise _unknown(key, list(TOPIC_CONFIGS), "topic")
        if key == "retention.ms":
            return self.retention_ms
        if key == "segment.ms":
            return self.roll_ms
        if key == "segment.jitter.ms":
            return self.roll_jitter_ms
        if key == "flush.ms":
            return self.flush_interval_ms
        return self._values[definition.broker_key]

    def topic_defaults(self) -> dict[str, Any]:
        return {k: self.topic_default(k) for k in TOPIC_CONFIGS}

    def topic_config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every topic-level key's effective typed value for a topic with these (validated) overrides."""
        out = self.topic_defaults()
        out.update(validate_topic_configs(overrides or {}))
        return out

    def describe(self, keys: Sequence[str] | None = None) -> list[ConfigEntry]:
        """DescribeConfigs entries for the broker (every key, or `keys`; unknown keys raise)."""
        names = list(keys) if keys else list(BROKER_CONFIGS)
        out = []
        for name in names:
            definition = BROKER_CONFIGS.get(name)
            if definition is None:
                raise _unknown(name, list(BROKER_CONFIGS), "broker")
            source = self._sources[name]
            code = SOURCE_CODES[source]
            # a password's value never leaves the broker (Kafka answers null for sensitive keys)
            value = None if definition.type == "password" else format_value(self._values[name])
            synonyms = self._layers(name)
            out.append(
                ConfigEntry(
                    name,
                    value,
                    source,
                    code,
                    TYPE_CODES[definition.type],
                    definition.doc,
                    read_only=definition.mode == "read-only",
                    is_sensitive=definition.type == "password",
                    synonyms=synonyms,
                )
            )
        return out

    def describe_default_entity(self, keys: Sequence[str] | None = None) -> list[ConfigEntry]:
        """DescribeConfigs of the cluster's default entity (Kafka's empty broker name): only the keys set
        there, each DYNAMIC_DEFAULT_BROKER_CONFIG, as Kafka answers."""
        for name in keys or ():
            if name not in BROKER_CONFIGS:
                raise _unknown(name, list(BROKER_CONFIGS), "broker")
        out = []
        for name, raw in self._dynamic_default.items():
            if keys and name not in keys:
                continue
            definition = BROKER_CONFIGS[name]
            sensitive = definition.type == "password"
            value = None if sensitive else format_value(definition.parse(raw))
            out.append(
                ConfigEntry(name, value, "dynamic-default", SOURCE_CODES["dynamic-default"],
                            TYPE_CODES[definition.type], definition.doc, read_only=False,
                            is_sensitive=sensitive,
                            synonyms=((name, value, SOURCE_CODES["dynamic-default"]),))
            )
        return out

    def _layers(self, name: str) -> tuple[tuple[str, str | None, int], ...]:
        """Kafka's synonyms of a broker key: each layer that sets it, highest precedence first (this
        broker's dynamic value, the cluster default's, the static one, the key's default)."""
        definition = BROKER_CONFIGS[name]
        sensitive = definition.type == "password"

        def shown(value: Any) -> str | None:
            return None if sensitive else format_value(value)

        out: list[tuple[str, str | None, int]] = []
        if name in self._dynamic_broker:
            out.append((name, shown(definition.parse(self._dynamic_broker[name])),
                        SOURCE_CODES["dynamic-broker"]))
        if name in self._dynamic_default:
            out.append((name, shown(definition.parse(self._dynamic_default[name])),
                        SOURCE_CODES["dynamic-default"]))
        static_source = self._static._sources[name]
        if static_source != "default":
            out.append((name, shown(self._static._values[name]), SOURCE_CODES[static_source]))
        if definition.default is not None:
            out.append((name, shown(definition.default), SOURCE_CODES["default"]))
        return tuple(out)

    def describe_topic(
        self, overrides: Mapping[str, Any] | None = None, keys: Sequence[str] | None = None
    ) -> list[ConfigEntry]:
        """DescribeConfigs entries of a topic whose stored per-topic configs are `overrides`."""
        overrides = overrides or {}
        names = list(keys) if keys else list(TOPIC_CONFIGS)
        out = []
        for name in names:
            definition = TOPIC_CONFIGS.get(name)
            if definition is None:
                raise _unknown(name, list(TOPIC_CONFIGS), "topic")
            synonyms: list[tuple[str, str | None, int]] = []
            if name in overrides:
                synonyms.append(
                    (name, format_value(definition.parse(overrides[name])), SOURCE_DYNAMIC_TOPIC_CONFIG)
                )
            for broker_key in definition.broker_keys:
                if self._values[broker_key] is not None:
                    synonyms.append(
                        (
                            broker_key,
                            format_value(self._values[broker_key]),
                            SOURCE_CODES[self._sources[broker_key]],
                        )
                    )
            if name in overrides:
                value, source = synonyms[0][1], "topic"
            else:
                value = format_value(self.topic_default(name))
                first = next((s for s in synonyms if s[2] != SOURCE_DEFAULT_CONFIG), None)
                source = self._sources[first[0]] if first else "default"
            out.append(
                ConfigEntry(
                    name,
                    value,
                    source,
                    SOURCE_CODES[source],
                    TYPE_CODES[definition.type],
                    definition.doc,
                    read_only=False,
                    synonyms=tuple(synonyms),
                )
            )
        return out
