"""What may enter a workflow from outside: the checks on signals, updates, queries and inputs.

Anyone who can reach Temporal can send any workflow any message (``temporal workflow signal``
bypasses the CLI and the API), so each workflow checks what arrives before its content becomes
state or a command (a signal to another workflow, a child, a timer, a search attribute):

* a signal with a bad argument is **recorded and dropped**: the job's or cron's audit trail
  gets a ``rejected`` entry (consecutive ones fold into one, so a flood cannot push real
  entries out), the DLQ's log a ``rejected`` line and its totals a count;
* an update with a bad argument is **rejected by its validator** (the caller gets the message;
  nothing is written to the history);
* a query with a bad argument **answers an error**;
* a workflow **started with a bad input** fails at once with a non-retryable
  ``InvalidWorkflowInput`` error naming the problem, instead of failing workflow tasks forever.

Signal handlers take their argument untyped and decode it here, so a payload of the wrong
shape is recorded by the workflow too (the SDK itself would only log and drop it). Pure: no
clock (``now`` is an argument), no I/O, so the sandbox passes it through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from temporalio.exceptions import ApplicationError

from jobctl.workflows.models import (
    AUDIT_LIMIT,
    HANDLER_PATTERN,
    MAX_AHEAD,
    MAX_NOTE,
    UNKNOWN_ACTOR,
    AuditEntry,
    ControlRequest,
    CronInput,
    DeadEntry,
    DlqState,
    JobRelease,
    JobSpec,
    ReleaseRequest,
    SlotFinished,
    WorkerHandlers,
    check_instant,
    check_job_id,
    is_job_id,
)
from jobctl.workflows.models.job import DependencyWatch
from jobctl.workflows.models.registry import MAX_SCHEMA, MAX_SCHEMAS
from jobctl.workflows.textclip import ellipsize

T = TypeVar("T")

MAX_NAME = 200  # a job's name and handler (JobSpec's bounds)
MAX_ACTOR = 200  # characters of who asked (an API token's name, cli:<os user>, ...)
MAX_REASON = 400  # characters of a recorded reason
SHOWN_INPUT = 60  # characters of a refused input quoted in a reason
MAX_QUERY_LIMIT = 100_000
MAX_HANDLERS = 1000  # names one worker may publish
CLOCK_SKEW = timedelta(days=1)  # how far ahead of the server a worker's clock may be
_HANDLER = re.compile(HANDLER_PATTERN)
# A cron continues as new beyond its event budget; below this it would do so at once, forever.
MIN_EVENT_BUDGET = 10
MAX_EVENT_BUDGET = 40_000  # Temporal refuses histories beyond 51,200 events
INVALID_START = "InvalidWorkflowInput"
_STREAK = re.compile(r"^\((\d+) in a row\) ")


# What each signal accepts (built once here: the sandbox re-imports workflow modules per run).
CONTROL_ARG: TypeAdapter[ControlRequest | None] = TypeAdapter(ControlRequest | None)
JOB_RELEASE_ARG: TypeAdapter[ReleaseRequest | None] = TypeAdapter(ReleaseRequest | None)
DLQ_RELEASE_ARG: TypeAdapter[str | ReleaseRequest] = TypeAdapter(str | ReleaseRequest)
DEAD_ENTRY_ARG: TypeAdapter[DeadEntry] = TypeAdapter(DeadEntry)
JOB_RELEASED_ARG: TypeAdapter[JobRelease] = TypeAdapter(JobRelease)
SLOT_FINISHED_ARG: TypeAdapter[SlotFinished] = TypeAdapter(SlotFinished)
WORKER_HANDLERS_ARG: TypeAdapter[WorkerHandlers] = TypeAdapter(WorkerHandlers)
WATCH_ARG: TypeAdapter[DependencyWatch] = TypeAdapter(DependencyWatch)
# What each workflow is started with.
JOB_START: TypeAdapter[JobSpec] = TypeAdapter(JobSpec)
CRON_START: TypeAdapter[CronInput] = TypeAdapter(CronInput)
DLQ_START: TypeAdapter[DlqState] = TypeAdapter(DlqState)
REGISTRY_START: TypeAdapter[list[WorkerHandlers]] = TypeAdapter(list[WorkerHandlers])


class Invalid(ValueError):
    """A refused message; the text says why, fit for a log line and an update's rejection."""


