"""Upgrade safety: today's workflow code must replay the recorded histories of every workflow
type (tests/histories, made by ``python -m tests.record_histories``). A change that would
break workflows already running fails here, not in production."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from jobctl.worker import WORKFLOWS, sandbox_runner
from tests.changed_workflow import ChangedJobWorkflow

pytestmark = pytest.mark.drill

HISTORIES = sorted((Path(__file__).resolve().parent / "histories").glob("*.json"))


def load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def workflow_type(path: Path) -> str:
    first = json.loads(path.read_text())["events"][0]
    return str(first["workflowExecutionStartedEventAttributes"]["workflowType"]["name"])


def replayer(*workflows: type) -> Replayer:
    return Replayer(
        workflows=list(workflows),
        data_converter=pydantic_data_converter,
        workflow_runner=sandbox_runner(),
    )


def test_histories_cover_every_workflow_type() -> None:
    covered = {workflow_type(path) for path in HISTORIES}
    assert covered == {defn.__temporal_workflow_definition.name for defn in WORKFLOWS}  # type: ignore[attr-defined]
    assert any(
        json.loads(p.read_text())["events"][-1]["eventType"]
        == "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
        for p in HISTORIES
    )


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_current_code_replays_the_recorded_history(path: Path) -> None:
    result = await replayer(*WORKFLOWS).replay_workflow(load(path), raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.stem}: {result.replay_failure}"


async def test_an_incompatible_change_is_caught() -> None:
    path = next(p for p in HISTORIES if p.stem == "r1-retries")
    result = await replayer(ChangedJobWorkflow).replay_workflow(
        load(path), raise_on_replay_failure=False
    )
    assert result.replay_failure is not None
    assert "nondetermin" in str(result.replay_failure).lower()
