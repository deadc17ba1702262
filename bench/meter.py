"""Metering a window of server work: billable actions, history events and workflow tasks.

A dev server with its Prometheus endpoint on a known port (``--metrics-port``). A window is
two readings of the server's counters (activity heartbeats that reached the frontend, queries
it answered, and the server's own ``action`` counter, for comparison); the histories of every
run that was open during the window are counted by bench.actions, only their events inside
the window. Run one case at a time: a window holds everything the server did meanwhile.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench import actions
from bench.common import Workers, side
from jobctl.starter.dev.devserver import DevServer, free_port

NAMESPACE = "default"
HEARTBEATS = {"RecordActivityTaskHeartbeat", "RecordActivityTaskHeartbeatById"}
QUERIES = {"QueryWorkflow"}
# The history service's visibility tasks, one visibility-store write each (start, upsert, close).
VISIBILITY_TASK = "VisibilityTask"
# The history service handing a workflow task to matching (every one but an eager start's).
WORKFLOW_TASK_DISPATCH = "TransferActiveTaskWorkflowTask"
# A read of the search attribute definitions from the database (cluster metadata).
SEARCH_ATTRIBUTE_READ = "GetCurrentClusterMetadata"
TASK_DONE = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
# One Prometheus text-format sample: name{labels} value (timestamps unused by the server).
SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass
class MeteredServer(DevServer):
    """The bench's dev server, with its metrics endpoint on a port we chose."""

    metrics_port: int = field(default_factory=free_port)

    def command(self) -> list[str]:
        return [*super().command(), "--metrics-port", str(self.metrics_port)]

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    async def heartbeats(self, settle: float = 2.0) -> float:
        """Heartbeat requests the frontend has answered so far in our namespace, once the
        count holds still for ``settle`` seconds (the server publishes counters periodically)."""
        return (await self.settled(settle)).heartbeats

    async def settled(self, settle: float = 2.0, visibility_at_least: float = 0.0) -> Reading:
        """A reading once heartbeats and visibility writes hold still for ``settle`` seconds
        (visibility tasks run after the change that made them) and the visibility writes have
        reached ``visibility_at_least``."""
        last = None
        async with asyncio.timeout(60):
            while True:
                got = await read(self)
                counts = (got.heartbeats, got.visibility_writes)
                if counts == last and got.visibility_writes >= visibility_at_least:
                    return got
                last = counts
                await asyncio.sleep(settle)


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of each sample line of a Prometheus text exposition."""
    found = []
    for line in text.splitlines():
        if line.startswith("#") or not (match := SAMPLE.match(line)):
            continue
        labels = dict(LABEL.findall(match["labels"] or ""))
        found.append((match["name"], labels, float(match["value"])))
    return found


@dataclass(frozen=True)
class Reading:
    at: datetime
    heartbeats: float
    queries: float
    server_actions: float
    visibility_writes: float = 0.0  # visibility tasks the history service ran
    workflow_task_dispatches: float = 0.0  # workflow tasks sent through matching
    search_attribute_reads: float = 0.0  # definitions read from the database (any namespace)


def reading(text: str, at: datetime) -> Reading:
    """The counters a window needs, from one scrape (frontend requests in our namespace)."""
    heartbeats = queries = server_actions = visibility = dispatches = definitions = 0.0
    for name, labels, value in samples(text):
        operation = labels.get("operation", "")
        if name == "persistence_requests" and operation == SEARCH_ATTRIBUTE_READ:
            definitions += value
        if labels.get("namespace") != NAMESPACE:
            continue
        if name == "action" and labels.get("service_name") == "frontend":
            server_actions += value
        if name == "task_requests" and operation.startswith(VISIBILITY_TASK):
            visibility += value
        if name == "task_requests" and operation == WORKFLOW_TASK_DISPATCH:
            dispatches += value
        if name != "service_requests" or labels.get("service_name") != "frontend":
            continue
        if operation in HEARTBEATS:
            heartbeats += value
        elif operation in QUERIES:
            queries += value
    return Reading(at, heartbeats, queries, server_actions, visibility, dispatches, definitions)


async def read(server: MeteredServer) -> Reading:
    at = datetime.now(UTC)
    async with httpx.AsyncClient() as http:
        response = await http.get(server.metrics_url, timeout=30)
    response.raise_for_status()
    return reading(response.text, at)


@dataclass
class Window:
    """What the server did between two readings."""

    actions: Counter[str]
    events: int
    tasks: int
    server_counter: float  # the dev server's own ``action`` metric, for comparison
    runs: int
    by_type: dict[str, Counter[str]]  # history actions by workflow type (no heartbeats)
    visibility_writes: float = 0.0

    @property
    def billable(self) -> int:
        return sum(self.actions.values())

    def row(self, case: str, side: str, per: int = 1) -> dict[str, Any]:
        return {
            "case": case,
            "side": side,
            "actions": self.billable / per,
            "by_kind": {kind: n / per for kind, n in sorted(self.actions.items())},
            "events": self.events / per,
            "tasks": self.tasks / per,
            "server_action_metric": self.server_counter / per,
            "visibility_writes": self.visibility_writes / per,
            "by_workflow_type": {
                name: {kind: n / per for kind, n in sorted(kinds.items())}
                for name, kinds in sorted(self.by_type.items())
            },
            "runs": self.runs,
            "per": per,
        }


async def window(client: Client, before: Reading, after: Reading) -> Window:
    """Count every run open at some point in [before, after): its billable events, history
    events and completed workflow tasks inside the window, plus heartbeats and queries."""
    counts: Counter[str] = Counter()
    by_type: dict[str, Counter[str]] = {}
    events = tasks = runs = 0
    async for wf in client.list_workflows():
        if wf.close_time is not None and wf.close_time < before.at:
            continue
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        inside = [e for e in history.events if actions.in_window(e, before.at, after.at)]
        if not inside:
            continue
        runs += 1
        billed = actions.tally(history.events, before.at, after.at)
        counts.update(billed)
        by_type.setdefault(wf.workflow_type, Counter()).update(billed)
        events += len(inside)
        tasks += sum(1 for e in inside if e.event_type == TASK_DONE)
    for kind, got in (
        ("heartbeat", after.heartbeats - before.heartbeats),
        ("query", after.queries - before.queries),
    ):
        if got:
            counts[kind] += int(got)
    server_counter = after.server_actions - before.server_actions
    visibility = after.visibility_writes - before.visibility_writes
    return Window(counts, events, tasks, server_counter, runs, by_type, visibility)


@asynccontextmanager
async def metered_side() -> AsyncIterator[tuple[MeteredServer, Client, Workers, Path]]:
    """bench.common.side with a metered server."""
    async with side(server_type=MeteredServer) as (server, client, workers, records):
        assert isinstance(server, MeteredServer)
        yield server, client, workers, records
