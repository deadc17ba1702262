"""``read_attempt_log``: the round's attempt log as the server holds it right now.

A job's attempt log rides in the heartbeat details of its ``run_job`` activity, which Temporal
keeps on the pending activity between attempts. Cancelling that activity while it waits out a
retry backoff (no attempt running) ends it at once and without any details, so
:class:`~workflows.job_workflow.JobWorkflow` reads the log first, with this local activity:
one ``DescribeWorkflowExecution`` of its own run, the pending activity's heartbeat details
decoded with the client's data converter. It runs only on the cancel path (one local
activity: one billable action), never for a job that is not cancelled.
"""

from __future__ import annotations

from temporalio import activity

from jobctl.workflows import names
from jobctl.workflows.models import HeartbeatState


@activity.defn(name=names.READ_ATTEMPT_LOG)
async def read_attempt_log(activity_id: str) -> HeartbeatState | None:
    """The heartbeat details of this workflow run's pending activity ``activity_id``, or None
    when it has none (no attempt has heartbeated yet, or the activity is gone)."""
    info = activity.info()
    client = activity.client()
    assert info.workflow_id is not None  # a local activity always runs for a workflow
    handle = client.get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
    desc = await handle.describe()
    for pending in desc.raw_description.pending_activities:
        if pending.activity_id == activity_id and pending.heartbeat_details.payloads:
            payloads = pending.heartbeat_details.payloads
            decoded = await client.data_converter.decode(payloads[:1], [HeartbeatState])
            state = decoded[0]
            return state if isinstance(state, HeartbeatState) else None
    return None
