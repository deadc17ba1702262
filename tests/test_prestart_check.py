"""The pre-start check's moment and the pause cutoff (:mod:`workflows.prestart_check`): a pause
the workflow accepts always lands before the attempt's check, a lone job keeps its 3-9 s
check and 10 s cutoff, and a herd's long waits check at a rate bounded by the wake rate."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from jobctl.workflows.models import CONTROL_CUTOFF
from jobctl.workflows.prestart_check import (
    CHECK_MARGIN,
    CHECK_SHARE,
    GO_CHECK_AHEAD,
    LONG_WAIT,
    check_ahead,
    pause_cutoff,
)

waits = st.floats(min_value=0.0, max_value=400.0, allow_nan=False)
draws = st.floats(min_value=0.0, max_value=1.0)


@given(dispatched=waits, started_later_by=waits, draw=draws)
def test_a_pause_the_workflow_accepts_lands_before_the_check(
    dispatched: float, started_later_by: float, draw: float
) -> None:
    # The attempt starts at or after the workflow scheduled it: its wait is never longer.
    wait = max(0.0, dispatched - started_later_by)
    assert check_ahead(wait, draw) + CHECK_MARGIN <= pause_cutoff(dispatched)


@given(wait=st.floats(min_value=0.0, max_value=LONG_WAIT), draw=draws)
def test_a_lone_job_checks_3_to_9_s_ahead_and_refuses_pause_in_the_last_10_s(
    wait: float, draw: float
) -> None:
    assert GO_CHECK_AHEAD <= check_ahead(wait, draw) <= 9.0
    assert pause_cutoff(wait) == CONTROL_CUTOFF.total_seconds() == 10.0


@given(wait=st.floats(min_value=LONG_WAIT, max_value=400.0, exclude_min=True), draw=draws)
def test_a_long_wait_checks_half_of_it_ahead(wait: float, draw: float) -> None:
    assert check_ahead(wait, draw) == max(CHECK_SHARE * wait, GO_CHECK_AHEAD + 6.0 * draw)
    assert pause_cutoff(wait) == max(10.0, CHECK_SHARE * wait + CHECK_MARGIN)


def test_a_herd_handed_over_at_the_wake_rate_checks_at_a_bounded_rate() -> None:
    """5,000 jobs due together, woken at 40/s from 15 s before run_at backwards (the wake
    plan's shape): no second before run_at holds more than the wake rate / CHECK_SHARE checks
    beyond the lone window's (the 3-9 s rule put all 5,000 into 6 s)."""
    rng = random.Random(7)
    rate = 40
    waits = [15 + i / rate for i in range(5000)]
    per_second: dict[int, int] = {}
    for wait in waits:
        second = int(check_ahead(wait, rng.random()))
        per_second[second] = per_second.get(second, 0) + 1
    beyond_lone_window = {s: n for s, n in per_second.items() if s >= 10}
    assert max(beyond_lone_window.values()) <= rate / CHECK_SHARE + 1
    # The lone window holds only the jobs that wait up to LONG_WAIT: 600 over 6 s.
    within = sum(n for s, n in per_second.items() if s < 10)
    assert within == sum(1 for wait in waits if wait <= LONG_WAIT)
    assert max(per_second.values()) < 5000 / 6
