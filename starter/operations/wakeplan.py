"""When a one-shot job wakes: the lead rule that spreads a herd over the notice it was given.

A one-shot starts with ``start_delay`` and wakes ``lead`` seconds before its ``run_at``; the
workflow hands the attempt to a worker at once (it waits there for run_at, activities/
predispatch.py). The server's and the worker's work for a job happens at that wake, so a herd
due together is on time only if its wakes are spread at a rate the cluster can carry.

The rule (:func:`pick_lead`), per job, in the process that schedules it:

* The job's first choice is today's: a random lead in [``floor``, ``first``] (15-30 s by
  default), so jobs scheduled by separate processes still spread.
* This process remembers how many wakes it has planned in each second (:class:`WakePlan`). If
  the first choice's second already holds ``rate`` wakes (``JOBS_WAKE_RATE``, default 20/s:
  each wake is followed by its check and start record at up to twice that rate,
  ``workflows.prestart_check``; see below), the job takes the
  latest second before it with room, down to ``bound`` before run_at: the herd fills the
  notice from run_at backwards, as densely as the cluster can wake jobs, so each job waits
  in its worker no longer than the herd needs.
* If no second within the notice has room, the least loaded one (the herd is larger than the
  notice can carry; it is spread as evenly as the notice allows).

Bounds: the lead is never below ``floor`` (15 s, or ``dispatch_lead`` if smaller), so the
pre-start check and the refusal of pause in the last 10 s keep working; never above the
notice (no wake before the job was scheduled) nor above ``bound``: the job's own
``dispatch_lead`` when the caller set one, else :data:`MAX_AUTO_LEAD` (the field's limit).
When the lead exceeds the spec's ``dispatch_lead`` (an unset one, only), the starter raises
the workflow input's ``dispatch_lead`` to cover it (:func:`covering_lead`), so the workflow
still hands over at its first task: no timer, no extra action. A wait in the worker longer
than the lease covers (38 s with the default 60 s lease) sends a heartbeat every 0.8 lease;
only jobs of a herd that needs that lead pay it.

A herd scheduled from many processes at once is seen by none of them whole: give such jobs a
larger ``dispatch_lead`` (each picks at random within it, as before).

The default rate: ``python -m bench.capacity`` measures the wake phase alone (66/s on this
2-core machine); but a herd woken at 40/s from run_at backwards also checks and records its
starts at up to 80/s over the last minute before run_at, and beside one busy core a 5,000
herd's wake tasks then queued for up to a minute (p99 31-56 s late in 4 of 6 runs). At 20/s
the same herd fired at p99 0.76-1.43 s in three runs (docs/PERFORMANCE.md). A herd whose
notice is shorter than N / rate spreads over the whole notice either way (a 2,000 herd at
60 s: ~44/s).
"""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger("jobs.starter")

MIN_DISPATCH_LEAD = 15.0  # seconds; jobs wake at least this long before run_at (or their lead)
MAX_AUTO_LEAD = 300.0  # the most an unset dispatch_lead is raised to (the field's own limit)
SKEW_MARGIN = 2.0  # an automatic dispatch_lead covers the lead by this much (clock skew)
WAKE_RATE_ENV = "JOBS_WAKE_RATE"
DEFAULT_WAKE_RATE = 20.0  # wakes/s, with their checks and records after (module docstring)
MAX_BUCKETS = 200_000  # seconds remembered; past that, new seconds are not recorded


def wake_rate(environ: Mapping[str, str] | None = None) -> float:
    """``JOBS_WAKE_RATE`` (wakes per second this process plans at most), or the default."""
    raw = (os.environ if environ is None else environ).get(WAKE_RATE_ENV, "").strip()
    if not raw:
        return DEFAULT_WAKE_RATE
    try:
        rate = float(raw)
    except ValueError:
        rate = math.nan
    if not math.isfinite(rate) or rate <= 0:
        log.warning(
            "%s=%r is not a positive number; using %g", WAKE_RATE_ENV, raw, DEFAULT_WAKE_RATE
        )
        return DEFAULT_WAKE_RATE
    return rate


def pick_lead(
    notice: float,
    run_at: float,
    floor: float,
    first: float,
    bound: float,
    planned: Mapping[int, int],
    rate: float,
    rng: random.Random,
) -> float:
    """Seconds before ``run_at`` (epoch seconds) to wake a job scheduled ``notice`` seconds
    ahead, given the wakes already ``planned`` per epoch second (see the module docstring).
    The result lies in [min(floor, notice), min(bound, notice)] (``floor`` ≤ ``first`` ≤
    ``bound`` expected; 0 when ``bound`` is 0)."""
    high = min(bound, notice)
    low = min(floor, high)
    if high <= low:
        return high
    lead = rng.uniform(low, min(first, high))
    if planned.get(math.floor(run_at - lead), 0) < rate:
        return lead
    latest, earliest = math.floor(run_at - low), math.ceil(run_at - high)
    best, best_load = latest, math.inf
    for second in range(latest, earliest - 1, -1):
        load = planned.get(second, 0)
        if load < rate:
            best = second
            break
        if load < best_load:
            best, best_load = second, load
    # A random moment within that second, kept inside [low, high].
    return min(high, max(low, run_at - best - rng.random()))


def covering_lead(lead: float, dispatch_lead: float) -> float | None:
    """The ``dispatch_lead`` the workflow input needs so a wake ``lead`` seconds early hands
    the attempt over at once (None: the spec's own covers it)."""
    if lead <= dispatch_lead:
        return None
    return min(MAX_AUTO_LEAD, float(math.ceil(lead + SKEW_MARGIN)))


@dataclass
class WakePlan:
    """The wakes this process has planned, per epoch second (pruned as they pass)."""

    rate: float = field(default_factory=wake_rate)
    seconds: dict[int, int] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    recorded: int = 0  # wakes recorded since the last prune

    def lead(
        self, run_at: float, now: float, floor: float, first: float, bound: float
    ) -> tuple[float, int | None]:
        """Pick a lead (:func:`pick_lead`) and record its wake; also the second recorded
        (None if not), for :meth:`release`."""
        lead = pick_lead(
            run_at - now, run_at, floor, first, bound, self.seconds, self.rate, self.rng
        )
        if lead <= 0:
            return lead, None
        self._prune(now)
        second = math.floor(run_at - lead)
        if second in self.seconds or len(self.seconds) < MAX_BUCKETS:
            self.seconds[second] = self.seconds.get(second, 0) + 1
            return lead, second
        return lead, None

    def release(self, second: int | None) -> None:
        """Forget a planned wake whose job did not start."""
        if second is not None and self.seconds.get(second, 0) > 0:
            self.seconds[second] -= 1

    def _prune(self, now: float) -> None:
        """Every 10,000 recorded wakes, forget the seconds that have passed."""
        self.recorded += 1
        if self.recorded >= 10_000:
            self.recorded = 0
            past = math.floor(now) - 1
            self.seconds = {s: n for s, n in self.seconds.items() if s >= past}
