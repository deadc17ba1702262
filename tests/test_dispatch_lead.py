"""The lead rule (starter/operations/wakeplan.py): when a one-shot wakes before its run_at.

Pure tests of :func:`pick_lead` / :class:`WakePlan` (never after run_at minus the floor, never
before the job was scheduled, within the job's bound; a herd fills its notice backwards at the
planned rate, so its spread grows with its size and is capped by its notice), and one
dev-server test: a job given a lead beyond the default 30 s by a crowded plan reaches its
worker that early, in its first workflow task (no timer), and fires on time, not early.
"""

from __future__ import annotations

import math
import random
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.operations import starting
from jobctl.starter.operations.wakeplan import (
    DEFAULT_WAKE_RATE,
    MAX_AUTO_LEAD,
    MIN_DISPATCH_LEAD,
    SKEW_MARGIN,
    WakePlan,
    covering_lead,
    pick_lead,
    wake_rate,
)
from jobctl.workflows.models import JobSpec
from tests.helpers.drills import wait_for_records
from tests.helpers.poll import eventually
from tests.helpers.processes import Workers

RUN_AT = 1_900_000_000.0  # epoch seconds, a whole second
DEFAULT_LEAD = 30.0


def herd(size: int, notice: float, rate: float, bound: float = MAX_AUTO_LEAD) -> list[float]:
    """Leads of ``size`` jobs due together, scheduled one after another by one process."""
    plan = WakePlan(rate=rate, rng=random.Random(size))
    now = RUN_AT - notice
    return [plan.lead(RUN_AT, now, MIN_DISPATCH_LEAD, DEFAULT_LEAD, bound)[0] for _ in range(size)]


def per_second(leads: list[float]) -> Counter[int]:
    return Counter(math.floor(RUN_AT - lead) for lead in leads)


@settings(max_examples=300, deadline=None)
@given(
    notice=st.floats(0, 3600),
    bound=st.sampled_from([0.0, 5.0, 15.0, 30.0, 120.0, MAX_AUTO_LEAD]),
    crowd=st.integers(0, 400),
    rate=st.floats(0.5, 100),
    seed=st.integers(0, 2**32),
)
def test_the_lead_stays_between_the_floor_and_the_notice_and_the_bound(
    notice: float, bound: float, crowd: int, rate: float, seed: int
) -> None:
    """Never after run_at - floor (or at once, when the notice is shorter), never before the
    job was scheduled, never more than its bound, however crowded the plan."""
    rng = random.Random(seed)
    floor = min(MIN_DISPATCH_LEAD, bound)
    planned = Counter(math.floor(RUN_AT - rng.uniform(0, 400)) for _ in range(crowd))
    lead = pick_lead(notice, RUN_AT, floor, min(DEFAULT_LEAD, bound), bound, planned, rate, rng)
    assert lead <= notice  # the wake is not before the scheduling moment
    assert lead <= bound
    assert lead >= min(floor, notice, bound)  # not after run_at - floor


@pytest.mark.parametrize("notice", [31.0, 60.0, 300.0, 86_400.0])
def test_a_lone_job_wakes_15_to_30_s_early_as_before(notice: float) -> None:
    leads = [herd(1, notice, DEFAULT_WAKE_RATE)[0] for _ in range(50)]
    assert all(MIN_DISPATCH_LEAD <= lead <= DEFAULT_LEAD for lead in leads)


@pytest.mark.parametrize("notice", [0.0, 3.0, 14.9])
def test_a_job_due_within_the_floor_wakes_at_once(notice: float) -> None:
    [lead] = herd(1, notice, DEFAULT_WAKE_RATE)
    assert lead == pytest.approx(notice)  # delay 0: dispatched at once, waits in the worker


@pytest.mark.parametrize("size", [100, 400, 2000])
def test_a_herd_fills_its_notice_backwards_at_the_planned_rate(size: int) -> None:
    """No second holds more than the rate, and the herd reaches no earlier than it needs:
    the floor plus size / rate (every job waits in its worker as short as the herd allows)."""
    rate = 20.0
    leads = herd(size, 300.0, rate)
    assert max(per_second(leads).values()) <= rate
    assert min(leads) >= MIN_DISPATCH_LEAD
    assert max(leads) <= max(DEFAULT_LEAD, MIN_DISPATCH_LEAD + size / rate) + 1


def test_the_spread_grows_with_the_herd() -> None:
    spreads = [max(herd(size, 300.0, 20.0)) for size in (200, 1000, 3000)]
    assert spreads[0] <= DEFAULT_LEAD < spreads[1] < spreads[2]


@pytest.mark.parametrize(("notice", "peak"), [(60.0, 45), (120.0, 20), (300.0, 10)])
def test_a_herd_larger_than_its_notice_carries_spreads_evenly_over_it(
    notice: float, peak: int
) -> None:
    """2,000 jobs at 10 wakes/s need 200 s: with less notice they share it evenly (the most
    crowded second holds about size / (notice - floor) jobs), with more they keep the rate."""
    leads = herd(2000, notice, 10.0)
    assert max(leads) <= notice and min(leads) >= MIN_DISPATCH_LEAD
    assert max(per_second(leads).values()) <= peak