def quote(raw: object) -> str:
    """A short, one-line rendering of a refused input (whatever its size or shape)."""
    if isinstance(raw, str):
        raw = raw[: SHOWN_INPUT + 1]
    try:
        text = json.dumps(raw, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(type(raw))
    return ellipsize(" ".join(text.split()), SHOWN_INPUT)


def first_error(err: ValidationError) -> str:
    """``until: must include a timezone offset`` (the first problem; its field path)."""
    problem = err.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in problem["loc"])
    message = str(problem["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def accept(adapter: TypeAdapter[T], raw: object, what: str) -> T:
    """A signal's raw (JSON-decoded) argument, validated as the handler's type (and, for a
    ControlRequest, its who and why bounded); Invalid naming the problem if not."""
    try:
        value = adapter.validate_python(raw)
    except ValidationError as err:
        raise Invalid(f"{what}: {first_error(err)} (got {quote(raw)})") from None
    except (ValueError, RecursionError) as err:
        raise Invalid(f"{what}: {err}") from None
    if isinstance(value, ControlRequest):
        try:
            check_request(value)
        except Invalid as err:
            raise Invalid(f"{what}: {err}") from None
    return value


def one_arg(args: tuple[Any, ...], what: str, optional: bool = False) -> object:
    """A signal's single raw argument (handlers take ``*args``, so a missing or extra one is
    recorded here rather than failing the workflow task with a TypeError)."""
    if len(args) == 1 or (optional and not args):
        return args[0] if args else None
    wanted = "at most one argument" if optional else "exactly one argument"
    raise Invalid(f"{what}: takes {wanted} (got {len(args)})")


def signal_arg(
    args: tuple[Any, ...], adapter: TypeAdapter[T], what: str, optional: bool = False
) -> T:
    """A signal's single argument (:func:`one_arg`), validated as ``adapter``'s type
    (:func:`accept`); Invalid naming the problem if either fails."""
    return accept(adapter, one_arg(args, what, optional), what)


def actor_of(raw: object) -> str | None:
    """Who sent a refused message, when it says so plausibly (for the record)."""
    actor = raw.get("actor") if isinstance(raw, dict) else None
    return actor if isinstance(actor, str) and 0 < len(actor) <= MAX_ACTOR else None


# -- the parts of a message -------------------------------------------------------------------


def check_job_ref(job_id: str, what: str = "job id") -> str:
    """A job id another workflow will be addressed by: the id pattern, and not a system id."""
    if not is_job_id(job_id):
        raise Invalid(
            f"{what} {quote(job_id)} is not a job id "
            "(1-200 characters of letters, digits and . _ : -)"
        )
    try:
        return check_job_id(job_id)
    except ValueError as err:
        raise Invalid(f"{what}: {err}") from None


def check_request(request: ControlRequest | None) -> None:
    """Who and why: bounded text (the CLI and the API refuse the same)."""
    if request is None:
        return
    if request.actor is not None and not 0 < len(request.actor) <= MAX_ACTOR:
        raise Invalid(f"actor must be 1-{MAX_ACTOR} characters (got {len(request.actor)})")
    if request.note is not None and len(request.note) > MAX_NOTE:
        raise Invalid(f"note is {len(request.note)} characters; the limit is {MAX_NOTE}")


def check_until(until: datetime | None, now: datetime) -> None:
    """A pause's end: in the future, within the date range (so a timer can hold it)."""
    if until is None:
        return
    try:
        check_instant(until, now)
    except ValueError as err:
        raise Invalid(f"cannot pause: until {err}") from None
    if until <= now:
        raise Invalid("cannot pause: until is in the past")


def check_due(moment: datetime, now: datetime, what: str) -> None:
    """An instant a workflow will wait for: at most MAX_AHEAD after ``now`` (the start)."""
    if moment - now > MAX_AHEAD:
        raise Invalid(f"{what} must be at most 10 years ahead")


def check_dead_entry(entry: DeadEntry) -> DeadEntry:
    """A park from a job: the job's own id, name and handler bounds, sane counts."""
    check_job_ref(entry.job_id)
    if not 0 < len(entry.name) <= MAX_NAME or not 0 < len(entry.handler) <= MAX_NAME:
        raise Invalid(f"park: name and handler must be 1-{MAX_NAME} characters")
    if entry.attempts < 0 or entry.round < 1:
        raise Invalid(f"park: attempts {entry.attempts}, round {entry.round} are impossible")
    _check_moment(entry.parked_at, "park: parked_at")
    return entry


def check_release(release: JobRelease) -> JobRelease:
    """A job's answer to a forwarded requeue or discard."""
    check_job_ref(release.job_id)
    check_request(ControlRequest(actor=release.actor, note=release.note))
    return release


def _check_moment(moment: datetime, what: str) -> None:
    try:
        check_instant(moment)
    except ValueError as err:
        raise Invalid(f"{what} {err}") from None


def check_worker_handlers(entry: WorkerHandlers, now: datetime) -> WorkerHandlers:
    """A worker's published handler names: bounded, each a handler name, dated sanely."""
    if not 0 < len(entry.worker) <= MAX_ACTOR:
        raise Invalid(f"publish: worker must be 1-{MAX_ACTOR} characters")
    if len(entry.handlers) > MAX_HANDLERS:
        raise Invalid(f"publish: {len(entry.handlers)} handlers; the limit is {MAX_HANDLERS}")
    for name in entry.handlers:
        if not _HANDLER.fullmatch(name):
            raise Invalid(f"publish: handler {quote(name)} is not a handler name")
    _check_schemas(entry)
    _check_moment(entry.published_at, "publish: published_at")
    if entry.published_at - now > CLOCK_SKEW:
        raise Invalid("publish: published_at is more than a day ahead of the server")
    return entry


def _check_schemas(entry: WorkerHandlers) -> None:
    """Payload schemas: each for a handler the worker publishes, each and all bounded."""
    total, handlers = 0, set(entry.handlers)
    for name, schema in entry.schemas.items():
        if name not in handlers:
            raise Invalid(f"publish: a schema for {quote(name)}, which is not among its handlers")
        if len(schema) > MAX_SCHEMA:
            raise Invalid(f"publish: the schema of {quote(name)} is over {MAX_SCHEMA} characters")
        total += len(schema)
    if total > MAX_SCHEMAS:
        raise Invalid(f"publish: schemas total {total} characters; the limit is {MAX_SCHEMAS}")


def registry_size(entry: WorkerHandlers) -> int:
    """Characters an entry carries (what REGISTRY_BUDGET counts), its schemas included."""
    names = len(entry.worker) + sum(len(name) for name in entry.handlers)
    return names + sum(len(name) + len(schema) for name, schema in entry.schemas.items())


def check_job_start(spec: JobSpec) -> None:
    """What a JobWorkflow needs beyond a valid spec (the door guarantees it; a workflow
    started by hand may not): a job id and an absolute run_at."""
    check_job_ref(spec.id, "id")
    if spec.cron is not None or spec.run_at is None:
        raise Invalid(
            "a JobWorkflow needs run_at (a cron job runs as a CronJobWorkflow; "
            "the CLI and the API turn a delay into run_at)"
        )


def check_cron_start(start: CronInput) -> None:
    """What a CronJobWorkflow needs beyond a valid spec: a cron, an id, a workable event
    budget and a carried-over state whose instants and slot job ids are sound."""
    spec, state = start.spec, start.state
    check_job_ref(spec.id, "id")
    if spec.cron is None or spec.run_at is not None or spec.delay is not None:
        raise Invalid("a CronJobWorkflow needs cron (and neither run_at nor delay)")
    if not MIN_EVENT_BUDGET <= start.event_budget <= MAX_EVENT_BUDGET:
        raise Invalid(f"event_budget must be {MIN_EVENT_BUDGET}-{MAX_EVENT_BUDGET}")
    for job_id, slot in state.running.items():
        check_job_ref(job_id, "state.running")
        _check_moment(slot, "state.running slot")
    moments = {"last_slot": state.last_slot, "paused_until": state.paused_until}
    moments["buffered"] = state.buffered
    for what, moment in moments.items():
        if moment is not None:
            _check_moment(moment, f"state.{what}")


def query_limit(limit: object, maximum: int = MAX_QUERY_LIMIT) -> int:
    """A query's ``limit``: an integer, clamped to 0..maximum; anything else is an error."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise Invalid(f"limit must be an integer (got {quote(limit)})")
    return max(0, min(limit, maximum))


def unknown_signal(name: str) -> str:
    return f"unknown signal {quote(name)}: dropped"


# -- recording -------------------------------------------------------------------------------


def record_rejection(
    trail: list[AuditEntry], at: datetime, reason: str, actor: str | None = None
) -> int:
    """A ``rejected`` entry in a job's or cron's audit trail. Consecutive rejections fold into
    the newest one (with their count), so a flood takes one line of the AUDIT_LIMIT. Returns
    the count (the caller logs the first of a run only: a flood must stay cheap)."""
    streak = 1
    if trail and trail[-1].action == "rejected":
        found = _STREAK.match(trail[-1].detail or "")
        streak = (int(found.group(1)) if found else 1) + 1
        trail.pop()
    detail = ellipsize(reason, MAX_REASON)
    if streak > 1:
        detail = f"({streak} in a row) {detail}"
    who = actor or UNKNOWN_ACTOR
    trail.append(AuditEntry(action="rejected", actor=who, at=at, detail=detail))
    del trail[:-AUDIT_LIMIT]
    return streak


# -- start input -------------------------------------------------------------------------------


def invalid_start(message: str) -> ApplicationError:
    """The failure of a workflow started with an input it cannot run."""
    return ApplicationError(
        f"invalid workflow input: {ellipsize(message, MAX_REASON)}",
        type=INVALID_START,
        non_retryable=True,
    )


def start_arg(args: tuple[Any, ...], adapter: TypeAdapter[T], check: Callable[[T], None]) -> T:
    """A workflow's input, from the raw (JSON-decoded) arguments it was started with: exactly
    one, valid as ``adapter``'s type, passing ``check``. Anything else raises
    :func:`invalid_start` (an ApplicationError, so the workflow fails at once), where a
    typed ``run`` would fail its workflow task on every retry (a decoding error, or a
    TypeError for a missing or extra argument). Validated from JSON text, as the data
    converter would, so a valid input decodes exactly as before."""
    if len(args) != 1:
        raise invalid_start(f"takes exactly one argument (got {len(args)})")
    try:
        value = adapter.validate_json(json.dumps(args[0]))
        check(value)
    except ValidationError as err:
        raise invalid_start(first_error(err)) from None
    except (ValueError, TypeError, RecursionError) as err:
        raise invalid_start(str(err)) from None
    return value
