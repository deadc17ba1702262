"""A control sent to a job that closes between our describe and the update: the answer says the
job has finished, not that it never existed. The refusals are the server's own words (the
NOT_FOUND one was seen in CI, when a job finished right after a resume)."""

from __future__ import annotations

import pytest
from temporalio.service import RPCError, RPCStatusCode

from jobctl.starter.errors import InvalidTransition
from jobctl.starter.operations.controls import _control


def refused(message: str, status: RPCStatusCode) -> RPCError:
    return RPCError(message, status, b"")


@pytest.mark.parametrize(
    "err",
    [
        refused("update 505ac64c-f75e-4ff0-a1b9-a5d05645e693 not found", RPCStatusCode.NOT_FOUND),
        refused("workflow execution already completed", RPCStatusCode.NOT_FOUND),
        refused("Workflow execution already completed", RPCStatusCode.FAILED_PRECONDITION),
    ],
    ids=["update-not-found", "completed-not-found", "completed-precondition"],
)
async def test_a_job_that_closed_during_the_update_has_finished(err: RPCError) -> None:
    async def call() -> None:
        raise err

    with pytest.raises(InvalidTransition, match=r"cannot resume: job 'j-1' has finished"):
        await _control("j-1", "resume", call)


async def test_other_refusals_are_not_taken_for_a_finished_job() -> None:
    async def call() -> None:
        raise refused("not allowed", RPCStatusCode.PERMISSION_DENIED)

    with pytest.raises(RPCError, match="not allowed"):
        await _control("j-1", "resume", call)


async def test_an_answered_control_returns_its_answer() -> None:
    async def call() -> str:
        return "report"

    assert await _control("j-1", "resume", call) == "report"
