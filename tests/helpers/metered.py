"""A dev server that serves its metrics, with an in-process worker on a queue of its own: for
tests that count the server's work (heartbeats, visibility writes), one module at a time."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from temporalio.client import Client

from bench.meter import MeteredServer
from tests.helpers.temporal import running_worker


@dataclass
class Lab:
    server: MeteredServer
    client: Client
    queue: str


@asynccontextmanager
async def metered_lab(prefix: str, **dynamic_config: object) -> AsyncIterator[Lab]:
    """A fresh metered server (in memory; ``dynamic_config`` on top of what we ship) and a
    worker on ``<prefix>-<random>``."""
    server = MeteredServer(db_file=None, dynamic_config=dynamic_config)
    client = await server.start()
    queue = f"{prefix}-{uuid.uuid4().hex[:8]}"
    try:
        async with running_worker(client, queue):
            yield Lab(server, client, queue)
    finally:
        server.stop()
