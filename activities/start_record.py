"""The attempt's start, recorded with the server before its handler runs.

The SDK sends heartbeats in the background, at most one per 80% of the lease: a handler that
ends its process at once (``os._exit``, the OOM killer) would otherwise take the record of its
start along, and the next attempt could neither name the loss nor count it against
``max_attempts``. So the first heartbeat is sent here and its answer awaited.

A handler runs only once its start is on record. While the server cannot be reached the
attempt waits for it (within its lease): a handler started then could not record its outcome,
and the server would run the job again after the lease (a server SIGKILLed just as two jobs
started ran both of them twice). Once the server no longer holds the attempt (its lease ran
out; the server has retried the job), or the lease passes unanswered, the handler does not run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta

from temporalio import activity
from temporalio.api.common.v1 import Payloads
from temporalio.api.workflowservice.v1 import RecordActivityTaskHeartbeatRequest
from temporalio.service import RPCError, RPCStatusCode

from jobctl.workflows.models import HeartbeatState

log = logging.getLogger("jobs.run_job")
# Answers that mean "not reachable right now": the attempt waits and asks again.
UNREACHABLE = {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED}
RETRY_PAUSE = 1.0


class StartNotRecorded(Exception):
    """The server did not take the attempt's start: its handler must not run."""


async def record_start(state: HeartbeatState, timeout: float, lease: float) -> None:
    """Record the attempt log with the server (the attempt's first heartbeat, not an extra
    one: the SDK's own beats start from the handler loop's next one) and wait for the answer;
    ``timeout`` per call, retried while the server is unreachable for up to ``lease``.

    Raises StartNotRecorded when the server no longer holds the attempt or stays silent for
    the lease. Any other refusal (a malformed detail, say) lets the handler start, leaving
    the record to the SDK's next beat."""
    info = activity.info()
    client = activity.client()
    payloads = await client.data_converter.encode([state])
    request = RecordActivityTaskHeartbeatRequest(
        task_token=info.task_token,
        details=Payloads(payloads=payloads),
        identity=client.identity,
        namespace=client.namespace,
    )
    give_up = time.monotonic() + lease
    while True:
        try:
            answer = await client.workflow_service.record_activity_task_heartbeat(
                request, timeout=timedelta(seconds=timeout)
            )
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                log.warning("job %s: the server no longer holds this attempt", info.workflow_id)
                raise StartNotRecorded(str(err)) from err
            if err.status not in UNREACHABLE:
                log.warning(
                    "job %s: could not record the attempt's start: %s", info.workflow_id, err
                )
                activity.heartbeat(state)  # the SDK delivers it with its next beat
                return
            if time.monotonic() + RETRY_PAUSE > give_up:
                log.warning("job %s: server silent for the lease; not starting", info.workflow_id)
                raise StartNotRecorded(str(err)) from err
            log.warning("job %s: server unreachable at start (%s); waiting", info.workflow_id, err)
            await asyncio.sleep(RETRY_PAUSE)
            continue
        if answer.cancel_requested:  # only the SDK's own beat delivers it to the activity
            activity.heartbeat(state)
        return
