"""Rate limits as text: ``"10/s"``, ``"600/m"``, ``"100/h"``: a whole number of starts per
second, minute or hour. Pure: the job model, the CLI, the API and the workflows parse with it.

The text is strict (``^[1-9][0-9]*/[smh]$``, nothing else: no spaces, signs, decimals or
exponents), so ``0/s``, ``-1/s``, ``1e309/s`` or ``10/fortnight`` are refused with one reason.
A rate's spacing is ``period / count`` seconds; a burst of B lets B starts go at once after
an idle spell (the generic cell rate algorithm's tolerance, ``(B - 1) * spacing``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
_RATE = re.compile(r"([1-9][0-9]{0,6})/([smh])")
# One key's limiter answers every job's request by signal: beyond ~100 starts a second one
# workflow's task throughput, not the rate, would decide the pace.
MAX_PER_SECOND = 100.0
MAX_BURST = 1000
RATE_HELP = 'a whole number of starts per s, m or h, e.g. "10/s", "600/m", "100/h"'


@dataclass(frozen=True)
class Rate:
    count: int
    unit: str  # s, m or h

    @property
    def spacing(self) -> float:
        """Seconds between two starts at the rate."""
        return UNIT_SECONDS[self.unit] / self.count

    @property
    def per_second(self) -> float:
        return self.count / UNIT_SECONDS[self.unit]

    def __str__(self) -> str:
        return f"{self.count}/{self.unit}"


def parse_rate(text: object) -> Rate:
    """``"10/s"`` -> Rate(10, "s"); ValueError naming the rule for anything else."""
    if not isinstance(text, str):
        raise ValueError(f"must be text: {RATE_HELP}")
    match = _RATE.fullmatch(text)
    if match is None:
        raise ValueError(f"{text[:40]!r} is not a rate: {RATE_HELP}")
    rate = Rate(int(match.group(1)), match.group(2))
    if rate.per_second > MAX_PER_SECOND:
        raise ValueError(f"{text} is above {MAX_PER_SECOND:g}/s, the most one key can pace")
    return rate


def describe(rate: str, burst: int) -> str:
    """``20/s`` or ``20/s burst 5``."""
    return rate if burst <= 1 else f"{rate} burst {burst}"
