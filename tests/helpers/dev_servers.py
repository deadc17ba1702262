"""The ``dev_server`` and ``dev_client`` fixtures: the session's (tests/conftest.py) and a test
module's own, with extra dynamic config, for tests that need the server set differently or
need it to themselves. A dev server in memory, for speed; the drills use a SQLite file
(tests/helpers/sqlite_fixtures.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import pytest
from temporalio.client import Client

from jobctl.connection.client import connect
from jobctl.starter.dev.devserver import DevServer


def dev_server_fixtures(
    scope: Literal["session", "module"] = "module",
    dynamic_config: dict[str, object] | None = None,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``dev_server`` and ``dev_client`` fixtures of ``scope``, to assign to those names in
    conftest or a test module: a module's stand in for the session's (so its tests are
    ``devserver`` tests as usual), and each server stops when its scope is done."""

    @pytest.fixture(scope=scope)
    async def dev_server() -> AsyncIterator[DevServer]:
        server = DevServer(db_file=None, dynamic_config=dict(dynamic_config or {}))
        await server.start()
        yield server
        server.stop()

    @pytest.fixture(scope=scope)
    async def dev_client(dev_server: DevServer) -> Client:
        return await connect(dev_server.address, "default")

    return dev_server, dev_client
