"""Job ids: their shape, and the system workflows' ids that are never a job's."""

from __future__ import annotations

import re
from collections.abc import Mapping

from jobctl.workflows import names

ID_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
HANDLER_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
# A cron tick's id is "<cron id>@<slot>", the slot in UTC with seconds precision.
TICK_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,178}@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"
# A cron's id (and idempotency key) leaves room for "@<slot>" (21 characters) within 200.
MAX_CRON_ID = 178
_ID_RE = re.compile(f"{ID_PATTERN}|{TICK_ID_PATTERN}")


def is_job_id(value: str) -> bool:
    """Whether ``value`` has the shape of a job id (or of a cron slot's job id)."""
    return _ID_RE.fullmatch(value) is not None


# System workflow ids (singletons): never valid as job ids, never a job operation's target.
RESERVED_IDS: Mapping[str, str] = {
    names.DLQ_WORKFLOW_ID: "the dead-letter queue",
    names.REGISTRY_WORKFLOW_ID: "the handler registry",
}


def check_job_id(job_id: str) -> str:
    """Refuse a system workflow's id where a job id is expected (ValueError)."""
    what = RESERVED_IDS.get(job_id)
    if what is not None:
        raise ValueError(f"{job_id!r} is reserved for the system ({what}); it is not a job")
    return job_id
