"""A job's dependencies (``after``, issue 44): what a job that runs after others does next.

Pure (no I/O, no clock), shared by ``JobWorkflow`` and the tests. A dependency stands as its
job last told (a ``dependency_settled`` signal) or as a read of its closed run found:

* ``done``: satisfied;
* ``dead`` (parked: a requeue may still bring it to done), ``cancelled``, ``discarded``:
  failed, and ``on_failed_dependency`` decides: ``cancel`` (the default) ends this job
  cancelled, ``run`` counts it as settled, ``wait`` keeps waiting for it to be done;
* ``waiting`` (asked, no answer yet) and ``not started`` (no such job runs yet, e.g. a later
  member of the same batch): still waiting; ``not started`` for longer than
  :data:`MISSING_AFTER` becomes ``missing`` (the door saw the job, so it has gone since:
  Temporal deleted its closed run after the namespace's retention), a failed one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from jobctl.workflows.models.spec import DependencyPolicy

DONE = "done"
WAITING = "waiting"
NOT_STARTED = "not started"
MISSING = "missing"
FAILED = frozenset({"dead", "cancelled", "discarded", MISSING})
MISSING_AFTER = timedelta(hours=1)
# What a dependency_settled signal may bring (a read of a closed run gives one of these too).
SETTLEMENTS = frozenset({DONE, "dead", "cancelled", "discarded"})
MAX_WATCHERS = 1_000  # jobs one job tells when it settles (each sent a watch signal)
SHOWN = 3  # dependency ids a waiting text names before "and N more"


@dataclass(frozen=True)
class Decision:
    """``run`` now, ``wait`` (``text`` says for what) or ``cancel`` (``text`` says why)."""

    action: Literal["run", "wait", "cancel"]
    text: str = ""


def decide(after: Sequence[str], known: Mapping[str, str], policy: DependencyPolicy) -> Decision:
    """What a job that runs after ``after`` does, given how each stands (``known``)."""
    failed = [(job_id, known[job_id]) for job_id in after if known.get(job_id) in FAILED]
    if failed and policy == "cancel":
        job_id, status = failed[0]
        return Decision("cancel", f"job {job_id} it runs after is {status}")
    settled = {DONE} | (FAILED if policy == "run" else set())
    open_ = [job_id for job_id in after if known.get(job_id, WAITING) not in settled]
    if not open_:
        return Decision("run")
    return Decision("wait", waiting_text(open_, known))


def waiting_text(open_: Sequence[str], known: Mapping[str, str]) -> str:
    """``waiting for jobs a, b (dead), c and 2 more to be done``."""
    shown = []
    for job_id in open_[:SHOWN]:
        status = known.get(job_id, WAITING)
        shown.append(job_id if status == WAITING else f"{job_id} ({status})")
    more = f" and {len(open_) - SHOWN} more" if len(open_) > SHOWN else ""
    noun = "job" if len(open_) == 1 else "jobs"
    return f"waiting for {noun} {', '.join(shown)}{more} to be done"


def settled_as(status: str) -> str | None:
    """A dependency's report, if it is one of SETTLEMENTS (None for any other status, which
    a watcher refuses: a job tells only settlements)."""
    return status if status in SETTLEMENTS else None


def give_up_on_unstarted(known: dict[str, str]) -> None:
    """After MISSING_AFTER of asking, a dependency still not started is missing."""
    for job_id, status in known.items():
        if status == NOT_STARTED:
            known[job_id] = MISSING


def backoff(tries: int) -> float:
    """Seconds before asking again for a dependency not started yet: 1, 2, 4 ... 60."""
    return float(min(60, 2 ** min(tries, 6)))
