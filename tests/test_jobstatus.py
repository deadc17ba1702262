"""The one status rule and the attempt numbering (workflows/jobstatus.py): pure, no server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobctl.starter.render import status_line, time_line
from jobctl.workflows.jobstatus import (
    AttemptFacts,
    Facts,
    JobView,
    attempt_label,
    current_attempt,
    job_time,
    last_attempt,
    public_status,
)
from jobctl.workflows.models import AttemptRecord, JobStatus

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
AHEAD = NOW + timedelta(minutes=5)
PAST = NOW - timedelta(minutes=5)


def started(handler_running: bool = True) -> AttemptFacts:
    return AttemptFacts(state="started", handler_since=PAST if handler_running else None)


CASES: list[tuple[str, Facts, JobStatus, str | None]] = [
    ("completed", Facts("completed", "running"), JobStatus.DONE, None),
    ("completed old run", Facts("completed", "done"), JobStatus.DONE, None),
    ("canceled", Facts("canceled", "cancelled"), JobStatus.CANCELLED, None),
    ("terminated", Facts("terminated", "scheduled"), JobStatus.CANCELLED, "terminated"),
    ("discarded (new runs)", Facts("failed", "discarded"), JobStatus.DISCARDED, None),
    (
        "failed while dead, not discarded",
        Facts("failed", "dead"),
        JobStatus.DEAD,
        "the run ended (it cannot be requeued)",
    ),
    (
        "discarded by failure type",
        Facts("failed", None, failure_type="JobDiscarded"),
        JobStatus.DISCARDED,
        None,
    ),
    (
        "a run that failed otherwise",
        Facts("failed", "scheduled", failure_type="InvalidWorkflowInput"),
        JobStatus.DEAD,
        "the run ended (it cannot be requeued)",
    ),
    (
        "timed out",
        Facts("timed_out", None),
        JobStatus.DEAD,
        "the run ended (it cannot be requeued)",
    ),
    (
        "settled between describe and query",
        Facts("running", "scheduled", cancel_requested=True, report=JobStatus.CANCELLED),
        JobStatus.CANCELLED,
        None,
    ),
    (
        "cancel requested",
        Facts("running", "scheduled", cancel_requested=True),
        JobStatus.CANCELLING,
        None,
    ),
    (
        "cancel of a dead job",
        Facts("running", "dead", cancel_requested=True),
        JobStatus.CANCELLING,
        None,
    ),
    ("paused", Facts("running", "paused", run_at=PAST), JobStatus.PAUSED, None),
    ("dead (parked)", Facts("running", "dead", run_at=PAST), JobStatus.DEAD, None),
    ("cron", Facts("running", "scheduled", kind="cron", run_at=PAST), JobStatus.SCHEDULED, None),
    ("waiting for run_at", Facts("running", "scheduled", run_at=AHEAD), JobStatus.SCHEDULED, None),
    ("due, no task yet", Facts("running", "scheduled", run_at=PAST), JobStatus.PENDING, None),
    (
        "with a worker before run_at",
        Facts("running", "running", run_at=AHEAD, activity=started(False)),
        JobStatus.SCHEDULED,
        "with a worker, waiting for run_at",
    ),
    (
        "its start recorded just before run_at (the handler starts at run_at)",
        Facts(
            "running",
            "scheduled",
            run_at=AHEAD,
            activity=AttemptFacts("started", 1, None, None, AHEAD),
        ),
        JobStatus.SCHEDULED,
        "with a worker, waiting for run_at",
    ),
    (
        "triggered before run_at (handler running)",
        Facts("running", "scheduled", run_at=AHEAD, activity=started(True)),
        JobStatus.RUNNING,
        None,
    ),
    (
        "running (old runs say running)",
        Facts("running", "running", run_at=PAST, activity=started(False)),
        JobStatus.RUNNING,
        None,
    ),
    (
        "running (new runs say scheduled)",
        Facts("running", "scheduled", run_at=PAST, activity=started(True)),
        JobStatus.RUNNING,
        None,
    ),
    (
        "first attempt waits for a worker",
        Facts("running", "scheduled", run_at=PAST, activity=AttemptFacts("scheduled", 1)),
        JobStatus.PENDING,
        None,
    ),
    (
        "handed out ahead of run_at, no worker has it yet (a busy worker)",
        Facts("running", "scheduled", run_at=AHEAD, activity=AttemptFacts("scheduled", 1)),
        JobStatus.SCHEDULED,
        None,
    ),
    (
        "backing off",
        Facts("running", "scheduled", run_at=PAST, activity=AttemptFacts("scheduled", 2, AHEAD)),
        JobStatus.RETRYING,
        None,
    ),
    (
        "retry due, waiting for a worker",
        Facts("running", "scheduled", run_at=PAST, activity=AttemptFacts("scheduled", 3, PAST)),
        JobStatus.PENDING,
        None,
    ),
]


@pytest.mark.parametrize(
    ("facts", "expected", "detail"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_public_status(facts: Facts, expected: JobStatus, detail: str | None) -> None:
    verdict = public_status(facts, NOW)
    assert verdict.status == expected
    assert verdict.detail == detail


def test_retrying_carries_the_next_attempt_and_the_last_failure() -> None:
    activity = AttemptFacts("scheduled", 2, AHEAD, last_failure="boom")
    verdict = public_status(Facts("running", "scheduled", run_at=PAST, activity=activity), NOW)
    assert (verdict.status, verdict.next_attempt_at, verdict.last_error) == (
        JobStatus.RETRYING,
        AHEAD,
        "boom",
    )


def record(n: int, round_: int = 1, outcome: str = "failed") -> AttemptRecord:
    return AttemptRecord.model_validate(
        {"attempt": n, "round": round_, "started_at": PAST, "outcome": outcome}
    )


def test_a_running_first_attempt_is_attempt_1_never_0() -> None:
    """Defect: a running first attempt showed as "attempt 0 of 8"."""
    assert current_attempt([], 1, 8).label == "attempt 1 of 8"
    assert current_attempt([record(1, outcome="running")], 1, 8).label == "attempt 1 of 8"
    report = JobView(
        job_id="j",
        name="n",
        handler="h",
        status=JobStatus.RUNNING,
        max_attempts=8,
        idempotency_key="j",
        worker="w1",
    )
    assert status_line(report, NOW) == "running on w1, attempt 1 of 8"


def test_attempts_count_across_requeues_budgets_per_round() -> None:
    """Defect: per round in `jobctl status`, cumulative in the worker log and the DLQ."""
    first_round = [record(1), record(2), record(3), record(4)]
    assert current_attempt(first_round, 2, 4).label == "attempt 5 (1 of 4 in round 2)"
    second = [*first_round, record(5, 2), record(6, 2, "running")]
    assert current_attempt(second, 2, 4).label == "attempt 6 (2 of 4 in round 2)"
    last = last_attempt([*first_round, record(5, 2)], 4)
    assert last is not None and last.label == "attempt 5 (1 of 4 in round 2)"
    assert attempt_label(2, 2, 4) == "attempt 2 of 4"


def test_a_handed_over_attempt_costs_no_budget_but_keeps_its_number() -> None:
    log = [record(1, outcome="handed_over"), record(2, outcome="running")]
    assert current_attempt(log, 1, 3).label == "attempt 2 (1 of 3 in round 1)"


def test_retrying_line_names_the_failed_and_the_next_attempt() -> None:
    report = JobView(
        job_id="j",
        name="n",
        handler="h",
        status=JobStatus.RETRYING,
        max_attempts=4,
        idempotency_key="j",
        attempts=[record(1)],
        next_attempt_at=AHEAD,
    )
    line = status_line(report, NOW)
    assert line.startswith("retrying: attempt 1 of 4 failed; next attempt 2026-11-30T12:05:00Z")


def test_discarded_says_so() -> None:
    report = JobView(
        job_id="j",
        name="n",
        handler="h",
        status=JobStatus.DISCARDED,
        max_attempts=2,
        idempotency_key="j",
        attempts=[record(1), record(2)],
    )
    assert status_line(report, NOW).startswith("discarded after 2 attempt(s)")


def test_a_finished_job_shows_when_it_ran_not_a_future_run_at() -> None:
    """Defect: a finished job (triggered early) showed a future "run at"."""
    report = JobView(
        job_id="j",
        name="n",
        handler="h",
        status=JobStatus.DONE,
        run_at=AHEAD,
        max_attempts=2,
        idempotency_key="j",
        attempts=[record(1, outcome="succeeded")],
    )
    assert time_line(report, NOW).startswith("ran at:  2026-11-30T11:55:00Z")
    assert job_time(AHEAD, NOW) == NOW  # closed before its run_at: its time is when it closed
    assert job_time(PAST, NOW) == PAST
    assert job_time(AHEAD, None) == AHEAD