@pytest.mark.parametrize("bound", [0.0, 10.0, 30.0, 60.0])
def test_a_caller_set_dispatch_lead_bounds_the_spread(bound: float) -> None:
    leads = herd(1000, 600.0, 5.0, bound=bound)
    assert max(leads) <= bound
    if bound == 0:
        assert set(leads) == {0.0}


def test_a_released_wake_frees_its_second() -> None:
    plan = WakePlan(rate=1, rng=random.Random(1))
    lead, second = plan.lead(RUN_AT, RUN_AT - 100, 15, 15, 100)
    assert second == math.floor(RUN_AT - lead) and plan.seconds[second] == 1
    plan.release(second)
    assert plan.seconds[second] == 0
    plan.release(None)  # a wake not recorded: nothing to free


@pytest.mark.parametrize(
    ("lead", "dispatch_lead", "expected"),
    [(20.0, 30.0, None), (30.0, 30.0, None), (30.5, 30.0, 33.0), (47.2, 30.0, 50.0)],
)
def test_covering_lead(lead: float, dispatch_lead: float, expected: float | None) -> None:
    assert covering_lead(lead, dispatch_lead) == expected


def test_covering_lead_never_passes_the_fields_limit() -> None:
    assert covering_lead(MAX_AUTO_LEAD, DEFAULT_LEAD) == MAX_AUTO_LEAD


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", DEFAULT_WAKE_RATE), ("250", 250.0), ("0.5", 0.5), ("0", DEFAULT_WAKE_RATE),
     ("-3", DEFAULT_WAKE_RATE), ("nan", DEFAULT_WAKE_RATE), ("inf", DEFAULT_WAKE_RATE),
     ("lots", DEFAULT_WAKE_RATE)],
)  # fmt: skip
def test_wake_rate_setting(raw: str, expected: float) -> None:
    assert wake_rate({"JOBS_WAKE_RATE": raw}) == expected


# -- end to end ------------------------------------------------------------------------------

NOTICE = 40.0  # seconds between scheduling and run_at (the crowded plan gives a lead of ~34 s)
CROWDED = 33  # the plan's seconds from run_at - CROWDED to run_at are full


async def first_events(client: Client, job_id: str) -> list[EventType.ValueType]:
    history = await client.get_workflow_handle(job_id).fetch_history()
    return [event.event_type for event in history.events]


@pytest.mark.devserver
async def test_a_job_spread_beyond_the_default_lead_hands_over_at_its_wake_and_fires_on_time(
    dev_client: Client,
    task_queue: str,
    workers: Workers,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crowded plan (as after a big herd) gives a job with an unset dispatch_lead a lead of
    33-50 s: its workflow input carries a dispatch_lead covering it, its attempt is with the
    worker more than 30 s before run_at with no timer in its history, and the handler starts
    at run_at, not before."""
    plan = WakePlan(rate=1)
    monkeypatch.setattr(starting, "WAKES", plan)
    workers.start()
    records = tmp_path / "records.jsonl"
    now = datetime.now(UTC)
    run_at = now + timedelta(seconds=NOTICE)
    full = range(math.floor(run_at.timestamp()) - CROWDED, math.ceil(run_at.timestamp()) + 1)
    plan.seconds.update({second: 1 for second in full})
    job_id = f"lead-{uuid.uuid4().hex[:8]}"
    spec = {
        "id": job_id,
        "name": "spread",
        "handler": "test.record",
        "run_at": run_at,
        "payload": {"path": str(records)},
    }
    handlers = load_handlers("tests.handlers").names()
    await operations.schedule(dev_client, spec, handlers, now=now, task_queue=task_queue)
    [wake] = [s for s, n in plan.seconds.items() if s not in full and n]
    lead = run_at.timestamp() - wake
    assert CROWDED - 1 <= lead <= NOTICE

    handle = dev_client.get_workflow_handle(job_id)
    desc = await eventually(
        handle.describe,
        lambda d: d.raw_description.pending_activities,
        timeout=NOTICE,
        what=f"{job_id} dispatched",
    )
    assert datetime.now(UTC) < run_at - timedelta(seconds=DEFAULT_LEAD - 1)  # beyond 30 s
    assert desc.raw_description.pending_activities  # with its worker, waiting
    events = await first_events(dev_client, job_id)
    assert EventType.EVENT_TYPE_TIMER_STARTED not in events  # handed over at the wake
    history = await handle.fetch_history()
    payloads = history.events[0].workflow_execution_started_event_attributes.input.payloads
    [given] = await dev_client.data_converter.decode(payloads, [JobSpec])
    assert isinstance(given, JobSpec)
    assert lead <= given.dispatch_lead <= lead + SKEW_MARGIN + 1  # covers the wake, no more

    [start] = wait_for_records(records, 1, "start", timeout=NOTICE + 30)
    lag = start["at"] - run_at.timestamp()
    assert 0 <= lag < 2.0, lag  # not early, and on time
