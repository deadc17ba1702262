"""Launching the long-running processes: ``jobctl worker``, ``jobctl api``, ``jobctl dev``.

Each imports what it launches only when run, so the other commands never load the API
server, the worker or its handler modules."""

from __future__ import annotations

import asyncio

import click


@click.command()
@click.option(
    "--max-concurrent-jobs",
    type=int,
    help="Attempts at once (JOBS_MAX_CONCURRENT_JOBS, default 100).",
)
@click.option(
    "--rate-limit", type=float, help="Attempts/s across the task queue (JOBS_RATE_LIMIT)."
)
@click.option(
    "--shutdown-grace",
    type=float,
    help="Seconds running attempts get on SIGTERM (JOBS_SHUTDOWN_GRACE, default 30).",
)
@click.option(
    "--role",
    help="all, workflows or activities: which tasks it polls for (JOBS_WORKER_ROLE, default all).",
)
def worker(
    max_concurrent_jobs: int | None,
    rate_limit: float | None,
    shutdown_grace: float | None,
    role: str | None,
) -> None:
    """Run a worker (same as python worker.py)."""
    from jobctl.starter.dev.launch import run_worker  # the worker side: imported only to launch it

    run_worker(max_concurrent_jobs, rate_limit, shutdown_grace, role)


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Anything but loopback needs JOBS_API_TOKEN.",
)
@click.option("--port", default=8000, show_default=True)
def api(host: str, port: int) -> None:
    """Run the HTTP API (OpenAPI at /docs)."""
    from jobctl.starter.api import server

    http = server(host, port)
    click.echo(f"API on http://{host}:{port} (docs: /docs)")
    asyncio.run(http.serve())


@click.command()
@click.option(
    "--state-dir", default=".jobs", show_default=True, help="Where the SQLite file lives."
)
@click.option("--port", default=7233, show_default=True)
@click.option("--ui-port", default=8233, show_default=True)
@click.option("--api-port", default=8000, show_default=True)
@click.option("--demo", is_flag=True, help="Schedule the demo jobs once the stack is up.")
def dev(state_dir: str, port: int, ui_port: int, api_port: int, demo: bool) -> None:
    """The embedded stack: dev server (SQLite file), worker and API. Ctrl-C stops it."""
    from jobctl.starter.dev.stack import run_dev_stack

    asyncio.run(run_dev_stack(state_dir, port, ui_port, api_port, demo))
