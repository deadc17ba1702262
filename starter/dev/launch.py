"""``jobctl worker``: a worker process from the CLI. With :mod:`starter.dev.stack`, the only
client-side modules that import the worker side (``worker``); the CLI imports this one only
when the command runs."""

from __future__ import annotations

import asyncio

from jobctl.worker import WorkerSettings, prepare_process, worker_role
from jobctl.worker import run_worker as run_worker_async


def run_worker(
    max_concurrent_jobs: int | None,
    rate_limit: float | None,
    shutdown_grace: float | None,
    role: str | None = None,
) -> None:
    """Run a worker until SIGTERM/SIGINT; a flag given overrides its environment variable."""
    prepare_process()
    settings = WorkerSettings()
    if role is not None:
        settings.role = worker_role(role, given_as="--role")
    if max_concurrent_jobs is not None:
        settings.max_concurrent_jobs = max_concurrent_jobs
    if rate_limit is not None:
        settings.rate_limit = rate_limit
    if shutdown_grace is not None:
        settings.shutdown_grace = shutdown_grace
    asyncio.run(run_worker_async(settings))
