"""The one backoff formula: ``min(base * 2^(n-1), max) * (1 + U(0, jitter))``.

Pure functions. The random draw ``u`` is an argument so the formula stays deterministic and
testable; the caller (the ``run_job`` activity) supplies ``random.random()``.
"""

from __future__ import annotations

from datetime import datetime, timedelta


def base_delay(attempt: int, base: float, maximum: float) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based), before jitter."""
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    # Cap the exponent so huge attempt numbers cannot overflow before min() applies.
    return min(base * 2.0 ** min(attempt - 1, 1000), maximum)


def retry_delay(attempt: int, base: float, maximum: float, jitter: float, u: float) -> float:
    """Seconds to wait after failed attempt ``attempt``; ``u`` is a uniform draw in [0, 1)."""
    if not 0.0 <= u < 1.0:
        raise ValueError("u must be in [0, 1)")
    return base_delay(attempt, base, maximum) * (1.0 + u * jitter)


def retry_delay_bounds(
    attempt: int, base: float, maximum: float, jitter: float
) -> tuple[float, float]:
    """The closed range every ``retry_delay`` for this attempt falls in."""
    delay = base_delay(attempt, base, maximum)
    return delay, delay * (1.0 + jitter)


def next_retry(
    now: datetime, attempt: int, base: float, maximum: float, jitter: float, u: float
) -> datetime:
    """When the attempt after failed attempt ``attempt`` may start."""
    return now + timedelta(seconds=retry_delay(attempt, base, maximum, jitter, u))
