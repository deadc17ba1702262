"""The worker: job workflows, the ``run_job`` activity and the handler registry.

Run any number of them (``python worker.py`` or ``jobctl worker``). Settings come from flags or
the environment:

* ``JOBS_MAX_CONCURRENT_JOBS`` (default 100): attempts one worker runs at once.
* ``JOBS_PREFETCH`` (default 2000): attempts a worker may hold beyond those, waiting for their
  run_at (jobs are dispatched up to 30 s early) or for a free handler slot.
* ``JOBS_RATE_LIMIT`` (default unlimited): attempts per second of each handler across the
  task queue (each handler's attempts have their own queue, :mod:`activities.job_worker`),
  enforced by the server (``max_task_queue_activities_per_second``), the lever for a herd.
* ``JOBS_SHUTDOWN_GRACE`` (default 30s): on SIGTERM or SIGINT the worker stops polling and
  gives running attempts this long to finish before cancelling them.
* ``JOBS_LOOP_STALL_LIMIT`` (default 60s; 0: off): a worker whose event loop has not turned
  for this long (an async handler blocking it) logs where it is stuck and exits with code 70
  for its supervisor to restart it (:mod:`activities.loop_watchdog`).
* ``JOBS_CANCEL_LATENCY`` (default 10s; at least 1s): the most ``jobctl cancel`` takes to reach
  a running handler (``ctx.cancelled``, an async handler's CancelledError). A cancel rides the
  answer to a heartbeat, so while a handler runs its worker sends one at least this often
  (or every 80% of the job's lease, if that is shorter): 3600/10 = 360 heartbeats per hour of
  handler run time at the default, each a billed action on Temporal Cloud.
* ``JOBS_SLOTS_PER_KEY`` (default unset: no limit): the most handler slots one fairness key
  holds at once on this worker. Below ``JOBS_MAX_CONCURRENT_JOBS`` it keeps slots free for
  other keys, so a small tenant's job starts at once beside a big tenant's flood; those slots
  stay idle while no other key has work. Jobs without a fairness key are not limited.
* ``JOBS_WORKER_ROLE`` (default ``all``): ``workflows`` polls only for workflow tasks (the
  job, cron, DLQ, registry and limit workflows), ``activities`` only for activity tasks (the
  handlers' attempts and the DLQ's bookkeeping). A Python worker is one event loop under one
  GIL: one process running both shares one core between them, a ``workflows`` and an
  ``activities`` process on one task queue can use two, and each kind scales on its own.
  A task queue needs at least one worker of each kind (``all`` counts as both).
* ``JOBS_HANDLER_MODULES``: comma-separated modules that register extra handlers (besides
  those installed packages declare under the ``jobs.handlers`` entry-point group).
* ``JOBS_MALLOC_ARENAS`` (default 2; 0: glibc's default): malloc arenas the process keeps
  (:mod:`activities.malloc_arenas`).
* ``JOBS_METRICS_PORT`` (default unset: no metrics endpoint): serve Prometheus metrics at
  ``http://JOBS_METRICS_HOST:JOBS_METRICS_PORT/metrics``, the SDK's ``temporal_*`` and the
  scheduler's ``jobs_*`` (see :mod:`activities.metrics`).
* ``JOBS_METRICS_HOST`` (default ``127.0.0.1``): the address the endpoint binds; set
  ``0.0.0.0`` for a scraper on another host (in a container, say). The endpoint has no
  authentication, so expose it only where the scraper needs it.
"""

from __future__ import annotations

import asyncio
import compileall
import logging
import os
import pkgutil
import signal
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.runtime import Runtime
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

import jobctl
from jobctl import workflows
from jobctl.activities.dlq import AlertActivities, park_in_dlq
from jobctl.activities.job_worker import JobWorker, handler_workers
from jobctl.activities.loop_watchdog import BROKEN_LOOP_EXIT_CODE, LoopWatchdog, exit_now
from jobctl.activities.malloc_arenas import ARENAS_ENV, cap_malloc_arenas
from jobctl.activities.metrics import DEFAULT_HOST, bind_address, prometheus_runtime
from jobctl.activities.notify import notifier_from_env
from jobctl.activities.registry import HandlerModuleError, HandlerRegistry, load_handlers
from jobctl.activities.run_job import DEFAULT_CANCEL_LATENCY, JobActivities
from jobctl.connection import build
from jobctl.connection.client import connect, task_queue
from jobctl.connection.errors import SpecError
from jobctl.workflows import inbox, names
from jobctl.workflows.batch_workflow import BatchWorkflow
from jobctl.workflows.concurrency_workflow import ConcurrencyLimitWorkflow
from jobctl.workflows.cron_workflow import CronJobWorkflow
from jobctl.workflows.dependency_calls import cancel_own_job, read_job_outcomes
from jobctl.workflows.dlq_workflow import DeadLetterQueueWorkflow
from jobctl.workflows.durations import parse_duration
from jobctl.workflows.job_workflow import JobWorkflow
from jobctl.workflows.live_attempts import read_attempt_log
from jobctl.workflows.models import WorkerHandlers
from jobctl.workflows.ratelimit_workflow import RateLimitWorkflow
from jobctl.workflows.registry_workflow import HandlerRegistryWorkflow

