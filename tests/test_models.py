"""Pure pieces: the job model, the backoff formula, durations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from jobctl.starter.errors import SpecError
from jobctl.workflows.backoff import base_delay, next_retry, retry_delay, retry_delay_bounds
from jobctl.workflows.durations import format_duration, parse_duration
from jobctl.workflows.models import JobSpec, parse_spec

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def problems(data: dict[str, object]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as err:
        parse_spec(data, NOW, new_id="job-x")
    return SpecError.from_validation(err.value).problems


def test_defaults_follow_the_design() -> None:
    spec = parse_spec({"name": "n", "handler": "log", "delay": 90}, NOW, new_id="job-1")
    assert (spec.id, spec.run_at, spec.delay) == ("job-1", NOW + timedelta(seconds=90), None)
    assert (spec.max_attempts, spec.backoff_base, spec.backoff_max, spec.jitter) == (8, 2, 300, 0.3)
    assert (spec.lease, spec.timeout, spec.timezone, spec.payload) == (60, 3600, "UTC", {})
    assert spec.key == "job-1"


def test_durations_accept_units_and_reject_nonsense() -> None:
    assert [parse_duration(v) for v in ("90", "90s", "5m", "2h", "1h30m", 7)] == [
        90,
        90,
        300,
        7200,
        5400,
        7,
    ]
    for bad in ("soon", "", "5 minutes", "m5"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert format_duration(5400) == "1h30m" and format_duration(57.47) == "57.5s"


def test_ten_year_bound_applies_only_when_validating_a_submission() -> None:
    far = (NOW + timedelta(days=3700)).isoformat()
    assert problems({"name": "n", "handler": "log", "run_at": far}) == [
        ("run_at", "must be at most 10 years ahead")
    ]
    # Decoding inside a workflow (no clock in the context) must never re-judge the time.
    assert JobSpec.model_validate({"name": "n", "handler": "log", "run_at": far}).run_at


def test_decoded_specs_keep_validating() -> None:
    spec = parse_spec({"name": "n", "handler": "log", "delay": 5}, NOW, new_id="job-2")
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec


def test_several_problems_are_all_reported() -> None:
    found = dict(problems({"name": "", "handler": "log", "delay": 5, "max_attempts": 0}))
    assert set(found) == {"name", "max_attempts"}


@pytest.mark.parametrize("attempt", [1, 2, 3, 8, 100])
def test_retry_delay_stays_inside_its_bounds(attempt: int) -> None:
    low, high = retry_delay_bounds(attempt, 2, 300, 0.3)
    assert retry_delay(attempt, 2, 300, 0.3, 0.0) == low
    assert low <= retry_delay(attempt, 2, 300, 0.3, 0.999999) <= high
    assert low == min(2 * 2 ** (attempt - 1), 300)


def test_backoff_doubles_then_caps() -> None:
    assert [base_delay(n, 2, 300) for n in range(1, 11)] == [
        2,
        4,
        8,
        16,
        32,
        64,
        128,
        256,
        300,
        300,
    ]
    assert next_retry(NOW, 1, 2, 300, 0.5, 0.5) == NOW + timedelta(seconds=2.5)
    with pytest.raises(ValueError):
        retry_delay(1, 2, 300, 0.3, 1.0)
