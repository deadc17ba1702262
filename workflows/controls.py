"""What the job and cron workflows do alike with a message from outside: drop an invalid one
into the audit trail, and take the ``cancel_requested`` signal's who and why. Workflow code
(it reads ``workflow.now()`` and logs through ``workflow.logger``), shared, holding no state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow

from jobctl.workflows import inbox, names
from jobctl.workflows.models import AuditEntry, ControlRequest


class Rejected:
    """The answer of :func:`accept_cancel` for an argument it recorded as rejected."""


def reject(audit: list[AuditEntry], what: str, reason: str, raw: object = None) -> None:
    """Record a dropped message in ``audit`` (see workflows/inbox.py); the first of a streak
    is also logged, as ``what`` (e.g. ``job <id>``) says."""
    streak = inbox.record_rejection(audit, workflow.now(), reason, inbox.actor_of(raw))
    if streak == 1:
        workflow.logger.warning("%s: %s", what, reason)


def accept_cancel(
    args: tuple[Any, ...], on_reject: Callable[[str, object], None]
) -> ControlRequest | Rejected | None:
    """The ``cancel_requested`` signal's argument (who and why; none is fine): sent just
    before the cancellation itself. An invalid one goes to ``on_reject`` (the cancellation
    still notes itself)."""
    try:
        return inbox.signal_arg(args, inbox.CONTROL_ARG, names.SIGNAL_CANCEL_REQUESTED, True)
    except inbox.Invalid as err:
        on_reject(str(err), args[0] if args else None)
        return Rejected()
