"""The door of a batch (``POST /jobs/batch`` with ``batch``, ``jobctl schedule --from-file
--batch``, ``JobsClient.schedule_many(batch=...)``): every check that needs no server.

A batch is all or nothing: one problem anywhere (the batch, a member, a callback) refuses
the whole request with every problem listed (fields ``batch.id``, ``jobs[3].handler``,
``batch.on_complete.payload``...), and nothing starts. The rules are docs/batches.md's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobctl.starter.errors import SpecError
from jobctl.starter.operations.dependencies import cycles
from jobctl.starter.operations.validation import check_handler, fingerprint, submission
from jobctl.workflows import batch_rules
from jobctl.workflows.models import MAX_PAYLOAD_BYTES, JobSpec
from jobctl.workflows.models.batch import (
    CALLBACKS,
    MAX_BATCH_ID,
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    MAX_SUMMARY_BYTES,
    PAYLOAD_KEY,
    BatchCallback,
)

Problems = list[tuple[str, str]]
MAX_CALLBACK_PAYLOAD = MAX_PAYLOAD_BYTES - MAX_SUMMARY_BYTES
BATCH_FIELDS = {"id", *CALLBACKS}
# What a callback's payload receives, for checking it against a typed handler's model.
SAMPLE_SUMMARY = {
    "id": "b",
    "total": 1,
    "counts": {"done": 1},
    "succeeded": True,
    "cancelled_by": None,
    "dead": [],
    "cancelled": [],
    "discarded": [],
    "not_started": [],
    "truncated": False,
}


@dataclass(frozen=True)
class CheckedBatch:
    """A batch that passed every check: its id, members (parsed specs), callbacks and the
    fingerprint of the request as sent (a retried identical request answers the batch)."""

    batch_id: str
    members: list[JobSpec]
    callbacks: dict[str, BatchCallback]
    request: str

    def compact_members(self) -> list[dict[str, Any]]:
        return [compact(spec) for spec in self.members]


def compact(spec: JobSpec) -> dict[str, Any]:
    """A spec as JSON, without the fields equal to their defaults (the workflow re-applies
    them): what a batch's input carries per member."""
    return spec.model_dump(mode="json", exclude_defaults=True)


def check_batch_request(batch: Any, specs: Any, now: datetime) -> CheckedBatch:
    """Every problem of a batch request at once (SpecError), or the checked batch."""
    problems: Problems = []
    if not isinstance(batch, dict):
        raise SpecError([("batch", 'must be an object: {"id", "on_complete"?, "on_success"?}')])
    problems += [(f"batch.{key}", "unknown field") for key in sorted(set(batch) - BATCH_FIELDS)]
    batch_id = batch.get("id")
    if not batch_rules.is_batch_id(batch_id):
        reason = f"must be 1-{MAX_BATCH_ID} characters of letters, digits and . _ : -"
        problems.append(("batch.id", reason))
        batch_id = None
    if not isinstance(specs, list) or not specs:
        raise SpecError([*problems, ("jobs", "a batch needs at least one job")])
    if len(specs) > MAX_MEMBERS:
        problems.append(("jobs", f"at most {MAX_MEMBERS} jobs per batch (got {len(specs)})"))
        raise SpecError(problems)
    members = _members(specs, batch_id, now, problems)
    callbacks = _callbacks(batch, batch_id, now, problems)
    ids = {spec.id for spec in members}
    looped = cycles(members)
    for index, spec in enumerate(members):
        if spec.id in looped:
            problems.append((f"jobs[{index}].after", looped[spec.id]))
    for name, callback in callbacks.items():
        if callback.job_id in ids:
            problems.append((f"batch.{name}.id", f"{callback.job_id!r} is also a member's id"))
    if len({c.job_id for c in callbacks.values()}) < len(callbacks):
        problems.append(("batch.on_success.id", "on_complete and on_success need distinct ids"))
    weight = sum(len(json.dumps(compact(spec), separators=(",", ":"))) for spec in members)
    if weight > MAX_MEMBER_BYTES:
        reason = (
            f"the batch's jobs weigh {weight} bytes as JSON; at most {MAX_MEMBER_BYTES} "
            "(pass large data by reference in the payload)"
        )
        problems.append(("jobs", reason))
    if problems:
        raise SpecError(problems)
    assert batch_id is not None
    request = fingerprint({"batch": batch, "jobs": specs})
    return CheckedBatch(batch_id, members, callbacks, request)


