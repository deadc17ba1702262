"""The worker's slot gate (activities/slot_gate.py): attempts that wait for a handler slot
get it by priority, then fair share between fairness keys (by weight), then arrival."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from jobctl.activities.slot_gate import SlotGate
from jobctl.starter.errors import SpecError
from jobctl.worker import WorkerSettings

Waiter = tuple[str, int, str | None, float]  # name, priority, fairness key, weight


async def grant_order(gate: SlotGate, waiters: list[Waiter]) -> list[str]:
    """Hold the gate's only slot, queue ``waiters`` (name, priority, key, weight) in that
    order, then release: the names in the order they got the slot (each gives it back)."""
    order: list[str] = []

    async def wait(name: str, priority: int, key: str | None, weight: float) -> None:
        async with gate.slot(priority, key, weight):
            order.append(name)
            await asyncio.sleep(0)

    await gate.acquire()
    tasks = []
    for waiter in waiters:
        tasks.append(asyncio.create_task(wait(*waiter)))
        await asyncio.sleep(0)  # queued in this order
    gate.release()
    await asyncio.gather(*tasks)
    return order


async def test_defaults_are_served_in_arrival_order() -> None:
    names = [f"job-{i}" for i in range(20)]
    order = await grant_order(SlotGate(1), [(n, 3, None, 1.0) for n in names])
    assert order == names


async def test_a_higher_priority_goes_first_whatever_its_arrival() -> None:
    waiters: list[Waiter] = [(f"low-{i}", 5, None, 1.0) for i in range(10)]
    waiters += [("mid", 3, None, 1.0), ("urgent", 1, None, 1.0), ("two", 2, "k", 1.0)]
    order = await grant_order(SlotGate(1), waiters)
    assert order[:3] == ["urgent", "two", "mid"]
    assert order[3:] == [f"low-{i}" for i in range(10)]


async def test_fairness_keys_take_turns_however_long_the_flood() -> None:
    waiters: list[Waiter] = [(f"a-{i}", 3, "a", 1.0) for i in range(100)]
    waiters += [(f"b-{i}", 3, "b", 1.0) for i in range(5)]
    order = await grant_order(SlotGate(1), waiters)
    b_positions = [order.index(f"b-{i}") for i in range(5)]
    # Round robin: b's jobs are every other grant from the start (b joins at a's pass).
    assert b_positions == [1, 3, 5, 7, 9], order[:12]
    assert [n for n in order if n.startswith("a")] == [f"a-{i}" for i in range(100)]


async def test_weights_share_the_slots_in_proportion() -> None:
    waiters: list[Waiter] = [(f"a-{i}", 3, "a", 3.0) for i in range(60)]
    waiters += [(f"b-{i}", 3, "b", 1.0) for i in range(60)]
    order = await grant_order(SlotGate(1), waiters)
    first = Counter(name[0] for name in order[:40])
    assert (first["a"], first["b"]) == (30, 10)


async def test_an_idle_key_banks_no_credit() -> None:
    """A key that starts waiting late joins at the current share, not at zero: it gets its
    turn, not a burst of every grant it missed."""
    gate = SlotGate(1)
    order: list[str] = []

    async def wait(name: str, key: str) -> None:
        async with gate.slot(3, key):
            order.append(name)
            await asyncio.sleep(0)

    await gate.acquire()
    flood = [asyncio.create_task(wait(f"a-{i}", "a")) for i in range(40)]
    await asyncio.sleep(0)
    gate.release()
    while len(order) < 20:
        await asyncio.sleep(0)
    late = [asyncio.create_task(wait(f"b-{i}", "b")) for i in range(10)]
    await asyncio.gather(*flood, *late)
    after = order[order.index("b-0") - 1 :][:8]
    assert Counter(name[0] for name in after) == {"a": 4, "b": 4}, order


async def test_capacity_is_never_exceeded_and_every_waiter_is_served() -> None:
    gate = SlotGate(3)
    inside = 0
    most = 0
    served = 0

    async def job(priority: int, key: str) -> None:
        nonlocal inside, most, served
        async with gate.slot(priority, key):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.001)
            inside -= 1
            served += 1

    await asyncio.gather(*(job(1 + i % 5, f"k{i % 7}") for i in range(300)))
    assert (most, served, gate.free, gate.waiting()) == (3, 300, 3, 0)


async def test_a_cancelled_waiter_leaves_the_queue_and_loses_no_slot() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    gone = asyncio.create_task(gate.acquire(1, "x"))
    stays = asyncio.create_task(gate.acquire(5, "y"))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert gate.waiting() == 1
    gate.release()
    await asyncio.wait_for(stays, timeout=5)
    gate.release()
    assert (gate.free, gate.waiting()) == (1, 0)


async def test_a_waiter_cancelled_as_its_slot_arrives_passes_it_on() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    first = asyncio.create_task(gate.acquire())
    second = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    gate.release()  # the slot is handed to `first`, which has not run yet...
    first.cancel()  # ...and is cancelled before it does
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, timeout=5)  # the slot went on to `second`
    gate.release()
    assert (gate.free, gate.waiting()) == (1, 0)


async def test_a_beating_wait_beats_while_it_waits_and_keeps_its_place() -> None:
    gate = SlotGate(1)
    beats: list[str] = []
    order: list[str] = []

    async def wait(name: str) -> None:
        async with gate.slot(3, beat=lambda: beats.append(name), every=0.02):
            order.append(name)

    await gate.acquire()
    first = asyncio.create_task(wait("first"))
    await asyncio.sleep(0)
    second = asyncio.create_task(wait("second"))
    await asyncio.sleep(0.15)  # several beat intervals with the slot held
    assert beats.count("first") >= 3 and beats.count("second") >= 3
    gate.release()
    await asyncio.gather(first, second)
    assert order == ["first", "second"]  # beating did not cost the first its place
    assert gate.free == 1 and gate.waiting() == 0


async def test_a_beating_wait_beats_first_after_first_then_every() -> None:
    """A pre-dispatched attempt's waiting beats held the SDK's clock of its lease only until
    shortly after run_at: its slot wait beats first that soon, then at its own cadence."""
    gate = SlotGate(1)
    began = asyncio.get_running_loop().time()
    beats: list[float] = []

    async def wait() -> None:
        beat = lambda: beats.append(asyncio.get_running_loop().time() - began)  # noqa: E731
        async with gate.slot(3, beat=beat, every=0.3, first=0.05):
            pass

    await gate.acquire()
    waiter = asyncio.create_task(wait())
    await asyncio.sleep(0.5)
    gate.release()
    await waiter
    assert len(beats) == 2 and beats[0] < 0.2 and 0.3 <= beats[1] - beats[0] < 0.45, beats


async def test_a_beating_wait_cancelled_loses_no_slot() -> None:
    gate = SlotGate(1)
    await gate.acquire()

    async def wait() -> None:
        async with gate.slot(3, beat=lambda: None, every=0.01):
            raise AssertionError("a cancelled waiter must not run")

    waiter = asyncio.create_task(wait())
    await asyncio.sleep(0.05)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert gate.waiting() == 0
    gate.release()
    assert gate.free == 1


# -- key_limit: headroom for other keys ------------------------------------------------------


async def test_a_key_limit_keeps_a_slot_free_for_another_key() -> None:
    gate = SlotGate(4, key_limit=3)
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    order: list[str] = []
    go = asyncio.Event()

    async def job(name: str, key: str) -> None:
        async with gate.slot(3, key):
            running[key] += 1
            peak[key] = max(peak[key], running[key])
            order.append(name)
            await go.wait()
            running[key] -= 1

    names = [f"a-{i}" for i in range(20)]
    flood = [asyncio.create_task(job(name, "a")) for name in names]
    await asyncio.sleep(0.01)
    assert (running["a"], gate.free, gate.waiting()) == (3, 1, 17)
    # The free slot goes to "b" at once, though 17 of "a" wait ahead of it.
    await asyncio.wait_for(gate.acquire(3, "b"), timeout=0.5)
    assert (gate.free, gate.held["b"]) == (0, 1)
    gate.release("b")
    assert gate.free == 1  # back to the headroom, not to "a"
    go.set()
    await asyncio.gather(*flood)
    assert peak["a"] == 3 and order == names  # every "a" ran, in arrival order, 3 at a time
    assert (gate.free, gate.waiting(), dict(gate.held)) == (4, 0, {})


async def test_jobs_without_a_key_are_not_limited() -> None:
    gate = SlotGate(4, key_limit=1)
    for _ in range(4):
        await asyncio.wait_for(gate.acquire(), timeout=0.5)
    assert gate.free == 0


async def test_a_limited_key_does_not_block_a_lower_priority_key_behind_it() -> None:
    """The capped key's waiter is first by priority, but may not take the slot: the next
    waiter that may take it gets it."""
    gate = SlotGate(2, key_limit=1)
    await gate.acquire(1, "a")
    await gate.acquire(5, "b")
    order: list[str] = []

    async def wait(name: str, priority: int, key: str) -> None:
        async with gate.slot(priority, key):
            order.append(name)

    urgent = asyncio.create_task(wait("a-urgent", 1, "a"))
    low = asyncio.create_task(wait("c-low", 5, "c"))
    await asyncio.sleep(0)
    gate.release("b")  # "a" holds its one slot: "c" takes this one
    await low
    assert order == ["c-low"] and not urgent.done()
    gate.release("a")
    await urgent
    assert order == ["c-low", "a-urgent"]


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "1e3", " "])
def test_slots_per_key_setting_is_checked(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_SLOTS_PER_KEY", value)
    if not value.strip():  # blank: unset, no limit
        assert WorkerSettings().slots_per_key is None
        return
    with pytest.raises(SpecError, match="JOBS_SLOTS_PER_KEY"):
        WorkerSettings()


def test_slots_per_key_setting_reads_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBS_SLOTS_PER_KEY", raising=False)
    assert WorkerSettings().slots_per_key is None
    monkeypatch.setenv("JOBS_SLOTS_PER_KEY", "8")
    assert WorkerSettings().slots_per_key == 8
