"""No key is claimed to take effect unless the code uses it, and no key marked without effect is used.

A key is followed from the parsed configuration to a use, by an AST scan of src/ (names in a table do not
count: a string in a dict literal, a tuple or a synonym list is not a read):
- a string read: `cfg["key"]`, `x.get("key")`, `x.setting("key")`, `x.topic_default("key")` or
  `x.for_listener(listener, "key")`, `x.for_mechanism(listener, mechanism, "key")` (or the keys handed to `InternalTopic` or `jaas_key`) outside the key tables (server/config/) and storage/config.py;
- a BrokerConfig property that reads `self._values["key"]`, itself read as an attribute outside
  server/config/ (`config.retention_ms`, `config.listeners`, ...) or by such a property;
- a key a parser maps to a dataclass field (LogConfig's `_TOPIC_KEYS` / `_BROKER_KEYS`, CoordinatorConfig's
  KEYS), whose field is read as an attribute outside the parser's module, directly or through one of the
  dataclass's properties that is (or that another such property reads) (`cfg.max_compaction_lag_ms`, `cfg.timestamp_before_max_ms`, ...);
- a broker key that is a synonym of a used topic key (BrokerConfig.topic_config resolves them).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from helpers import REPO
from kaflite.coordinator.config import CoordinatorConfig
from kaflite.server.config import BROKER_CONFIGS, TOPIC_CONFIGS, TOPIC_NOT_READ
from kaflite.storage import config as storage_config

SRC = REPO / "src" / "kaflite"
CONFIG = SRC / "server" / "config"  # the key tables name every key: they do not count as reading one
STORAGE_CONFIG = SRC / "storage" / "config.py"
COORDINATOR_CONFIG = SRC / "coordinator" / "config.py"
GETTERS = {"get", "setting", "topic_default"}  # read the key given as first argument
KEY_ARGUMENT = {"InternalTopic",  # an internal topic's spec: the keys of its partitions, replication, configs
                "jaas_key"}  # takes the broker-wide JAAS key it falls back to
SECOND_ARGUMENT = {"for_listener"}  # (listener, key): the listener's override of the key, else the key
THIRD_ARGUMENT = {"for_mechanism"}  # (listener, mechanism, key): that mechanism's override, else for_listener


@cache
def _trees() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(SRC.rglob("*.py"))}


def string_reads(tree: ast.AST) -> set[str]:
    """Keys read by subscript or getter call with a literal key."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                out.add(node.slice.value)
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            args = node.args[:1] if name in GETTERS else node.args if name in KEY_ARGUMENT else \
                node.args[1:2] if name in SECOND_ARGUMENT else node.args[2:3] if name in THIRD_ARGUMENT else []
            out.update(a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return out


def attribute_reads(tree: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)}