def _members(
    specs: list[Any], batch_id: str | None, now: datetime, problems: Problems
) -> list[JobSpec]:
    """Each member parsed as ``POST /jobs`` parses it (a missing id is ``<batch id>.<n>``);
    one-shots only, ids distinct."""
    members: list[JobSpec] = []
    first_of: dict[str, int] = {}
    for index, data in enumerate(specs):
        where = f"jobs[{index}]"
        if not isinstance(data, dict):
            problems.append((where, "must be a JSON object"))
            continue
        if not data.get("id") and batch_id is not None:
            data = {**data, "id": f"{batch_id}.{index}"}
        try:
            spec = submission(data, now).spec
        except SpecError as err:
            problems += [(f"{where}.{field}", reason) for field, reason in err.problems]
            continue
        if spec.cron is not None:
            problems.append((f"{where}.cron", "a batch member is a one-shot (run_at or delay)"))
            continue
        if spec.id in first_of:
            problems.append((f"{where}.id", f"{spec.id!r} is also jobs[{first_of[spec.id]}]'s id"))
            continue
        first_of[spec.id] = index
        members.append(spec)
    return members


def _callbacks(
    batch: dict[str, Any], batch_id: str | None, now: datetime, problems: Problems
) -> dict[str, BatchCallback]:
    found: dict[str, BatchCallback] = {}
    for name in CALLBACKS:
        data = batch.get(name)
        if data is None:
            continue
        callback = _callback(name, data, batch_id, now, problems)
        if callback is not None:
            found[name] = callback
    return found


def _callback(
    name: str, data: Any, batch_id: str | None, now: datetime, problems: Problems
) -> BatchCallback | None:
    """A callback's spec: a one-shot without run_at (``delay`` counts from when the batch
    settles), a payload leaving room for the summary under ``batch``."""
    where = f"batch.{name}"
    if not isinstance(data, dict):
        problems.append((where, "must be a job spec (a JSON object)"))
        return None
    before = len(problems)
    for field in ("run_at", "cron"):
        if data.get(field) is not None:
            reason = "a callback runs when the batch settles (delay: that long after)"
            problems.append((f"{where}.{field}", reason))
    payload = data.get("payload")
    if isinstance(payload, dict):
        if PAYLOAD_KEY in payload:
            reason = "is reserved: the batch's summary is given to the callback there"
            problems.append((f"{where}.payload.{PAYLOAD_KEY}", reason))
        size = len(json.dumps(payload, separators=(",", ":"), default=str).encode())
        if size > MAX_CALLBACK_PAYLOAD:
            reason = f"is {size} bytes; a callback's payload may have {MAX_CALLBACK_PAYLOAD}"
            problems.append((f"{where}.payload", f"{reason} (the summary needs the rest)"))
    if len(problems) > before:
        return None
    if not data.get("id") and batch_id is not None:
        data = {**data, "id": f"{batch_id}.{name}"}
    try:
        spec = submission({**data, "delay": data.get("delay") or 0}, now).spec
    except SpecError as err:
        problems += [(f"{where}.{field}", reason) for field, reason in err.problems]
        return None
    assert spec.run_at is not None
    delay = max(0.0, (spec.run_at - now).total_seconds())
    raw = compact(spec)
    raw.pop("run_at", None)
    return BatchCallback(spec=raw, delay=delay)


def check_batch_handlers(checked: CheckedBatch, known: Iterable[str]) -> None:
    """Each member's and callback's handler (and typed payload), as a single schedule checks
    it; a callback's payload is checked with a summary under ``batch``, as it will run."""
    problems: Problems = []
    for index, spec in enumerate(checked.members):
        _handler_problems(f"jobs[{index}]", spec.handler, spec.payload, known, problems)
    for name, callback in checked.callbacks.items():
        payload = {**callback.spec.get("payload", {}), PAYLOAD_KEY: SAMPLE_SUMMARY}
        _handler_problems(f"batch.{name}", callback.spec["handler"], payload, known, problems)
    if problems:
        raise SpecError(problems)


def _handler_problems(
    where: str, handler: str, payload: dict[str, Any], known: Iterable[str], problems: Problems
) -> None:
    try:
        check_handler(handler, known, payload)
    except SpecError as err:
        problems += [(f"{where}.{field}", reason) for field, reason in err.problems]


def member_ids(specs: Sequence[JobSpec]) -> list[str]:
    return [spec.id for spec in specs]
