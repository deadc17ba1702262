"""The Python API of the job scheduler, in the style of Temporal's own client::

    from jobctl import JobsClient

    client = await JobsClient.connect()             # as `jobs` connects
    handle = await client.schedule("nightly report", handler="log", in_="5m")
    report = await handle.result()                  # done, dead, cancelled or discarded

- :class:`JobsClient`: ``connect``, ``schedule``, ``get_handle``, ``list`` (rows, a page at a
  time), ``pages`` / ``list_page``, ``schedule_many``;
- :class:`JobHandle`: ``status``, ``cancel``, ``pause``, ``resume``, ``trigger``, ``requeue``,
  ``discard``, ``result``;
- :class:`SyncJobsClient` / :class:`SyncJobHandle`: the same, blocking (WSGI apps, scripts);
- the exceptions are :mod:`jobctl.starter.errors`' (also ``from jobctl import ...``): every
  one a ``JobsError`` whose ``exit_code`` is ``jobctl``'s exit code for the same failure.
"""

from __future__ import annotations

from jobctl.starter.jobsclient.client import JobsClient
from jobctl.starter.jobsclient.handle import SETTLED, JobHandle
from jobctl.starter.jobsclient.sync import SyncJobHandle, SyncJobsClient
from jobctl.starter.operations import ItemResult, JobPage, JobRow, Report, Scheduled
from jobctl.workflows.models import JobStatus

__all__ = [
    "SETTLED",
    "ItemResult",
    "JobHandle",
    "JobPage",
    "JobRow",
    "JobStatus",
    "JobsClient",
    "Report",
    "Scheduled",
    "SyncJobHandle",
    "SyncJobsClient",
]
