"""``jobctl limits``: every rate key and concurrency key in use, with its limit, recent
starts, waiting jobs and the earliest next start."""

from __future__ import annotations

import click

from jobctl.starter import operations, render
from jobctl.starter.cli.common import emit, json_option, run
from jobctl.workflows.textclip import ellipsize


def row(info: operations.LimitInfo) -> list[str]:
    if info.error is not None:
        return [info.kind, ellipsize(info.key, 40), "-", "-", "-", f"no answer: {info.error}"]
    if info.kind == "rate":
        recent, next_start = str(info.recent_starts), render.when(info.next_start)
    else:
        recent, next_start = f"{info.running} running", "-"
    return [
        info.kind,
        ellipsize(info.key, 40),
        info.limit or "-",
        recent,
        str(info.waiting),
        next_start,
    ]


@click.command()
@json_option
def limits(as_json: bool) -> None:
    """Rate and concurrency keys in use: limit, starts in the last minute, waiting jobs."""
    listing = run(operations.list_limits)
    if as_json:
        emit(listing)
        return
    if not listing.limits:
        click.echo("no rate or concurrency key in use (a key's limiter ends after 10 idle minutes)")
        return
    headers = ["kind", "key", "limit", "last minute", "waiting", "earliest next start"]
    click.echo(render.table(headers, [row(info) for info in listing.limits]))
