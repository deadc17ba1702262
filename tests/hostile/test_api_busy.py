"""A Temporal that refuses calls for load: the API answers 503 ``unavailable`` with
``Retry-After``, never a 500, starts nothing, and serves as before once the load is gone.

This module's own dev server allows one visibility call a second (the server's default is 10
and the stacks we ship allow 100: starter/dev/devserver.py). A CI run met the default on the
shared dev server, and a forged-page-token request came back as a 500 with a traceback. Here a
burst of page requests, each checking its page token with the server, meets
RESOURCE_EXHAUSTED; the token check asks again for about 3 s (starter/operations/pagetokens.py),
then the refusal reaches the caller.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import httpx
import pytest
from temporalio.client import Client

from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.api.errors import ErrorBody
from jobctl.starter.api.guards import LOOPBACK_HOSTS
from tests.helpers.dev_servers import dev_server_fixtures
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import (
    NORMAL_JOB_DEADLINE,
    assert_nothing_started,
    normal_job_completes,
    started_count,
)

pytestmark = pytest.mark.devserver

QUEUE = f"hostile-busy-{uuid.uuid4().hex[:8]}"
ONE_LISTING_A_SECOND: dict[str, object] = {"frontend.namespaceRPS.visibility": 1}
BURST = 20  # requests at once; at one call a second, at most ~4 fit in a token check's 3 s
FORGED = operations.encode_token(b"\x00" * 40)  # passes the checksum; the server refuses it


# This module's own dev server: the session's, with one visibility call a second.
dev_server, dev_client = dev_server_fixtures("module", ONE_LISTING_A_SECOND)


def check_answer(answer: httpx.Response) -> None:
    """A refused token (422 naming it) or a busy server (503 with Retry-After); nothing else."""
    body = answer.json()
    ErrorBody.model_validate(body)
    if answer.status_code == 503:
        assert body["error"] == "unavailable" and "busy" in body["detail"], body
        assert answer.headers["Retry-After"] == "1", answer.headers
    else:
        assert answer.status_code == 422 and body["error"] == "invalid", answer.text
        assert [p["field"] for p in body["detail"]] == ["page_token"], body


async def test_a_busy_temporal_is_503_with_retry_after_then_serves(dev_client: Client) -> None:
    async with running_worker(dev_client, QUEUE, publish=True):
        app = create_app(
            token="", client=dev_client, task_queue=QUEUE, allowed_hosts=list(LOOPBACK_HOSTS)
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000", timeout=60
        ) as http:
            before = await started_count(dev_client, QUEUE)
            burst = [http.get("/jobs", params={"page_token": FORGED}) for _ in range(BURST)]
            answers = await asyncio.gather(*burst)
            for answer in answers:
                check_answer(answer)
            statuses = Counter(answer.status_code for answer in answers)
            assert statuses[503] >= BURST // 2, statuses  # the server did refuse for load
            await assert_nothing_started(dev_client, before, QUEUE)

            await asyncio.sleep(2)  # the limit's bucket fills again
            alone = await http.get("/jobs", params={"page_token": FORGED})
            assert alone.status_code == 422, alone.text
            assert await normal_job_completes(dev_client, QUEUE) < NORMAL_JOB_DEADLINE
    await end_singletons(dev_client)
