"""One board snapshot (see :mod:`starter.board` for what each column holds) and the cache
that lets concurrent refreshes share it."""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from jobctl.starter import jobviews
from jobctl.starter.board.models import COLUMN_OF, COLUMNS, Board, BoardColumn, Card, Column, Cost
from jobctl.starter.operations import temporal_errors
from jobctl.starter.operations.listing import EPOCH, status_query
from jobctl.workflows import names
from jobctl.workflows.jobstatus import Facts, current_attempt, job_time, public_status
from jobctl.workflows.models import JOB_HANDLER, JOB_NAME, JOB_RUN_AT, DeadEntry, JobStatus
from jobctl.workflows.textclip import ellipsize

UI_URL_ENV = "JOBS_UI_URL"
DEFAULT_UI_URL = "http://localhost:8233"
TTL_ENV = "JOBS_BOARD_TTL"
DEFAULT_TTL = 1.0
CARDS = 50  # per column
DESCRIBE_CONCURRENCY = 8
MAX_ERROR = 300
ROUND_ID = re.compile(r"^round-(\d+)")
T = TypeVar("T")


def queries(now: datetime) -> dict[str, str]:
    """The visibility queries of one snapshot (see the module docstring)."""
    return {
        "scheduled": f"({status_query(JobStatus.SCHEDULED, now)}) OR "
        f"({status_query(JobStatus.PAUSED, now)})",
        "in_flight": status_query(JobStatus.RUNNING, now),
        "dead": status_query(JobStatus.DEAD, now),
        "done": status_query(JobStatus.DONE, now),
        "cancelled": f"({status_query(JobStatus.CANCELLED, now)}) OR "
        f"({status_query(JobStatus.DISCARDED, now)})",
    }


def _newest(cards: list[Card]) -> list[Card]:
    return sorted(cards, key=lambda c: c.run_at or c.started_at or EPOCH, reverse=True)


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
            dead = [await self.dead(wf) for wf in pages["dead"][0]]
        counts = dict(zip(names, counted, strict=True))
        flying: dict[Column, list[Card]] = {c: [] for c in COLUMNS}
        for placed in described:
            if placed is not None:
                flying[placed[0]].append(placed[1])
        exact = counts["in_flight"] <= len(pages["in_flight"][0])
        columns: dict[Column, BoardColumn] = {}
        columns["scheduled"] = await self.column(counts["scheduled"], pages["scheduled"][0])
        for name in ("pending", "running", "retrying"):
            columns[name] = BoardColumn(
                count=len(flying[name]), exact=exact, cards=_newest(flying[name])
            )
        columns["dead"] = BoardColumn(count=counts["dead"], cards=_newest(dead))
        columns["done"] = await self.column(counts["done"], pages["done"][0])
        columns["cancelled"] = await self.column(counts["cancelled"], pages["cancelled"][0])
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

    async def column(self, count: int, rows: list[WorkflowExecution]) -> BoardColumn:
        cards = [self.visible(wf, run_at=await jobviews.next_run(wf, self.now)) for wf in rows]
        return BoardColumn(count=count, cards=_newest(cards))

    def visible(
        self, wf: WorkflowExecution, facts: Facts | None = None, run_at: datetime | None = None
    ) -> Card:
        """A card from the visibility row (and the facts describe added, if any; ``run_at``
        when the row's JobRunAt is not the run time, as for a cron)."""
        attrs = wf.typed_search_attributes
        verdict = public_status(facts or jobviews.visible_facts(wf), self.now)
        return Card(
            job_id=wf.id,
            kind=jobviews.kind_of(wf.workflow_type),
            name=attrs.get(JOB_NAME) or wf.id,
            handler=attrs.get(JOB_HANDLER) or "",
            status=verdict.status,
            detail=verdict.detail,
            cancelling=verdict.status == JobStatus.CANCELLING,
            run_at=job_time(run_at or attrs.get(JOB_RUN_AT), wf.close_time),
            started_at=wf.start_time,
            closed_at=wf.close_time,
            next_attempt_at=verdict.next_attempt_at,
            last_error=_clip(verdict.last_error),
        )

    async def dead(self, wf: WorkflowExecution) -> Card:
        card = self.visible(wf)
        memo = await wf.memo()  # decoded locally: no RPC
        if names.MEMO_DLQ in memo:
            entry = DeadEntry.model_validate(memo[names.MEMO_DLQ])
            card = card.model_copy(
                update={
                    "attempts": entry.attempts,
                    "round": entry.round,
                    "last_error": _clip(entry.last_error),
                    "parked_at": entry.parked_at,
                }
            )
        return card

    async def in_flight(self, wf: WorkflowExecution) -> tuple[Column, Card] | None:
        """Describe one due job: its status by the rule, attempt, heartbeat, next attempt;
        its column is its status's (a cancelling one's: where it is until the cancel lands)."""
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
        beat = await jobviews.heartbeat(self.client, desc)
        facts = await jobviews.described_facts(self.client, desc, beat)
        card = self.visible(wf, facts)
        where = public_status(replace(facts, cancel_requested=False), self.now).status
        column = COLUMN_OF.get(where, "pending")
        activity = jobviews.run_job_activity(desc)
        if activity is None:
            return column, card
        update: dict[str, Any] = {"round": _round_of(activity.activity_id)}
        if card.status != JobStatus.PENDING or activity.attempt > 1:
            update["worker"] = activity.last_worker_identity or None
        records = beat.attempts if beat is not None else []
        budget = jobviews.round_budget(activity)
        if budget is not None and (records or update["round"] == 1):
            count = current_attempt(records, update["round"], budget)
            update["attempt"], update["attempt_label"] = count.number, count.label
        options = activity.activity_options
        if options.HasField("heartbeat_timeout"):
            update["lease"] = options.heartbeat_timeout.ToTimedelta().total_seconds()
        if card.status in (JobStatus.RUNNING, JobStatus.CANCELLING) and activity.HasField(
            "last_heartbeat_time"
        ):
            beat_at = activity.last_heartbeat_time.ToDatetime(UTC)
            update["last_heartbeat_at"] = beat_at
            lease = update.get("lease")
            update["heartbeat_late"] = bool(lease and (self.now - beat_at).total_seconds() > lease)
        if beat is not None and card.status in (JobStatus.RUNNING, JobStatus.CANCELLING):
            update["progress"] = beat.progress
            running = bool(beat.attempts) and beat.attempts[-1].outcome == "running"
            if card.status == JobStatus.CANCELLING and running:
                update["cancel_within"] = beat.cancel_within
        return column, card.model_copy(update=update)


def _round_of(activity_id: str) -> int:
    """The round an attempt belongs to: the job names its activity ``round-<n>[-<k>]``."""
    match = ROUND_ID.match(activity_id)
    return int(match.group(1)) if match else 1


def _clip(text: str | None) -> str | None:
    return None if text is None else ellipsize(text, MAX_ERROR)


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
