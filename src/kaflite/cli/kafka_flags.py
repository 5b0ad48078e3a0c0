"""Kafka's tool spellings, mapped in one place onto kaflite's commands.

Kafka's tools take the action as a flag (`kafka-topics.sh --create --topic t`), kaflite as a subcommand
(`kaflite topics create t`). `translate(argv)` rewrites an invocation typed from Kafka habit into kaflite's
own before Click parses it, so `kaflite topics --bootstrap-server X --create --topic t` works unchanged.

Rules (checkable facts, tested in tests/cli/test_kafka_flags.py):
- only the words after a command registered here (`TOOLS`) are rewritten; every other argv is returned
  unchanged, and so is an argv whose second word is already one of the tool's subcommands (except the
  flags of `flags`, which are rewritten in both spellings);
- exactly one action flag may be given; two different ones are refused, as Kafka's tools refuse them;
- an action flag becomes the subcommand right after the command, wherever it stood;
- a flag of `kafka_form_only` (Kafka's meaning differs from kaflite's, e.g. `--timeout` in ms, not s) is
  rewritten only when the action was given as a flag, i.e. when the user is typing Kafka's spelling;
- a refused flag raises `Refused` whose message names the Kafka flag and a kaflite command line that does
  the same or the nearest thing; a flag kaflite has no use for is dropped with a note for stderr;
- `--command-config`, `--producer.config`, `--consumer.config` FILE: the Java client properties file is
  read here, its keys translated to librdkafka's (`client_properties`) and passed by
  `kaflite.cli.common.client_config` to every admin client, producer and consumer of the command.

Other command modules plug in from their `register(app)`: `register_tool(KafkaTool("kafka-acls.sh", "acls",
actions={"--add": "add", "--remove": "remove", "--list": "list"}, flags={...}))` for a new tool, or
`extend_tool("configs", flags={"--user": Rename("--user")})` to take over a flag refused here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ClientKey",
    "Custom",
    "Ignore",
    "KafkaTool",
    "PropertiesFile",
    "Refuse",
    "Refused",
    "Rename",
    "TOOLS",
    "Translation",
    "extend_tool",
    "java_client_properties",
    "register_tool",
    "translate",
]


class Refused(Exception):
    """A Kafka flag kaflite does not take; `message` names the kaflite equivalent."""

    def __init__(self, message: str, equivalent: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.equivalent = equivalent


@dataclass(frozen=True)
class Rename:
    """The same meaning under another name (`--broker-list` -> `--bootstrap-server`); `to=None` with a
    value keeps only the value (a positional)."""

    to: str
    takes_value: bool = True
    convert: Callable[[str], str] | None = None


@dataclass(frozen=True)
class ClientKey:
    """A Kafka flag that is a client setting: becomes `-X key=value` (librdkafka's key)."""

    key: str
    takes_value: bool = True
    convert: Callable[[str], str] | None = None
    fixed: str | None = None  # the value of a flag without one (`--sync`)


@dataclass(frozen=True)
class Ignore:
    """Accepted, without effect in kaflite (said on stderr, with the reason)."""

    why: str
    takes_value: bool = False


@dataclass(frozen=True)
class Refuse:
    """Refused; `equivalent` is a kaflite command line (placeholders in capitals) doing the nearest thing."""

    why: str
    equivalent: str
    takes_value: bool = False


@dataclass(frozen=True)
class Custom:
    """Rewritten by a function of the value (None when the flag takes none or it was left out)."""

    rewrite: Callable[[str | None], list[str]]
    takes_value: bool | None = True  # None: an optional value (taken unless the next word is a flag)


@dataclass(frozen=True)
class PropertiesFile:
    """A Java client properties file whose keys go to the command's clients (see `client_properties`)."""

    security_only: bool = False


FlagMap = Rename | ClientKey | Ignore | Refuse | Custom | PropertiesFile


@dataclass(frozen=True)
class KafkaTool:
    script: str  # Kafka's script, for messages: "kafka-topics.sh"
    command: str  # kaflite's command: "topics"
    actions: Mapping[str, str] = field(default_factory=dict)  # "--create" -> "create"
    flags: Mapping[str, FlagMap] = field(default_factory=dict)
    kafka_form_only: Mapping[str, FlagMap] = field(default_factory=dict)

    def mapping(self, flag: str, kafka_form: bool) -> FlagMap | None:
        if kafka_form and flag in self.kafka_form_only:
            return self.kafka_form_only[flag]
        return self.flags.get(flag)


@dataclass
class Translation:
    argv: list[str]
    notes: list[str] = field(default_factory=list)
    client_properties: dict[str, str] = field(default_factory=dict)
    kafka_form: bool = False


TOOLS: dict[str, KafkaTool] = {}


def register_tool(tool: KafkaTool) -> None:
    """Make `kaflite <tool.command>` take Kafka's spellings of `tool.script` (a later call replaces it)."""
    TOOLS[tool.command] = tool


def extend_tool(command: str, actions: Mapping[str, str] | None = None, flags: Mapping[str, FlagMap] | None = None,
                ) -> None:
    """Add action flags or flag mappings to a registered tool (a command module taking over a flag another
    refuses, e.g. kafka-configs.sh --user for SCRAM credentials)."""
    tool = TOOLS[command]
    TOOLS[command] = KafkaTool(tool.script, tool.command, {**tool.actions, **(actions or {})},
                               {**tool.flags, **(flags or {})}, tool.kafka_form_only)


# --- Java client properties -> librdkafka ------------------------------------------------------------

# Java-only keys with no librdkafka meaning (serialisation is the tool's business here).
_JAVA_ONLY = frozenset({"key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
                        "ssl.truststore.type", "ssl.keystore.type", "interceptor.classes"})
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java .properties file, read as java.util.Properties reads it (the broker's own parser)."""
    from kaflite.server.config.properties import parse_properties

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise Refused(f"{path}: {err.strerror or err}") from None
    return {key: value for key, value, _line in parse_properties(text)}


def command_config(path: str | Path | None) -> dict[str, str]:
    """librdkafka settings from a `--command-config` client properties file: its security keys, translated
    by `java_client_properties`; a file that cannot be used is a usage error naming the option. For the
    commands that take the option themselves (users, acls)."""
    if path is None:
        return {}
    from kaflite.cli.common import EXIT_USAGE, fail

    try:
        return java_client_properties(read_properties(path), str(path), security_only=True)
    except Refused as err:
        fail(f"--command-config: {err.message}", EXIT_USAGE)


def java_client_properties(props: Mapping[str, str], path: str, security_only: bool) -> dict[str, str]:
    """librdkafka settings for a Java client's properties: the same key where librdkafka has it, JAAS
    PLAIN/SCRAM as sasl.username/sasl.password, PEM trust and key stores as ssl.ca/certificate/key.location.
    A JKS or PKCS12 store is refused (librdkafka reads PEM; `kaflite certs` makes PEM files)."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if security_only and not key.startswith(_SECURITY_PREFIXES):
            continue
        if key in _JAVA_ONLY:
            continue
        if key == "sasl.jaas.config":
            from kaflite.server.config.definitions import ConfigError
            from kaflite.server.config.jaas import parse_jaas

            try:
                entry = parse_jaas(value, f"{path}: sasl.jaas.config")
            except ConfigError as err:
                raise Refused(str(err)) from None
            for name in ("username", "password"):
                if name in entry.options:
                    out[f"sasl.{name}"] = entry.options[name]
        elif key == "sasl.mechanism":
            out["sasl.mechanisms"] = value
        elif key in ("ssl.truststore.location", "ssl.keystore.location"):
            kind = props.get(key.replace(".location", ".type"), "JKS").upper()
            if kind != "PEM":
                raise Refused(
                    f"{path}: {key} is a {kind} store; librdkafka reads PEM files: set "
                    f"{key.replace('.location', '.type')}=PEM with a PEM file "
                    "(`kaflite certs DIR` makes them)", "kaflite certs DIR")
            if key == "ssl.truststore.location":
                out["ssl.ca.location"] = value
            else:  # Kafka's PEM key store holds the key and the certificate chain in one file
                out["ssl.certificate.location"] = value
                out["ssl.key.location"] = value
        elif key == "ssl.truststore.password" or key == "ssl.keystore.password":
            continue  # PEM files read here are not encrypted as a whole; ssl.key.password covers the key
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value or "none"
        else:
            out[key] = value
    return out


# --- value conversions -----------------------------------------------------------------------------

def _ms_to_seconds(value: str) -> str:
    try:
        return f"{int(value) / 1000:g}"
    except ValueError:
        raise Refused(f"--timeout: expected milliseconds (an integer), got {value!r}") from None


def _bytes_to_kbytes(value: str) -> str:
    try:
        return str(max(1, int(value) // 1024))
    except ValueError:
        raise Refused(f"--max-memory-bytes: expected a number of bytes, got {value!r}") from None


def _compression(value: str | None) -> list[str]:
    # kafka-console-producer.sh: the flag alone means gzip
    return ["--compression", value or "gzip"]


_DEFAULT_FORMATTERS = ("DefaultMessageFormatter",)


def _formatter(value: str | None) -> list[str]:
    name = (value or "").rsplit(".", 1)[-1]
    if name in _DEFAULT_FORMATTERS:
        return []  # kaflite consume prints with Kafka's DefaultMessageFormatter already
    if name == "NoOpMessageFormatter":
        return ["--property", "print.value=false"]
    raise Refused(
        f"--formatter {value}: kaflite consume prints with Kafka's DefaultMessageFormatter (its --property "
        "print.key=true, print.timestamp=true, ... keys) or one JSON object a record: "
        "`kaflite consume --topic TOPIC --json`", "kaflite consume --topic TOPIC --json")


def _properties_as(option: str) -> Callable[[str | None], list[str]]:
    def rewrite(value: str | None) -> list[str]:
        out: list[str] = []
        for key, v in read_properties(value or "").items():
            out += [option, f"{key}={v}"]
        return out

    return rewrite


def _deserializer(value: str | None) -> list[str]:
    name = (value or "").rsplit(".", 1)[-1]
    if name in ("StringDeserializer", "ByteArrayDeserializer", "BytesDeserializer"):
        return []  # kaflite prints bytes as UTF-8 text: what these two do in the console consumer
    raise Refused(
        f"deserializer {value}: kaflite consume prints keys and values as text; for the raw record use "
        "`kaflite consume --topic TOPIC --json`", "kaflite consume --topic TOPIC --json")


def _add_config_file(value: str | None) -> list[str]:
    props = read_properties(value or "")
    return ["--add-config", ",".join(f"{k}=[{v}]" if "," in v else f"{k}={v}" for k, v in props.items())]


_ZOOKEEPER = Refuse("kaflite's tools talk to brokers, never to ZooKeeper (removed from Kafka's tools too)",
                    "kaflite configs describe --bootstrap-server HOST:PORT --topic TOPIC", takes_value=True)

_CLIENT_CONFIG_FILES: dict[str, FlagMap] = {
    "--command-config": PropertiesFile(security_only=True),
}


# --- the tools ------------------------------------------------------------------------------------

def _builtin_tools() -> list[KafkaTool]:
    return [
        KafkaTool(
            "kafka-topics.sh", "topics",
            actions={"--create": "create", "--list": "list", "--describe": "describe", "--alter": "alter",
                     "--delete": "delete"},
            flags={
                **_CLIENT_CONFIG_FILES,
                "--partition-size-limit-per-response": Ignore(
                    "librdkafka pages DescribeTopicPartitions itself", takes_value=True),
                "--topic-id": Refuse("kaflite names topics by name; `topics describe` prints each TopicId",
                                     "kaflite topics describe --topic TOPIC", takes_value=True),
                "--replica-assignment": Refuse(
                    "create the topic, then place its replicas with reassign-partitions",
                    "kaflite reassign-partitions --reassignment-json-file FILE --execute", takes_value=True),
            },
        ),
        KafkaTool(
            "kafka-consumer-groups.sh", "groups",
            actions={"--list": "list", "--describe": "describe", "--delete": "delete",
                     "--reset-offsets": "reset-offsets"},
            flags={
                **_CLIENT_CONFIG_FILES,
                "--offsets": Ignore("the per-partition offsets are what `groups describe` prints by default"),
                "--verbose": Ignore("`groups describe --members` prints each member's partition count"),
                "--delete-offsets": Refuse(
                    "kaflite deletes a whole group's offsets (or resets them)",
                    "kaflite groups delete --group GROUP"),
                "--export": Refuse("the plan is printed as a table",
                                   "kaflite groups reset-offsets --group GROUP --all-topics --to-earliest --dry-run"),
                "--from-file": Refuse("give the offsets with --to-offset per --topic TOPIC:P",
                                      "kaflite groups reset-offsets --group GROUP --topic TOPIC --to-offset N",
                                      takes_value=True),
                "--to-current": Refuse("the committed offsets are where the group is; shift them by 0",
                                       "kaflite groups reset-offsets --group GROUP --all-topics --shift-by 0"),
                "--to-datetime": Refuse(
                    "reset by time is not in kaflite yet; find the offset of a time with get-offsets --time MS",
                    "kaflite get-offsets --topic TOPIC --time MS", takes_value=True),
                "--by-duration": Refuse(
                    "reset by time is not in kaflite yet; find the offset of a time with get-offsets --time MS",
                    "kaflite get-offsets --topic TOPIC --time MS", takes_value=True),
            },
            # kafka-consumer-groups.sh's --timeout is in milliseconds, kaflite's in seconds
            kafka_form_only={"--timeout": Rename("--timeout", convert=_ms_to_seconds)},
        ),
        KafkaTool(
            "kafka-configs.sh", "configs",
            actions={"--describe": "describe", "--alter": "alter"},
            flags={
                **_CLIENT_CONFIG_FILES,
                "--add-config-file": Custom(_add_config_file),
                "--force": Ignore("kaflite configs never asks for confirmation"),
                "--zookeeper": _ZOOKEEPER,
                "--zk-tls-config-file": _ZOOKEEPER,
                "--bootstrap-controller": Refuse(
                    "kaflite runs in ZooKeeper mode: configs go through the brokers",
                    "kaflite configs describe --bootstrap-server HOST:PORT --broker ID", takes_value=True),
                "--broker-defaults": Refuse("broker-wide defaults are static in kaflite (server.properties); "
                                            "kaflite configs changes one topic or one broker",
                                            "kaflite configs describe --broker ID --all"),
                # the default user / client id of client quotas: kafka-configs.sh keeps it as the name ""
                "--entity-default": Custom(lambda _v: ["--entity-name", ""], takes_value=False),
                "--user": Custom(lambda v: ["--entity-type", "users", "--entity-name", v or ""]),
                "--client": Custom(lambda v: ["--entity-type", "clients", "--entity-name", v or ""]),
                "--user-defaults": Custom(lambda _v: ["--entity-type", "users", "--entity-name", ""],
                                          takes_value=False),
                "--client-defaults": Custom(lambda _v: ["--entity-type", "clients", "--entity-name", ""],
                                            takes_value=False),
                "--broker-logger": Refuse("log levels are not configs in kaflite (serve --log-level)",
                                          "kaflite configs describe --broker ID --all", takes_value=True),
                **{f: Refuse("kaflite keeps no IP quotas or client metrics subscriptions",
                             "kaflite configs describe --entity-type users --entity-name USER",
                             takes_value=f in ("--ip", "--client-metrics"))
                   for f in ("--ip", "--ip-defaults", "--client-metrics")},
            },
        ),
        KafkaTool(
            "kafka-get-offsets.sh", "get-offsets",
            flags={**_CLIENT_CONFIG_FILES, "--broker-list": Rename("--bootstrap-server")},
        ),
        KafkaTool(
            "kafka-console-producer.sh", "produce",
            flags={
                "--producer.config": PropertiesFile(),
                "--broker-list": Rename("--bootstrap-server"),
                "--request-required-acks": Rename("--acks"),
                "--compression-codec": Custom(_compression, takes_value=None),
                "--sync": Rename("--linger-ms", takes_value=False, convert=lambda _: "0"),
                "--batch-size": ClientKey("batch.size"),
                "--max-partition-memory-bytes": ClientKey("batch.size"),
                "--max-memory-bytes": ClientKey("queue.buffering.max.kbytes", convert=_bytes_to_kbytes),
                "--message-send-max-retries": ClientKey("message.send.max.retries"),
                "--metadata-expiry-ms": ClientKey("metadata.max.age.ms"),
                "--request-timeout-ms": ClientKey("request.timeout.ms"),
                "--retry-backoff-ms": ClientKey("retry.backoff.ms"),
                "--socket-buffer-size": ClientKey("socket.send.buffer.bytes"),
                "--reader-config": Custom(_properties_as("--property")),
                "--line-reader": Refuse(
                    "kaflite reads one record a line: key<SEP>value with --property parse.key=true",
                    "kaflite produce --topic TOPIC --property parse.key=true --property key.separator=:",
                    takes_value=True),
                "--max-block-ms": Refuse(
                    "librdkafka never blocks a send; it bounds its queue instead",
                    "kaflite produce --topic TOPIC -X queue.buffering.max.messages=N", takes_value=True),
            },
        ),
        KafkaTool(
            "kafka-console-consumer.sh", "consume",
            flags={
                "--consumer.config": PropertiesFile(),
                "--formatter": Custom(_formatter),
                "--formatter-config": Custom(_properties_as("--property")),
                "--isolation-level": ClientKey("isolation.level"),
                "--key-deserializer": Custom(_deserializer),
                "--value-deserializer": Custom(_deserializer),
                "--skip-message-on-error": Ignore("kaflite prints undecodable bytes with replacement "
                                                  "characters instead of failing"),
                **{f: Refuse("kaflite consume reads one topic named with --topic",
                             "kaflite consume --topic TOPIC", takes_value=True)
                   for f in ("--include", "--whitelist")},
                "--enable-systest-events": Refuse("Kafka's system-test events are not printed by kaflite",
                                                  "kaflite consume --topic TOPIC --json"),
            },
        ),
    ]


for _tool in _builtin_tools():
    register_tool(_tool)


# --- the translation ------------------------------------------------------------------------------

def _refuse(tool: KafkaTool, flag: str, how: Refuse) -> Refused:
    return Refused(f"{tool.script}'s {flag}: {how.why}; use `{how.equivalent}`", how.equivalent)


def translate(argv: list[str]) -> Translation:
    """kaflite's spelling of `argv` (the words after `kaflite`); raises Refused."""
    if not argv or argv[0] not in TOOLS:
        return Translation(list(argv))
    tool = TOOLS[argv[0]]
    words = list(argv[1:])
    end = words.index("--") if "--" in words else len(words)
    head, tail = words[:end], words[end:]
    if "--version" in head and (not head or head[0] not in tool.actions.values()):
        return Translation(["--version"])
    subcommands = set(tool.actions.values())
    given = list(dict.fromkeys(w for w in head if w in tool.actions))
    sub: list[str] = []
    kafka_form = False
    if given and not (head and head[0] in subcommands):
        if len(given) > 1:
            raise Refused(f"{tool.script}: give one action of {', '.join(tool.actions)} (got {', '.join(given)})")
        kafka_form = True
        sub = [tool.actions[given[0]]]
        head = [w for w in head if w != given[0]]
    out = Translation([])
    out.kafka_form = kafka_form
    rewritten: list[str] = []
    i = 0
    while i < len(head):
        word = head[i]
        flag, eq, inline = word.partition("=")
        how = tool.mapping(flag, kafka_form) if flag.startswith("--") else None
        if how is None:
            rewritten.append(word)
            i += 1
            continue
        takes = how.takes_value if not isinstance(how, PropertiesFile) else True
        value: str | None = None
        if eq:
            value = inline
        elif takes is None:  # optional value
            if i + 1 < len(head) and not head[i + 1].startswith("-"):
                value = head[i + 1]
                i += 1
        elif takes:
            if i + 1 >= len(head):
                raise Refused(f"{flag}: a value is missing")
            value = head[i + 1]
            i += 1
        i += 1
        if isinstance(how, Rename):
            new = how.convert(value or "") if how.convert else value
            rewritten += [how.to] + ([new] if new is not None else [])
        elif isinstance(how, ClientKey):
            raw = how.fixed if how.fixed is not None else (value or "")
            rewritten += ["-X", f"{how.key}={how.convert(raw) if how.convert else raw}"]
        elif isinstance(how, Ignore):
            out.notes.append(f"{tool.script}'s {flag} has no effect in kaflite: {how.why}")
        elif isinstance(how, Refuse):
            raise _refuse(tool, flag, how)
        elif isinstance(how, Custom):
            rewritten += how.rewrite(value)
        else:  # PropertiesFile
            path = value or ""
            out.client_properties.update(java_client_properties(read_properties(path), path, how.security_only))
    out.argv = [tool.command, *sub, *rewritten, *tail]
    return out


def takes_value(command: str, flag: str, kafka_form: bool = True) -> bool | None:
    """Whether the mapped Kafka `flag` of `command` takes a value (None: not mapped here, or optional)."""
    tool = TOOLS.get(command)
    how = tool.mapping(flag, kafka_form) if tool else None
    if how is None:
        return None
    return True if isinstance(how, PropertiesFile) else how.takes_value
