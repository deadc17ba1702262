"""jobctl.testing (issue 42): the real workflows and handlers on the time-skipping server,
driven the way a user's tests drive them; and the example under examples/ runs as a user
would run it (`pytest examples/`)."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from jobctl import JobStatus
from jobctl.testing import HandlerCall, job_test_env

ROOT = Path(__file__).resolve().parent.parent


async def test_a_job_a_day_ahead_settles_and_its_handler_saw_what_was_sent() -> None:
    async with job_test_env("tests.handlers") as env:
        before = await env.now()
        job = await env.schedule("greet", handler="log", in_="1d", payload={"who": "ada"})
        report = await env.settled(job)
        after = await env.now()
    assert report.status == JobStatus.DONE and report.result == {"logged": True}
    assert after - before >= timedelta(days=1)  # the test server's clock moved, not ours
    [call] = env.calls
    assert isinstance(call, HandlerCall)
    assert (call.handler, call.job_id, call.attempt) == ("log", job.job_id, 1)
    assert call.payload == {"who": "ada"} and call.idempotency_key == job.job_id
    assert call.scheduled_at == report.run_at


async def test_a_failing_job_goes_dead_then_a_requeue_runs_a_new_round() -> None:
    async with job_test_env("tests.handlers") as env:
        job = await env.schedule(
            "always",
            handler="demo.sleep",
            in_="1h",
            payload={"seconds": 0, "always_fail": True},
            max_attempts=2,
        )
        dead = await env.settled(job)
        await env.requeue(job)
        again = await env.settled(job)
    assert dead.status == again.status == JobStatus.DEAD
    assert [c.attempt for c in env.calls] == [1, 2, 3, 4]
    assert again.round == 2


def test_the_example_runs_as_a_user_runs_it() -> None:
    answer = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "3 passed" in answer.stdout


def test_the_docs_example_is_the_tested_one() -> None:
    readme = (ROOT / "docs" / "handlers.md").read_text()
    section = readme.split("## Testing your handlers", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert example in (ROOT / "examples" / "test_billing.py").read_text()