log = logging.getLogger("jobs.worker")

WORKFLOWS = [JobWorkflow, CronJobWorkflow, DeadLetterQueueWorkflow, HandlerRegistryWorkflow]
WORKFLOWS += [ConcurrencyLimitWorkflow, RateLimitWorkflow, BatchWorkflow]
# Third-party modules the workflows use: deterministic, so every run shares the worker's copy.
THIRD_PARTY_PASSTHROUGH = ("pydantic", "pydantic_core", "annotated_types")


def _env_float(name: str) -> float | None:
    value = os.environ.get(name)
    return parse_duration(value) if value else None


def _stall_limit() -> float:
    limit = _env_float("JOBS_LOOP_STALL_LIMIT")
    return 60.0 if limit is None else limit


CANCEL_LATENCY_ENV = "JOBS_CANCEL_LATENCY"
MIN_CANCEL_LATENCY = 1.0


def _cancel_latency() -> float:
    raw = os.environ.get(CANCEL_LATENCY_ENV, "").strip()
    try:
        value = parse_duration(raw) if raw else DEFAULT_CANCEL_LATENCY
    except ValueError as err:
        raise SpecError([(CANCEL_LATENCY_ENV, str(err))]) from err
    if not MIN_CANCEL_LATENCY <= value < float("inf"):
        reason = f"must be at least {MIN_CANCEL_LATENCY:g}s (a duration like 10s), not {raw!r}"
        raise SpecError([(CANCEL_LATENCY_ENV, reason)])
    return value


