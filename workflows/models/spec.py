"""The job spec: one pydantic model shared by the CLI, the HTTP API and the workflows.

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
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
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

from jobctl.workflows import cronmath
from jobctl.workflows.cronmath import DstGap, DstRepeat
from jobctl.workflows.durations import parse_duration
from jobctl.workflows.models.ids import HANDLER_PATTERN, MAX_CRON_ID, check_job_id, is_job_id
from jobctl.workflows.models.instants import MAX_AHEAD, Instant, door_clock
from jobctl.workflows.rates import MAX_BURST, parse_rate

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_PAYLOAD_DEPTH = 64  # nested objects/arrays, the payload object itself included
# Temporal fires activity retries no sooner than about a second apart: a smaller base cannot
# be honoured, so new submissions are refused below it (older jobs keep what they had).
MIN_BACKOFF_BASE = 1.0


def _spec_error(fields: str, message: str) -> PydanticCustomError:
    """A whole-spec error that still names its fields (pydantic gives those an empty loc)."""
    return PydanticCustomError("spec", message, {"fields": fields})


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


Overlap = Literal["skip", "buffer_one", "allow_all", "cancel_other"]
# What a job does when a job it runs after goes dead, is cancelled or discarded (issue 44).
DependencyPolicy = Literal["cancel", "run", "wait"]
MAX_AFTER = 50  # job ids one job may run after

# Temporal's limits: priority keys 1..5 (its default levels; 3 when unset), a fairness key of
# at most 64 bytes, weights are clamped by the server to this range.
PRIORITY_LEVELS = 5
DEFAULT_PRIORITY = 3
MAX_FAIRNESS_KEY_BYTES = 64
MIN_FAIRNESS_WEIGHT, MAX_FAIRNESS_WEIGHT = 0.001, 1000.0
MAX_CONCURRENCY_LIMIT = 1000
MAX_KEY_BYTES = 200  # a concurrency key names a workflow id
# Fields that only a cron job may set (checked against their defaults).
CRON_ONLY = (
    "overlap",
    "catchup_window",
    "schedule_jitter",
    "start",
    "end",
    "max_runs",
    "dst_gap",
    "dst_repeat",
)


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
    # An attempt waits this long for a worker that serves its handler (on the job's task
    # queue) to take it; then the job goes dead saying so. Waiting includes every minute no
    # such worker runs (a deploy, an outage) and every moment all of them are busy (their
    # slots and prefetch full): keep it well above a backlog's drain time. A DLQ requeue
    # starts the wait afresh.
    handler_wait: Seconds = Field(default=86400.0, ge=10, le=30 * 86400)
    overlap: Overlap = "skip"
    catchup_window: Seconds = Field(default=60.0, ge=0, le=366 * 86400)
    schedule_jitter: Seconds = Field(default=0.0, ge=0, le=86400)
    # Issue 18: ordering among queued attempts, and limits across the cluster.
    priority: Count = Field(default=DEFAULT_PRIORITY, ge=1, le=PRIORITY_LEVELS)
    fairness_key: str | None = Field(default=None, min_length=1, max_length=64)
    fairness_weight: Number = Field(default=1.0, ge=MIN_FAIRNESS_WEIGHT, le=MAX_FAIRNESS_WEIGHT)
    concurrency_key: str | None = Field(default=None, min_length=1, max_length=200)
    concurrency_limit: Count | None = Field(default=None, ge=1, le=MAX_CONCURRENCY_LIMIT)
    # Issue 44: at most `rate` starts of rounds per rate_key, cluster-wide (workflows/rates.py).
    rate_key: str | None = Field(default=None, min_length=1, max_length=200)
    rate: str | None = Field(default=None, min_length=3, max_length=12)
    rate_burst: Count | None = Field(default=None, ge=1, le=MAX_BURST)
    # Cron bounds: no slot before start or after end; done after max_runs slots have run.
    start: Instant | None = None
    end: Instant | None = None
    max_runs: Count | None = Field(default=None, ge=1, le=1_000_000)
    # Wall-clock times a DST change skips (gap) or repeats; None: "first" for fixed times,
    # "both" for interval expressions (the rule before these fields existed).
    dst_gap: DstGap = "shift"
    dst_repeat: DstRepeat | None = None
    # Issue 44: run only once every job named here is done (workflows/dependency_rules.py).
    after: list[str] = Field(default_factory=list, max_length=MAX_AFTER)
    on_failed_dependency: DependencyPolicy = "cancel"

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if value and not is_job_id(value):
            raise ValueError("must be 1-200 characters of letters, digits and . _ : -")
        check_job_id(value)
        return value

    @field_validator("after")
    @classmethod
    def _check_after(cls, value: list[str]) -> list[str]:
        for job_id in value:
            if not is_job_id(job_id):
                raise ValueError(f"{job_id[:80]!r} is not a job id")
            check_job_id(job_id)
        if len(set(value)) < len(value):
            raise ValueError("names a job more than once")
        return value

    @field_validator("backoff_base")
    @classmethod
    def _check_backoff_floor(cls, value: float, info: ValidationInfo) -> float:
        # At the door only: jobs already recorded with a smaller base keep replaying.
        if door_clock(info) is not None and value < MIN_BACKOFF_BASE:
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

    @field_validator("rate")
    @classmethod
    def _check_rate(cls, value: str | None) -> str | None:
        return None if value is None else str(parse_rate(value))

    @field_validator("fairness_key", "concurrency_key", "rate_key")
    @classmethod
    def _check_key(cls, value: str | None) -> str | None:
        if value is None:
            return None
        _valid_text(value)
        if not value.isprintable():
            raise ValueError("must be printable text (no control characters)")
        if len(value.encode()) > MAX_KEY_BYTES:
            raise ValueError(f"must be at most {MAX_KEY_BYTES} bytes of UTF-8")
        return value

    @field_validator("fairness_key")
    @classmethod
    def _check_fairness_key(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode()) > MAX_FAIRNESS_KEY_BYTES:
            limit = MAX_FAIRNESS_KEY_BYTES
            raise ValueError(f"must be at most {limit} bytes of UTF-8 (Temporal's limit)")
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
    def _check_combination(self, info: ValidationInfo) -> JobSpec:
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
            # At the door, any cron-only field given is refused, even at its default value;
            # elsewhere (decoding a recorded spec sets every field) those differing from it.
            set_at_door = self.model_fields_set if door_clock(info) is not None else set()
            defaults = type(self).model_fields
            cron_only = [
                name
                for name in CRON_ONLY
                if name in set_at_door or getattr(self, name) != defaults[name].default
            ]
            if cron_only:
                raise _spec_error(", ".join(cron_only), "only applies to cron jobs")
        self._check_limits()
        self._check_dependencies()
        return self

    def _check_dependencies(self) -> None:
        if self.id and self.id in self.after:
            raise _spec_error("after", "a job cannot run after itself")
        if self.cron is not None and self.after:
            raise _spec_error("after", "a cron job's slots cannot wait for other jobs")
        if not self.after and self.on_failed_dependency != "cancel":
            raise _spec_error("on_failed_dependency", "needs after")

    def _check_limits(self) -> None:
        if (self.concurrency_key is None) != (self.concurrency_limit is None):
            raise _spec_error(
                "concurrency_key, concurrency_limit",
                "concurrency_key and concurrency_limit go together",
            )
        if (self.rate_key is None) != (self.rate is None):
            raise _spec_error("rate_key, rate", "rate_key and rate go together")
        if self.rate_burst is not None and self.rate is None:
            raise _spec_error("rate_burst", "needs a rate_key and a rate")
        if self.fairness_key is None and self.fairness_weight != 1.0:
            raise _spec_error("fairness_weight", "needs a fairness_key")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise _spec_error("end", "must be after start")

    def scheduling(self) -> dict[str, Any]:
        """The issue-18 settings a status report shows (one home for the list)."""
        names = [
            "priority",
            "fairness_key",
            "fairness_weight",
            "concurrency_key",
            "concurrency_limit",
            "rate_key",
            "rate",
            "rate_burst",
        ]
        if self.cron is not None:
            names += ["start", "end", "max_runs", "dst_gap", "dst_repeat"]
        return {name: getattr(self, name) for name in names}

    @property
    def key(self) -> str:
        """The idempotency key handed to the handler: stable across retries."""
        return self.idempotency_key or self.id


class SchedulingReport(BaseModel):
    """The issue-18 settings, as a status report shows them (from :meth:`JobSpec.scheduling`)."""

    priority: int = DEFAULT_PRIORITY
    fairness_key: str | None = None
    fairness_weight: float = 1.0
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    rate_key: str | None = None
    rate: str | None = None
    rate_burst: int | None = None


class CronBoundsReport(SchedulingReport):
    start: datetime | None = None
    end: datetime | None = None
    max_runs: int | None = None
    dst_gap: DstGap = "shift"
    dst_repeat: DstRepeat | None = None


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
