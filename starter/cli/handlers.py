"""``jobctl handlers``: the handlers a job may use, their payloads and who serves them."""

from __future__ import annotations

from typing import Any

import click

from jobctl.starter import operations, render
from jobctl.starter.cli.common import emit, json_option, run
from jobctl.workflows.textclip import ellipsize

SHOWN_WORKERS = 3  # worker identities named in the table (--json has them all)


def payload_summary(schema: dict[str, Any] | None) -> str:
    """``ChargeRequest {amount*, customer*, note}`` (* required); ``any JSON object``."""
    if schema is None:
        return "any JSON object"
    properties = schema.get("properties")
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    fields = sorted(properties) if isinstance(properties, dict) else []
    shown = ", ".join(f"{name}*" if name in required else name for name in fields)
    title = schema.get("title") if isinstance(schema.get("title"), str) else "object"
    return ellipsize(f"{title} {{{shown}}}", 80)


def workers_summary(workers: list[str]) -> str:
    if not workers:
        return "-"
    more = len(workers) - SHOWN_WORKERS
    return ", ".join(workers[:SHOWN_WORKERS]) + (f" (+{more})" if more > 0 else "")


def live_summary(entry: operations.HandlerInfo) -> str:
    """Who serves the handler on this task queue now (``since`` they published), or
    ``none live`` and who published it: its jobs wait for a worker."""
    if not entry.live:
        published = f" (published by {workers_summary(entry.workers)})" if entry.workers else ""
        return "none live" + published
    named = [
        f"{w.worker} since {render.when(w.since)}" if w.since is not None else w.worker
        for w in entry.live
    ]
    return workers_summary(named)


@click.command()
@json_option
def handlers(as_json: bool) -> None:
    """Handlers a job may use: names, payloads (* required) and who serves them now."""
    listing = run(operations.handler_listing)
    if as_json:
        emit(listing)
        return
    rows = [
        [
            entry.name + (" (built-in)" if entry.builtin else ""),
            payload_summary(entry.payload_schema),
            live_summary(entry),
        ]
        for entry in listing.handlers
    ]
    click.echo(render.table(["handler", "payload", "serving now"], rows))
