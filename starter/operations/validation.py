"""Every check of what a caller sends, in one place, before anything reaches Temporal.

A submission is parsed once (:func:`submission`): the CLI and the API call it up front, so bad
input is refused even with Temporal down, and hand the :class:`Submission` to
:func:`starter.operations.schedule`, which then only checks the handler name against the names
workers published (:func:`check_handler`). Controls' inputs (notes, pause times, cron changes,
job ids) are checked here too. A typed handler's payload is checked against the JSON schema
its workers published (:mod:`.payloads`), with the handler name.
"""

from __future__ import annotations

import getpass
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from uuid import uuid4

from pydantic import ValidationError

from jobctl.starter.errors import SpecError
from jobctl.starter.operations.handlers import HandlerCatalog
from jobctl.starter.operations.payloads import payload_problems
from jobctl.workflows import cronmath
from jobctl.workflows.models import (
    MAX_NOTE,
    ControlRequest,
    CronUpdate,
    JobSpec,
    PauseRequest,
    check_job_id,
    parse_spec,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Submission:
    """A parsed submission: the spec to start and the fingerprint of the request as sent
    (recorded in the job's memo, to recognise a retried identical request)."""

    spec: JobSpec
    request: str


def fingerprint(data: dict[str, Any] | JobSpec) -> str:
    """A stable digest of a submission as sent, to recognise a retried identical request."""
    raw = data.model_dump(mode="json", exclude_unset=True) if isinstance(data, JobSpec) else data
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _parse(data: dict[str, Any] | JobSpec, now: datetime) -> tuple[JobSpec | None, list[Any]]:
    try:
        return parse_spec(data, now, new_id=f"job-{uuid4()}"), []
    except ValidationError as err:
        return None, SpecError.from_validation(err).problems


def submission(data: dict[str, Any] | JobSpec | Submission, now: datetime) -> Submission:
    """Parse a submission once (``delay`` anchored at ``now``); every spec problem at once.
    The handler name is checked later, against the published names (:func:`check_handler`)."""
    if isinstance(data, Submission):
        return data
    spec, problems = _parse(data, now)
    if problems or spec is None:
        raise SpecError(problems)
    return Submission(spec=spec, request=fingerprint(data))


def handler_problem(handler: object, known: Iterable[str]) -> tuple[str, str] | None:
    """Why ``handler`` may not be used (not among ``known``, a list that refuses:
    ``JOBS_ALLOWED_HANDLERS``, or names a caller passed), or None. An advisory catalog (what
    workers published, :func:`~.handlers.known_handlers`) refuses nothing: a job whose
    handler no worker serves yet waits for one (the answer warns, :mod:`.handler_watch`)."""
    if isinstance(known, HandlerCatalog) and known.advisory:
        return None
    names = set(known)
    if not isinstance(handler, str) or not handler or handler in names:
        return None
    return ("handler", f"unknown handler {handler!r}; known: {sorted(names)}")


def check_handler(
    handler: str, known: Iterable[str], payload: dict[str, Any] | None = None
) -> None:
    """Refuse a handler name not among ``known`` and, when ``known`` carries the published
    payload schemas (a :class:`~.handlers.HandlerCatalog`, what ``known_handlers`` answers),
    a ``payload`` that does not validate against the handler's: every problem at once."""
    problem = handler_problem(handler, known)
    if problem is not None:
        raise SpecError([problem])
    schema = known.schema(handler) if isinstance(known, HandlerCatalog) else None
    if schema is not None and payload is not None:
        problems = payload_problems(schema, payload)
        if problems:
            raise SpecError(problems)


def validate_spec(
    data: dict[str, Any] | JobSpec, handlers: Iterable[str] | None, now: datetime
) -> JobSpec:
    """Parse a submission and check its handler name in one go (for scripts that hold the
    names already); every problem at once. ``handlers`` None skips the name check."""
    spec, problems = _parse(data, now)
    handler = data.handler if isinstance(data, JobSpec) else data.get("handler")
    problem = handler_problem(handler, handlers) if handlers is not None else None
    if problem is not None:
        problems.append(problem)
    if problems or spec is None:
        raise SpecError(problems)
    if handlers is not None:
        check_handler(spec.handler, handlers, spec.payload)
    return spec


def check_not_reserved(job_id: str) -> None:
    """A system workflow's id (RESERVED_IDS) is no job: refused before Temporal is asked."""
    try:
        check_job_id(job_id)
    except ValueError as err:
        raise SpecError([("job_id", str(err))]) from err


def check_note(note: str | None) -> str | None:
    """An operator's note for the audit trail: trimmed, blank is none, at most MAX_NOTE."""
    if note is None or not note.strip():
        return None
    note = note.strip()
    try:
        note.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecError([("note", "contains a lone surrogate (not valid Unicode text)")]) from None
    if len(note) > MAX_NOTE:
        raise SpecError([("note", f"must be at most {MAX_NOTE} characters (got {len(note)})")])
    return note


def local_actor(kind: str) -> str:
    """Who acts from this machine, for the audit trail: ``<kind>:<OS user>`` (``cli``,
    ``python``)."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name in the environment nor the user database
        user = "unknown"
    return f"{kind}:{user}"


def control_request(note: str | None = None, actor: str | None = None) -> ControlRequest | None:
    """Who and why for a control; None (the control's older, argument-less shape) when the
    caller says neither."""
    note = check_note(note)
    return ControlRequest(actor=actor, note=note) if note or actor else None


def pause_request(
    until: datetime | str | None, note: str | None = None, actor: str | None = None
) -> PauseRequest:
    """A validated pause: ``until`` in the date range by this machine's clock."""
    data = {"until": until, "note": check_note(note), "actor": actor}
    try:
        return PauseRequest.model_validate(data, context={"now": datetime.now(UTC)})
    except ValidationError as err:
        raise SpecError.from_validation(err) from err


class Problems:
    """Collects (field, reason) pairs so one SpecError reports every problem at once."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def check(self, field: str, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except ValueError as err:  # CronError included
            self.items.append((field, str(err)))
            return None

    def raise_any(self) -> None:
        if self.items:
            raise SpecError(self.items)


def cron_update(expression: str | None, timezone: str | None, overlap: str | None) -> CronUpdate:
    """Validate a cron change before it reaches the workflow (whose validator checks again)."""
    problems = Problems()
    if expression is not None:
        problems.check("cron", lambda: cronmath.parse(expression))
    if timezone is not None:
        problems.check("timezone", lambda: cronmath.zone(timezone))
    if not (expression or timezone or overlap):
        problems.items.append(("update", "give at least one of --cron, --tz, --overlap"))
    problems.raise_any()
    return CronUpdate.model_validate({"cron": expression, "timezone": timezone, "overlap": overlap})
