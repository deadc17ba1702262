"""Rate limits without a server: the ``rate`` text, the spec's rules for the rate fields, and
the limiter's arithmetic (GCRA reservations, the recent-starts tally)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from jobctl.workflows.cron_rules import tick_spec
from jobctl.workflows.models import JobSpec
from jobctl.workflows.models.ratelimit import (
    RateRequest,
    RateState,
    count_start,
    recent_starts,
    reserve,
)
from jobctl.workflows.rates import Rate, describe, parse_rate

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "count", "unit", "spacing"),
    [
        ("10/s", 10, "s", 0.1),
        ("600/m", 600, "m", 0.1),
        ("100/h", 100, "h", 36.0),
        ("1/h", 1, "h", 3600.0),
    ],
)
def test_rates_parse(text: str, count: int, unit: str, spacing: float) -> None:
    rate = parse_rate(text)
    assert (rate, str(rate)) == (Rate(count, unit), text)
    assert rate.spacing == pytest.approx(spacing)


BAD_RATES: list[Any] = [
    "0/s",
    "-1/s",
    "1e309/s",
    "10/fortnight",
    "10/d",
    "10 /s",
    " 10/s",
    "10/S",
    "10/s burst 2",
    "1.5/s",
    "010/s",
    "+5/s",
    "/s",
    "10/",
    "10",
    "",
    "101/s",
    "6001/m",
    "inf/s",
    "nan/s",
    "\u0661\u0660/s",  # Arabic-Indic digits: \d would take them
    True,
    False,
    10,
    10.0,
    None,
    ["10/s"],
    {"n": 10},
]


@pytest.mark.parametrize("raw", BAD_RATES)
def test_bad_rates_are_refused_at_the_door(raw: Any) -> None:
    spec = {"name": "n", "handler": "log", "delay": 0, "rate_key": "k", "rate": raw}
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(spec, context={"now": NOW})
    assert any("rate" in str(e["loc"]) or "rate" in str(e["msg"]) for e in caught.value.errors())


@pytest.mark.parametrize(
    "fields",
    [
        {"rate": "10/s"},  # rate without rate_key
        {"rate_key": "k"},  # rate_key without rate
        {"rate_burst": 5},  # a burst alone
        {"rate_key": "k", "rate": "10/s", "rate_burst": 0},
        {"rate_key": "k", "rate": "10/s", "rate_burst": 1001},
        {"rate_key": "k", "rate": "10/s", "rate_burst": True},
        {"rate_key": "k", "rate": "10/s", "rate_burst": 2.0},
        {"rate_key": "k" * 201, "rate": "10/s"},
        {"rate_key": "é" * 101, "rate": "10/s"},  # 202 bytes
        {"rate_key": "a\nb", "rate": "10/s"},
        {"rate_key": "", "rate": "10/s"},
        {"rate_key": 5, "rate": "10/s"},
    ],
)
def test_rate_fields_go_together_and_stay_in_bounds(fields: dict[str, Any]) -> None:
    spec = {"name": "n", "handler": "log", "delay": 0, **fields}
    with pytest.raises(ValidationError):
        JobSpec.model_validate(spec, context={"now": NOW})


def test_a_cron_slot_inherits_the_rate_fields() -> None:
    cron = JobSpec(
        id="nightly",
        name="n",
        handler="log",
        cron="* * * * *",
        rate_key="api",
        rate="600/m",
        rate_burst=3,
    )
    slot = tick_spec(cron, "nightly.1", NOW, NOW)
    assert (slot.rate_key, slot.rate, slot.rate_burst) == ("api", "600/m", 3)
    assert cron.scheduling()["rate"] == "600/m"


def reserve_many(n: int, spacing: float, burst: int, arrivals: list[float]) -> list[float]:
    """Reserve n starts, the i-th asked at arrivals[i] seconds: their start offsets."""
    tat = None
    starts = []
    for i in range(n):
        start, tat = reserve(tat, NOW + timedelta(seconds=arrivals[i]), spacing, burst)
        starts.append((start - NOW).total_seconds())
    return starts


def test_reservations_are_spaced_by_the_rate() -> None:
    assert reserve_many(4, 0.2, 1, [0, 0, 0, 0]) == pytest.approx([0, 0.2, 0.4, 0.6])


def test_a_burst_goes_at_once_then_the_rate_holds() -> None:
    assert reserve_many(5, 0.5, 3, [0] * 5) == pytest.approx([0, 0, 0, 0.5, 1.0])


def test_an_idle_spell_earns_the_burst_back_and_no_more() -> None:
    starts = reserve_many(6, 1.0, 2, [0, 0, 10, 10, 10, 10])
    assert starts == pytest.approx([0, 0, 10, 10, 11, 12])


def test_no_window_holds_more_than_burst_plus_rate() -> None:
    """The GCRA guarantee: any window of W seconds holds at most burst + W * rate starts."""
    import random

    rng = random.Random(44)
    arrivals = sorted(rng.uniform(0, 20) for _ in range(300))
    spacing, burst = 0.1, 4
    starts = reserve_many(300, spacing, burst, arrivals)
    assert all(s >= a - 1e-6 for s, a in zip(starts, arrivals, strict=True))  # never before asking
    for i, first in enumerate(starts):
        for window in (0.05, 0.5, 1.0, 5.0):
            inside = sum(1 for s in starts[i:] if s < first + window)
            assert inside <= burst + window / spacing + 1e-6, (first, window, inside)


def test_recent_starts_count_the_last_minute() -> None:
    state = RateState(key="k")
    for offset in (-90, -61, -58.5, -1, 0, 0.2, 1.5):
        count_start(state, NOW + timedelta(seconds=offset))
    assert recent_starts(state, NOW) == 4  # -58.5, -1, 0, 0.2 (whole seconds; 1.5 is still ahead)
    assert len(state.recent) <= 63  # older seconds are forgotten


def test_a_request_normalizes_and_checks_its_rate() -> None:
    base = {
        "key": "k",
        "holder": "j",
        "run_id": "0" * 8 + "-0000-0000-0000-" + "0" * 12,
        "ticket": "t",
    }
    assert RateRequest.model_validate({**base, "rate": "5/s"}).rate == "5/s"
    for bad in ("0/s", 5, "5/s ", None):
        with pytest.raises(ValidationError):
            RateRequest.model_validate({**base, "rate": bad})
    assert describe("5/s", 1) == "5/s" and describe("5/s", 4) == "5/s burst 4"
