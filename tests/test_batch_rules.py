"""The batch's decisions without a server (workflows/batch_rules.py) and the door's checks
that need none (starter/operations/batch_check.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from jobctl.starter.errors import SpecError
from jobctl.starter.operations.batch_check import check_batch_request
from jobctl.workflows import batch_rules as rules
from jobctl.workflows import inbox
from jobctl.workflows.models.batch import (
    MAX_SUMMARY_BYTES,
    BatchCallback,
    BatchInput,
    BatchState,
)

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)
SPEC = {"name": "m", "handler": "log", "delay": 0}


def state(n: int, started: int | None = None) -> BatchState:
    return BatchState(
        members=[f"b.{i}" for i in range(n)], started=n if started is None else started
    )


def test_reports_settle_members_and_the_latest_report_counts() -> None:
    s = state(3)
    assert rules.accept_report(s, ({"job_id": "b.0", "status": "dead"},), set()) == ("b.0", "dead")
    rules.settle(s, "b.0", "dead")
    rules.settle(s, "b.1", "done")
    assert not rules.all_settled(s) and rules.succeeded(s) is None
    rules.settle(s, "b.0", "done")  # requeued, then done
    rules.settle(s, "b.2", "cancelled")
    assert rules.all_settled(s) and rules.counts(s)["done"] == 2 and rules.succeeded(s) is False
    assert rules.report("b", s).cancelled == ["b.2"] and rules.status_of(s) == "running"


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (({"job_id": "stranger", "status": "done"},), "no started member"),
        (({"job_id": "b.2", "status": "done"},), "no started member"),  # not started yet
        (({"job_id": "b.0", "status": "running"},), "not a settlement"),
        (({"job_id": "b.0"},), "status"),
        ((["b.0"],), "slot_finished"),
        ((), "exactly one argument"),
        (({"job_id": "b.0", "status": "done"}, 1), "exactly one argument"),
    ],
)
def test_hostile_reports_are_refused(args: tuple[object, ...], reason: str) -> None:
    with pytest.raises(inbox.Invalid, match=reason):
        rules.accept_report(state(3, started=2), args, set())


def test_a_callback_reports_itself_and_is_ignored() -> None:
    report = ({"job_id": "b.on_complete", "status": "done"},)
    assert rules.accept_report(state(1), report, {"b.on_complete"}) is None


def test_the_summary_stays_under_its_bound_and_says_truncated() -> None:
    s = BatchState(members=[f"{'x' * 180}.{i}" for i in range(1000)], started=1000)
    for job_id in s.members:
        rules.settle(s, job_id, "dead")
    summary = rules.summary("b", s)
    assert len(json.dumps(summary)) <= MAX_SUMMARY_BYTES and summary["truncated"] is True
    assert summary["counts"]["dead"] == 1000 and 0 < len(summary["dead"]) < 1000


def test_cancel_before_every_member_started_counts_the_rest_cancelled() -> None:
    s = state(4, started=1)
    rules.drop_unstarted(s)
    assert s.started == 4 and rules.counts(s)["cancelled"] == 3
    assert rules.unsettled_started(s) == ["b.0"]


def test_the_callback_spec_gets_the_summary_and_its_delay() -> None:
    callback = BatchCallback(
        spec={"id": "b.on_complete", "name": "cb", "handler": "log", "payload": {"k": 1}}, delay=60
    )
    raw = rules.callback_spec(callback, {"id": "b"}, NOW)
    assert raw["payload"] == {"k": 1, "batch": {"id": "b"}}
    assert raw["run_at"] == (NOW + timedelta(seconds=60)).isoformat()
    assert rules.check_member_spec(raw).id == "b.on_complete"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"batch_id": "a/b"}, "not a batch id"),
        ({"state": BatchState(members=[])}, "1-1000 members"),
        ({"state": BatchState(members=["a", "a"])}, "twice"),
        ({"pending": []}, "members\\[started:\\]"),
        ({"event_budget": 1}, "event_budget"),
        ({"on_complete": BatchCallback(spec={"id": "b.0"})}, "a member's"),
    ],
)
def test_a_hand_made_start_input_is_refused(change: dict[str, object], reason: str) -> None:
    good = BatchInput(
        batch_id="b",
        pending=[{**SPEC, "id": "b.0", "delay": None, "run_at": NOW.isoformat()}],
        state=BatchState(members=["b.0"]),
    )
    rules.check_start(good)
    with pytest.raises(inbox.Invalid, match=reason):
        rules.check_start(good.model_copy(update=change))


def test_the_door_lists_every_problem_at_once() -> None:
    batch = {"id": "b", "on_complete": {"name": "cb", "handler": "log", "run_at": "x"}, "x": 1}
    with pytest.raises(SpecError) as refused:
        check_batch_request(batch, [SPEC, {**SPEC, "id": "b.0"}, {**SPEC, "delay": -1}], NOW)
    fields = {field for field, _ in refused.value.problems}
    assert fields == {"batch.x", "batch.on_complete.run_at", "jobs[1].id", "jobs[2].delay"}


def test_the_door_fills_ids_and_keeps_a_callback_delay() -> None:
    batch = {"id": "b", "on_complete": {"name": "cb", "handler": "log", "delay": "5m"}}
    checked = check_batch_request(batch, [SPEC, {**SPEC, "id": "mine"}], NOW)
    assert [s.id for s in checked.members] == ["b.0", "mine"]
    assert checked.callbacks["on_complete"].delay == 300
    assert checked.callbacks["on_complete"].job_id == "b.on_complete"
    assert "run_at" not in checked.callbacks["on_complete"].spec
    again = check_batch_request(batch, [SPEC, {**SPEC, "id": "mine"}], NOW + timedelta(1))
    assert again.request == checked.request  # a retried identical request
