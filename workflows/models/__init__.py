"""The models every side shares (pydantic, pure: the workflow sandbox passes them through),
split by concern; this package is their public surface: ``from workflows.models import X``.

- :mod:`.spec`: the job spec and the door's rules (payload shape, durations, parse_spec)
- :mod:`.instants`: instants given by a person, one date range
- :mod:`.ids`: job ids and the system workflows' reserved ids
- :mod:`.status`: the status vocabulary
- :mod:`.attempts`: attempt records, heartbeat details, the ``run_job`` input and result
- :mod:`.audit`: control requests and the audit trail
- :mod:`.job`: a job's report and the state its workflow keeps
- :mod:`.cron`: slots, a cron's state, updates and report
- :mod:`.dlq`: the dead-letter queue's entries, releases and state
- :mod:`.registry`: what a worker publishes to the handler registry
- :mod:`.search`: the typed search attribute keys (names in :mod:`workflows.names`)
"""

from jobctl.workflows.models.attempts import (
    AttemptRecord,
    HeartbeatState,
    RunJobInput,
    RunJobResult,
)
from jobctl.workflows.models.audit import (
    AUDIT_LIMIT,
    CONTROL_CUTOFF,
    MAX_NOTE,
    UNKNOWN_ACTOR,
    AuditAction,
    AuditEntry,
    ControlRequest,
    PauseRequest,
    append_audit,
)
from jobctl.workflows.models.cron import (
    CronInput,
    CronReport,
    CronState,
    CronUpdate,
    SlotFinished,
    SlotOutcome,
    SlotRecord,
    SlotTime,
)
from jobctl.workflows.models.dlq import (
    MAX_ERROR_CHARS,
    DeadEntry,
    DlqLogLine,
    DlqState,
    JobRelease,
    ReleaseRequest,
)
from jobctl.workflows.models.ids import (
    HANDLER_PATTERN,
    ID_PATTERN,
    MAX_CRON_ID,
    RESERVED_IDS,
    TICK_ID_PATTERN,
    check_job_id,
    is_job_id,
)
from jobctl.workflows.models.instants import (
    EARLIEST,
    ISO_EXAMPLE,
    MAX_AHEAD,
    Instant,
    OffsetDatetime,
    check_instant,
    parse_instant,
)
from jobctl.workflows.models.job import JobReport, JobState
from jobctl.workflows.models.registry import WorkerHandlers
from jobctl.workflows.models.search import (
    BUILD_IDS,
    JOB_HANDLER,
    JOB_NAME,
    JOB_RUN_AT,
    JOB_STATUS,
    SEARCH_ATTRIBUTES,
)
from jobctl.workflows.models.spec import (
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    MIN_BACKOFF_BASE,
    Count,
    JobSpec,
    Number,
    Overlap,
    Seconds,
    check_json_tree,
    parse_spec,
)
from jobctl.workflows.models.status import JobStatus

__all__ = [
    "AUDIT_LIMIT",
    "BUILD_IDS",
    "CONTROL_CUTOFF",
    "EARLIEST",
    "HANDLER_PATTERN",
    "ID_PATTERN",
    "ISO_EXAMPLE",
    "JOB_HANDLER",
    "JOB_NAME",
    "JOB_RUN_AT",
    "JOB_STATUS",
    "MAX_AHEAD",
    "MAX_CRON_ID",
    "MAX_ERROR_CHARS",
    "MAX_NOTE",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MIN_BACKOFF_BASE",
    "RESERVED_IDS",
    "SEARCH_ATTRIBUTES",
    "TICK_ID_PATTERN",
    "UNKNOWN_ACTOR",
    "AttemptRecord",
    "AuditAction",
    "AuditEntry",
    "ControlRequest",
    "Count",
    "CronInput",
    "CronReport",
    "CronState",
    "CronUpdate",
    "DeadEntry",
    "DlqLogLine",
    "DlqState",
    "HeartbeatState",
    "Instant",
    "JobRelease",
    "JobReport",
    "JobSpec",
    "JobState",
    "JobStatus",
    "Number",
    "OffsetDatetime",
    "Overlap",
    "PauseRequest",
    "ReleaseRequest",
    "RunJobInput",
    "RunJobResult",
    "Seconds",
    "SlotFinished",
    "SlotOutcome",
    "SlotRecord",
    "SlotTime",
    "WorkerHandlers",
    "append_audit",
    "check_instant",
    "check_job_id",
    "check_json_tree",
    "is_job_id",
    "parse_instant",
    "parse_spec",
]
