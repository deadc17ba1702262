"""The one client factory: every entry point (CLI, API, worker, demo, tests) connects here."""

from __future__ import annotations

import os
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from starter.errors import TemporalUnavailable

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "jobs"


def task_queue() -> str:
    """The task queue jobs run on: ``JOBS_TASK_QUEUE``, default ``jobs``."""
    return os.environ.get("JOBS_TASK_QUEUE", DEFAULT_TASK_QUEUE)


def temporal_address() -> str:
    return os.environ.get("TEMPORAL_ADDRESS", DEFAULT_ADDRESS)


async def connect(
    address: str | None = None, namespace: str | None = None, **options: Any
) -> Client:
    """Connect with the pydantic data converter (the job model is pydantic end to end).

    ``address`` defaults to ``TEMPORAL_ADDRESS`` (``localhost:7233``) and ``namespace`` to
    ``TEMPORAL_NAMESPACE`` (``default``); ``options`` go to ``Client.connect``.
    Raises :class:`TemporalUnavailable` when the server cannot be reached.
    """
    target = address or temporal_address()
    try:
        return await Client.connect(
            target,
            namespace=namespace or os.environ.get("TEMPORAL_NAMESPACE", DEFAULT_NAMESPACE),
            data_converter=pydantic_data_converter,
            **options,
        )
    except RuntimeError as err:  # the SDK reports connection failures as RuntimeError
        raise TemporalUnavailable(f"cannot reach Temporal at {target}: {err}") from err
