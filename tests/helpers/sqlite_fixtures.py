"""A dev server on a SQLite file (WAL), as ``jobctl dev`` runs it, for the failure drills.

The functional tests share a faster in-memory dev server (conftest). Drill modules import
these fixtures, which take the names ``dev_server`` and ``dev_client`` there, so the ``cli``
and ``workers`` fixtures point at the file-backed server in those modules only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from jobctl.connection.client import connect
from jobctl.starter.dev.devserver import DevServer


@pytest.fixture(scope="module", name="dev_server")
async def sqlite_dev_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    server = DevServer(db_file=tmp_path_factory.mktemp("drills") / "temporal.db")
    await server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module", name="dev_client")
async def sqlite_dev_client(dev_server: DevServer) -> Client:
    return await connect(dev_server.address, "default")
