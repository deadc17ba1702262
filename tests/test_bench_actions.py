"""bench.actions (Temporal Cloud's billing rules over a history) and bench.meter's metrics
reading: pure functions, on recorded histories (tests/histories) and small synthetic ones."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import MeteringMetadata, Payload, SearchAttributes, WorkflowExecution
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import (
    ActivityTaskStartedEventAttributes,
    HistoryEvent,
    MarkerRecordedEventAttributes,
    UpsertWorkflowSearchAttributesEventAttributes,
    WorkflowExecutionStartedEventAttributes,
    WorkflowTaskCompletedEventAttributes,
    WorkflowTaskFailedEventAttributes,
)
from temporalio.client import WorkflowHistory

from bench.actions import tally
from bench.meter import reading

E = EventType
HISTORIES = Path(__file__).parent / "histories"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def recorded(name: str) -> list[HistoryEvent]:
    return list(WorkflowHistory.from_json(name, (HISTORIES / name).read_text()).events)


def at(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(T0 + timedelta(seconds=seconds))
    return stamp


def event(
    event_id: int, kind: EventType.ValueType, seconds: float = 0.0, **attrs: Any
) -> HistoryEvent:
    return HistoryEvent(event_id=event_id, event_type=kind, event_time=at(seconds), **attrs)


def started(seconds: float = 0.0, **fields: Any) -> HistoryEvent:
    attrs = WorkflowExecutionStartedEventAttributes(**fields)
    return event(
        1, E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, seconds,
        workflow_execution_started_event_attributes=attrs,
    )  # fmt: skip


def upsert(event_id: int, *keys: str) -> HistoryEvent:
    fields = SearchAttributes(indexed_fields={key: Payload(data=b'"x"') for key in keys})
    attrs = UpsertWorkflowSearchAttributesEventAttributes(search_attributes=fields)
    return event(
        event_id,
        E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
        upsert_workflow_search_attributes_event_attributes=attrs,
    )


def marker(event_id: int, name: str, task: int) -> HistoryEvent:
    attrs = MarkerRecordedEventAttributes(marker_name=name, workflow_task_completed_event_id=task)
    return event(event_id, E.EVENT_TYPE_MARKER_RECORDED, marker_recorded_event_attributes=attrs)


# -- recorded histories: the rules on what our workflows really wrote ------------------------


def test_a_one_shot_is_its_start_and_its_activity() -> None:
    # JobStatus is set at start (free) and a done job writes no other: no upsert.
    assert tally(recorded("r1-dispatched.json")) == Counter(start=1, activity=1)


def test_every_attempt_of_an_activity_counts_not_only_the_last_event() -> None:
    # one ActivityTaskStarted with attempt 3: the first attempt and two retries
    assert tally(recorded("r1-retries.json"))["activity"] == 3


def test_signal_with_start_is_one_action_and_later_signals_one_each() -> None:
    assert tally(recorded("r1-handler-registry.json")) == Counter(start=1)
    assert tally(recorded("r1-dead-letter-queue.json")) == Counter(start=1, activity=1, signal=2)


def test_a_child_start_is_two_on_the_parent_and_free_on_the_child() -> None:
    parent = recorded("r1-cron-run1.json")
    initiated = sum(
        1 for e in parent if e.event_type == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    )
    assert initiated and tally(parent)["child"] == 2 * initiated
    child = tally(recorded("r1-cron-slot.json"))
    assert "start" not in child and child == Counter(activity=1)


def test_memo_updates_are_free() -> None:  # r1-dlq carries two WorkflowPropertiesModified
    # Two attempts and the park's signal-with-start activity (no DLQ ran yet); JobStatus
    # dead, then scheduled again on the requeue; the requeue signal.
    assert tally(recorded("r1-dlq.json")) == Counter(start=1, upsert=2, activity=3, signal=1)


# -- synthetic histories: each rule alone -------------------------------------------------------


def test_a_continue_as_new_run_is_a_start() -> None:
    assert tally([started(continued_execution_run_id="old")]) == Counter(start=1)


def test_a_run_started_by_a_schedule_carries_the_schedules_two_actions() -> None:
    fields = SearchAttributes(indexed_fields={"TemporalScheduledById": Payload(data=b'"s"')})
    first = started(search_attributes=fields, first_execution_run_id="a")
    first.workflow_execution_started_event_attributes.original_execution_run_id = "a"
    assert tally([first]) == Counter(start=1, schedule=2)
    # its continue-as-new runs carry the attribute too, but the Schedule started only the first
    later = started(search_attributes=fields, first_execution_run_id="a")
    later.workflow_execution_started_event_attributes.original_execution_run_id = "b"
    assert tally([later]) == Counter(start=1)


def test_a_workflow_retry_is_not_a_new_start() -> None:
    assert tally([started(attempt=2)]) == Counter()


def test_a_childs_own_start_is_not_billed_again() -> None:
    child = started(parent_workflow_execution=WorkflowExecution(workflow_id="p", run_id="r"))
    assert tally([child]) == Counter()


@pytest.mark.parametrize(
    ("delayed", "gap", "expected"),
    [
        (False, 0.0, Counter(start=1)),  # signal-with-start
        (True, 0.0, Counter(start=1)),  # signal-with-start with a start delay
        (True, 5.0, Counter(start=1, signal=1)),  # a plain signal woke a delayed start
    ],
)
def test_a_signal_right_behind_the_start(delayed: bool, gap: float, expected: Counter[str]) -> None:
    first = started(first_workflow_task_backoff=Duration(seconds=30)) if delayed else started()
    signal = event(2, E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, gap)
    assert tally([first, signal]) == expected


def test_the_senders_side_of_a_signal_is_free() -> None:
    events = [
        started(),
        event(2, E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
        event(3, E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED),
        event(4, E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED),
    ]
    assert tally(events) == Counter(start=1)


def test_timers_updates_and_options_updates_are_one_each() -> None:
    events = [
        started(),
        event(2, E.EVENT_TYPE_TIMER_STARTED),
        event(3, E.EVENT_TYPE_TIMER_CANCELED),
        event(4, E.EVENT_TYPE_TIMER_STARTED),
        event(5, E.EVENT_TYPE_TIMER_FIRED),
        event(6, E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED),
        event(7, E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED),
        event(8, E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED),
        event(9, E.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED),
    ]
    assert tally(events) == Counter(start=1, timer=2, update=2, options=1)


def test_an_upsert_is_one_however_many_attributes_but_a_change_version_alone_is_free() -> None:
    events = [
        started(),
        upsert(2, "JobStatus", "JobRunAt"),
        upsert(3, "TemporalChangeVersion"),
        upsert(4, "TemporalChangeVersion", "JobStatus"),
    ]
    assert tally(events) == Counter(start=1, upsert=2)


def test_patch_markers_are_free_other_markers_one_per_workflow_task() -> None:
    events = [
        started(),
        marker(3, "core_patch", task=2),
        marker(6, "Version", task=5),
        marker(7, "core_local_activity", task=4),
        marker(8, "core_local_activity", task=4),
        marker(12, "core_local_activity", task=10),
        marker(13, "SideEffect", task=10),
    ]
    assert tally(events) == Counter(start=1, marker=2)


def test_local_activity_retries_come_from_the_workflow_tasks_metering() -> None:
    def task_done(event_id: int, retries: int) -> HistoryEvent:
        attrs = WorkflowTaskCompletedEventAttributes(
            metering_metadata=MeteringMetadata(nonfirst_local_activity_execution_attempts=retries)
        )
        kind = E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        return event(event_id, kind, workflow_task_completed_event_attributes=attrs)

    assert tally([started(), task_done(4, 3), task_done(8, 0), task_done(12, 250)]) == Counter(
        start=1, marker=103
    )


def test_a_reset_is_one_action() -> None:
    def task_failed(event_id: int, cause: WorkflowTaskFailedCause.ValueType) -> HistoryEvent:
        attrs = WorkflowTaskFailedEventAttributes(cause=cause)
        kind = E.EVENT_TYPE_WORKFLOW_TASK_FAILED
        return event(event_id, kind, workflow_task_failed_event_attributes=attrs)

    reset = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
    failed = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE
    assert tally([started(), task_failed(4, failed), task_failed(8, reset)]) == Counter(
        start=1, reset=1
    )


def test_a_scheduled_activity_counts_once_and_its_retries_on_its_started_event() -> None:
    def attempt(event_id: int, number: int) -> HistoryEvent:
        attrs = ActivityTaskStartedEventAttributes(attempt=number)
        kind = E.EVENT_TYPE_ACTIVITY_TASK_STARTED
        return event(event_id, kind, activity_task_started_event_attributes=attrs)

    events = [
        started(),
        event(2, E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
        attempt(3, 1),
        event(4, E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
        attempt(5, 4),
    ]
    assert tally(events) == Counter(start=1, activity=5)


def test_a_window_counts_only_its_own_events() -> None:
    events = [
        started(0),
        event(2, E.EVENT_TYPE_TIMER_STARTED, 10),
        event(3, E.EVENT_TYPE_TIMER_STARTED, 20),
        event(4, E.EVENT_TYPE_TIMER_STARTED, 30),
    ]
    since, until = T0 + timedelta(seconds=10), T0 + timedelta(seconds=30)
    assert tally(events, since, until) == Counter(timer=2)  # [since, until)
    # a signal-with-start outside the window is still recognised as one
    signal = event(2, E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, 0)
    assert tally([started(0), signal], since, until) == Counter()


# -- the dev server's metrics ----------------------------------------------------------------

METRICS = """\
# HELP service_requests service_requests counter
# TYPE service_requests counter
service_requests{namespace="default",operation="RecordActivityTaskHeartbeat",service_name="frontend"} 3
service_requests{namespace="default",operation="RecordActivityTaskHeartbeat",service_name="history"} 3
service_requests{namespace="default",operation="RecordActivityTaskHeartbeatById",service_name="frontend"} 2
service_requests{namespace="other",operation="RecordActivityTaskHeartbeat",service_name="frontend"} 7
service_requests{namespace="default",operation="QueryWorkflow",service_name="frontend"} 4
client_requests{namespace="default",operation="HistoryClientRecordActivityTaskHeartbeat",service_name="frontend"} 9
action{action_type="grpc_StartWorkflowExecution",namespace="default",operation="StartWorkflowExecution",service_name="frontend"} 1
action{action_type="grpc_StartWorkflowExecution",namespace="temporal_system",operation="StartWorkflowExecution",service_name="frontend"} 2
action{action_type="grpc_RecordActivityTaskHeartbeat",namespace="default",operation="RecordActivityTaskHeartbeat",service_name="frontend"} 5
task_requests{namespace="default",operation="VisibilityTaskStartExecution",service_name="history"} 4
task_requests{namespace="default",operation="VisibilityTaskUpsertExecution",service_name="history"} 1
task_requests{namespace="temporal_system",operation="VisibilityTaskStartExecution",service_name="history"} 2
task_requests{namespace="default",operation="TransferActivityTask",service_name="history"} 8
task_requests{namespace="default",operation="TransferActiveTaskWorkflowTask",service_name="history"} 3
task_requests{namespace="temporal_system",operation="TransferActiveTaskWorkflowTask",service_name="history"} 9
persistence_requests{operation="GetCurrentClusterMetadata",service_name="history"} 7
persistence_requests{operation="GetCurrentClusterMetadata",service_name="frontend"} 2
persistence_requests{namespace="default",operation="GetWorkflowExecution",service_name="history"} 6
"""  # noqa: E501


def test_heartbeats_and_queries_are_the_frontends_requests_in_our_namespace() -> None:
    got = reading(METRICS, T0)
    assert (got.heartbeats, got.queries, got.server_actions) == (5, 4, 6)


def test_visibility_writes_are_the_visibility_tasks_in_our_namespace() -> None:
    assert reading(METRICS, T0).visibility_writes == 5


def test_dispatches_are_our_namespaces_and_definition_reads_every_services() -> None:
    got = reading(METRICS, T0)
    assert (got.workflow_task_dispatches, got.search_attribute_reads) == (3, 9)
