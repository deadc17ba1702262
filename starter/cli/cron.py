"""``jobs cron preview`` and ``jobs update`` (a cron's expression, zone or overlap)."""

from __future__ import annotations

import click

from starter import operations, render
from starter.cli.common import cli_actor, control, emit, job_id_argument, json_option, note_option


@click.group()
def cron() -> None:
    """Cron expressions: 5 fields, or 6 with seconds first."""


@cron.command()
@click.argument("expression")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone.")
@click.option("--after", help="Start after this ISO-8601 time with offset (default: now).")
@click.option("-n", "count", default=5, show_default=True, type=click.IntRange(1, 1000))
@json_option
def preview(expression: str, tz: str, after: str | None, count: int, as_json: bool) -> None:
    """The next slots of EXPRESSION, local and UTC, under our DST rules. Schedules nothing."""
    slots = operations.preview_cron(expression, tz, after, count)
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
