"""Java .properties parsing rules that matter for server.properties."""

from __future__ import annotations

from kaflite.server.config import parse_properties


def kv(text: str) -> dict[str, str]:
    return {k: v for k, v, _ in parse_properties(text)}


def test_separators_and_whitespace() -> None:
    assert kv("a=1\nb: 2\nc 3\n  d  =  4  \ne\t=\t5\nf\n") == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4  ",
        "e": "5",
        "f": "",
    }


def test_comments_and_blank_lines() -> None:
    assert kv("# x=1\n! y=2\n   # z=3\n\n\nw=4 # not a comment\n") == {"w": "4 # not a comment"}


def test_line_continuation() -> None:
    text = "listeners=PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\nnext=1\n"
    assert kv(text) == {"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "next": "1"}
    # an even number of backslashes is an escaped backslash, not a continuation
    assert kv("path=C:\\\\dir\\\\\nb=2\n") == {"path": "C:\\dir\\", "b": "2"}
    # a comment line never continues
    assert kv("# a \\\nb=2\n") == {"b": "2"}


def test_escapes_in_keys_and_values() -> None:
    assert kv("key\\ with\\ spaces=v\\tx\nk\\=eq=\\u0041B\n") == {"key with spaces": "v\tx", "k=eq": "AB"}


def test_first_separator_only_and_duplicates_last_wins() -> None:
    assert kv("a==b\nc=d=e\na=2\n") == {"a": "2", "c": "d=e"}
    assert [line for _, _, line in parse_properties("a=1\n\n# c\nb=2\n")] == [1, 4]


def test_crlf() -> None:
    assert kv("a=1\r\nb=2\r\n") == {"a": "1", "b": "2"}
