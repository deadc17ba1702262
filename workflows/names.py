"""Every name this project gives something in Temporal, defined once.

Workflow types, well-known workflow ids, activity names, signal / query / update names, search
attributes, memo keys and patch ids are a contract: recorded histories, running workflows, the
``temporal`` CLI, the Web UI and users' scripts all refer to them by these strings. Code on
either side (workflows, activities, worker, client) imports them from here and never spells
them again. Pure module: no Temporal imports, safe inside the workflow sandbox.
"""

from __future__ import annotations

from typing import Final

# -- workflow types -----------------------------------------------------------------------------
JOB_WORKFLOW: Final = "JobWorkflow"
CRON_WORKFLOW: Final = "CronJobWorkflow"
DLQ_WORKFLOW: Final = "DeadLetterQueueWorkflow"
REGISTRY_WORKFLOW: Final = "HandlerRegistryWorkflow"
CONCURRENCY_WORKFLOW: Final = "ConcurrencyLimitWorkflow"  # one per concurrency key
RATE_WORKFLOW: Final = "RateLimitWorkflow"  # one per rate key
BATCH_WORKFLOW: Final = "BatchWorkflow"  # one per batch

# -- well-known workflow ids (one of each per namespace) ------------------------------------------
DLQ_WORKFLOW_ID: Final = "dead-letter-queue"
REGISTRY_WORKFLOW_ID: Final = "handler-registry"
CONCURRENCY_ID_PREFIX: Final = "concurrency/"  # + the key ("/" is never in a job id)
RATE_ID_PREFIX: Final = "ratelimit/"  # + the key
BATCH_ID_PREFIX: Final = "batch/"  # + the batch id

# -- activities ----------------------------------------------------------------------------------
RUN_JOB: Final = "run_job"
PARK_IN_DLQ: Final = "park_in_dlq"
NOTIFY_DEAD_JOBS: Final = "notify_dead_jobs"
READ_ATTEMPT_LOG: Final = "read_attempt_log"  # a local activity of JobWorkflow
READ_JOB_OUTCOMES: Final = "read_job_outcomes"  # a local activity of JobWorkflow (after)
CANCEL_OWN_JOB: Final = "cancel_own_job"  # a local activity of JobWorkflow (after)
DEPENDENCY_ACTOR: Final = "after"  # who cancels a job whose dependency failed (audit)

# -- signals -------------------------------------------------------------------------------------
SIGNAL_CANCEL_REQUESTED: Final = "cancel_requested"  # job, cron
SIGNAL_REQUEUE: Final = "requeue"  # job (no argument or a ControlRequest), DLQ (with a job id)
SIGNAL_DISCARD: Final = "discard"  # job, DLQ
SIGNAL_PARK: Final = "park"  # job -> DLQ: a DeadEntry
SIGNAL_JOB_RELEASED: Final = "job_released"  # job -> DLQ: a JobRelease
SIGNAL_SLOT_FINISHED: Final = "slot_finished"  # slot job -> cron (only when the slot parks),
# member job -> batch (every settlement)
SIGNAL_PUBLISH: Final = "publish"  # worker -> handler registry (signal-with-start)
SIGNAL_ACQUIRE: Final = "acquire"  # job -> concurrency limit / rate limit: a Permit/RateRequest
SIGNAL_RELEASE_PERMIT: Final = "release"  # job -> concurrency limit / rate limit: a PermitRelease
SIGNAL_RATE_GRANTED: Final = "rate_granted"  # rate limit -> job: a RateGrant
SIGNAL_PERMIT_GRANTED: Final = "permit_granted"  # concurrency limit -> job: a PermitGrant
SIGNAL_WATCH: Final = "watch"  # job -> a job it runs after: a DependencyWatch
SIGNAL_DEPENDENCY_SETTLED: Final = "dependency_settled"  # job -> its watchers: a SlotFinished

# -- queries -------------------------------------------------------------------------------------
QUERY_STATUS: Final = "status"  # job, cron
QUERY_ENTRIES: Final = "entries"  # DLQ
QUERY_LOG: Final = "log"  # DLQ
QUERY_DLQ_STATE: Final = "state"  # DLQ: its whole DlqState
QUERY_HANDLERS: Final = "handlers"  # handler registry
QUERY_CATALOG: Final = "catalog"  # handler registry: every WorkerHandlers, schemas included
QUERY_PERMITS: Final = "permits"  # concurrency limit: its SemaphoreState
QUERY_RESERVATIONS: Final = "reservations"  # rate limit: its RateState

# -- updates -------------------------------------------------------------------------------------
UPDATE_PAUSE: Final = "pause"  # job, cron
UPDATE_RESUME: Final = "resume"  # job, cron
UPDATE_TRIGGER: Final = "trigger"  # job, cron
UPDATE_SCHEDULE: Final = "update"  # cron: change its expression, zone or overlap
UPDATE_BACKFILL: Final = "backfill"  # cron: run the slots of a past range
UPDATE_CANCEL: Final = "cancel"  # batch: cancel every unsettled member

# -- search attributes (registered by the dev stack, compose and every test environment) ---------
SA_JOB_STATUS: Final = "JobStatus"  # Keyword
SA_JOB_NAME: Final = "JobName"  # Keyword
SA_JOB_HANDLER: Final = "JobHandler"  # Keyword
SA_JOB_RUN_AT: Final = "JobRunAt"  # Datetime
# Temporal's own (KeywordList): the builds that completed a workflow's tasks. Our starters set it
# at start to what the first task's completion would write (see connection.build).
SA_BUILD_IDS: Final = "BuildIds"
UNVERSIONED: Final = "unversioned"  # Temporal's marker in BuildIds for a worker without versioning

# -- memo keys -----------------------------------------------------------------------------------
MEMO_SCHEDULE: Final = "schedule"  # a cron's expression, zone and bounds, for listings
MEMO_SLOT_END: Final = "slot_end"  # on a cron's slot jobs whose completion the cron reads
MEMO_DLQ: Final = "dlq"  # a parked job's DeadEntry, so listings need no queries
MEMO_REQUEST: Final = "request"  # fingerprint of the submission that created a job

# -- memo values ---------------------------------------------------------------------------------
SLOT_END_BY_COMPLETION: Final = "completion"

# -- patch ids (workflow.patched): never renamed, never reused -----------------------------------
# None since 1.0.0 (docs/ARCHITECTURE.md, "Changing workflow code", says when to add one).

# -- built-in handlers (every worker serves them; the client accepts them unpublished) -------
HANDLER_LOG: Final = "log"
HANDLER_HTTP_POST: Final = "http.post"
HANDLER_DEMO_SLEEP: Final = "demo.sleep"
BUILTIN_HANDLERS: Final = frozenset({HANDLER_LOG, HANDLER_HTTP_POST, HANDLER_DEMO_SLEEP})

# -- task queue ----------------------------------------------------------------------------------
DEFAULT_TASK_QUEUE: Final = "jobs"
# A job's attempts wait on a queue of their handler's own, beside the job's task queue, which
# only the workers that serve that handler poll: an attempt never reaches a worker that
# cannot run it, and with no such worker it waits (up to the spec's ``handler_wait``).
HANDLER_QUEUE_MARK: Final = "/handler/"


def handler_task_queue(task_queue: str, handler: str) -> str:
    """The task queue where ``handler``'s attempts of jobs on ``task_queue`` wait."""
    return f"{task_queue}{HANDLER_QUEUE_MARK}{handler}"
