"""The job model: one pydantic spec shared by the CLI, the HTTP API and the workflows.

Everything here is pure (no I/O, no clock) so the workflow sandbox can pass it through.
Checks that depend on the current time (``run_at`` at most 10 years ahead) or tighten the
contract for new submissions (the backoff floor) run only when the caller validates with
``context={"now": <aware datetime>}`` (the door); :func:`parse_spec` does that for every
submission path, so data decoded inside a workflow (recorded histories included) is never
re-judged against a clock or a newer rule.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from temporalio.common import SearchAttributeKey

from workflows import cronmath
from workflows.durations import parse_duration

# Search attributes every job workflow carries (registered on every server we start).
JOB_STATUS = SearchAttributeKey.for_keyword("JobStatus")
JOB_NAME = SearchAttributeKey.for_keyword("JobName")
JOB_HANDLER = SearchAttributeKey.for_keyword("JobHandler")
JOB_RUN_AT = SearchAttributeKey.for_datetime("JobRunAt")
SEARCH_ATTRIBUTES = (JOB_STATUS, JOB_NAME, JOB_HANDLER, JOB_RUN_AT)

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_PAYLOAD_DEPTH = 64  # nested objects/arrays, the payload object itself included
# Pause acts on a job already dispatched to a worker only up to this long before run_at.
CONTROL_CUTOFF = timedelta(seconds=10)
# The one date range: every instant a person gives (run_at, pause until, a preview's after)
# lies in [EARLIEST, now + MAX_AHEAD]; the upper end is checked where a clock is at hand.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
MAX_AHEAD = timedelta(days=3653)  # 10 years, leap days included
# Temporal fires activity retries no sooner than about a second apart: a smaller base cannot
# be honoured, so new submissions are refused below it (older jobs keep what they had).
MIN_BACKOFF_BASE = 1.0
ID_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
HANDLER_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
# A cron tick's id is "<cron id>@<slot>", the slot in UTC with seconds precision.
TICK_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,178}@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"
# A cron's id (and idempotency key) leaves room for "@<slot>" (21 characters) within 200.
MAX_CRON_ID = 178
_ID_RE = re.compile(f"{ID_PATTERN}|{TICK_ID_PATTERN}")


def is_job_id(value: str) -> bool:
    """Whether ``value`` has the shape of a job id (or of a cron slot's job id)."""
    return _ID_RE.fullmatch(value) is not None


def _spec_error(fields: str, message: str) -> PydanticCustomError:
    """A whole-spec error that still names its fields (pydantic gives those an empty loc)."""
    return PydanticCustomError("spec", message, {"fields": fields})


# -- the door's shared rules ------------------------------------------------------------------

ISO_EXAMPLE = "2030-01-01T09:00:00+00:00"


def _iso_instant(value: Any) -> Any:
    """An instant is an ISO-8601 string (parsed by the standard library) or a datetime; never
    a number or a numeric string, which pydantic would otherwise read as Unix time."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:  # upper(): RFC 3339 allows a lowercase "t" and "z"
            return datetime.fromisoformat(value.upper())
        except ValueError:
            pass
    raise ValueError(f"must be an ISO-8601 date-time with an offset, e.g. {ISO_EXAMPLE}")


def check_instant(value: datetime, now: datetime | None = None) -> datetime:
    """The date range, in one place: aware, not before EARLIEST and, when ``now`` is given
    (a submission, not data decoded in a workflow), at most MAX_AHEAD after it."""
    if value.utcoffset() is None:
        raise ValueError(f"must include a timezone offset, e.g. {ISO_EXAMPLE}")
    too_early = "must not be before 1970-01-01T00:00:00Z"
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00: no such UTC instant
        late = value.year > EARLIEST.year
        raise ValueError("must be at most 10 years ahead" if late else too_early) from None
    if utc < EARLIEST:
        raise ValueError(too_early)
    if now is not None and utc - now > MAX_AHEAD:
        raise ValueError("must be at most 10 years ahead")
    return value


def parse_instant(value: Any, now: datetime | None = None) -> datetime:
    """An ISO-8601 string or datetime checked like every Instant field (ValueError)."""
    moment: datetime = _iso_instant(value)
    return check_instant(moment, now)


def _instant_in_range(value: datetime, info: ValidationInfo) -> datetime:
    now = (info.context or {}).get("now")
    return check_instant(value, now if isinstance(now, datetime) else None)


# A time given by a person (run_at, pause until, a preview's after): see check_instant.
Instant = Annotated[datetime, BeforeValidator(_iso_instant), AfterValidator(_instant_in_range)]


def _valid_text(value: str) -> None:
    """Refuse lone surrogates (pydantic's ``str`` does for fields; a payload is ``Any``)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains a lone surrogate (not valid Unicode text)") from None


def check_json_tree(value: Any) -> None:
    """A payload's shape: at most MAX_PAYLOAD_DEPTH levels of objects/arrays, finite numbers,
    valid Unicode text (keys included). Iterative, so no input can exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > MAX_PAYLOAD_DEPTH:
                raise ValueError(f"is nested more than {MAX_PAYLOAD_DEPTH} levels deep")
            items = list(node.items()) if isinstance(node, dict) else [(None, v) for v in node]
            for key, child in items:
                if isinstance(key, str):
                    _valid_text(key)
                stack.append((child, depth + 1))
        elif isinstance(node, str):
            _valid_text(node)
        elif isinstance(node, float) and not math.isfinite(node):
            raise ValueError(f"contains {node!r}; JSON numbers must be finite")


class JobStatus(StrEnum):
    """The status vocabulary. ``JobStatus`` search attributes carry these values."""

    SCHEDULED = "scheduled"  # waiting for run_at
    PENDING = "pending"  # due, waiting for a worker
    RUNNING = "running"
    RETRYING = "retrying"  # backing off until the next attempt
    PAUSED = "paused"
    DONE = "done"
    DEAD = "dead"  # exhausted; parked in the dead-letter queue
    CANCELLED = "cancelled"
    CANCELLING = "cancelling"  # cancel accepted, not settled yet (live state; never upserted)
    DISCARDED = "discarded"  # a dead job discarded by a human: ended for good

    @property
    def finished(self) -> bool:
        return self in (JobStatus.DONE, JobStatus.CANCELLED)


Overlap = Literal["skip", "buffer_one", "allow_all", "cancel_other"]


def _seconds(value: Any) -> Any:
    """Let duration fields take ``90``, ``"90s"``, ``"5m"`` as well as plain numbers (a bool
    is left alone, for the strict float to refuse)."""
    if isinstance(value, str):
        return parse_duration(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


# Strict: a JSON number or a duration string, never true/false; always finite.
Number = Annotated[float, Strict(), AllowInfNan(False)]
Count = Annotated[int, Strict()]
Seconds = Annotated[float, Strict(), AllowInfNan(False), BeforeValidator(_seconds)]


class JobSpec(BaseModel):
    """What to run, when, and how hard to try. Defaults and bounds follow DESIGN.md."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(default="", description="Job id and workflow id; `job-<uuid4>` if empty.")
    name: str = Field(min_length=1, max_length=200)
    handler: str = Field(min_length=1, max_length=200, pattern=HANDLER_PATTERN)
    payload: dict[str, Any] = Field(default_factory=dict)
    run_at: Instant | None = None
    delay: Seconds | None = None
    cron: str | None = None
    timezone: str = "UTC"
    max_attempts: Count = Field(default=8, ge=1, le=100)
    backoff_base: Seconds = Field(default=2.0, gt=0, le=86400)
    backoff_max: Seconds = Field(default=300.0, gt=0, le=7 * 86400)
    jitter: Number = Field(default=0.3, ge=0, le=1)
    lease: Seconds = Field(default=60.0, ge=1, le=3600)
    timeout: Seconds = Field(default=3600.0, ge=1, le=7 * 86400)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    # The job reaches a worker at a random moment up to this long before run_at and waits
    # there, so a herd due in one second costs the server its work spread over the window and
    # fires on time (activities/run_job.py). 0 dispatches exactly at run_at.
    dispatch_lead: Seconds = Field(default=30.0, ge=0, le=300)
    overlap: Overlap = "skip"
    catchup_window: Seconds = Field(default=60.0, ge=0, le=366 * 86400)
    schedule_jitter: Seconds = Field(default=0.0, ge=0, le=86400)

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if value and not _ID_RE.fullmatch(value):
            raise ValueError("must be 1-200 characters of letters, digits and . _ : -")
        check_job_id(value)
        return value

    @field_validator("backoff_base")
    @classmethod
    def _check_backoff_floor(cls, value: float, info: ValidationInfo) -> float:
        # At the door only: jobs already recorded with a smaller base keep replaying.
        if (info.context or {}).get("now") is not None and value < MIN_BACKOFF_BASE:
            raise ValueError(
                f"must be at least {MIN_BACKOFF_BASE:g}s (Temporal does not fire retries "
                "sooner than about a second apart)"
            )
        return value

    @field_validator("delay")
    @classmethod
    def _check_delay(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value <= MAX_AHEAD.total_seconds():
            raise ValueError("must be between 0 seconds and 10 years")
        return value

    @field_validator("payload")
    @classmethod
    def _check_payload(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_json_tree(value)  # before dumps: depth, non-finite numbers, lone surrogates
        try:
            size = len(json.dumps(value, separators=(",", ":"), allow_nan=False).encode())
        except (TypeError, ValueError) as err:
            raise ValueError(f"must be JSON-serializable ({err})") from err
        if size > MAX_PAYLOAD_BYTES:
            raise ValueError(f"is {size} bytes serialized; the limit is {MAX_PAYLOAD_BYTES}")
        return value

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str | None) -> str | None:
        return None if value is None else cronmath.parse(value).expression

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        cronmath.zone(value)
        return value

    @model_validator(mode="after")
    def _check_combination(self) -> JobSpec:
        given = [f for f in ("run_at", "delay", "cron") if getattr(self, f) is not None]
        if len(given) != 1:
            fields = ", ".join(given) if given else "run_at, delay, cron"
            raise _spec_error(fields, "exactly one of run_at, delay or cron is required")
        if self.timeout < self.lease:
            raise _spec_error("timeout", f"must be at least the lease ({self.lease:g}s)")
        if self.backoff_max < self.backoff_base:
            floor = f"must be at least backoff_base ({self.backoff_base:g}s)"
            raise _spec_error("backoff_max", floor)
        if self.cron is not None:
            for name in ("id", "idempotency_key"):
                value = getattr(self, name) or ""
                if len(value) > MAX_CRON_ID:
                    raise _spec_error(
                        name,
                        f"must be at most {MAX_CRON_ID} characters for a cron "
                        "job (each slot's id appends @<slot>)",
                    )
        if self.cron is None:
            # Compared with the defaults, not model_fields_set: decoded specs set every field.
            cron_only = [
                name
                for name in ("overlap", "catchup_window", "schedule_jitter")
                if getattr(self, name) != type(self).model_fields[name].default
            ]
            if cron_only:
                raise _spec_error(", ".join(cron_only), "only applies to cron jobs")
        return self

    @property
    def key(self) -> str:
        """The idempotency key handed to the handler: stable across retries."""
        return self.idempotency_key or self.id


def parse_spec(data: dict[str, Any] | JobSpec, now: datetime, new_id: str) -> JobSpec:
    """Validate a submission against ``now`` and normalize it for the workflow.

    ``delay`` becomes an absolute ``run_at`` and an empty id becomes ``new_id``, so the
    workflow input names one instant. Raises ``pydantic.ValidationError``.
    """
    raw = data.model_dump(exclude_unset=True) if isinstance(data, JobSpec) else data
    spec = JobSpec.model_validate(raw, context={"now": now})
    update: dict[str, Any] = {}
    if not spec.id:
        update["id"] = new_id
    if spec.delay is not None:
        update.update(run_at=now + timedelta(seconds=spec.delay), delay=None)
    return spec.model_copy(update=update) if update else spec


class AttemptRecord(BaseModel):
    """One execution attempt of the ``run_job`` activity."""

    attempt: int  # counts across requeue rounds: 1, 2, ...
    round: int = 1  # 1 for the first budget of attempts, +1 per requeue
    started_at: datetime
    ended_at: datetime | None = None
    worker: str = ""
    # handed_over: a worker shutting down cleanly gave the attempt back; it costs no budget.
    outcome: Literal["running", "succeeded", "failed", "lost", "cancelled", "handed_over"] = (
        "running"
    )
    error: str | None = None
    error_type: str | None = None
    retry_delay: float | None = None  # seconds chosen by the backoff formula, if retried

    @property
    def spent(self) -> bool:
        """Whether this attempt used up one of the round's ``max_attempts``."""
        return self.outcome != "handed_over"

    def close(
        self,
        outcome: Literal["succeeded", "failed", "lost", "cancelled", "handed_over"],
        ended_at: datetime,
        error: str | None = None,
        error_type: str | None = None,
        retry_delay: float | None = None,
    ) -> AttemptRecord:
        return self.model_copy(
            update={
                "outcome": outcome,
                "ended_at": ended_at,
                "error": error,
                "error_type": error_type,
                "retry_delay": retry_delay,
            }
        )


class HeartbeatState(BaseModel):
    """Heartbeat details of ``run_job``: the round's attempt log survives across attempts."""

    attempts: list[AttemptRecord] = Field(default_factory=list)
    progress: Any = None
    # While the handler runs: the most a cancel takes to reach it, in seconds (its worker's
    # heartbeat cadence), for ``jobs status`` to promise while a cancel is on its way.
    cancel_within: float | None = None

    def close_dangling(self, ended_at: datetime, error: str, error_type: str) -> None:
        """Mark an attempt that never reported its end (its worker died or it timed out)."""
        if self.attempts and self.attempts[-1].outcome == "running":
            self.attempts[-1] = self.attempts[-1].close("lost", ended_at, error, error_type)


class RunJobInput(BaseModel):
    """What the workflow hands to one round of the ``run_job`` activity."""

    spec: JobSpec
    round: int = 1
    attempt_offset: int = 0  # attempt records so far (numbering continues from here)
    spent: int = 0  # attempts of this round already used (before a handover)
    not_before: datetime | None = None  # pre-dispatched: wait in the worker until then

    @property
    def budget(self) -> int:
        """Attempts this activity may still make: the round's max minus those spent."""
        return self.spec.max_attempts - self.spent


class RunJobResult(BaseModel):
    attempts: list[AttemptRecord]
    result: Any = None
    cancelled: bool = False  # the attempt stopped because the job was cancelled
    handed_over: bool = False  # the worker shut down cleanly: run it elsewhere, no cost
    withdrawn: bool = False  # pre-dispatched, but paused before run_at: the handler never ran


# -- audit trail ----------------------------------------------------------------------------

MAX_NOTE = 500  # characters of an operator's note (longer is refused by the CLI and the API)
AUDIT_LIMIT = 50  # trail entries a job or cron keeps (newest); a cron carries them over
UNKNOWN_ACTOR = "unknown"  # a control sent without one (e.g. with the bare temporal CLI)

# "rejected": a message dropped by the workflow as invalid (workflows/inbox.py).
AuditAction = Literal[
    "pause", "resume", "trigger", "cancel", "requeue", "discard", "update", "rejected"
]


class AuditEntry(BaseModel):
    """One operator action on a job or cron, recorded by the workflow when it applies it."""

    action: AuditAction
    actor: str  # an API token's name, ``cli:<os user>``, or ``unknown``
    at: datetime  # the workflow's ``workflow.now()``: the server's time, not the caller's
    note: str | None = None
    detail: str | None = None  # what it did, e.g. "until 2026-12-01T09:00:00Z", "ignored: ..."

    @field_validator("note")
    @classmethod
    def _clip_note(cls, value: str | None) -> str | None:
        if value is not None and len(value) > MAX_NOTE:
            return value[: MAX_NOTE - 1] + "…"
        return value


class ControlRequest(BaseModel):
    """Who asks for a control and why. Every field is optional, so the argument itself is
    too: ``resume``, ``trigger`` and ``cancel_requested`` also accept no argument."""

    actor: str | None = None
    note: str | None = None


def append_audit(
    trail: list[AuditEntry],
    action: AuditAction,
    request: ControlRequest | None,
    at: datetime,
    detail: str | None = None,
) -> None:
    """Add one operator action to a job's or cron's trail, keeping the newest AUDIT_LIMIT."""
    request = request or ControlRequest()
    actor = request.actor or UNKNOWN_ACTOR
    trail.append(AuditEntry(action=action, actor=actor, at=at, note=request.note, detail=detail))
    del trail[:-AUDIT_LIMIT]


# A time given by a person: an offset is required, so no one's local clock is guessed; the
# date range is the spec's (check_instant; 10 years ahead when validated with a "now").
OffsetDatetime = Instant | None


class PauseRequest(ControlRequest):
    until: OffsetDatetime = None


class JobReport(BaseModel):
    """What ``status`` returns for a one-shot job (the query, enriched by the client)."""

    job_id: str
    kind: Literal["job", "cron"] = "job"
    name: str
    handler: str
    status: JobStatus
    run_at: datetime | None = None
    paused_until: datetime | None = None
    max_attempts: int
    round: int = 1
    attempts: list[AttemptRecord] = Field(default_factory=list)
    result: Any = None
    last_error: str | None = None
    idempotency_key: str
    parked_at: datetime | None = None  # when it last went dead
    # Live state filled in from Temporal's describe by the client, not by the workflow.
    next_attempt_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    worker: str | None = None
    cancel_within: float | None = None  # cancelling: reaches the handler within this (seconds)
    audit: list[AuditEntry] = Field(default_factory=list)  # operator actions, oldest first


# -- dead-letter queue ---------------------------------------------------------------------

DLQ_WORKFLOW_ID = "dead-letter-queue"
DLQ_MEMO_KEY = "dlq"  # a parked job's DeadEntry, in its memo, so listings need no queries
# Set in a job's memo by whoever starts it (our starters, a cron for its slots): the run has the
# lean shape (JobStatus only where listings filter on it). Told by the start input rather than by
# a patch marker, which would cost every run a marker event and a TemporalChangeVersion upsert.
SHAPE_MEMO_KEY = "shape"
LEAN_SHAPE = "lean-status"
MAX_ERROR_CHARS = 500


class DeadEntry(BaseModel):
    """The compact record of a parked job; the full history stays on the job."""

    job_id: str
    name: str
    handler: str
    attempts: int
    last_error: str | None = None
    parked_at: datetime
    round: int = 1

    @field_validator("last_error")
    @classmethod
    def _truncate(cls, value: str | None) -> str | None:
        if value is not None and len(value) > MAX_ERROR_CHARS:
            return value[: MAX_ERROR_CHARS - 1] + "…"
        return value


class ReleaseRequest(ControlRequest):
    """A requeue or discard with who and why. The signals also take their older shapes: the
    DLQ's ``requeue`` / ``discard`` a bare job id, the job's own a source string or nothing."""

    job_id: str | None = None  # required by the DLQ's signals; the job's own ignore it
    source: str | None = None  # DLQ_WORKFLOW_ID when the DLQ forwards it (the job answers)


class JobRelease(BaseModel):
    """A job telling the DLQ what became of a requeue or discard (the job decides)."""

    job_id: str
    action: Literal["requeue", "discard"]
    applied: bool  # False: the job was not dead, nothing happened
    status: JobStatus  # the job's status when the request arrived
    round: int
    actor: str | None = None  # who asked (None from jobs older than the audit trail)
    note: str | None = None


class DlqLogLine(BaseModel):
    at: datetime
    action: str  # parked, requeued, discarded, forwarded, ignored, alerted, alert-failed
    job_id: str = ""
    detail: str = ""


class DlqState(BaseModel):
    """Everything the DLQ workflow carries across continue-as-new."""

    entries: list[DeadEntry] = Field(default_factory=list)  # newest last
    log: list[DlqLogLine] = Field(default_factory=list)  # newest last
    pending_alerts: list[DeadEntry] = Field(default_factory=list)
    totals: dict[str, int] = Field(default_factory=dict)
    generation: int = 0  # runs so far: +1 per continue-as-new


# -- cron ----------------------------------------------------------------------------------

SlotOutcome = Literal["ran", "skipped", "missed", "paused", "manual", "duplicate", "buffered"]


class SlotRecord(BaseModel):
    """What became of one slot. ``status`` follows the slot's job (ran/manual slots)."""

    slot: datetime
    outcome: SlotOutcome
    job_id: str | None = None
    status: JobStatus | None = None
    detail: str = ""


class SlotTime(BaseModel):
    local: str  # ISO-8601 with the zone's offset
    utc: str  # ISO-8601, Z


class CronState(BaseModel):
    """What a cron carries across continue-as-new: small and capped."""

    last_slot: datetime | None = None  # the latest slot handled (any outcome)
    paused: bool = False
    paused_until: datetime | None = None
    running: dict[str, datetime] = Field(default_factory=dict)  # slot job id -> slot
    buffered: datetime | None = None  # buffer_one: the slot waiting for the running one
    recent: list[SlotRecord] = Field(default_factory=list)  # newest last, capped
    counts: dict[str, int] = Field(default_factory=dict)
    generation: int = 0
    audit: list[AuditEntry] = Field(default_factory=list)  # oldest first, capped


class CronInput(BaseModel):
    spec: JobSpec
    state: CronState = Field(default_factory=CronState)
    event_budget: int = 10_000  # continue-as-new beyond this many history events


class CronUpdate(BaseModel):
    """Change a running cron; omitted fields stay as they are."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = None
    timezone: str | None = None
    overlap: Overlap | None = None
    # Who and why, for the cron's audit trail (not part of the schedule).
    actor: str | None = None
    note: str | None = None

    def schedule_changes(self) -> dict[str, Any]:
        """The schedule fields this update sets."""
        return self.model_dump(exclude={"actor", "note"}, exclude_none=True)


class SlotFinished(BaseModel):
    """A slot's job telling its cron how it ended (done, dead or cancelled)."""

    job_id: str
    status: JobStatus


class CronReport(BaseModel):
    """What ``status`` returns for a cron job."""

    job_id: str
    kind: Literal["job", "cron"] = "cron"
    name: str
    handler: str
    status: JobStatus
    cron: str
    timezone: str
    overlap: Overlap
    run_at: datetime | None = None  # the next slot
    paused_until: datetime | None = None
    next_slots: list[SlotTime] = Field(default_factory=list)
    recent_slots: list[SlotRecord] = Field(default_factory=list)  # newest first
    running: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    generation: int = 0  # continue-as-new count
    attempts: list[AttemptRecord] = Field(default_factory=list)  # always empty: see the slots
    audit: list[AuditEntry] = Field(default_factory=list)  # operator actions, oldest first


# -- handler registry ----------------------------------------------------------------------

REGISTRY_WORKFLOW_ID = "handler-registry"

# System workflow ids (singletons): never valid as job ids, never a job operation's target.
RESERVED_IDS: Mapping[str, str] = {
    DLQ_WORKFLOW_ID: "the dead-letter queue",
    REGISTRY_WORKFLOW_ID: "the handler registry",
}


def check_job_id(job_id: str) -> str:
    """Refuse a system workflow's id where a job id is expected (ValueError)."""
    what = RESERVED_IDS.get(job_id)
    if what is not None:
        raise ValueError(f"{job_id!r} is reserved for the system ({what}); it is not a job")
    return job_id


class WorkerHandlers(BaseModel):
    """What one worker published at start-up: the handler names it runs."""

    worker: str
    handlers: list[str]
    published_at: datetime
