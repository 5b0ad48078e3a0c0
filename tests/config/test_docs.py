"""docs/configuration.md stays in step with the key table: every key, its default, and the dev profile."""

from __future__ import annotations

from helpers import REPO
from kaflite.server.config import BROKER_CONFIGS, DEV_PROFILE, TOPIC_CONFIGS, TOPIC_NOT_READ, format_value

DOC = (REPO / "docs" / "configuration.md").read_text()


BROKER_SECTION = DOC.split("## Broker keys", 1)[1].split("## Topic keys", 1)[0]
TOPIC_SECTION = DOC.split("## Topic keys", 1)[1]


def _row(key: str, section: str) -> str:
    rows = [line for line in section.splitlines() if line.startswith(f"| `{key}` |")]
    assert rows, f"docs/configuration.md has no row for {key}"
    return rows[0]


def test_every_broker_key_documented_with_its_default() -> None:
    for key, definition in BROKER_CONFIGS.items():
        row = _row(key, BROKER_SECTION)
        default = format_value(definition.default)
        if default:  # unset and empty defaults are written in words
            assert f"`{default}`" in row, (key, row)


def test_every_topic_key_documented_with_its_fallback() -> None:
    for key, definition in TOPIC_CONFIGS.items():
        row = _row(key, TOPIC_SECTION)
        for broker_key in definition.broker_keys:
            assert f"`{broker_key}`" in row


def test_dev_profile_documented() -> None:
    for key, value in DEV_PROFILE.items():
        assert f"| `{key}` | `{value}` |" in DOC


def test_keys_without_effect_are_marked_with_their_reason() -> None:
    """A row says *Accepted for compatibility; no effect* exactly when the key tables say so (broker:
    applies=False; topic: TOPIC_NOT_READ, whose reason the row repeats)."""
    mark = "Accepted for compatibility; no effect"
    for key, definition in BROKER_CONFIGS.items():
        assert (mark in _row(key, BROKER_SECTION)) == (not definition.applies), key
    for key in TOPIC_CONFIGS:
        row = _row(key, TOPIC_SECTION)
        assert (mark in row) == (key in TOPIC_NOT_READ), key
        if key in TOPIC_NOT_READ:
            assert TOPIC_NOT_READ[key] in row, key
