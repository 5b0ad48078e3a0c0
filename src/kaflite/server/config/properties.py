"""Java .properties parsing (the rules that matter for server.properties) and escaping for writing back."""

from __future__ import annotations

import re

__all__ = ["parse_properties"]



def parse_properties(text: str) -> list[tuple[str, str, int]]:
    """Parse .properties text into (key, value, line_number) in file order (later duplicates win).

    Rules (java.util.Properties.load): lines whose first non-blank character is # or ! are comments; a
    line ending in an odd number of backslashes continues on the next line, whose leading whitespace is
    dropped; the key ends at the first unescaped `=`, `:` or whitespace; whitespace and one `=` or `:`
    after it are skipped; escapes \\t \\n \\r \\f \\uXXXX are decoded and any other escaped character
    stands for itself.
    """
    out: list[tuple[str, str, int]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):  # a continuation on the last line: drop the lone backslash
            line = line[:-1]
        key, value = _split_key_value(line)
        out.append((_unescape(key), _unescape(value), start + 1))
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line):
        c = line[j]
        if c == "\\":
            j += 2
            continue
        if c in "=: \t\f":
            break
        j += 1
    key = line[:j]
    rest = line[j:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):  # one separator, after optional whitespace
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _escape_value(value: str) -> str:
    """Escape a value for a .properties line (backslashes, control characters, leading whitespace)."""
    out = value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("\f", "\\f")
    return "\\" + out if out[:1] == " " else out


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    j = 0
    while j < len(s):
        c = s[j]
        if c != "\\" or j + 1 >= len(s):
            out.append(c)
            j += 1
            continue
        n = s[j + 1]
        if n == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", s[j + 2 : j + 6]):
            out.append(chr(int(s[j + 2 : j + 6], 16)))
            j += 6
            continue
        out.append(_ESCAPES.get(n, n))
        j += 2
    return "".join(out)
