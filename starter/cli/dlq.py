"""``jobctl dlq``: the dead-letter queue (list, log, requeue, discard)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from jobctl.starter import dlq as dead_letters
from jobctl.starter import operations, render
from jobctl.starter.cli.common import (
    cli_actor,
    emit,
    json_option,
    not_reserved,
    note_option,
    run,
    show_page,
)


@click.group()
def dlq() -> None:
    """The dead-letter queue: jobs that used up their attempts, waiting for a human."""


@dlq.command(name="list")
@click.option("--handler", help="Only jobs of this handler.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--page-token", help="Continue from a previous page.")
@json_option
def dlq_list(handler: str | None, limit: int, page_token: str | None, as_json: bool) -> None:
    """Parked jobs, newest first (from the JobStatus="dead" visibility query)."""
    page = run(lambda client: dead_letters.list_dead(client, limit, page_token, handler))
    rows = [
        [e.job_id, e.name, str(e.attempts), render.when(e.parked_at), (e.last_error or "")[:80]]
        for e in page.entries
    ]
    show_page(
        page, ["id", "name", "attempts", "parked", "last error"], rows, as_json, "jobctl dlq list"
    )


@dlq.command(name="log")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@json_option
def dlq_log(limit: int, as_json: bool) -> None:
    """The DLQ's audit log: parks, requeues, discards, ignored requests, alerts."""
    lines = run(lambda client: dead_letters.audit_log(client, limit))
    if as_json:
        emit([line.model_dump(mode="json") for line in lines])
        return
    click.echo(
        render.table(
            ["at", "action", "job", "detail"],
            [[render.when(x.at), x.action, x.job_id, x.detail] for x in lines],
        )
    )


def release_command(action: dead_letters.Action) -> Callable[..., None]:
    def command(
        job_id: str | None, all_: bool, handler: str | None, note: str | None, as_json: bool
    ) -> None:
        if all_ == (job_id is not None):
            raise click.UsageError("give a job id or --all")
        if handler and not all_:
            raise click.UsageError("--handler goes with --all")
        operations.check_note(note)
        actor = cli_actor()
        if job_id is not None:
            run(lambda client: dead_letters.release(client, job_id, action, note, actor))
            result: dict[str, Any] = {"job_id": job_id, "action": action}
            text = f"{action} sent to {job_id}"
        else:
            count = run(
                lambda client: dead_letters.release_all(client, action, handler, note, actor)
            )
            result = {"action": action, "count": count}
            text = f"{action} sent to {count} dead job(s)"
        click.echo(json.dumps(result) if as_json else text)

    past = "requeued (fresh attempts)" if action == "requeue" else "discarded (dead for good)"
    command.__doc__ = f"Have one dead job, or all (--all [--handler H]), {past}."
    command = json_option(command)
    command = note_option(command)
    command = click.option("--handler", help="With --all: only this handler's jobs.")(command)
    command = click.option("--all", "all_", is_flag=True, help="Every dead job.")(command)
    command = click.argument("job_id", required=False, callback=not_reserved)(command)
    return command


dlq.command(name="requeue")(release_command("requeue"))
dlq.command(name="discard")(release_command("discard"))
