"""The Python API of the job scheduler, in the style of Temporal's own client::

    from jobctl.starter.jobsclient import JobsClient

    client = await JobsClient.connect()             # as `jobs` connects
    handle = await client.schedule("nightly report", handler="log", in_="5m")
    report = await handle.result()                  # done, dead, cancelled or discarded

- :class:`JobsClient`: ``connect``, ``schedule``, ``get_handle``, ``list`` (rows, a page at a
  time), ``pages`` / ``list_page``, ``schedule_many``;
- :class:`JobHandle`: ``status``, ``cancel``, ``pause``, ``resume``, ``trigger``, ``requeue``,
  ``discard``, ``result``;
- :class:`SyncJobsClient` / :class:`SyncJobHandle`: the same, blocking (WSGI apps, scripts);
- the exceptions (:mod:`.errors`): every one a :class:`JobsError` whose ``exit_code`` is the
  ``jobs`` command's exit code for the same failure.
"""

from __future__ import annotations

from jobctl.starter.jobsclient.client import JobsClient
from jobctl.starter.jobsclient.errors import (
    EXIT_CODES,
    InvalidTransition,
    JobExists,
    JobNotFound,
    JobsError,
    SpecError,
    TemporalBusy,
    TemporalUnavailable,
)
from jobctl.starter.jobsclient.handle import SETTLED, JobHandle
from jobctl.starter.jobsclient.sync import SyncJobHandle, SyncJobsClient
from jobctl.starter.operations import ItemResult, JobPage, JobRow, Report, Scheduled
from jobctl.workflows.models import JobStatus

__all__ = [
    "EXIT_CODES",
    "SETTLED",
    "InvalidTransition",
    "ItemResult",
    "JobExists",
    "JobHandle",
    "JobNotFound",
    "JobPage",
    "JobRow",
    "JobStatus",
    "JobsClient",
    "JobsError",
    "Report",
    "Scheduled",
    "SpecError",
    "SyncJobHandle",
    "SyncJobsClient",
    "TemporalBusy",
    "TemporalUnavailable",
]
