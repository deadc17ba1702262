"""The HTTP API as the tests drive it: the module's stack and waiting on a job's status."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from tests.helpers.poll import eventually_sync
from tests.helpers.processes import Api


@dataclass
class Stack:
    api: Api
    http: httpx.Client
    env: dict[str, str]


def new_id(prefix: str = "api") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_status(
    http: httpx.Client, job_id: str, status: str, timeout: float = 60
) -> dict[str, Any]:
    def body() -> dict[str, Any]:
        answer: dict[str, Any] = http.get(f"/jobs/{job_id}").json()
        return answer

    return eventually_sync(
        body,
        lambda answer: answer.get("status") == status,
        timeout=timeout,
        interval=0.3,
        what=f"{job_id} {status}",
    )