def properties(tree: ast.AST) -> dict[str, tuple[set[str], set[str]]]:
    """property name -> (attributes of self it reads, literal keys it reads), over every class."""
    out: dict[str, tuple[set[str], set[str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
            isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list
        ):
            attrs = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                     and isinstance(n.value, ast.Name) and n.value.id == "self"}
            out[node.name] = (attrs, string_reads(node))
    return out


def _outside(*excluded: Path) -> list[ast.Module]:
    return [t for p, t in _trees().items() if p not in excluded and CONFIG not in p.parents]


@cache
def _string_reads_outside() -> frozenset[str]:
    return frozenset().union(*(string_reads(t) for t in _outside(STORAGE_CONFIG)))


@cache
def _attribute_reads_outside(module: Path | None) -> frozenset[str]:
    return frozenset().union(*(attribute_reads(t) for t in (_outside(module) if module else _outside())))


def _live_properties(module: Path, reads_outside: frozenset[str]) -> dict[str, tuple[set[str], set[str]]]:
    """The properties of `module` read outside it, or by a live property of the module (fixpoint)."""
    props = properties(_trees()[module])
    live = {n for n in props if n in reads_outside}
    while True:
        more = {n for n in props if n not in live and any(n in props[m][0] for m in live)}
        if not more:
            return {n: props[n] for n in live}
        live |= more


def _field_used(field: str, module: Path) -> bool:
    """`field` of the dataclass defined in `module` is read outside it, or through a live property."""
    outside = _attribute_reads_outside(module)
    return field in outside or any(field in attrs for attrs, _ in _live_properties(module, outside).values())


def _parsers() -> list[tuple[Mapping[str, str], Path]]:
    return [
        (storage_config._TOPIC_KEYS, STORAGE_CONFIG),  # noqa: SLF001 - the parser's own table
        (storage_config._BROKER_KEYS, STORAGE_CONFIG),  # noqa: SLF001
        (CoordinatorConfig.KEYS, COORDINATOR_CONFIG),
    ]


@cache
def used(key: str) -> bool:
    if key in _string_reads_outside():
        return True
    for table, module in _parsers():
        if key in table and _field_used(table[key], module):
            return True
    # BrokerConfig's derived properties (retention_ms, log_dirs, listeners, ...)
    live = _live_properties(CONFIG / "broker_config.py", _attribute_reads_outside(None))
    if any(key in keys for _attrs, keys in live.values()):
        return True
    return any(key in t.broker_keys and t.name not in TOPIC_NOT_READ and used(t.name) for t in TOPIC_CONFIGS.values())


def test_the_scan_counts_reads_and_not_tables() -> None:
    tree = ast.parse('TABLE = {"a.b": "a_b"}\nSYN = ("c.d",)\nx = cfg["e.f"]\ny = cfg.get("g.h", 1)\n'
                     'z = broker.setting("i.j")\ncfg["k.l"] = 1\n')
    assert string_reads(tree) == {"e.f", "g.h", "i.j"}
    tree = ast.parse("class C:\n    @property\n    def p(self):\n        return self.f or self._values['m.n']\n")
    assert properties(tree) == {"p": ({"f", "_values"}, {"m.n"})}


def test_every_applying_broker_key_is_used() -> None:
    unused = [k for k, d in BROKER_CONFIGS.items() if d.applies and not used(k)]
    assert not unused, f"broker keys claimed to apply that nothing uses (use them, or add them to NOT_READ): {unused}"


def test_no_broker_key_marked_without_effect_is_used() -> None:
    misread = [k for k, d in BROKER_CONFIGS.items() if not d.applies and used(k)]
    assert not misread, f"broker keys marked 'no effect' that the code uses (mark them as applying): {misread}"


def test_every_topic_key_is_used_or_listed_without_effect() -> None:
    unused = [k for k in TOPIC_CONFIGS if k not in TOPIC_NOT_READ and not used(k)]
    assert not unused, f"topic keys that nothing uses (use them, or add them to TOPIC_NOT_READ): {unused}"
    misread = [k for k in TOPIC_NOT_READ if used(k)]
    assert not misread, f"topic keys in TOPIC_NOT_READ that the code uses: {misread}"
    assert set(TOPIC_NOT_READ) <= set(TOPIC_CONFIGS)


def test_storage_accepts_no_topic_key_the_broker_does_not_know() -> None:
    """LogConfig.from_topic_configs used to pass the replication throttles and remote.storage.enable
    silently, keys the broker refuses as unknown."""
    accepted = set(storage_config._TOPIC_KEYS) | storage_config._NON_STORAGE_TOPIC_KEYS  # noqa: SLF001
    dotted_fields = {f.replace("_", ".") for f in storage_config._FIELD_TYPES}  # noqa: SLF001 - aliases
    assert accepted - dotted_fields <= set(TOPIC_CONFIGS)


def test_keys_without_effect_say_why() -> None:
    for key, d in BROKER_CONFIGS.items():
        if not d.applies:
            assert d.differs, key
    for key, reason in TOPIC_NOT_READ.items():
        assert reason, key