def _env_whole(name: str, low: int, high: int | None, wanted: str) -> int | None:
    """A whole-number setting from the environment, ``low``-``high``; unset or blank: None."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < low or (high is not None and int(value) > high):
        raise SpecError([(name, f"must be {wanted}, not {value!r}")])
    return int(value)


SLOTS_PER_KEY_ENV = "JOBS_SLOTS_PER_KEY"


def _slots_per_key() -> int | None:
    return _env_whole(SLOTS_PER_KEY_ENV, 1, None, "a whole number of slots (1 or more)")


ROLE_ENV = "JOBS_WORKER_ROLE"
Role = Literal["all", "workflows", "activities"]
ROLES: tuple[Role, ...] = ("all", "workflows", "activities")


def worker_role(value: str | None = None, given_as: str = ROLE_ENV) -> Role:
    """``value`` (default: JOBS_WORKER_ROLE; unset or blank: ``all``) as a role; a bad one
    is a SpecError naming ``given_as``."""
    raw = (os.environ.get(ROLE_ENV, "") if value is None else value).strip() or "all"
    for role in ROLES:
        if raw == role:
            return role
    raise SpecError([(given_as, f"must be one of {', '.join(ROLES)}, not {raw!r}")])


METRICS_PORT_ENV = "JOBS_METRICS_PORT"
METRICS_HOST_ENV = "JOBS_METRICS_HOST"


def _metrics_port() -> int | None:
    return _env_whole(METRICS_PORT_ENV, 1, 65535, "a port number (1-65535)")


@dataclass
class WorkerSettings:
    """Worker limits; every field states its default and its environment variable."""

    task_queue: str = field(default_factory=task_queue)
    max_concurrent_jobs: int = field(
        default_factory=lambda: int(os.environ.get("JOBS_MAX_CONCURRENT_JOBS", "100"))
    )
    prefetch: int = field(default_factory=lambda: int(os.environ.get("JOBS_PREFETCH", "2000")))
    rate_limit: float | None = field(default_factory=lambda: _env_float("JOBS_RATE_LIMIT"))
    shutdown_grace: float = field(default_factory=lambda: _env_float("JOBS_SHUTDOWN_GRACE") or 30.0)
    loop_stall_limit: float = field(default_factory=_stall_limit)
    cancel_latency: float = field(default_factory=_cancel_latency)  # seconds
    slots_per_key: int | None = field(default_factory=_slots_per_key)  # None: no limit
    identity: str = field(default_factory=lambda: f"{os.getpid()}@{socket.gethostname()}")
    handler_modules: str | None = None  # None: JOBS_HANDLER_MODULES
    role: Role = field(default_factory=worker_role)  # which tasks it polls for
    metrics_port: int | None = field(default_factory=_metrics_port)  # None: no endpoint
    metrics_host: str = field(
        default_factory=lambda: os.environ.get(METRICS_HOST_ENV, "").strip() or DEFAULT_HOST
    )


def precompile_workflow_modules() -> None:
    """Write bytecode for the workflow modules, which the sandbox imports afresh for every
    run (:func:`sandbox_passthrough`): without a ``.pyc`` (``PYTHONDONTWRITEBYTECODE``) each
    run compiled them again. A read-only folder is left alone."""
    compileall.compile_dir(Path(workflows.__file__).parent, maxlevels=0, quiet=2)
    # The packages above them too (jobctl, jobctl.workflows): the sandbox imports those afresh.
    compileall.compile_file(Path(jobctl.__file__), quiet=2)


def sandbox_passthrough() -> tuple[str, ...]:
    """What the sandbox shares with every workflow run instead of importing it afresh per run:
    :data:`THIRD_PARTY_PASSTHROUGH` and every module of ``workflows/`` except those that define
    a workflow class (each run gets its own copy of those, with the sandbox's checks on what
    they call). The shared modules keep no state between calls."""
    defining = {cls.__module__ for cls in WORKFLOWS}
    found = pkgutil.walk_packages(workflows.__path__, prefix=f"{workflows.__name__}.")
    ours = sorted(module.name for module in found if module.name not in defining)
    return (*THIRD_PARTY_PASSTHROUGH, *ours)


def sandbox_runner() -> SandboxedWorkflowRunner:
    """The SDK's sandbox, with our pass-through rule: what the replay check runs the recorded
    histories in (it fails a workflow that reads the clock, random or does I/O). Workers run
    unsandboxed (:func:`build_worker`)."""
    precompile_workflow_modules()
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*sandbox_passthrough())
    )


def build_worker(
    client: Client, settings: WorkerSettings, registry: HandlerRegistry | None = None
) -> JobWorker:
    registry = registry or load_handlers(settings.handler_modules)
    executor = ThreadPoolExecutor(
        max_workers=settings.max_concurrent_jobs, thread_name_prefix="job-handler"
    )
    jobs = JobActivities(
        registry,
        executor,
        settings.identity,
        settings.max_concurrent_jobs,
        cancel_latency=settings.cancel_latency,
        slots_per_key=settings.slots_per_key,
    )
    alerts = AlertActivities(notifier_from_env())
    runs_workflows = settings.role != "activities"
    # A local activity runs in the workflow's own worker: a job's (its cancel path, its
    # dependencies) go with the workflows.
    local: list[Callable[..., Any]] = [read_attempt_log, read_job_outcomes, cancel_own_job]
    activities: list[Callable[..., Any]] = local if runs_workflows else []
    if settings.role != "workflows":
        # Attempts wait on their handler's queue (activities/job_worker.py), not here.
        activities += [park_in_dlq, alerts.notify_dead_jobs]
    # What the job queue's worker and the handlers' share (activities/job_worker.py).
    shared: dict[str, Any] = dict(
        # Attempts waiting for their run_at hold no handler slot (see JobActivities).
        max_concurrent_activities=settings.max_concurrent_jobs + settings.prefetch,
        max_task_queue_activities_per_second=settings.rate_limit,
        graceful_shutdown_timeout=timedelta(seconds=settings.shutdown_grace),
        # Heartbeats carry cancels: the SDK sends one at most every min(80% of the lease,
        # this); the handler loop beats as often (see JobActivities.beat_every).
        max_heartbeat_throttle_interval=timedelta(seconds=settings.cancel_latency),
        identity=settings.identity,
        # The build starters preset in each job's BuildIds (connection.build): the first
        # workflow task then costs the server no visibility write.
        build_id=build.build_id(),
    )
    worker = Worker(
        client,
        task_queue=settings.task_queue,
        workflows=WORKFLOWS if runs_workflows else [],
        activities=activities,
        # Without this a workflows worker would poll activity tasks for its local activity
        # and fail every run_job it took as "not registered".
        no_remote_activities=settings.role == "workflows",
        # Unsandboxed: the sandbox's per-run imports made a busy machine's herd a minute late
        # (docs/PERFORMANCE.md). No user code runs in a workflow; ruff's bans on workflows/
        # and the replay check in the sandbox (sandbox_runner) hold them deterministic.
        workflow_runner=UnsandboxedWorkflowRunner(),
        # 10 workflow-task pollers, 5 on the task queue's partitions and 5 sticky (the SDK's
        # default: 1 and 4; docs/PERFORMANCE.md, "Why a busy machine made a herd late").
        max_concurrent_workflow_task_polls=10,
        nonsticky_to_sticky_poll_ratio=0.5,
        **shared,
    )
    serving = settings.role != "workflows"
    per_handler = handler_workers(client, settings.task_queue, jobs, **shared) if serving else []
    return JobWorker(worker, executor, jobs, per_handler)


async def publish_handlers(
    client: Client, settings: WorkerSettings, registry: HandlerRegistry
) -> None:
    """Tell the handler registry which handler names this worker runs, with the typed ones'
    payload schemas (signal-with-start). What the registry would refuse (a schema over its
    size limit, say) stops the worker here, with the registry's reason."""
    entry = WorkerHandlers(
        worker=settings.identity,
        handlers=registry.names(),
        published_at=datetime.now(UTC),
        schemas=registry.schemas(),
        task_queue=settings.task_queue,
    )
    try:
        inbox.check_worker_handlers(entry, entry.published_at)
    except inbox.Invalid as err:
        raise HandlerModuleError(f"cannot publish this worker's handlers: {err}") from err
    await client.start_workflow(
        HandlerRegistryWorkflow.run,
        [],
        id=names.REGISTRY_WORKFLOW_ID,
        task_queue=settings.task_queue,
        start_signal=names.SIGNAL_PUBLISH,
        start_signal_args=[entry],
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


def metrics_runtime(settings: WorkerSettings) -> Runtime | None:
    """The SDK runtime serving Prometheus metrics, when ``settings.metrics_port`` is set. It
    must exist before the client connects: the client, and every worker on it, records there."""
    if settings.metrics_port is None:
        return None
    address = bind_address(settings.metrics_host, settings.metrics_port)
    try:
        runtime = prometheus_runtime(settings.metrics_host, settings.metrics_port)
    except ValueError as err:  # taken, or not an address this host has
        raise SpecError([(METRICS_PORT_ENV, f"cannot serve metrics on {address}: {err}")]) from err
    log.info("metrics on http://%s/metrics", address)
    return runtime


async def run_worker(settings: WorkerSettings, client: Client | None = None) -> None:
    """Publish this worker's handlers, then run until SIGTERM/SIGINT and shut down gracefully.

    Without a ``client`` it connects itself, serving metrics if configured; a given client
    keeps the runtime it was connected with. Handler modules load first: a module that
    cannot be imported, or a handler name registered twice, stops it before it connects."""
    registry = load_handlers(settings.handler_modules)
    if client is None:
        runtime = metrics_runtime(settings)
        client = await (connect(runtime=runtime) if runtime is not None else connect())
    elif settings.metrics_port is not None:
        log.warning("%s ignored: the worker was handed a client", METRICS_PORT_ENV)
    job_worker = build_worker(client, settings, registry)
    if settings.role != "workflows":  # a worker that runs no attempt serves no handler
        await publish_handlers(client, settings, registry)
    stopping: list[asyncio.Future[None]] = []  # the shutdowns SIGTERM/SIGINT started

    def stop() -> None:
        stopping.append(asyncio.ensure_future(job_worker.shutdown()))

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    watchdog = LoopWatchdog(
        settings.loop_stall_limit, lambda: sorted(job_worker.activities.running)
    )
    if settings.loop_stall_limit > 0:
        watchdog.start()
    log.info(
        "worker %s polling task queue %r for %s (max %d concurrent jobs)",
        settings.identity,
        settings.task_queue,
        "workflow and activity tasks" if settings.role == "all" else f"{settings.role} only",
        settings.max_concurrent_jobs,
    )
    try:
        await job_worker.run()
    except asyncio.CancelledError:
        if stopping:
            raise
        # Nobody asked us to stop: asyncio is tearing the loop down because a SystemExit or
        # KeyboardInterrupt escaped into it (from a task or callback a handler started; the
        # handler's own are contained). Exit for a restart rather than risk hanging on threads.
        job_worker.close()
        log.critical(
            "event loop torn down under the worker; exiting with %d", BROKEN_LOOP_EXIT_CODE
        )
        exit_now(BROKEN_LOOP_EXIT_CODE)
    finally:
        watchdog.stop()
        job_worker.close()
        # asyncio.run ends by waiting for its default executor's threads, without a time limit:
        # one a handler left blocked (asyncio.to_thread) would keep this process alive after
        # its shutdown. Give it an idle executor to wait for; the process ends with os._exit.
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        log.info("worker %s stopped", settings.identity)


def prepare_process() -> None:
    """Logging, and the malloc arena cap: before the SDK starts its threads."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    arenas = cap_malloc_arenas()
    if arenas is not None:
        log.debug("malloc arenas capped at %d (%s)", arenas, ARENAS_ENV)


def main() -> None:
    """``python worker.py``: like ``jobctl worker``, ends with ``os._exit`` once shut down, so a
    thread a handler leaked (or one stuck in a handler) cannot keep the process alive."""
    prepare_process()
    asyncio.run(run_worker(WorkerSettings()))
    exit_now(0)


if __name__ == "__main__":
    main()
