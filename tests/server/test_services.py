"""server/services.py: the broker's typed service slots (the rules at the top of the module)."""

from __future__ import annotations

import pytest

from kaflite.server.services import BrokerServices, Slot


class _Service:
    def __init__(self, services: BrokerServices, slot: Slot[_Service], fail: bool = False) -> None:
        self.services, self.slot, self.fail = services, slot, fail
        self.seen_while_starting: _Service | None = None

    def start(self) -> None:
        # a call made while it starts (a metadata listener, a replayed record) asks for the service again
        self.seen_while_starting = self.services.start(self.slot, lambda: _Service(self.services, self.slot),
                                                       _Service.start)
        if self.fail:
            raise OSError("the internal topic cannot be opened")


def test_a_service_is_made_once_and_found_by_a_call_made_while_it_starts() -> None:
    services, slot = BrokerServices(), Slot[_Service]("svc")
    made: list[_Service] = []

    def make() -> _Service:
        made.append(_Service(services, slot))
        return made[-1]
    first = services.start(slot, make, _Service.start)
    assert made == [first] and first.seen_while_starting is first  # never a second one
    assert services.start(slot, make, _Service.start) is first and services.get(slot) is first


def test_a_service_whose_start_fails_is_not_kept_and_the_next_use_tries_again() -> None:
    services, slot = BrokerServices(), Slot[_Service]("svc")
    with pytest.raises(OSError):
        services.start(slot, lambda: _Service(services, slot, fail=True), _Service.start)
    assert services.get(slot) is None and services.names() == []
    again = services.start(slot, lambda: _Service(services, slot), _Service.start)
    assert services.get(slot) is again


def test_slots_are_distinct_by_identity_and_pop_takes_the_value_out() -> None:
    services = BrokerServices()
    a, b = Slot[list[int]]("same name"), Slot[list[int]]("same name")
    assert services.get_or_make(a, lambda: [1]) == [1]
    assert services.get(b) is None  # another slot, even with the same name
    assert services.get_or_make(a, lambda: [2]) == [1]  # made once
    assert services.pop(a) == [1] and services.pop(a) is None and services.get(a) is None
