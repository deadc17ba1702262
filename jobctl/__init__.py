"""The job scheduler's public Python API: ``from jobctl import JobsClient, handler``.

Everything a program that schedules jobs or writes handlers needs, under one short name:

* :class:`JobsClient` / :class:`SyncJobsClient`: schedule, inspect and control jobs
  (``await JobsClient.connect()``), with :class:`JobHandle` per job;
* :func:`handler`, :class:`JobContext`, :class:`PermanentError`: write handlers
  (``@handler("billing.charge")``);
* the errors every door raises (:class:`SpecError` exit 2, :class:`JobNotFound` 3,
  :class:`JobExists` 4, :class:`InvalidTransition` 5, :class:`TemporalUnavailable` 6), and
  the models a report is made of (:class:`JobStatus`, :class:`JobSpec`);
* :func:`cron_preview`: a cron's next slots, as ``jobctl cron preview`` prints them.

:mod:`jobctl.testing` runs your handlers and crons on Temporal's time-skipping test server.
The subpackages (``jobctl.workflows``, ``jobctl.activities``, ``jobctl.starter``,
``jobctl.connection``, ``jobctl.worker``) are internal: their names may change between
releases. They are the repository's top-level folders, installed under this one name so that
an app's own ``workflows`` or ``activities`` packages live beside them in one process.

The names below load on first use: a worker imports ``jobctl.workflows`` and
``jobctl.activities`` without loading the client side (and the workflow sandbox, which runs
this file afresh for every workflow run, pays for a few definitions only).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobctl.activities.context import JobContext, PermanentError
    from jobctl.activities.registry import handler
    from jobctl.starter.errors import (
        InvalidTransition,
        JobExists,
        JobNotFound,
        JobsError,
        SpecError,
        TemporalBusy,
        TemporalUnavailable,
    )
    from jobctl.starter.jobsclient import JobHandle, JobsClient, SyncJobHandle, SyncJobsClient
    from jobctl.starter.operations.cronpreview import preview_cron as cron_preview
    from jobctl.workflows.models import CronReport, JobReport, JobSpec, JobStatus

# Public name -> (module, attribute): the one list of what `from jobctl import X` offers.
_PUBLIC = {
    "CronReport": ("jobctl.workflows.models", "CronReport"),
    "InvalidTransition": ("jobctl.starter.errors", "InvalidTransition"),
    "JobContext": ("jobctl.activities.context", "JobContext"),
    "JobExists": ("jobctl.starter.errors", "JobExists"),
    "JobHandle": ("jobctl.starter.jobsclient", "JobHandle"),
    "JobNotFound": ("jobctl.starter.errors", "JobNotFound"),
    "JobReport": ("jobctl.workflows.models", "JobReport"),
    "JobSpec": ("jobctl.workflows.models", "JobSpec"),
    "JobStatus": ("jobctl.workflows.models", "JobStatus"),
    "JobsClient": ("jobctl.starter.jobsclient", "JobsClient"),
    "JobsError": ("jobctl.starter.errors", "JobsError"),
    "PermanentError": ("jobctl.activities.context", "PermanentError"),
    "SpecError": ("jobctl.starter.errors", "SpecError"),
    "SyncJobHandle": ("jobctl.starter.jobsclient", "SyncJobHandle"),
    "SyncJobsClient": ("jobctl.starter.jobsclient", "SyncJobsClient"),
    "TemporalBusy": ("jobctl.starter.errors", "TemporalBusy"),
    "TemporalUnavailable": ("jobctl.starter.errors", "TemporalUnavailable"),
    "cron_preview": ("jobctl.starter.operations.cronpreview", "preview_cron"),
    "handler": ("jobctl.activities.registry", "handler"),
}

# Literal, for type checkers and linters; tests/test_public_api.py keeps it equal to _PUBLIC.
__all__ = [
    "CronReport",
    "InvalidTransition",
    "JobContext",
    "JobExists",
    "JobHandle",
    "JobNotFound",
    "JobReport",
    "JobSpec",
    "JobStatus",
    "JobsClient",
    "JobsError",
    "PermanentError",
    "SpecError",
    "SyncJobHandle",
    "SyncJobsClient",
    "TemporalBusy",
    "TemporalUnavailable",
    "cron_preview",
    "handler",
]


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    try:
        module, attribute = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'jobctl' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
