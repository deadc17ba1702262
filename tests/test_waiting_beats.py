"""A pre-dispatched attempt's heartbeats while it waits for run_at
(activities/predispatch.py ``sleep_heartbeating``, ``hold_heartbeating``): spaced within the
SDK's throttle, none in the stretch before the check it was told to leave free, and the
SDK's own clock of the lease kept going until just after run_at with the fewest beats.

A 5,000 herd's attempts, each beating at the end of its wait, sent 5,000 beats in the
tenth of a second before run_at (found by profiling the worker at run_at)."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from jobctl.activities import predispatch
from jobctl.activities.predispatch import (
    HOLD_AFTER,
    SDK_THROTTLE,
    ServerLiveness,
    hold_heartbeating,
    pre_check_quiet,
    sleep_heartbeating,
    wait_for_run_at,
)
from jobctl.activities.server_clock import ServerClock
from jobctl.workflows.models import HeartbeatState

LEASE = 1.0  # short, so a wait of a few leases takes a few seconds
SLACK = 0.15  # timers on a loaded 2-core machine fire this late, measured at most ~0.05 s


async def beats_during(seconds: float, ahead: float) -> tuple[list[float], float]:
    """The moments (seconds from the start) at which a wait of ``seconds`` beat, and when it
    ended."""
    beats: list[float] = []
    env = ActivityEnvironment()
    began = time.monotonic()
    env.on_heartbeat = lambda *_: beats.append(time.monotonic() - began)

    async def wait() -> None:
        await sleep_heartbeating(seconds, HeartbeatState(), LEASE, ahead)

    await env.run(wait)
    return beats, time.monotonic() - began


async def test_a_long_wait_beats_within_the_throttle_and_leaves_its_last_stretch_free() -> None:
    ahead = 0.45 * LEASE
    beats, ended = await beats_during(2.5, ahead)
    assert ended >= 2.5
    gaps = [b - a for a, b in zip([0.0, *beats], beats, strict=False)]
    assert beats and max(gaps) <= SDK_THROTTLE * LEASE + SLACK, beats
    last_beat = 2.5 - ahead
    assert last_beat - 0.01 <= beats[-1] <= last_beat + SLACK, beats  # and none after it


async def test_with_nothing_left_free_the_last_beat_is_at_the_end() -> None:
    beats, _ = await beats_during(1.0, 0.0)
    assert len(beats) == 2 and beats[-1] >= 1.0 - 0.01, beats


async def test_a_wait_shorter_than_its_free_stretch_does_not_beat() -> None:
    beats, ended = await beats_during(0.3, 0.4)
    assert beats == [] and ended >= 0.3


async def hold_beats(seconds: float, since_ago: float) -> list[float]:
    """The moments (seconds from the hold's start) at which a hold of ``seconds`` beat, the
    SDK's last beat ``since_ago`` seconds before it."""
    beats: list[float] = []
    env = ActivityEnvironment()
    began = time.monotonic()
    env.on_heartbeat = lambda *_: beats.append(time.monotonic() - began)

    async def hold() -> None:
        await hold_heartbeating(seconds, HeartbeatState(), LEASE, began - since_ago)

    await env.run(hold)
    return beats


@pytest.mark.parametrize(("seconds", "since_ago"), [(2.5, 0.7), (1.0, 0.0), (0.3, 0.6)])
async def test_a_hold_keeps_the_sdks_clock_past_run_at_with_the_fewest_beats(
    seconds: float, since_ago: float
) -> None:
    """From the SDK's last beat to HOLD_AFTER of the lease past run_at (when a slot wait
    beats on its own), no stretch is longer than the throttle interval, and no beat more than
    that needs: one beat fewer would leave a longer stretch."""
    beats = await hold_beats(seconds, since_ago)
    until = seconds + HOLD_AFTER * LEASE
    every = SDK_THROTTLE * LEASE
    gaps = [b - a for a, b in itertools.pairwise([-since_ago, *beats, until])]
    assert max(gaps) <= every + SLACK, beats
    assert (
        (until + since_ago) / (len(beats) + 1) <= every < (until + since_ago) / len(beats or [0.1])
    )


async def test_a_hold_the_last_beat_covers_sends_none() -> None:
    assert await hold_beats(0.5, 0.1) == []  # 0.1 + 0.5 + 0.1 of a 0.8 s interval


async def beats_before_the_record(
    monkeypatch: pytest.MonkeyPatch, wait: float, ahead: float, lease: float
) -> tuple[list[float], float]:
    """The moments (seconds from the attempt's start) at which an attempt waiting ``wait``
    seconds for its run_at and checking ``ahead`` of it beat before its start record, and when
    that record went out."""
    beats, at = await beats_and_record(monkeypatch, wait, ahead, lease)
    return [b for b in beats if b < at], at


async def beats_and_record(
    monkeypatch: pytest.MonkeyPatch, wait: float, ahead: float, lease: float
) -> tuple[list[float], float]:
    """Every moment (seconds from the attempt's start) at which an attempt waiting ``wait``
    seconds for its run_at and checking ``ahead`` of it beat through the SDK, and when its
    start record went out (``wait_for_run_at``; the check's describe is left out). The check's
    bound is GO_CHECK: short, like the lease, so the waits take seconds."""
    monkeypatch.setattr(predispatch, "GO_CHECK_TIMEOUT", GO_CHECK)
    monkeypatch.setattr(predispatch, "check_ahead", lambda *_: ahead)

    async def wanted() -> None:
        return None

    monkeypatch.setattr(predispatch, "still_wanted", wanted)
    beats: list[float] = []
    recorded: list[float] = []
    env = ActivityEnvironment()
    began = time.monotonic()
    env.on_heartbeat = lambda *_: beats.append(time.monotonic() - began)

    async def commit() -> None:
        recorded.append(time.monotonic() - began)

    async def attempt() -> None:
        liveness = ServerLiveness()
        liveness.last_ok = float("inf")  # the server answers: no health check to wait for
        started = datetime.now(UTC)
        run_at = started + timedelta(seconds=wait)
        await wait_for_run_at(
            run_at, ServerClock(started), HeartbeatState(), lease, liveness, commit, lambda: None
        )

    await env.run(attempt)
    [at] = recorded
    return beats, at


GO_CHECK = 0.5  # GO_CHECK_TIMEOUT in the record tests


async def test_a_check_the_lease_reaches_is_preceded_by_no_beat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stretch to the check plus the check's bound fits in the throttle's share of the
    lease: the start record is the attempt's first beat. A beat at the end of that stretch
    (as before) went out through the SDK on its own schedule and once reached the server
    after the record, leaving ``attempts: []`` on record (test_dispatch's long wait)."""
    lease = 2.5  # 80%: 2 s
    beats, at = await beats_before_the_record(monkeypatch, wait=3.0, ahead=1.5, lease=lease)
    assert beats == [] and at >= 1.5 - 0.01, beats


async def test_a_long_stretch_beats_early_enough_before_its_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stretch the lease does not cover beats, but its last beat falls pre_check_quiet
    before the check, and each beat comes a full throttle interval after the one before: the
    SDK holds a beat that follows the previous one sooner than that and sends it when the
    interval ends, which could be after the record (5 s stretch, 2 s throttle: beats at 2, 4
    and 5, the last held until 6)."""
    lease = 2.5
    throttle = lease * SDK_THROTTLE
    beats, at = await beats_before_the_record(monkeypatch, wait=6.0, ahead=1.0, lease=lease)
    quiet = pre_check_quiet(lease)
    assert quiet >= 1.0
    assert beats and beats[-1] <= at - quiet + SLACK, (beats, at)
    gaps = [b - a for a, b in itertools.pairwise(beats)]
    assert all(throttle - 0.01 <= gap <= throttle + SLACK for gap in gaps), beats
    # The lease holds: from the start to the first beat, and from the last to the record.
    assert beats[0] <= throttle + SLACK and at - beats[-1] + GO_CHECK <= throttle + SLACK


async def test_the_sdks_beats_hold_the_lease_without_counting_the_start_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The start record goes to the server straight, not through the SDK, so the SDK's own
    clock of the lease (the lease plus 5 s, reset only by the answers to its beats) does not
    see it: from the attempt's start to just after run_at, no stretch without an SDK beat
    may be longer than the throttle interval. Counted from the record instead, the last
    beat came 2.2-3.3 s after the beat before the check (2 s allowed); in a 5,000 herd with
    the default lease the gaps reached 86 s and the SDK ended ~1,600 waiting attempts as
    timed out (``timed_out=True, not_found=True``), which the server then ran late."""
    wait, ahead = 6.0, 1.8
    lease = 2.5  # 80%: 2 s; the quiet before the check: 1.5 s
    beats, at = await beats_and_record(monkeypatch, wait=wait, ahead=ahead, lease=lease)
    throttle = lease * SDK_THROTTLE
    assert any(b > at for b in beats), (beats, at)
    gaps = [b - a for a, b in itertools.pairwise([0.0, *beats, wait + HOLD_AFTER * lease])]
    assert max(gaps) <= throttle + SLACK, (beats, at)
