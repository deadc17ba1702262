"""The ``jobs`` CLI run in this process through click's runner, for tests where no real
process is the point (answers and exit codes); :func:`~tests.helpers.processes.jobs` runs the
installed console script when the process itself is under test."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from click.testing import CliRunner

from jobctl.starter.cli import run


@dataclass(frozen=True)
class CliAnswer:
    """What one command printed and its exit code (as ``subprocess.CompletedProcess``)."""

    returncode: int
    stdout: str
    stderr: str


def jobs_here_sync(env: dict[str, str], *args: str) -> CliAnswer:
    """Run ``jobs *args`` with ``env`` as the environment overrides; never raises."""
    with CliRunner().isolation(env=env) as (out, err, _):
        code = run(list(args))
    return CliAnswer(code, out.getvalue().decode(), err.getvalue().decode())


def jobs_here_blocking(env: dict[str, str], *args: str) -> CliAnswer:
    """:func:`jobs_here_sync` from anywhere: called inside a running event loop (a sync helper
    of an async test) it runs in a thread, since the commands run their own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return jobs_here_sync(env, *args)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(jobs_here_sync, env, *args).result()


async def jobs_here(env: dict[str, str], *args: str) -> CliAnswer:
    """:func:`jobs_here_sync` in a thread: the commands run their own event loop."""
    return await asyncio.to_thread(jobs_here_sync, env, *args)
