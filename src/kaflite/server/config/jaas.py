"""Kafka's JAAS configuration syntax (`sasl.jaas.config` and its per-listener forms):

    org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s" user_alice="a";

Rules (Kafka's JaasConfig, a StreamTokenizer):
- one login module: its class name, a control flag (required, requisite, sufficient, optional), then
  `name=value` options, then `;`; whitespace and `//` and `/* */` comments separate tokens;
- a value is a bare word or a double-quoted string in which a backslash escapes the next character
  (`\\"`, `\\\\`; `\\n` and `\\t` are a newline and a tab);
- anything else is refused with a ConfigError naming the key and the position, never the text around it
  (it holds passwords).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaflite.server.config.definitions import ConfigError

__all__ = ["JaasEntry", "parse_jaas"]

FLAGS = ("required", "requisite", "sufficient", "optional")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str, key: str) -> list[tuple[str, str, int]]:
    """(kind, value, position): kind is "word", "string" or the symbol itself (= or ;)."""
    out: list[tuple[str, str, int]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ConfigError(f"{key}: unterminated comment at position {i}", key)
            i = end + 2
        elif c in "=;":
            out.append((c, c, i))
            i += 1
        elif c == '"':
            start, i, chars = i, i + 1, []
            while True:
                if i >= n:
                    raise ConfigError(f"{key}: unterminated quoted value starting at position {start}", key)
                c = text[i]
                if c == "\\" and i + 1 < n:
                    chars.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    chars.append(c)
                    i += 1
            out.append(("string", "".join(chars), start))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            out.append(("word", text[start:i], start))
    return out


def parse_jaas(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """The one login module of a JAAS configuration value; ConfigError naming `key` when malformed."""
    toks = _tokens(text, key)
    if not toks:
        raise ConfigError(f"{key}: expected a login module such as "
                          f"'org.apache.kafka.common.security.plain.PlainLoginModule required ...;', got ''", key)

    def expect(i: int, what: str) -> tuple[str, str, int]:
        if i >= len(toks):
            raise ConfigError(f"{key}: expected {what} at the end of the value (a JAAS entry ends with ';')", key)
        return toks[i]

    kind, module, _ = expect(0, "a login module class name")
    if kind != "word":
        raise ConfigError(f"{key}: expected a login module class name at position 0", key)
    kind, flag, pos = expect(1, "a control flag")
    if kind != "word" or flag.lower() not in FLAGS:
        raise ConfigError(f"{key}: expected a control flag ({', '.join(FLAGS)}) at position {pos}", key)
    options: dict[str, str] = {}
    i = 2
    while True:
        kind, name, pos = expect(i, "an option name=value or ';'")
        if kind == ";":
            i += 1
            break
        if kind != "word":
            raise ConfigError(f"{key}: expected an option name at position {pos}", key)
        kind, _, pos = expect(i + 1, "'=' after an option name")
        if kind != "=":
            raise ConfigError(f"{key}: expected '=' after option {name} at position {pos}", key)
        kind, value, pos = expect(i + 2, f"a value of option {name}")
        if kind not in ("word", "string"):
            raise ConfigError(f"{key}: expected a value of option {name} at position {pos}", key)
        options[name] = value
        i += 3
    if i != len(toks):
        raise ConfigError(f"{key}: expected exactly one login module, found more after position {toks[i][2]}", key)
    return JaasEntry(module, flag.lower(), options)
