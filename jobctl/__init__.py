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
Modules outside this package (``workflows``, ``activities``, ``starter``, ``connection``,
``worker``) are internal: their names may change between releases.
"""

from __future__ import annotations

from activities.context import JobContext, PermanentError
from activities.registry import handler
from starter.errors import (
    InvalidTransition,
    JobExists,
    JobNotFound,
    JobsError,
    SpecError,
    TemporalUnavailable,
)
from starter.jobsclient import JobHandle, JobsClient, SyncJobHandle, SyncJobsClient
from starter.operations.cronpreview import preview_cron as cron_preview
from workflows.models import CronReport, JobReport, JobSpec, JobStatus

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
    "TemporalUnavailable",
    "cron_preview",
    "handler",
]
