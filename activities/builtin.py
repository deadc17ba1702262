"""Built-in handlers: ``demo.sleep``, ``http.post`` and ``log``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from jobctl.activities.address_guard import URL_SHAPE_ERROR
from jobctl.activities.context import JobContext, PermanentError, handler
from jobctl.workflows import names

log = logging.getLogger("jobs.handlers")


def _number(payload: dict[str, Any], key: str, default: float) -> float:
    value = payload.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PermanentError(f"payload.{key} must be a non-negative number")
    return float(value)


class DemoFailure(Exception):
    """The failure ``demo.sleep`` raises on purpose."""


@handler(names.HANDLER_DEMO_SLEEP)
async def demo_sleep(ctx: JobContext) -> dict[str, Any]:
    """Sleep ``seconds`` (default 1), reporting progress each second.

    Payload: ``fail_times`` fails the first N attempts, ``always_fail`` fails every attempt
    (a poison job), ``permanent`` makes those failures non-retryable.
    """
    seconds = _number(ctx.payload, "seconds", 1.0)
    fail_times = int(_number(ctx.payload, "fail_times", 0))
    always_fail = bool(ctx.payload.get("always_fail", False))
    elapsed = 0.0
    while elapsed < seconds:
        step = min(1.0, seconds - elapsed)
        await asyncio.sleep(step)
        elapsed += step
        ctx.report_progress({"slept": round(elapsed, 3), "of": seconds})
    if always_fail or ctx.attempt <= fail_times:
        reason = "always_fail" if always_fail else f"fail_times={fail_times}"
        message = f"demo failure on attempt {ctx.attempt} ({reason})"
        if ctx.payload.get("permanent"):
            raise PermanentError(message)
        raise DemoFailure(message)
    return {"slept": seconds, "attempt": ctx.attempt}


@handler(names.HANDLER_HTTP_POST)
async def http_post(ctx: JobContext) -> dict[str, Any]:
    """POST ``json`` to ``url``; 2xx succeeds, 4xx (but 408/429) is permanent, the rest retries.

    The idempotency key travels in the ``Idempotency-Key`` header so the receiver can dedupe.
    Only public addresses are reached unless ``JOBS_HTTP_ALLOWED_HOSTS`` permits more; a
    refused destination is permanent (see :mod:`activities.http_post`).
    """
    # Imported on first use: httpx (with the rich and pygments its own CLI pulls in) took
    # ~0.1 s of every worker's start-up, and most workers never run http.post.
    import httpx

    from jobctl.activities.http_post import post as guarded_post

    url = ctx.payload.get("url")
    if not isinstance(url, str):
        raise PermanentError(URL_SHAPE_ERROR)
    timeout = _number(ctx.payload, "timeout", 10.0)
    headers = {"Idempotency-Key": ctx.idempotency_key}
    response = await guarded_post(url, ctx.payload.get("json"), headers, timeout)
    code = response.status_code
    if 200 <= code < 300:
        return {"status": code}
    summary = f"POST {response.url} answered {code}: {response.text[:200]}"
    if 400 <= code < 500 and code not in (408, 429):
        raise PermanentError(summary)
    raise httpx.HTTPStatusError(summary, request=response.request, response=response)


@handler(names.HANDLER_LOG)
def log_payload(ctx: JobContext) -> dict[str, Any]:
    """Write the payload to the worker's log."""
    log.info("job %s (%s) attempt %d: %s", ctx.job_id, ctx.name, ctx.attempt, ctx.payload)
    return {"logged": True}
