"""A test module's own dev server: the session's kind (in memory), with extra dynamic config,
for tests that need the server set differently or need it to themselves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from temporalio.client import Client

from connection.client import connect
from starter.dev.devserver import DevServer


def module_dev_server(
    dynamic_config: dict[str, object] | None = None,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``dev_server`` and ``dev_client`` fixtures of module scope, to assign to those names in
    a test module: they stand in for the session's (so the module's tests are ``devserver``
    tests as usual) and the server stops when the module is done."""

    @pytest.fixture(scope="module")
    async def dev_server() -> AsyncIterator[DevServer]:
        server = DevServer(db_file=None, dynamic_config=dict(dynamic_config or {}))
        await server.start()
        yield server
        server.stop()

    @pytest.fixture(scope="module")
    async def dev_client(dev_server: DevServer) -> Client:
        return await connect(dev_server.address, "default")

    return dev_server, dev_client
