"""`ssl.principal.mapping.rules`: from a certificate's distinguished name to a principal name, as
Kafka's SslPrincipalMapper.

Rules:
- the rules are tried in order and the first that matches decides; `DEFAULT` matches every name and
  keeps it whole; `RULE:pattern/replacement/` matches when `pattern` matches the WHOLE name, and the
  name becomes `replacement` with `$1`.. replaced by the groups; a trailing `L` or `U` lower- or
  upper-cases the result;
- a name no rule matches is refused (`NoMatchingRule`: the connection is closed, as Kafka's builder
  throws);
- a malformed rule list is refused at start-up naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kaflite.server.config.definitions import ConfigError

__all__ = ["NoMatchingRule", "PrincipalMapper"]

KEY = "ssl.principal.mapping.rules"
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:[,\n]\s*|$)")


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""


class PrincipalMapper:
    def __init__(self, rules: str = "DEFAULT", key: str = KEY) -> None:
        self.rules: list[_Rule] = []
        text = rules.strip()
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(
                    f"{key}: expected DEFAULT or RULE:pattern/replacement/[LU] entries separated by commas, "
                    f"got {text[pos:]!r}", key)
            if m.group(1):
                self.rules.append(_Rule(None))
            else:
                try:
                    pattern = re.compile(m.group(2).replace("\\/", "/"))
                except re.error as err:
                    raise ConfigError(f"{key}: bad pattern {m.group(2)!r}: {err}", key) from None
                # Java's $1 becomes Python's \g<1>
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3).replace("\\/", "/"))
                self.rules.append(_Rule(pattern, replacement, m.group(4)))
            pos = m.end()
        if not self.rules:
            self.rules.append(_Rule(None))

    def map(self, name: str) -> str:
        for rule in self.rules:
            if rule.pattern is None:
                return name
            m = rule.pattern.fullmatch(name)
            if m is None:
                continue
            out = m.expand(rule.replacement)
            return out.lower() if rule.case == "L" else out.upper() if rule.case == "U" else out
        raise NoMatchingRule(f"no rule of {KEY} applies to {name!r}")
