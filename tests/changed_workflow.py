"""A deliberately incompatible edit of ``JobWorkflow`` (a timer before the activity, without
versioning), for the replay test's negative control. Kept in its own module because the
workflow sandbox imports a workflow's whole module."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from jobctl.workflows.models import JobReport, JobSpec


@workflow.defn(name="JobWorkflow")
class ChangedJobWorkflow:
    @workflow.run
    async def run(self, spec: JobSpec) -> JobReport:
        await workflow.sleep(timedelta(seconds=1))
        raise AssertionError("replay should have failed before reaching here")
