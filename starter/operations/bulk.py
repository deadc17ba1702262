"""Bulk scheduling: up to :data:`MAX_BATCH` specs in one call (``POST /jobs/batch``,
``jobctl schedule --from-file``), as Oban's ``insert_all``, Sidekiq's ``push_bulk`` and River's
``InsertMany`` users expect.

Not all-or-nothing: each spec is judged on its own by the single schedule's own code
(:func:`~.validation.submission` for all of them first, then :func:`~.starting.schedule`
for each with the known handlers, fetched once per batch); the valid ones start, the others
are reported, and the results come back in the order of the specs. Only the batch as a whole
can be refused outright (more than :data:`MAX_BATCH` specs): then nothing starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client

from jobctl.starter.errors import JobsError, SpecError, TemporalUnavailable
from jobctl.starter.operations.dependencies import cycles, levels
from jobctl.starter.operations.handlers import as_catalog, known_handlers
from jobctl.starter.operations.starting import Scheduled, schedule
from jobctl.starter.operations.validation import Submission, submission
from jobctl.workflows.models import JobSpec

MAX_BATCH = 1000  # specs in one batch: one request, one file
# Starts in flight at once. On the dev server (SQLite, 2 busy cores) 2,000 specs ran at the
# same 50-80 jobs/s for every bound from 4 to 128: the server's one writer is the limit, so
# more in flight only queues there. 32 covers a real cluster's round trips (32 in flight at
# 50 ms each is 640 starts/s) while one batch never holds more than 32 of the server's slots.
CONCURRENCY = 32


@dataclass(frozen=True)
class ItemResult:
    """One spec's outcome: ``scheduled`` (as :func:`~.starting.schedule` answers) or ``error``
    (the typed error a single schedule would have raised for it)."""

    scheduled: Scheduled | None = None
    error: JobsError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def problems(self) -> list[tuple[str, str]]:
        """The error as (field, reason) pairs; field "" when it names none (e.g. id taken)."""
        if isinstance(self.error, SpecError):
            return list(self.error.problems)
        return [] if self.error is None else [("", str(self.error))]


Checked = Submission | JobsError


def check_batch(specs: Sequence[Any], now: datetime) -> list[Checked]:
    """Parse every spec (``delay`` anchored at ``now``) without asking the server: a
    :class:`~.validation.Submission`, or the :class:`SpecError` a single schedule would give.
    More than :data:`MAX_BATCH` specs raises SpecError for the whole batch."""
    if len(specs) > MAX_BATCH:
        raise SpecError([("jobs", f"at most {MAX_BATCH} specs per batch (got {len(specs)})")])
    return [_check_one(data, now) for data in specs]


def _check_one(data: Any, now: datetime) -> Checked:
    if not isinstance(data, dict | JobSpec | Submission):
        return SpecError([("spec", f"must be a JSON object (got {_kind(data)})")])
    try:
        return submission(data, now)
    except SpecError as err:
        return err


def _kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "other")


async def schedule_many(
    client: Client,
    specs: Sequence[dict[str, Any] | JobSpec],
    handlers: Iterable[str] | None = None,
    now: datetime | None = None,
    task_queue: str | None = None,
) -> list[ItemResult]:
    """Validate and start up to :data:`MAX_BATCH` jobs; one :class:`ItemResult` per spec, in
    order.

    Not all-or-nothing: every valid spec starts, every invalid one is reported (with the
    error a single :func:`~.starting.schedule` would raise) and starts nothing. Over
    :data:`MAX_BATCH` specs raises :class:`SpecError` and nothing starts. ``handlers``
    (default: :func:`~.handlers.known_handlers`, asked once per batch), ``now`` and
    ``task_queue`` are as for :func:`~.starting.schedule`; ids and identical retries too
    (specs sharing an id start one after the other, in order, so the second answers as a
    retry of the first would).
    """
    now = now or datetime.now(UTC)
    return await start_checked(client, check_batch(specs, now), handlers, now, task_queue)


async def start_checked(
    client: Client,
    checked: Sequence[Checked],
    handlers: Iterable[str] | None,
    now: datetime,
    task_queue: str | None = None,
) -> list[ItemResult]:
    """Start the submissions of :func:`check_batch` (errors pass through), at most
    :data:`CONCURRENCY` at a time; the server is asked nothing when none is valid. A spec
    whose ``after`` names others of the request starts once they have (waves), and not at
    all if one of them did not; specs that name each other in a cycle start none."""
    results = [ItemResult(error=item) if isinstance(item, JobsError) else None for item in checked]
    valid = _refuse_cycles(checked, results)
    if not valid:
        return [result for result in results if result is not None]
    known = (
        as_catalog(handlers) if handlers is not None else await known_handlers(client, task_queue)
    )
    siblings = {item.spec.id for item in checked if isinstance(item, Submission)}
    started: set[str] = set()
    starter = _Starter(client, checked, results, known, now, task_queue, siblings)
    for wave in levels([item.spec for _, item in valid]):
        by_id: dict[str, list[int]] = {}
        for index, item in (valid[w] for w in wave):
            missed = [d for d in item.spec.after if d in siblings and d not in started]
            if missed:
                reason = f"{missed[0]!r} of the same request was not scheduled"
                results[index] = ItemResult(error=SpecError([("after", reason)]))
                continue
            by_id.setdefault(item.spec.id, []).append(index)
        await starter.wave(by_id)
        started |= {r.scheduled.job_id for r in results if r is not None and r.scheduled}
    return [result for result in results if result is not None]


def _refuse_cycles(
    checked: Sequence[Checked], results: list[ItemResult | None]
) -> list[tuple[int, Submission]]:
    """The valid submissions with their indices; those in an ``after`` cycle get its error."""
    valid = [(index, item) for index, item in enumerate(checked) if isinstance(item, Submission)]
    looped = cycles([item.spec for _, item in valid])
    for index, item in valid:
        if item.spec.id in looped:
            results[index] = ItemResult(error=SpecError([("after", looped[item.spec.id])]))
    return [(index, item) for index, item in valid if results[index] is None]


@dataclass
class _Starter:
    """Starts a wave's submissions, one id's after another's in order, CONCURRENCY at once."""

    client: Client
    checked: Sequence[Checked]
    results: list[ItemResult | None]
    known: set[str]
    now: datetime
    task_queue: str | None
    siblings: set[str]
    gate: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(CONCURRENCY))
    # Once a start finds the server unreachable, the items not yet started get that answer
    # at once: a batch with Temporal down answers within one start's bound, as one job does.
    down: list[TemporalUnavailable] = field(default_factory=list)

    async def wave(self, by_id: dict[str, list[int]]) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                for indices in by_id.values():
                    group.create_task(self.same_id(indices))
        except ExceptionGroup as failed:  # a bug, not a refusal: raise it as itself
            raise failed.exceptions[0] from failed

    async def same_id(self, indices: list[int]) -> None:
        for index in indices:  # one after the other: the first of an id is the one created
            item = self.checked[index]
            assert isinstance(item, Submission)
            async with self.gate:
                if self.down:
                    self.results[index] = ItemResult(error=self.down[0])
                    continue
                result = await _start_one(self, item)
                self.results[index] = result
                if isinstance(result.error, TemporalUnavailable):
                    self.down.append(result.error)


async def _start_one(starter: _Starter, item: Submission) -> ItemResult:
    """The single schedule itself, for a parsed submission (not parsed again): the handler
    and ``after`` checks, then the start."""
    try:
        scheduled = await schedule(
            starter.client,
            item,
            starter.known,
            starter.now,
            starter.task_queue,
            siblings=starter.siblings,
        )
    except JobsError as err:
        return ItemResult(error=err)
    return ItemResult(scheduled=scheduled)
