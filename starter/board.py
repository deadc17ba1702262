"""The live job board: ``GET /`` serves one page (plain HTML, CSS and JS shipped in
``starter/board_static``, no CDN, no build step) that polls ``GET /board`` about once a second.

One refresh never lists every workflow. Each column is one visibility count plus one page of
its 50 newest workflows (the count is skipped when that page is the whole column), on the
search attributes every job carries (``JobStatus``, ``JobRunAt``); ``now`` is the API's clock:

=============  ===========================================================================
scheduled      open, and ``paused``; or ``scheduled`` with ``JobRunAt`` after now - 2 s; or
               ``running`` with ``JobRunAt`` after now (pre-dispatched: waiting in a worker)
pending        open, ``scheduled`` with ``JobRunAt`` at or before now - 2 s (due, and no
               worker has taken its first workflow task), plus in-flight jobs (below) whose
               attempt waits in the task queue
running        in flight: open, ``running`` with ``JobRunAt`` at or before now; refined by
retrying       ``describe`` of the 50 newest only (8 at a time): attempt started = running,
               attempt > 1 waiting for its backoff = retrying, otherwise pending
dead           open and ``dead`` (parked; the card comes from the DLQ entry in the memo)
done           ``done`` (the newest closed first)
=============  ===========================================================================

``JobStatus`` has no pending, running and retrying of its own (the workflow says ``running``
once the job is due and its attempt is with Temporal; the activity's state says the rest),
so those three counts are exact only when every in-flight job was described
(``exact: false`` otherwise: each count is then a lower bound, out of ``in_flight``).

Successive refreshes within ``JOBS_BOARD_TTL`` seconds (default 1) share one snapshot,
so ten open tabs cost the server what one does. The event log is derived in the browser by
diffing successive snapshots (``board.js``), only for the cards shown.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, Field
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from starter.errors import JobNotFound
from starter.operations import CRON_WORKFLOW, cancel_requested, temporal_errors
from workflows.job_workflow import RESERVE_ATTEMPTS, RUN_JOB
from workflows.models import (
    DLQ_MEMO_KEY,
    JOB_HANDLER,
    JOB_NAME,
    JOB_RUN_AT,
    JOB_STATUS,
    DeadEntry,
    HeartbeatState,
)

STATIC = Path(__file__).resolve().parent / "board_static"
ASSETS = {"board.js": "text/javascript", "board.css": "text/css"}
# No data in these: the page and its assets load without a token; /board itself needs one.
PUBLIC_PATHS = {"/", *(f"/board/{name}" for name in ASSETS)}
UI_URL_ENV = "JOBS_UI_URL"
DEFAULT_UI_URL = "http://localhost:8233"
TTL_ENV = "JOBS_BOARD_TTL"
DEFAULT_TTL = 1.0
CARDS = 50  # per column
DESCRIBE_CONCURRENCY = 8
# A cron's JobRunAt moves to its next slot a moment after each slot fires: not "pending" yet.
DUE_GRACE = timedelta(seconds=2)
MAX_ERROR = 300
NO_CACHE = {"Cache-Control": "no-cache"}

Column = Literal["scheduled", "pending", "running", "retrying", "dead", "done"]
COLUMNS: tuple[Column, ...] = ("scheduled", "pending", "running", "retrying", "dead", "done")
T = TypeVar("T")


class Card(BaseModel):
    """One job on the board. Absent fields are unknown or do not apply to its column."""

    job_id: str
    kind: Literal["job", "cron"]
    name: str
    handler: str
    status: str = Field(description="the JobStatus search attribute (coarse)")
    run_at: datetime | None = Field(None, description="run time; a cron's next slot")
    started_at: datetime | None = Field(None, description="when the workflow started")
    closed_at: datetime | None = None
    paused: bool = False
    with_worker: bool = Field(False, description="pre-dispatched: waiting in a worker for run_at")
    attempt: int | None = Field(None, description="the attempt running, or due next")
    max_attempts: int | None = None
    round: int | None = None
    next_attempt_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    lease: float | None = Field(None, description="heartbeat timeout, seconds")
    heartbeat_late: bool = False
    worker: str | None = None
    progress: Any = None
    cancelling: bool = Field(False, description="a cancel was accepted; not settled yet")
    cancel_within: float | None = Field(
        None, description="cancelling: reaches the running handler within this (seconds)"
    )
    last_error: str | None = None
    parked_at: datetime | None = None


class BoardColumn(BaseModel):
    count: int
    exact: bool = True
    cards: list[Card]


class Cost(BaseModel):
    rpcs: int = Field(description="Temporal RPCs this snapshot took")
    described: int
    ms: float
    cached: bool = False


class Board(BaseModel):
    at: datetime = Field(description="the snapshot's time (the API's clock)")
    namespace: str
    web_ui: str = Field(description="Temporal Web UI base: cards link to web_ui/namespaces/...")
    limit: int
    in_flight: int = Field(description="jobs due and with Temporal (pending+running+retrying)")
    columns: dict[Column, BoardColumn]
    cost: Cost


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def queries(now: datetime) -> dict[str, str]:
    """The visibility queries of one snapshot (see the module docstring)."""
    opened = 'ExecutionStatus = "Running"'
    grace = _iso(now - DUE_GRACE)
    at = _iso(now)
    return {
        "scheduled": f'{opened} AND (JobStatus = "paused" OR (JobStatus = "scheduled" AND '
        f'JobRunAt > "{grace}") OR (JobStatus = "running" AND JobRunAt > "{at}"))',
        "pending": f'{opened} AND JobStatus = "scheduled" AND JobRunAt <= "{grace}"',
        "in_flight": f'{opened} AND JobStatus = "running" AND JobRunAt <= "{at}"',
        "dead": f'{opened} AND JobStatus = "dead"',
        "done": 'JobStatus = "done"',
    }


class Snapshot:
    """One refresh: counts its own RPCs."""

    def __init__(self, client: Client, now: datetime):
        self.client = client
        self.now = now
        self.rpcs = 0
        self.described = 0
        self.gate = asyncio.Semaphore(DESCRIBE_CONCURRENCY)

    async def rpc(self, call: Awaitable[T]) -> T:
        self.rpcs += 1
        return await call

    async def page(self, query: str) -> tuple[list[WorkflowExecution], bool]:
        """The newest CARDS workflows matching ``query``, and whether there are more."""
        it = self.client.list_workflows(query, page_size=CARDS)
        await self.rpc(it.fetch_next_page(page_size=CARDS))
        return list(it.current_page or []), bool(it.next_page_token)

    async def count(self, query: str, rows: list[WorkflowExecution], more: bool) -> int:
        if not more:  # the page was the whole column: no count needed
            return len(rows)
        return (await self.rpc(self.client.count_workflows(query))).count

    async def build(self) -> Board:
        started = time.perf_counter()
        qs = queries(self.now)
        names = list(qs)
        async with temporal_errors():
            found = await asyncio.gather(*(self.page(qs[name]) for name in names))
            pages = dict(zip(names, found, strict=True))
            counted, described = await asyncio.gather(
                asyncio.gather(*(self.count(qs[name], *pages[name]) for name in names)),
                asyncio.gather(*(self.in_flight(wf) for wf in pages["in_flight"][0])),
            )
        counts = dict(zip(names, counted, strict=True))
        flying = [card for card in described if card is not None]
        columns: dict[Column, BoardColumn] = {}
        columns["scheduled"] = BoardColumn(
            count=counts["scheduled"],
            cards=sorted(
                [self.visible(wf) for wf in pages["scheduled"][0]],
                key=lambda c: c.run_at or self.now,
            ),
        )
        every_flight_described = counts["in_flight"] <= len(pages["in_flight"][0])
        unwoken = [self.visible(wf) for wf in pages["pending"][0]]
        split: dict[Column, list[Card]] = {"pending": [], "running": [], "retrying": []}
        for column, card in flying:
            split[column].append(card)
        columns["pending"] = BoardColumn(
            count=counts["pending"] + len(split["pending"]),
            exact=every_flight_described,
            cards=sorted(unwoken + split["pending"], key=lambda c: c.run_at or self.now)[:CARDS],
        )
        columns["running"] = BoardColumn(
            count=len(split["running"]), exact=every_flight_described, cards=split["running"]
        )
        columns["retrying"] = BoardColumn(
            count=len(split["retrying"]),
            exact=every_flight_described,
            cards=sorted(split["retrying"], key=lambda c: c.next_attempt_at or self.now),
        )
        dead = [await self.dead(wf) for wf in pages["dead"][0]]
        columns["dead"] = BoardColumn(
            count=counts["dead"], cards=sorted(dead, key=lambda c: c.parked_at or self.now)[::-1]
        )
        done = [self.visible(wf) for wf in pages["done"][0]]
        columns["done"] = BoardColumn(
            count=counts["done"],
            cards=sorted(done, key=lambda c: c.closed_at or self.now, reverse=True),
        )
        return Board(
            at=self.now,
            namespace=self.client.namespace,
            web_ui=os.environ.get(UI_URL_ENV, DEFAULT_UI_URL).rstrip("/"),
            limit=CARDS,
            in_flight=counts["in_flight"],
            columns=columns,
            cost=Cost(
                rpcs=self.rpcs,
                described=self.described,
                ms=round((time.perf_counter() - started) * 1000, 1),
            ),
        )

    def visible(self, wf: WorkflowExecution) -> Card:
        """A card from the visibility row alone (no RPC)."""
        attrs = wf.typed_search_attributes
        status = attrs.get(JOB_STATUS) or "scheduled"
        run_at = attrs.get(JOB_RUN_AT)
        return Card(
            job_id=wf.id,
            kind="cron" if wf.workflow_type == CRON_WORKFLOW else "job",
            name=attrs.get(JOB_NAME) or wf.id,
            handler=attrs.get(JOB_HANDLER) or "",
            status=status,
            run_at=run_at,
            started_at=wf.start_time,
            closed_at=wf.close_time,
            paused=status == "paused",
            with_worker=status == "running" and run_at is not None and run_at > self.now,
        )

    async def dead(self, wf: WorkflowExecution) -> Card:
        card = self.visible(wf)
        memo = await wf.memo()  # decoded locally: no RPC
        if DLQ_MEMO_KEY in memo:
            entry = DeadEntry.model_validate(memo[DLQ_MEMO_KEY])
            card = card.model_copy(
                update={
                    "attempt": entry.attempts,
                    "round": entry.round,
                    "last_error": _clip(entry.last_error),
                    "parked_at": entry.parked_at,
                }
            )
        return card

    async def in_flight(self, wf: WorkflowExecution) -> tuple[Column, Card] | None:
        """Describe one in-flight job: which column, attempt, heartbeat, next attempt."""
        card = self.visible(wf)
        self.described += 1
        handle = self.client.get_workflow_handle(wf.id, run_id=wf.run_id)
        try:
            async with self.gate:
                desc = await self.rpc(handle.describe())
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None  # deleted meanwhile
            raise
        if desc.status != WorkflowExecutionStatus.RUNNING:
            return None  # finished meanwhile: next snapshot shows it where it landed
        activities = [
            a for a in desc.raw_description.pending_activities if a.activity_type.name == RUN_JOB
        ]
        if cancel_requested(desc):
            card = card.model_copy(update={"cancelling": True})
        if not activities:  # between attempts: a workflow task waits for a worker
            return "pending", card
        activity = activities[0]
        update: dict[str, Any] = {
            "attempt": activity.attempt,
            "max_attempts": (
                activity.maximum_attempts - RESERVE_ATTEMPTS
                if activity.maximum_attempts > RESERVE_ATTEMPTS
                else None
            ),
            "worker": activity.last_worker_identity or None,
        }
        if activity.HasField("last_failure") and activity.last_failure.message:
            update["last_error"] = _clip(activity.last_failure.message)
        options = activity.activity_options
        if options.HasField("heartbeat_timeout"):
            update["lease"] = options.heartbeat_timeout.ToTimedelta().total_seconds()
        column: Column
        if activity.state in (
            PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
            PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED,
        ):
            column = "running"
            if activity.HasField("last_heartbeat_time"):
                beat = activity.last_heartbeat_time.ToDatetime(UTC)
                update["last_heartbeat_at"] = beat
                lease = update.get("lease")
                update["heartbeat_late"] = bool(lease and (self.now - beat).total_seconds() > lease)
            state = await self.beat(activity.heartbeat_details.payloads)
            if state is not None:
                update["progress"] = state.progress
                running = bool(state.attempts) and state.attempts[-1].outcome == "running"
                if card.cancelling and running:
                    update["cancel_within"] = state.cancel_within
        else:
            next_at = (
                activity.next_attempt_schedule_time.ToDatetime(UTC)
                if activity.HasField("next_attempt_schedule_time")
                else None
            )
            update["next_attempt_at"] = next_at
            waiting = activity.attempt > 1 and next_at is not None and next_at > self.now
            column = "retrying" if waiting else "pending"
            update["worker"] = None
        return column, card.model_copy(update=update)

    async def beat(self, payloads: Any) -> HeartbeatState | None:
        """The attempt's last heartbeat details (what the handler last reported with
        ``ctx.report_progress``, ...), decoded locally."""
        if not payloads:
            return None
        try:
            [state] = await self.client.data_converter.decode(list(payloads[:1]), [HeartbeatState])
        except Exception:  # a payload this API cannot decode: no progress shown
            return None
        return state if isinstance(state, HeartbeatState) else None


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_ERROR:
        return text
    return text[: MAX_ERROR - 1] + "…"


class BoardCache:
    """Single flight: concurrent requests share one snapshot, reused for ``ttl`` seconds."""

    def __init__(self, client: Callable[[], Awaitable[Client]], ttl: float):
        self.client = client
        self.ttl = ttl
        self.board: tuple[float, Board] | None = None
        self.building: asyncio.Task[Board] | None = None

    async def get(self) -> Board:
        if self.board is not None and time.monotonic() - self.board[0] < self.ttl:
            cached = self.board[1]
            return cached.model_copy(
                update={"cost": cached.cost.model_copy(update={"cached": True})}
            )
        if self.building is None:
            self.building = asyncio.ensure_future(self._build())
            self.building.add_done_callback(self._built)
        return await asyncio.shield(self.building)

    def _built(self, task: asyncio.Task[Board]) -> None:
        if self.building is task:
            self.building = None

    async def _build(self) -> Board:
        board = await Snapshot(await self.client(), datetime.now(UTC)).build()
        self.board = (time.monotonic(), board)
        return board


def board_ttl() -> float:
    raw = os.environ.get(TTL_ENV)
    return float(raw) if raw else DEFAULT_TTL


def install(app: FastAPI, client: Callable[[], Awaitable[Client]]) -> None:
    """Add ``GET /`` (the page), ``GET /board/{asset}`` and ``GET /board`` (the data)."""
    cache = BoardCache(client, board_ttl())

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers=NO_CACHE)

    @app.get("/board", response_model=Board, response_model_exclude_none=True)
    async def board(request: Request) -> Response:
        """The job board: per column a count and the 50 newest cards (see the README)."""
        snapshot = await cache.get()
        body = snapshot.model_dump_json(exclude_none=True, exclude_defaults=False).encode()
        headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", "") and len(body) > 1024:
            headers["Content-Encoding"] = "gzip"
            body = gzip.compress(body, compresslevel=5)
        return Response(body, media_type="application/json", headers=headers)

    @app.get("/board/{asset}", include_in_schema=False)
    async def asset(asset: str) -> FileResponse:
        if asset not in ASSETS:
            raise JobNotFound(f"no board asset {asset!r}")
        return FileResponse(STATIC / asset, media_type=ASSETS[asset], headers=NO_CACHE)
