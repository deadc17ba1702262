"""The pure decisions of ``CronJobWorkflow`` (workflows/cron_state.py and the checks in
workflows/cron_rules.py), without a server: what becomes of a slot, which slots come next,
how a backlog is recorded, and what the status report and Web UI details say."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

import jobctl.workflows.cron_state as cron_state
from jobctl.workflows.cron_rules import (
    MAX_BACKLOG_RECORDS,
    MAX_QUEUED_BACKFILLS,
    NEXT_SLOTS,
    RECENT_SLOTS,
    Schedule,
    backfill_plan,
    check_backfill,
    check_update,
    lazy_overlap,
)
from jobctl.workflows.models import CronState, CronUpdate, JobSpec, JobStatus
from jobctl.workflows.models.cron import BackfillRequest

HOUR = timedelta(hours=1)
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # a slot of the hourly cron


def hourly(**fields: Any) -> Schedule:
    spec = JobSpec(id="c1", name="report", handler="log", cron="0 * * * *", **fields)
    return Schedule.of(spec)


def state_at(last_slot: datetime = T0, **fields: Any) -> CronState:
    return CronState(last_slot=last_slot, **fields)


def test_runs_left_counts_only_scheduled_slots_and_names_the_end() -> None:
    spec = hourly(max_runs=3).spec
    state = state_at(counts={"ran": 2, "manual": 5, "backfilled": 4})
    assert cron_state.runs_left(hourly().spec, state) is None
    assert cron_state.runs_left(spec, state) == 1
    state.counts["ran"] = 4
    assert cron_state.runs_left(spec, state) == 0
    assert cron_state.end_reason(spec, state) == "max_runs reached (3 slots ran)"
    ending = hourly(end=T0 + HOUR).spec
    assert cron_state.end_reason(ending, state) == "no slot before end 2026-12-01 10:00 UTC"


def test_records_count_every_outcome_and_keep_the_newest() -> None:
    state = state_at()
    for i in range(RECENT_SLOTS + 3):
        cron_state.record(state, T0 + i * HOUR, "ran", f"c1@{i}", JobStatus.RUNNING)
    cron_state.record(state, T0, "skipped", detail="why")
    assert state.counts == {"ran": RECENT_SLOTS + 3, "skipped": 1}
    assert len(state.recent) == RECENT_SLOTS
    assert state.recent[-1].outcome == "skipped" and state.recent[-1].detail == "why"
    assert state.recent[0].job_id == "c1@4"


def test_settle_ends_the_slot_once_and_shows_its_status_on_its_records() -> None:
    state = state_at(running={"c1@a": T0, "c1@b": T0 + HOUR})
    cron_state.record(state, T0, "ran", "c1@a", JobStatus.RUNNING)
    cron_state.record(state, T0 + HOUR, "ran", "c1@b", JobStatus.RUNNING)
    assert cron_state.settle(state, "c1@a", JobStatus.DEAD) is True
    assert cron_state.settle(state, "c1@a", JobStatus.DEAD) is False
    assert state.running == {"c1@b": T0 + HOUR}
    assert [r.status for r in state.recent] == [JobStatus.DEAD, JobStatus.RUNNING]


def test_upcoming_stops_at_the_bounds() -> None:
    assert cron_state.upcoming(hourly(), state_at()) == [
        T0 + i * HOUR for i in range(1, NEXT_SLOTS + 1)
    ]
    assert cron_state.upcoming(hourly(end=T0 + 2 * HOUR), state_at()) == [
        T0 + HOUR,
        T0 + 2 * HOUR,
    ]
    capped = cron_state.upcoming(hourly(max_runs=3), state_at(counts={"ran": 1}))
    assert capped == [T0 + HOUR, T0 + 2 * HOUR]


def test_shown_next_puts_a_slot_started_ahead_first_and_hides_slots_due() -> None:
    schedule = hourly()
    now = T0 + HOUR - timedelta(seconds=5)
    state = state_at(running={"c1@next": T0 + HOUR})
    shown = cron_state.shown_next(schedule, state, now, overlap_wait=False)
    assert shown[:2] == [T0 + HOUR, T0 + HOUR] and len(shown) == NEXT_SLOTS
    later = T0 + 2 * HOUR + timedelta(minutes=1)
    running_long = state_at(running={"c1@old": T0})
    waiting = cron_state.shown_next(schedule, running_long, later, overlap_wait=True)
    assert waiting[0] == T0 + 3 * HOUR, "the slots already due are not shown as next"


def test_a_short_backlog_records_each_slot_and_a_long_one_jumps_ahead() -> None:
    schedule = hourly()
    state = state_at()
    cron_state.skip_backlog(schedule, state, T0 + 3 * HOUR + timedelta(minutes=5), "paused", "p")
    assert [r.slot for r in state.recent] == [T0 + HOUR, T0 + 2 * HOUR, T0 + 3 * HOUR]
    assert state.last_slot == T0 + 3 * HOUR and state.counts == {"paused": 3}
    long = state_at()
    until = T0 + (MAX_BACKLOG_RECORDS + 50) * HOUR
    cron_state.skip_backlog(schedule, long, until, "missed", "outage")
    assert long.counts == {"missed": MAX_BACKLOG_RECORDS + 1}
    assert long.last_slot == until
    assert long.recent[-1].detail == "and more slots up to this time (outage)"


def test_a_slot_is_missed_only_beyond_the_catch_up_window() -> None:
    schedule = hourly(catchup_window=60)
    slot = T0 + HOUR
    on_time = state_at()
    assert not cron_state.missed(schedule, on_time, slot, slot, slot + timedelta(seconds=60))
    assert on_time.recent == [] and on_time.last_slot == T0
    late = state_at()
    assert cron_state.missed(schedule, late, slot, slot, slot + timedelta(seconds=61))
    assert [(r.slot, r.outcome) for r in late.recent] == [(slot, "missed")]
    assert late.recent[0].detail == "beyond the 60s catch-up window"
    outage = state_at()
    assert cron_state.missed(schedule, outage, slot, slot, slot + 2 * HOUR)
    assert [r.slot for r in outage.recent] == [slot, slot + HOUR], "every slot that late"


@pytest.mark.parametrize(
    ("overlap", "buffered", "held", "outcome"),
    [
        ("skip", None, True, "skipped"),
        ("buffer_one", None, True, "buffered"),
        ("buffer_one", T0, True, "skipped"),
        ("allow_all", None, False, None),
        ("cancel_other", None, False, None),
    ],
)
def test_a_slot_due_while_another_runs_follows_the_overlap_policy(
    overlap: str, buffered: datetime | None, held: bool, outcome: str | None
) -> None:
    spec = hourly(overlap=overlap).spec
    slot = T0 + HOUR
    idle = state_at()
    assert not cron_state.held(spec, idle, slot) and idle.recent == []
    state = state_at(running={"c1@old": T0}, buffered=buffered)
    assert cron_state.held(spec, state, slot) is held
    assert [r.outcome for r in state.recent] == ([outcome] if outcome else [])
    if outcome == "buffered":
        assert state.buffered == slot
    assert lazy_overlap(spec) is (overlap in ("skip", "buffer_one"))


@pytest.mark.parametrize(("overlap", "first"), [("skip", "skipped"), ("buffer_one", "buffered")])
def test_slots_due_during_a_long_slot_get_their_outcome_when_it_ends(
    overlap: str, first: str
) -> None:
    schedule = hourly(overlap=overlap)
    state = state_at(running={"c1@old": T0})
    cron_state.decide_overlapped(schedule, state, T0 + 3 * HOUR + timedelta(minutes=1))
    assert [r.outcome for r in state.recent] == [first, "skipped", "skipped"]
    assert state.last_slot == T0 + 3 * HOUR
    assert state.buffered == (T0 + HOUR if overlap == "buffer_one" else None)
    untouched = state_at()
    cron_state.decide_overlapped(schedule, untouched, T0 + timedelta(minutes=59))
    assert untouched.recent == [] and untouched.last_slot == T0


def test_a_snapshot_is_a_new_generation_without_the_untracked_children() -> None:
    state = state_at(running={"c1@a": T0, "c1@b": T0 + HOUR}, generation=4)
    carried = cron_state.snapshot(state, {"c1@a"})
    assert carried.generation == 5 and carried.running == {"c1@b": T0 + HOUR}
    assert state.generation == 4 and len(state.running) == 2, "the run's own state is unchanged"


def details(schedule: Schedule, state: CronState, **flags: Any) -> str:
    run: dict[str, Any] = {
        "cancelled": False,
        "ended": None,
        "triggers": 0,
        "overlap_wait": False,
        "planned": None,
    }
    run.update(flags)
    return cron_state.details_text(schedule, state, T0 + timedelta(minutes=1), **run)


def test_the_web_ui_details_say_what_the_cron_does() -> None:
    schedule = hourly()
    state = state_at()
    assert details(schedule, state) == "**scheduled** · next slot 2026-12-01 10:00 UTC"
    planned = details(schedule, state, planned=T0 + 5 * HOUR, triggers=2)
    assert planned == "**scheduled** · next slot 2026-12-01 14:00 UTC · 2 manual run(s) queued"
    cron_state.record(state, T0, "ran", "c1@a", JobStatus.DONE)
    assert details(schedule, state, cancelled=True) == (
        "**cancelled** · no further slots · last slot 2026-12-01 09:00 UTC ran (done) · ran 1"
    )
    assert details(schedule, state, ended="max_runs reached").startswith(
        "**done** · max_runs reached"
    )
    paused = state_at(paused=True, paused_until=T0 + HOUR)
    assert details(schedule, paused) == "**paused** · until 2026-12-01 10:00 UTC"


def test_the_report_follows_the_state() -> None:
    schedule = hourly(timezone="Europe/Paris")
    state = state_at(running={"c1@a": T0})
    now = T0 + timedelta(minutes=1)
    scheduled = cron_state.report(
        schedule, state, now, cancelled=False, ended=None, overlap_wait=False
    )
    assert scheduled.status == JobStatus.SCHEDULED and scheduled.run_at == T0 + HOUR
    assert scheduled.next_slots[0].local == "2026-12-01T11:00:00+01:00"
    assert scheduled.running == ["c1@a"] and scheduled.cron == "0 * * * *"
    done = cron_state.report(schedule, state, now, cancelled=False, ended="x", overlap_wait=False)
    assert done.status == JobStatus.DONE and done.next_slots == [] and done.run_at is None
    gone = cron_state.report(schedule, state, now, cancelled=True, ended=None, overlap_wait=False)
    assert gone.status == JobStatus.CANCELLED and gone.run_at is None
    state.paused = True
    paused = cron_state.report(
        schedule, state, now, cancelled=False, ended=None, overlap_wait=False
    )
    assert paused.status == JobStatus.PAUSED


def backfill(first: datetime, last: datetime, **fields: Any) -> BackfillRequest:
    return BackfillRequest.model_validate({"from": first, "to": last, **fields})


@pytest.mark.parametrize(
    ("request_", "ended", "queued", "refusal"),
    [
        (backfill(T0, T0 + HOUR), "max_runs reached", 0, "the cron is done"),
        (backfill(T0, T0 + HOUR), None, MAX_QUEUED_BACKFILLS, "already waiting"),
        (backfill(T0 + HOUR, T0), None, 0, "from is after to"),
        (backfill(T0, T0 + 9 * HOUR), None, 0, "to is in the future"),
        (backfill(T0, T0 + HOUR, actor=""), None, 0, "actor must be"),
    ],
)
def test_a_backfill_is_refused_at_the_door(
    request_: BackfillRequest, ended: str | None, queued: int, refusal: str
) -> None:
    now = T0 + 2 * HOUR
    check_backfill(backfill(T0, T0 + HOUR), None, MAX_QUEUED_BACKFILLS - 1, now)  # accepted
    with pytest.raises(ValueError, match=refusal):
        check_backfill(request_, ended, queued, now)


def test_a_backfill_plan_counts_its_slots_and_picks_how_they_start() -> None:
    slots, overlap = backfill_plan(hourly(), backfill(T0, T0 + 2 * HOUR))
    assert slots == [T0, T0 + HOUR, T0 + 2 * HOUR] and overlap == "buffer_all"
    _, own = backfill_plan(hourly(overlap="allow_all"), backfill(T0, T0 + HOUR))
    assert own == "allow_all"
    _, asked = backfill_plan(hourly(), backfill(T0, T0 + HOUR, overlap="allow_all"))
    assert asked == "allow_all"
    with pytest.raises(ApplicationError, match="more than"):
        backfill_plan(hourly(), backfill(T0, T0 + 20_000 * HOUR))


def test_an_update_must_leave_a_next_slot() -> None:
    schedule = hourly()
    check_update(CronUpdate(cron="*/5 * * * *", timezone="Asia/Tokyo"), schedule, T0)
    with pytest.raises(ValueError, match="outside 0-59"):
        check_update(CronUpdate(cron="61 * * * *"), schedule, T0)
    with pytest.raises(ValueError, match="unknown IANA time zone"):
        check_update(CronUpdate(timezone="Mars/Olympus"), schedule, T0)
    with pytest.raises(ValueError, match="can never fire"):
        check_update(CronUpdate(cron="0 0 30 2 *"), schedule, T0)
