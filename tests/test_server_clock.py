"""The worker's reading of the server's clock (activities/server_clock.py): an attempt begun
late reads the time its promptly begun peers saw, and no reading is ever ahead of the
server (the "never before run_at" guarantee rests on it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobctl.activities import server_clock
from jobctl.activities.server_clock import CALIBRATION_WINDOW, ServerClock, ServerTimeline

TRUE_OFFSET = 1_000_000.0  # server time = monotonic time + this (the test's "truth")


def server_at(mono: float) -> datetime:
    return datetime.fromtimestamp(mono + TRUE_OFFSET, UTC)


def fake_monotonic(monkeypatch: pytest.MonkeyPatch, now: list[float]) -> None:
    monkeypatch.setattr(server_clock, "time", SimpleNamespace(monotonic=lambda: now[0]))


def test_an_attempt_begun_late_reads_the_time_its_prompt_peer_saw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    fake_monotonic(monkeypatch, now)
    timeline = ServerTimeline()
    prompt = ServerClock(server_at(100.0), timeline)  # begun as it was stamped
    now[0] = 101.5
    late = ServerClock(server_at(101.0), timeline)  # stamped at 101, begun 0.5 s later
    assert late.now() == server_at(101.5)  # the truth, not the stamp's 101.0 + 0
    assert prompt.now() == server_at(101.5)
    alone = ServerClock(server_at(101.0))  # without the worker's timeline: 0.5 s behind
    assert alone.now() == server_at(101.0)


@given(
    st.lists(
        st.tuples(st.floats(0, 30), st.floats(0, 5)),  # (seconds since the last one, lag)
        min_size=1,
        max_size=40,
    ),
    st.floats(0, 60),
)
def test_no_reading_is_ahead_of_the_server_and_a_prompt_stamp_makes_it_exact(
    attempts: list[tuple[float, float]], later: float
) -> None:
    timeline = ServerTimeline()
    mono = 0.0
    for gap, lag in attempts:
        mono += gap
        # The server stamped it `lag` seconds before this worker began it.
        timeline.observe(server_at(mono - lag), at=mono)
    reading = timeline.now(at=mono + later)
    truth = server_at(mono + later)
    assert reading <= truth + timedelta(microseconds=1)  # never ahead (float rounding aside)
    prompt_recent = any(lag == 0 for _, lag in attempts[-1:])
    if prompt_recent:
        assert truth - reading <= timedelta(microseconds=1)


def test_a_bound_older_than_the_window_gives_way_to_the_next_stamp() -> None:
    """A server clock set back 2 s: within the window the old (now too high) bound holds; past
    it the next stamp replaces it, and readings follow the server again."""
    timeline = ServerTimeline()
    timeline.observe(server_at(0.0), at=0.0)
    set_back = timedelta(seconds=2)
    timeline.observe(server_at(10.0) - set_back, at=10.0)
    assert timeline.now(at=10.0) == server_at(10.0)  # the older, tighter-looking bound holds
    after = CALIBRATION_WINDOW + 1
    timeline.observe(server_at(after) - set_back, at=after)
    assert timeline.now(at=after) == server_at(after) - set_back
