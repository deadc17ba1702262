"""A round's attempt log never lists more spent attempts than its budget
(job_rules.within_budget, applied by JobWorkflow to every record it keeps)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from jobctl.workflows.job_rules import within_budget
from jobctl.workflows.models import AttemptRecord

T0 = datetime(2026, 12, 7, tzinfo=UTC)


def lost(number: int, worker: str, round_: int = 1) -> AttemptRecord:
    started = T0 + timedelta(seconds=10 * number)
    record = AttemptRecord(attempt=number, round=round_, started_at=started, worker=worker)
    return record.close("lost", started + timedelta(seconds=5), "lease lost", "LeaseExpired")


def test_a_log_within_its_budget_comes_back_unchanged() -> None:
    log = [lost(1, "w1"), lost(2, "unknown")]
    assert within_budget(log, 1, 2) is log


def test_an_excess_reckoned_attempt_goes_first_and_the_rest_are_numbered_in_order() -> None:
    # The shape the lethal poison drill once reported: three lost attempts for a budget of 2.
    log = [lost(1, "w1"), lost(2, "unknown"), lost(3, "w2")]
    kept = within_budget(log, 1, 2)
    assert [(r.attempt, r.worker) for r in kept] == [(1, "w1"), (2, "w2")]


def test_without_a_reckoned_attempt_the_earliest_goes() -> None:
    kept = within_budget([lost(1, "w1"), lost(2, "w2"), lost(3, "w3")], 1, 2)
    assert [(r.attempt, r.worker) for r in kept] == [(1, "w2"), (2, "w3")]


def test_earlier_rounds_and_handed_over_attempts_are_left_alone() -> None:
    first_round = [lost(n, "w", round_=1) for n in (1, 2, 3)]  # ran under a larger budget
    started = T0 + timedelta(minutes=5)
    handed = AttemptRecord(attempt=4, round=2, started_at=started, worker="w9").close(
        "handed_over", started
    )
    log = [*first_round, handed, lost(5, "unknown", 2), lost(6, "w4", 2), lost(7, "w5", 2)]
    kept = within_budget(log, 2, 2)
    assert kept[:4] == log[:4]
    assert [(r.attempt, r.worker) for r in kept[4:]] == [(5, "w4"), (6, "w5")]


@given(
    workers=st.lists(st.sampled_from(["unknown", "w1", "w2"]), max_size=8),
    budget=st.integers(min_value=1, max_value=5),
)
def test_any_log_ends_within_the_budget_keeping_every_recorded_attempt_it_can(
    workers: list[str], budget: int
) -> None:
    log = [lost(n, worker) for n, worker in enumerate(workers, start=1)]
    kept = within_budget(log, 1, budget)
    assert len(kept) == min(len(log), budget)
    assert [r.attempt for r in kept] == list(range(1, len(kept) + 1))
    recorded = sum(w != "unknown" for w in workers)
    assert sum(r.worker != "unknown" for r in kept) == min(recorded, len(kept))
