"""Shared benchmark plumbing: a fresh dev server per run, percentiles, JSON results."""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client

from starter.devserver import DevServer

RESULTS = Path(__file__).resolve().parent / "results"


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (pct in 0-100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, round(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


@asynccontextmanager
async def fresh_server(wal: bool = True) -> AsyncIterator[tuple[DevServer, Client]]:
    """A dev server on a new SQLite file, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="jobs-bench-") as tmp:
        server = DevServer(db_file=Path(tmp) / "temporal.db", wal=wal)
        client = await server.start()
        try:
            yield server, client
        finally:
            server.stop()


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"{name}-{stamp}.json"
    meta = {"benchmark": name, "at": stamp, "machine": platform.node(), "cpus": os.cpu_count()}
    path.write_text(json.dumps({**meta, **data}, indent=2, default=str))
    return path
