"""The README's five-minute tour, pasted line by line into a fresh ``bash -c`` the way a new
user would, against a dev server with a worker: every command exits 0 and prints what the
README says it prints. Its two placeholders are bound to real jobs (``job-3f2c...`` to the id
the first command printed, ``some-job`` to a job scheduled for the purpose)."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

from tests.helpers.processes import ROOT, Workers, jobs_json, wait_for

BIN = Path(sys.executable).parent
SCHEDULED = re.compile(r"^scheduled (job-[0-9a-f-]+): runs at ")


def tour_lines() -> list[str]:
    """The command lines of the README's first bash block after "A five-minute tour"."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A five-minute tour", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0] == "source .venv/bin/activate"
    return lines[1:]  # the test puts the venv's bin first on PATH instead


def in_fresh_bash(line: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    shell_env = {**env, "PATH": f"{BIN}:/usr/bin:/bin"}
    return subprocess.run(
        ["bash", "-c", line], env=shell_env, capture_output=True, text=True, timeout=60
    )


def test_every_tour_command_works_pasted_into_bash(cli: dict[str, str], workers: Workers) -> None:
    workers.start()
    lines = tour_lines()
    assert len(lines) >= 8 and all(line.startswith("jobctl ") for line in lines)
    some_job = jobs_json(cli, "schedule", "some job", "--handler", "log", "--in", "1h")["job_id"]
    cleanup = f"cleanup-{uuid.uuid4().hex[:8]}"  # the tour's fixed id, unique per run
    bound: dict[str, str] = {"some-job": some_job, "cleanup-42": cleanup}
    for line in lines:
        for placeholder, value in bound.items():
            line = line.replace(placeholder, value)
        answer = in_fresh_bash(line, cli)
        assert answer.returncode == 0, (line, answer.stdout, answer.stderr)
        first = SCHEDULED.match(answer.stdout)
        if first and "job-3f2c..." not in bound:
            bound["job-3f2c..."] = first.group(1)
    assert "job-3f2c..." in bound, "the tour's first schedule printed no job id"
    wait_for(cli, some_job, "cancelled")
    wait_for(cli, cleanup, "done")  # paused until 2030, then triggered: it ran now
    wait_for(cli, bound["job-3f2c..."], "done")
