"""The ``jobs`` CLI against a real dev server, with worker subprocesses. Commands run in
this process (click's runner) unless the process itself is under test (``jobs``)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from tests.helpers.cli import jobs_here
from tests.helpers.cli import jobs_here_blocking as ask  # answers, no process: see jobs_json
from tests.helpers.processes import Workers, jobs, jobs_json, wait_for, wait_until

pytestmark = pytest.mark.devserver


def test_schedule_in_seconds_then_status_reaches_done(
    cli: dict[str, str], workers: Workers
) -> None:
    worker = workers.start()
    scheduled = jobs_json(
        cli,
        "schedule",
        "cli smoke",
        "--handler",
        "demo.sleep",
        "--payload",
        '{"seconds": 0.2}',
        "--in",
        "10s",  # one `jobctl status` took over 3 s at a load average of 10 (a CI run failed so)
    )
    assert scheduled["job_id"].startswith("job-") and scheduled["next_run_at"]
    first = jobs_json(cli, "status", scheduled["job_id"])
    # Before its handler ran: scheduled, or pending when this read came after run_at (a
    # loaded CI run took over 10 s to get here).
    assert first["status"] in ("scheduled", "pending") and first["attempts"] == []
    report = wait_for(cli, scheduled["job_id"], "done")
    [attempt] = report["attempts"]
    assert attempt["outcome"] == "succeeded"
    assert attempt["worker"] == workers.identity(worker)
    assert attempt["started_at"] >= scheduled["next_run_at"]


def test_controls_through_the_cli(cli: dict[str, str], workers: Workers) -> None:
    workers.start()
    job_id = f"ctl-{uuid.uuid4().hex[:8]}"
    jobs_json(cli, "schedule", "controls", "--handler", "log", "--in", "1h", "--id", job_id)
    assert jobs_json(cli, "pause", job_id)["status"] == "paused"
    assert jobs_json(cli, "status", job_id)["status"] == "paused"
    again = ask(cli, "resume", job_id)
    assert again.returncode == 0, again.stderr
    wrong = ask(cli, "resume", job_id)
    assert wrong.returncode == 5 and "not paused" in wrong.stderr
    jobs_json(cli, "trigger", job_id)
    wait_for(cli, job_id, "done")
    finished = ask(cli, "trigger", job_id)
    assert finished.returncode == 5 and "finished" in finished.stderr
    duplicate = ask(cli, "schedule", "again", "--handler", "log", "--in", "1h", "--id", job_id)
    assert duplicate.returncode == 4 and "already exists" in duplicate.stderr
    missing = ask(cli, "status", "no-such-job")
    assert (
        missing.returncode == 3 and missing.stderr.strip() == "error: no job with id 'no-such-job'"
    )


def test_cancel_through_the_cli(cli: dict[str, str], workers: Workers) -> None:
    workers.start()
    job_id = f"cancel-{uuid.uuid4().hex[:8]}"
    jobs_json(cli, "schedule", "to cancel", "--handler", "log", "--in", "2h", "--id", job_id)
    assert ask(cli, "cancel", job_id).returncode == 0
    assert wait_for(cli, job_id, "cancelled")["attempts"] == []
    again = ask(cli, "cancel", job_id)
    assert again.returncode == 5 and "finished (cancelled)" in again.stderr


BAD_INPUT = [
    # (case, extra flags, field named in the one error line)
    ("naive datetime", ["--at", "2030-01-01T09:00:00"], "run_at"),
    ("run_at and delay", ["--at", "2030-01-01T09:00:00Z", "--in", "10s"], "run_at, delay"),
    ("no time at all", [], "run_at, delay, cron"),
    ("negative delay", ["--in", "-5"], "delay"),
    ("unparseable delay", ["--in", "soon"], "delay"),
    ("more than 10 years ahead", ["--at", "2045-01-01T00:00:00+00:00"], "run_at"),
    ("malformed handler name", ["--in", "5s", "--handler", "no such handler"], "handler"),
    ("payload over 256 KiB", ["--in", "5s", "--payload", "@BIG"], "payload"),
    ("payload not an object", ["--in", "5s", "--payload", "[1, 2]"], "payload"),
    ("payload not JSON", ["--in", "5s", "--payload", "{oops"], "payload"),
    ("payload file not UTF-8", ["--in", "5s", "--payload", "@BINARY"], "payload"),
    ("payload file missing", ["--in", "5s", "--payload", "@/nonexistent/payload.json"], "payload"),
    ("max_attempts 0", ["--in", "5s", "--max-attempts", "0"], "max_attempts"),
    ("max_attempts 101", ["--in", "5s", "--max-attempts", "101"], "max_attempts"),
    ("lease above timeout", ["--in", "5s", "--lease", "10m", "--timeout", "5m"], "timeout"),
    ("lease under a second", ["--in", "5s", "--lease", "0.5"], "lease"),
    ("id with illegal characters", ["--in", "5s", "--id", "bad id!"], "id"),
    ("bad timezone", ["--in", "5s", "--tz", "Mars/Olympus_Mons"], "timezone"),
    ("jitter above 1", ["--in", "5s", "--jitter", "1.5"], "jitter"),
    ("zero backoff base", ["--in", "5s", "--backoff-base", "0"], "backoff_base"),
    (
        "backoff max below base",
        ["--in", "5s", "--backoff-base", "1m", "--backoff-max", "5s"],
        "backoff_max",
    ),
    ("cron option on a one-shot", ["--in", "5s", "--overlap", "allow_all"], "overlap"),
    ("idempotency key too long", ["--in", "5s", "--idempotency-key", "k" * 201], "idempotency_key"),
    ("cron that never fires", ["--cron", "0 0 30 2 *"], "cron"),
    ("cron with four fields", ["--cron", "* * * *"], "cron"),
    ("cron and a delay", ["--cron", "* * * * *", "--in", "5s"], "delay, cron"),
    ("cron id too long for its slot ids", ["--cron", "* * * * *", "--id", "c" * 190], "id"),
]


async def test_a_handler_no_worker_serves_is_scheduled_with_a_warning_exit_0(
    cli: dict[str, str], dev_client: Client
) -> None:
    """Issue 41: a well-formed name is not invalid input because no worker serves it now."""
    job_id = f"unserved-{uuid.uuid4().hex[:8]}"
    args = ["schedule", "u", "--handler", "no.such.handler", "--in", "1h", "--id", job_id]
    answer = jobs(cli, *args)
    await dev_client.get_workflow_handle(job_id).cancel()
    assert answer.returncode == 0, answer
    assert answer.stdout.startswith(f"scheduled {job_id}: runs at ")
    [warning] = answer.stderr.strip().splitlines()
    queue = cli["JOBS_TASK_QUEUE"]
    assert warning.startswith(
        f"warning: no live worker on task queue {queue!r} serves handler 'no.such.handler'"
    )


async def test_bad_input_exits_non_zero_with_one_line_and_starts_nothing(
    cli: dict[str, str], dev_client: Client, tmp_path: Path
) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"blob": "x" * (256 * 1024)}))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b'{"a": "\xff\xfe"}')
    files = {"@BIG": f"@{big}", "@BINARY": f"@{binary}"}
    names = []
    for case, flags, field in BAD_INPUT:
        name = f"bad-{uuid.uuid4().hex[:8]}"
        names.append(name)
        args = ["schedule", name, "--handler", "log"]
        if "--id" not in flags:
            args += ["--id", name]
        args += [files.get(flag, flag) for flag in flags]
        result = await jobs_here(cli, *args)  # the answer is the point, not the process
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, (case, result.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), (case, lines)
        assert result.stdout == "", case
        with pytest.raises(RPCError) as missing:
            await dev_client.get_workflow_handle(name).describe()
        assert missing.value.status == RPCStatusCode.NOT_FOUND, case
    assert len(BAD_INPUT) >= 15
    await asyncio.sleep(1.5)  # visibility is eventually consistent; give it time to show any
    listed = " OR ".join(f'JobName = "{name}"' for name in names)
    assert (await dev_client.count_workflows(listed)).count == 0


async def test_read_command_exits_zero_thirty_times_in_a_row(cli: dict[str, str]) -> None:
    job_id = f"reads-{uuid.uuid4().hex[:8]}"
    jobs_json(cli, "schedule", "read me", "--handler", "log", "--in", "1h", "--id", job_id)

    async def reads(times: int) -> list[int]:
        codes = []
        for _ in range(times):
            result = await asyncio.to_thread(jobs, cli, "status", job_id, "--json")
            codes.append(result.returncode)
            assert json.loads(result.stdout)["job_id"] == job_id
        return codes

    # Three readers of ten in a row each (a process's start-up is most of a read's time).
    runs = await asyncio.gather(*(reads(10) for _ in range(3)))
    assert runs == [[0] * 10] * 3


def test_unreachable_temporal_is_a_clear_error(cli: dict[str, str]) -> None:
    result = jobs({**cli, "TEMPORAL_ADDRESS": "127.0.0.1:1"}, "status", "anything")
    assert result.returncode == 6
    assert result.stderr.startswith("error: cannot reach Temporal at 127.0.0.1:1")


def test_status_shows_the_live_state_running_then_retrying(
    cli: dict[str, str], workers: Workers
) -> None:
    worker = workers.start()
    # 8 s running: each `jobctl status` takes over a second on a loaded 2-core machine, and a
    # 3 s window was once missed.
    payload = json.dumps({"seconds": 8, "fail_times": 1})
    job_id = jobs_json(
        cli,
        "schedule",
        "live",
        "--handler",
        "demo.sleep",
        "--payload",
        payload,
        "--in",
        "0",
        "--lease",
        "2s",
        "--backoff-base",
        "30s",
        "--jitter",
        "0",
    )["job_id"]
    # Running from the start (Temporal's pending activity says so); its record, with the
    # worker and the heartbeat, follows with the first heartbeat, a second into the handler.
    running = wait_until(
        cli,
        job_id,
        lambda shown: shown["status"] == "running" and shown["last_heartbeat_at"] is not None,
        what=f"{job_id} running, its first heartbeat in",
    )
    assert running["worker"] == workers.identity(worker)
    assert running["attempts"][0]["outcome"] == "running"
    retrying = wait_for(cli, job_id, "retrying")
    [failed] = retrying["attempts"]
    assert (failed["outcome"], failed["retry_delay"]) == ("failed", 30)
    ended = datetime.fromisoformat(failed["ended_at"])
    next_at = datetime.fromisoformat(retrying["next_attempt_at"])
    assert timedelta(seconds=29) <= next_at - ended <= timedelta(seconds=31)
    text = ask(cli, "status", job_id).stdout
    assert "retrying: attempt 1 of 8 failed; next attempt" in text
    assert ask(cli, "cancel", job_id).returncode == 0


def test_cron_preview_prints_local_and_utc_and_schedules_nothing(cli: dict[str, str]) -> None:
    slots = jobs_json(
        cli,
        "cron",
        "preview",
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2025-11-01T00:00:00-04:00",
        "-n",
        "3",
    )
    assert slots == [
        {"local": "2025-11-01T01:30:00-04:00", "utc": "2025-11-01T05:30:00Z"},
        {"local": "2025-11-02T01:30:00-04:00", "utc": "2025-11-02T05:30:00Z"},
        {"local": "2025-11-03T01:30:00-05:00", "utc": "2025-11-03T06:30:00Z"},
    ]
    bad = ask(cli, "cron", "preview", "0 0 31 4 *", "--tz", "Nowhere/Land")
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        "error: cron: can never fire: day-of-month '31' and month '4' never fall on a real date"
        " (like 30 February)",
        "error: timezone: unknown IANA time zone 'Nowhere/Land'",
    ]


def test_cron_job_end_to_end_through_the_cli(cli: dict[str, str], workers: Workers) -> None:
    workers.start()
    cron_id = f"cron-{uuid.uuid4().hex[:8]}"
    scheduled = jobs_json(
        cli,
        "schedule",
        "every 2s",
        "--handler",
        "log",
        "--cron",
        "*/2 * * * * *",
        "--tz",
        "Europe/Berlin",
        "--id",
        cron_id,
    )
    assert scheduled["job_id"] == cron_id and scheduled["next_run_at"]
    report = wait_until(
        cli,
        cron_id,
        lambda answer: sum(1 for s in answer["recent_slots"] if s["status"] == "done") >= 2,
        timeout=30,
        what="two slots done",
    )
    assert report["kind"] == "cron" and report["status"] == "scheduled"
    assert len(report["next_slots"]) == 5
    assert report["next_slots"][0]["local"].endswith(("+01:00", "+02:00"))
    ran = [s for s in report["recent_slots"] if s["outcome"] == "ran"]
    assert all(s["job_id"] == f"{cron_id}@{s['slot'][:19]}Z" for s in ran)
    tick = jobs_json(cli, "status", ran[-1]["job_id"])
    assert tick["status"] == "done" and tick["idempotency_key"] == ran[-1]["job_id"]
    text = ask(cli, "status", cron_id).stdout
    assert "next slots (local)" in text and "*/2 * * * * *" in text

    assert jobs_json(cli, "update", cron_id, "--cron", "0 0 * * *")["cron"] == "0 0 * * *"
    refused = ask(cli, "update", cron_id, "--cron", "0 0 30 2 *")
    assert refused.returncode == 2 and "can never fire" in refused.stderr
    assert jobs_json(cli, "pause", cron_id)["status"] == "paused"
    assert ask(cli, "cancel", cron_id).returncode == 0
    listed = jobs_json(cli, "list")["jobs"]
    assert cron_id in {row["job_id"] for row in listed}
