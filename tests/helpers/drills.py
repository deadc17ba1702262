"""Shared pieces of the failure drills: sizes, records, and the one-screen report.

``JOBS_DRILL_SIZE=full`` (what ``bash scripts/drill`` sets) runs every drill at the size its
issue names; the default ``ci`` size keeps the whole suite inside CI's time.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.helpers.poll import eventually_sync

FULL = os.environ.get("JOBS_DRILL_SIZE", "ci") == "full"


def size(ci: int, full: int) -> int:
    return full if FULL else ci


@dataclass
class DrillRow:
    drill: str
    jobs: int
    lost: int
    duplicated: int  # keys executed more than once
    max_lag: float | None  # seconds, where the drill measures it
    note: str = ""


# The rows go to a file the session names (conftest's pytest_configure sets the variable before
# any pytest-xdist worker starts): drills run in worker processes, the report is printed by the
# process that started the session.
ROWS_ENV = "JOBS_TEST_DRILL_ROWS"


def add_row(row: DrillRow) -> None:
    with Path(os.environ[ROWS_ENV]).open("a") as rows:
        rows.write(json.dumps(asdict(row)) + "\n")
    print(f"\n[drill] {row}")


def drill_rows() -> list[DrillRow]:
    """Every row any process of this session added, in the order they were written."""
    path = Path(os.environ.get(ROWS_ENV, ""))
    if not path.is_file():
        return []
    return [DrillRow(**json.loads(line)) for line in path.read_text().splitlines() if line]


def render_report(rows: list[DrillRow]) -> str:
    header = f"{'drill':<34} {'jobs':>6} {'lost':>5} {'dup':>5} {'max lag':>9}  note"
    lines = [header, "-" * len(header)]
    for row in rows:
        lag = f"{row.max_lag:8.2f}s" if row.max_lag is not None else f"{'-':>9}"
        lines.append(
            f"{row.drill:<34} {row.jobs:>6} {row.lost:>5} {row.duplicated:>5} {lag}  {row.note}"
        )
    return "\n".join(lines)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a record file. A line is complete once its newline is written: a
    read racing a handler's write may see part of it (a CI run read half a line), and it is
    left for the next read."""
    if not path.exists():
        return []
    *complete, _unfinished = path.read_text().split("\n")
    return [json.loads(line) for line in complete if line]


def wait_for_records(
    path: Path, count: int, event: str | None = None, timeout: float = 60
) -> list[dict[str, Any]]:
    """Until ``count`` lines (of ``event``, if given) are in the record file."""
    return eventually_sync(
        lambda: [r for r in read_records(path) if event is None or r["event"] == event],
        lambda records: len(records) >= count,
        timeout=timeout,
        what=f"{count} records",
    )


@dataclass
class Tally:
    """Per-key counts from a record file."""

    starts: Counter[str]
    dones: Counter[str]

    @classmethod
    def of(cls, records: list[dict[str, Any]]) -> Tally:
        return cls(
            Counter(r["key"] for r in records if r["event"] == "start"),
            Counter(r["key"] for r in records if r["event"] == "done"),
        )

    def lost(self, keys: set[str]) -> int:
        return sum(1 for key in keys if self.dones[key] == 0)

    def duplicated(self) -> int:
        return sum(1 for count in self.starts.values() if count > 1)
