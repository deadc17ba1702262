"""Billable actions: Temporal Cloud's counting rules as one pure function over a history.

The rules, in our words, from Temporal Cloud's "Actions" page (docs.temporal.io/cloud/actions)
and, where that page leaves a detail open, as the Temporal Web UI estimates them per event
(temporalio/ui, ``get-event-billable-actions.ts``):

- **Start** (1): a workflow run started by a client or by continue-as-new. A signal-with-start
  is one action in all (the start and its signal). A retry of a failed workflow run is free.
  The first run a Temporal Schedule starts costs 3: the Schedule's own start (2) and the
  workflow start (1).
- **Child workflow** (2): the parent recording the intent to start a child costs 2 (the start
  and the child's execution). The child's own start is that same action: not counted again
  (the Web UI, looking at one history at a time, would show it on the child as well).
- **Timer** (1): every timer started, including those an SDK starts for a wait with a timeout.
- **Activity** (1 per attempt): every attempt, the first and each retry. Retries leave no
  event of their own: the activity's started event carries the number of its last attempt.
- **Local activities and other markers** (1 per workflow task that records any), plus the
  local-activity retries the workflow task reports in its metering metadata (at most 100).
  ``patched`` markers (``core_patch``, ``Version``) are free.
- **Signal** (1): every signal a workflow receives, whether a client or another workflow sent
  it; counted once, on the receiver (the sender's "signal external" events are free).
- **Update** (1): every update accepted or rejected.
- **Search-attribute upsert** (1 per upsert command, however many attributes it sets).
  Attributes given at start are free, and so is an upsert of ``TemporalChangeVersion`` alone.
- **Workflow-options update**, **reset**, **Nexus operation scheduled or cancel requested** (1).
- Free: workflow tasks, completions and failures, memo updates, cancel requests.

Not in a history, counted by the caller: each activity heartbeat that reaches the server (1;
the SDK throttles the rest) and each query a worker answers (1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent

E = EventType
FREE_MARKERS = {"core_patch", "Version"}  # workflow.patched / GetVersion
CHANGE_VERSION = "TemporalChangeVersion"
SCHEDULED_BY = "TemporalScheduledById"
SCHEDULE_START = 2  # a Schedule's own share of each workflow it starts
CHILD_START = 2
LOCAL_RETRIES_CAP = 100
RESET = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW

# Billed exactly once per event of these types.
ONE_EACH = {
    E.EVENT_TYPE_TIMER_STARTED: "timer",
    E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED: "update",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED: "options",
    E.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED: "nexus",
    E.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED: "nexus",
}


def _start(event: HistoryEvent) -> Iterator[tuple[str, int]]:
    attrs = event.workflow_execution_started_event_attributes
    if attrs.HasField("parent_workflow_execution"):
        return  # billed on the parent's StartChildWorkflowExecutionInitiated
    if attrs.attempt > 1:
        return  # a workflow retry
    yield "start", 1
    first_run = attrs.first_execution_run_id == attrs.original_execution_run_id
    if first_run and SCHEDULED_BY in attrs.search_attributes.indexed_fields:
        yield "schedule", SCHEDULE_START


def signal_with_start(events: Sequence[HistoryEvent]) -> bool:
    """Was the run's first signal part of its start (one signal-with-start request)? The start
    and that signal are written together, before any workflow task; a plain signal can only
    come that early to a delayed start, and then later than the same millisecond."""
    if len(events) < 2 or events[1].event_type != E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        return False
    first, second = events[0], events[1]
    if not first.workflow_execution_started_event_attributes.HasField(
        "first_workflow_task_backoff"
    ):
        return True
    gap = second.event_time.ToNanoseconds() - first.event_time.ToNanoseconds()
    return gap < 1_000_000


def _other(event: HistoryEvent, marker_tasks: set[int]) -> tuple[str, int] | None:
    """The rules that need more than the event's type."""
    kind = event.event_type
    if kind == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        return "activity", event.activity_task_started_event_attributes.attempt - 1
    if kind == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        return "child", CHILD_START
    if kind == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
        return "upsert", 0 if set(fields.indexed_fields) <= {CHANGE_VERSION} else 1
    if kind == E.EVENT_TYPE_MARKER_RECORDED:
        marker = event.marker_recorded_event_attributes
        task = marker.workflow_task_completed_event_id
        if marker.marker_name in FREE_MARKERS or task in marker_tasks:
            return None
        marker_tasks.add(task)
        return "marker", 1
    if kind == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        metering = event.workflow_task_completed_event_attributes.metering_metadata
        return "marker", min(metering.nonfirst_local_activity_execution_attempts, LOCAL_RETRIES_CAP)
    if kind == E.EVENT_TYPE_WORKFLOW_TASK_FAILED:
        return "reset", int(event.workflow_task_failed_event_attributes.cause == RESET)
    return None


def billable_events(events: Sequence[HistoryEvent]) -> Iterator[tuple[HistoryEvent, str, int]]:
    """(event, category, actions) for every billable event of one run's full history (in
    order, from its first event). Heartbeats and queries are not in a history."""
    if not events:
        return
    if events[0].event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        for start_kind, count in _start(events[0]):
            yield events[0], start_kind, count
    skip_signal = events[1].event_id if signal_with_start(events) else None
    marker_tasks: set[int] = set()
    for event in events[1:]:
        kind = ONE_EACH.get(event.event_type)
        if kind is not None:
            if event.event_id != skip_signal:
                yield event, kind, 1
        elif (found := _other(event, marker_tasks)) is not None and found[1] > 0:
            yield event, *found


def in_window(event: HistoryEvent, since: datetime | None, until: datetime | None) -> bool:
    """Is the event's time in [since, until)? (aware datetimes; None: unbounded)"""
    when = event.event_time.ToDatetime(tzinfo=UTC)
    return (since is None or when >= since) and (until is None or when < until)


def tally(
    events: Sequence[HistoryEvent],
    since: datetime | None = None,
    until: datetime | None = None,
) -> Counter[str]:
    """Actions by category for one run's history, only events in [since, until) if given."""
    counts: Counter[str] = Counter()
    for event, kind, count in billable_events(events):
        if in_window(event, since, until):
            counts[kind] += count
    return counts
