"""Which workers serve a handler on a task queue right now, and what a schedule warns about.

A job's attempts wait on its handler's own queue (``names.handler_task_queue``), which only
the workers serving that handler poll. Temporal keeps each queue's recent pollers; a live
worker renews its poll at least once a minute (the server answers an idle long poll after
60 s), so a poller seen within LIVE_WITHIN is a live worker, and a worker that stopped,
cleanly or killed, leaves the answer within about that long. Reading it costs one describe
call per queue and handler, no billed action; answers are kept CACHE_FOR seconds so a herd of
schedules asks once.

A handler no live worker serves is no reason to refuse a job: its attempts wait on the queue
and run when such a worker starts (up to the spec's ``handler_wait``). The door accepts it
and says so in the answer's ``warnings``, with a did-you-mean when the name looks like a
typo of one the workers published.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError

from jobctl.starter.operations.rpc import QUERY_TIMEOUT
from jobctl.workflows import names
from jobctl.workflows.durations import format_duration
from jobctl.workflows.models import JobSpec

# A polling worker renews its poll within about 60 s; beyond this it has stopped.
LIVE_WITHIN = timedelta(seconds=75)
CACHE_FOR = 5.0


@dataclass(frozen=True)
class LiveWorker:
    """A worker polling a handler's queue, and when the server last heard its poll."""

    identity: str
    last_seen: datetime


_seen: dict[tuple[str, str], tuple[float, list[LiveWorker] | None]] = {}


async def live_workers(client: Client, task_queue: str, handler: str) -> list[LiveWorker] | None:
    """The workers polling ``handler``'s queue of ``task_queue`` now; None when the server
    cannot say (unreachable). Kept CACHE_FOR seconds per queue and handler."""
    key = (task_queue, handler)
    cached = _seen.get(key)
    if cached is not None and time.monotonic() - cached[0] < CACHE_FOR:
        return cached[1]
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(
            name=names.handler_task_queue(task_queue, handler),
            kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL,
        ),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    )
    found: list[LiveWorker] | None
    try:
        answer = await client.workflow_service.describe_task_queue(request, timeout=QUERY_TIMEOUT)
    except RPCError:
        found = None
    else:
        since = datetime.now(UTC) - LIVE_WITHIN
        pollers = [(p.identity, p.last_access_time.ToDatetime(UTC)) for p in answer.pollers]
        found = sorted(
            (LiveWorker(identity, seen) for identity, seen in pollers if seen >= since),
            key=lambda w: w.identity,
        )
    if len(_seen) > 10_000:  # many queues and handlers over a long life: start afresh
        _seen.clear()
    _seen[key] = (time.monotonic(), found)
    return found


def did_you_mean(handler: str, known: Iterable[str]) -> str | None:
    """The published name ``handler`` most likely meant, if one is close."""
    close = difflib.get_close_matches(handler, sorted(set(known) - {handler}), n=1)
    return close[0] if close else None


async def schedule_warnings(
    client: Client, task_queue: str, spec: JobSpec, known: Iterable[str]
) -> list[str]:
    """What a scheduled job's answer warns about: no live worker serves its handler on its
    task queue (it waits for one), and a likely typo of a published name."""
    workers = await live_workers(client, task_queue, spec.handler)
    if workers is None or workers:
        return []
    warning = (
        f"no live worker on task queue {task_queue!r} serves handler {spec.handler!r}: "
        f"the job waits for one (up to handler_wait, {format_duration(spec.handler_wait)}), "
        "then goes dead"
    )
    names_known = set(known)
    if spec.handler not in names_known:
        warning += "; no worker has published this handler"
        guess = did_you_mean(spec.handler, names_known)
        if guess is not None:
            warning += f" (did you mean {guess!r}?)"
    return [warning]
