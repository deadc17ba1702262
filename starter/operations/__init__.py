"""Job operations on a Temporal client: one code path for the CLI, the HTTP API and scripts.

Each function raises the typed errors of :mod:`starter.errors`, never raw SDK errors, so
callers map them to exit codes or HTTP statuses without knowing Temporal. By concern:

- :mod:`.validation`: every check of what a caller sends (a spec is parsed once per request:
  :func:`submission`; notes, pause times, cron changes, job ids)
- :mod:`.handlers`: the handler names a job may use (what workers published)
- :mod:`.starting`: :func:`schedule` / :func:`start`
- :mod:`.bulk`: :func:`schedule_many` (up to :data:`MAX_BATCH` specs, per-item results)
- :mod:`.readback`: :func:`describe`, :func:`status`
- :mod:`.listing`: :func:`list_jobs` (``jobctl list`` / ``GET /jobs``)
- :mod:`.limits`: :func:`list_limits` (``jobctl limits`` / ``GET /limits``)
- :mod:`.pagetokens`: visibility page tokens as checked text
- :mod:`.controls`: pause, resume, trigger, update, backfill, cancel
- :mod:`.cronpreview`: the next slots of an expression
- :mod:`.rpc`: Temporal's failures as typed errors

This package's namespace is its public surface: ``from starter import operations;
operations.schedule(...)``.
"""

from __future__ import annotations

from jobctl.starter.operations.bulk import (
    MAX_BATCH,
    ItemResult,
    check_batch,
    schedule_many,
    start_checked,
)
from jobctl.starter.operations.controls import (
    CONTROL_TIMEOUT,
    backfill,
    backfill_request,
    cancel,
    pause,
    require_open,
    resume,
    trigger,
    update_cron,
)
from jobctl.starter.operations.cronpreview import preview_cron
from jobctl.starter.operations.handlers import (
    ALLOWED_HANDLERS_ENV,
    HandlerCatalog,
    HandlerInfo,
    Handlers,
    handler_listing,
    known_handlers,
)
from jobctl.starter.operations.limits import LimitInfo, Limits, list_limits
from jobctl.starter.operations.listing import JobPage, JobRow, list_jobs
from jobctl.starter.operations.pagetokens import decode_token, encode_token, readable_token
from jobctl.starter.operations.readback import Report, describe, status
from jobctl.starter.operations.rpc import QUERY_TIMEOUT, temporal_errors
from jobctl.starter.operations.starting import MIN_DISPATCH_LEAD, Scheduled, schedule, start
from jobctl.starter.operations.validation import (
    Submission,
    check_handler,
    check_not_reserved,
    check_note,
    control_request,
    cron_update,
    fingerprint,
    local_actor,
    pause_request,
    submission,
    validate_spec,
)

__all__ = [
    "ALLOWED_HANDLERS_ENV",
    "CONTROL_TIMEOUT",
    "MAX_BATCH",
    "MIN_DISPATCH_LEAD",
    "QUERY_TIMEOUT",
    "HandlerCatalog",
    "HandlerInfo",
    "Handlers",
    "ItemResult",
    "JobPage",
    "JobRow",
    "LimitInfo",
    "Limits",
    "Report",
    "Scheduled",
    "Submission",
    "backfill",
    "backfill_request",
    "cancel",
    "check_batch",
    "check_handler",
    "check_not_reserved",
    "check_note",
    "control_request",
    "cron_update",
    "decode_token",
    "describe",
    "encode_token",
    "fingerprint",
    "handler_listing",
    "known_handlers",
    "list_jobs",
    "list_limits",
    "local_actor",
    "pause",
    "pause_request",
    "preview_cron",
    "readable_token",
    "require_open",
    "resume",
    "schedule",
    "schedule_many",
    "start",
    "start_checked",
    "status",
    "submission",
    "temporal_errors",
    "trigger",
    "update_cron",
    "validate_spec",
]
