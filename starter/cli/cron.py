"""``jobctl cron preview``, ``jobctl cron backfill`` and ``jobs update`` (a cron's expression,
zone or overlap)."""

from __future__ import annotations

import click

from jobctl.starter import operations, render
from jobctl.starter.cli.common import (
    cli_actor,
    control,
    emit,
    job_id_argument,
    json_option,
    note_option,
    run,
)


@click.group()
def cron() -> None:
    """Cron expressions: 5 fields, or 6 with seconds first."""


@cron.command()
@click.argument("expression")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone.")
@click.option("--after", help="Start after this ISO-8601 time with offset (default: now).")
@click.option("-n", "count", default=5, show_default=True, type=click.IntRange(1, 1000))
@click.option(
    "--dst-gap",
    "gap",
    default="shift",
    show_default=True,
    help="A wall time a DST change skips: at the transition (shift) | not at all (skip).",
)
@click.option(
    "--dst-repeat",
    "repeat",
    help="A wall time a DST change repeats: first | last | both occurrences "
    "(default: first for fixed times, both when the hour field is every hour).",
)
@json_option
def preview(
    expression: str,
    tz: str,
    after: str | None,
    count: int,
    gap: str,
    repeat: str | None,
    as_json: bool,
) -> None:
    """The next slots of EXPRESSION, local and UTC, under a DST policy. Schedules nothing."""
    slots = operations.preview_cron(expression, tz, after, count, gap=gap, repeat=repeat)
    if as_json:
        emit([slot.model_dump() for slot in slots])
    else:
        click.echo(render.table([f"local ({tz})", "utc"], [[s.local, s.utc] for s in slots]))


@click.command()
@job_id_argument
@click.option("--cron", "expression", help="New cron expression.")
@click.option("--tz", help="New IANA time zone.")
@click.option("--overlap", type=click.Choice(["skip", "buffer_one", "allow_all", "cancel_other"]))
@note_option
@json_option
def update(
    job_id: str,
    expression: str | None,
    tz: str | None,
    overlap: str | None,
    note: str | None,
    as_json: bool,
) -> None:
    """Change a cron job's expression, zone or overlap policy."""
    change = operations.cron_update(expression, tz, overlap)
    operations.check_note(note)  # a bad note exits 2 before anything is sent
    control(
        f"updated {job_id}",
        lambda client: operations.update_cron(client, job_id, change, note, cli_actor()),
        as_json,
    )


@cron.command()
@job_id_argument
@click.option("--from", "start", required=True, help="Range start, ISO-8601 with offset.")
@click.option("--to", "end", required=True, help="Range end (included), not in the future.")
@click.option(
    "--overlap",
    type=click.Choice(["allow_all", "buffer_all"]),
    help="allow_all: start every slot at once; buffer_all: one after another. "
    "Default: allow_all for an allow_all cron, else buffer_all.",
)
@note_option
@json_option
def backfill(
    job_id: str, start: str, end: str, overlap: str | None, note: str | None, as_json: bool
) -> None:
    """Run every slot of cron JOB_ID in [--from, --to] that has no job yet: each slot's job
    has the slot's usual id, so a slot that already ran (or an earlier backfill ran) is not
    run again. At most 2,000 slots per backfill."""
    operations.backfill_request(start, end, overlap, note)  # a bad range exits 2 at once
    answer = run(
        lambda client: operations.backfill(client, job_id, start, end, overlap, note, cli_actor())
    )
    if as_json:
        emit(answer)
    elif answer.first is None or answer.last is None:
        click.echo(f"backfill of {job_id}: no slot in that range")
    else:
        click.echo(
            f"backfill of {job_id}: {answer.slots} slot(s) from {answer.first.isoformat()} "
            f"to {answer.last.isoformat()} queued ({answer.overlap}); slots that already "
            "have a job are recorded as duplicate"
        )
