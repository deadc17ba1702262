"""What every ``jobs`` command shares: connecting, printing, the common options and the
caller's name for the audit trail."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from temporalio.client import Client

from jobctl.connection.client import connect
from jobctl.starter import operations, render

T = TypeVar("T")


def run(work: Callable[[Client], Awaitable[T]]) -> T:
    """Connect and run one operation."""

    async def go() -> T:
        return await work(await connect())

    return asyncio.run(go())


def emit(data: Any) -> None:
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    click.echo(json.dumps(data, indent=2, default=str))


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def note_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--note", help="Why: kept in the job's audit trail with who (cli:<user>) and when."
    )(fn)


def cli_actor() -> str:
    """Who acts, for the audit trail: ``cli:<OS user>``."""
    return operations.local_actor("cli")


def not_reserved(ctx: click.Context, param: click.Parameter, job_id: str | None) -> str | None:
    """A system workflow's id is refused (exit 2) before connecting to Temporal."""
    if job_id is not None:
        operations.check_not_reserved(job_id)
    return job_id


job_id_argument = click.argument("job_id", callback=not_reserved)


def show_page(
    page: BaseModel, headers: list[str], rows: list[list[str]], as_json: bool, command: str
) -> None:
    """One page of a listing: JSON as is, or a table and how to get the next page."""
    if as_json:
        emit(page)
        return
    click.echo(render.table(headers, rows))
    token = getattr(page, "next_page_token", None)
    if token:
        click.echo(f"more: {command} --page-token {token}")


def control(verb: str, call: Callable[[Client], Awaitable[Any]], as_json: bool) -> None:
    result = run(call)
    if as_json:
        emit(result if result is not None else {"ok": True})
    else:
        click.echo(verb)
