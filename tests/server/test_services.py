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


# --- spawn: background jobs held until done, their failure logged, cancelled at the broker's stop -----------

def test_a_spawned_task_is_held_until_done_though_its_caller_keeps_no_reference() -> None:
    import asyncio
    import gc
    import weakref

    services = BrokerServices()

    async def scenario() -> tuple[bool, str]:
        release = asyncio.Event()
        outcome: list[str] = []

        async def job() -> None:
            await release.wait()
            outcome.append("done")
        ref = weakref.ref(services.spawn(job(), name="held"))  # the caller drops the task at once
        for _ in range(3):
            gc.collect()
            await asyncio.sleep(0)
        held = ref() is not None and services.spawned() == [ref()]
        release.set()
        for _ in range(20):  # bounded: the job ends within a few loop turns
            if outcome:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)  # its done callback
        return held and services.spawned() == [], "".join(outcome)

    held, outcome = asyncio.run(scenario())
    assert held and outcome == "done"


def test_an_exception_a_spawned_task_ends_with_is_logged_with_its_name(caplog: pytest.LogCaptureFixture) -> None:
    import asyncio
    import logging

    services = BrokerServices()

    async def failing() -> None:
        raise RuntimeError("the step's records do not encode")

    async def scenario() -> None:
        task = services.spawn(failing(), name="share-membership-flush")
        await asyncio.wait({task}, timeout=5)
        await asyncio.sleep(0)  # the done callbacks

    with caplog.at_level(logging.ERROR, logger="kaflite.server"):
        asyncio.run(scenario())
    failed = [r for r in caplog.records if "share-membership-flush" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert "the step's records do not encode" in str(failed[0].exc_info[1])
    assert "never retrieved" not in caplog.text


def test_close_spawned_cancels_the_running_tasks_and_one_spawned_later_never_runs() -> None:
    import asyncio

    services = BrokerServices()
    ran: list[str] = []

    async def forever(name: str) -> None:
        ran.append(name)
        await asyncio.Event().wait()

    async def scenario() -> tuple[bool, bool]:
        first = services.spawn(forever("first"), name="first")
        await asyncio.sleep(0)
        running = services.close_spawned()
        await asyncio.wait(running, timeout=5)
        late = services.spawn(forever("late"), name="late")
        await asyncio.wait({late}, timeout=5)
        return running == [first] and first.cancelled(), late.cancelled()

    first_cancelled, late_cancelled = asyncio.run(scenario())
    assert first_cancelled and late_cancelled and ran == ["first"]


def test_the_broker_stop_cancels_and_awaits_its_spawned_tasks(tmp_path: object) -> None:
    """A real broker (no listener served): a membership write still waiting when the broker stops is
    cancelled and awaited by `Broker.stop`, before the logs close."""
    import asyncio

    from kaflite.server.broker import Broker
    from kaflite.server.embedded import load_broker_config

    cfg = load_broker_config({"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0"}, True)
    broker = Broker(cfg)
    loop = asyncio.new_event_loop()
    seen: list[str] = []

    async def waiting() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled" if broker.log_manager is not None else "cancelled after the logs closed")
            raise

    try:
        loop.run_until_complete(broker.start())

        async def spawn() -> asyncio.Task[None]:
            task = broker.services.spawn(waiting(), name="waiting")
            await asyncio.sleep(0)
            return task
        task = loop.run_until_complete(spawn())
    finally:
        loop.run_until_complete(asyncio.wait_for(broker.stop(), 30))
        loop.close()
    assert task.cancelled() and seen == ["cancelled"] and broker.services.spawned() == []
