"""helpers.holds_by, the poll that replaces a fixed sleep before one look at a "within N s" promise."""

from __future__ import annotations

import time

import pytest

from helpers import holds_by


def test_returns_as_soon_as_it_holds() -> None:
    calls: list[float] = []

    def third() -> str | None:
        calls.append(time.monotonic())
        return "yes" if len(calls) >= 3 else None

    t0 = time.monotonic()
    assert holds_by("third call", third, t0 + 5.0, interval=0.01) == "yes" and len(calls) == 3
    assert time.monotonic() - t0 < 1.0  # not the 5 s a sleep to the deadline costs


def test_fails_only_after_a_look_at_the_deadline() -> None:
    looks: list[float] = []
    deadline = time.monotonic() + 0.3
    with pytest.raises(AssertionError, match="never: not so by the deadline"):
        holds_by("never", lambda: looks.append(time.monotonic()), deadline, interval=0.05)
    assert len(looks) >= 2 and looks[-1] >= deadline  # the last look is not before the deadline


def test_a_deadline_already_past_still_gets_one_look() -> None:
    assert holds_by("late", lambda: 7, time.monotonic() - 1.0) == 7
    with pytest.raises(AssertionError):
        holds_by("late and false", lambda: 0, time.monotonic() - 1.0)
