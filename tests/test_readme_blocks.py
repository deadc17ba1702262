"""The README's command blocks beyond the tour, pasted line by line into a fresh ``bash -c`` as
a new user would: the cron block, the `cron preview` console examples (their printed output
compared with the README's), the dead-letter blocks (``jobctl`` and bare ``temporal``) and the
curl block. Placeholders that name a job (``nightly-report``, ``invoice-42``,
``demo-031502-poison``, ...) are bound to ids unique to the run; the curl block's external URL
is bound to an endpoint on 127.0.0.1 (tests never send traffic elsewhere)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobctl.starter.dev.devserver import DevServer
from tests.helpers.api import Stack
from tests.helpers.demo import run_demo
from tests.helpers.httpserver import serve
from tests.helpers.poll import eventually_sync
from tests.helpers.processes import ROOT, Workers, cli_env, jobs_json, wait_for, wait_until

BIN = Path(sys.executable).parent
# The README and the pages it leads to: every command block in them is checked.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "CHANGELOG.md"]
README = "\n".join(page.read_text() for page in PAGES)


def block_after(marker: str, fence: str = "```bash\n") -> list[str]:
    """The command lines of the first ``fence`` block after ``marker``: continuation lines
    joined, blank and comment-only lines dropped."""
    section = README.split(marker, 1)[1]
    block = section.split(fence, 1)[1].split("```", 1)[0]
    commands: list[str] = []
    pending = ""
    for line in block.replace("\\\n", " ").splitlines():
        if not pending and (not line.strip() or line.startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if complete(pending):
            commands.append(pending)
            pending = ""
    assert not pending, f"unterminated command in the README: {pending!r}"
    return commands


def complete(command: str) -> bool:
    """Whether a shell command is whole (a quote opened on one line may close on a later one)."""
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return False
    return True


def in_fresh_bash(line: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    shell_env = {**env, "PATH": f"{BIN}:/usr/bin:/bin"}
    return subprocess.run(
        ["bash", "-c", line], env=shell_env, capture_output=True, text=True, timeout=60
    )


def paste(line: str, env: dict[str, str], bound: dict[str, str]) -> str:
    """Run one README line with its placeholders bound; it must exit 0. Returns stdout."""
    for placeholder, value in bound.items():
        line = line.replace(placeholder, value)
    answer = in_fresh_bash(line, env)
    assert answer.returncode == 0, (line, answer.stdout, answer.stderr)
    return answer.stdout


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- `jobctl cron preview` examples: pure, no server -----------------------------------------


def preview_examples() -> list[tuple[str, str]]:
    """Each ``$ jobctl cron preview ...`` line in a console block, with the text under it."""
    examples = []
    for match in re.finditer(r"^\$ (jobctl cron preview .*)\n((?:(?!\$ |```).*\n)*)", README, re.M):
        examples.append((match.group(1), match.group(2)))
    return examples


@pytest.mark.parametrize(("command", "printed"), preview_examples())
def test_cron_preview_examples_print_what_the_readme_shows(command: str, printed: str) -> None:
    output = paste(command, dict(cli_env("localhost:1", "unused")), {})
    if "--json" in command:
        assert json.loads(output) == json.loads(printed)
    else:
        assert [line.rstrip() for line in output.splitlines()] == printed.rstrip().splitlines()


def test_the_readme_has_preview_examples_to_check() -> None:
    assert len(preview_examples()) >= 2


# -- the cron block ---------------------------------------------------------------------------


@pytest.mark.devserver
def test_cron_block_pasted_line_by_line(cli: dict[str, str], workers: Workers) -> None:
    workers.start()
    nightly, beat = unique("nightly-report"), unique("heartbeat")
    bound = {"nightly-report": nightly, "heartbeat": beat}
    lines = block_after("\n# Cron jobs\n")
    assert len(lines) == 8 and all(line.startswith("jobctl ") for line in lines)
    for line in lines:
        paste(line, cli, bound)
    wait_for(cli, beat, "cancelled")
    report = wait_for(cli, nightly, "scheduled")  # paused until 2030, then resumed
    assert (report["cron"], report["timezone"], report["overlap"]) == (
        "0 2 * * *",
        "Europe/Berlin",
        "buffer_one",
    )
    manual = wait_until(
        cli,
        nightly,
        lambda a: any(
            s["outcome"] == "manual" and s["status"] == "done" for s in a["recent_slots"]
        ),
        what="the triggered slot done",
    )["recent_slots"]
    assert [s["outcome"] for s in manual] == ["manual"]
    paste(f"jobctl cancel {nightly}", cli, {})


# -- the dead-letter blocks, on a server of their own (one line requeues every dead job) --------


@pytest.fixture
async def own_server(tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    server = DevServer(db_file=None)
    await server.start()
    try:
        yield cli_env(server.address, unique("readme-dlq"))
    finally:
        server.stop()


def dead_job(env: dict[str, str], job_id: str, rounds: int) -> None:
    wait_until(
        env,
        job_id,
        lambda report: report["status"] == "dead" and report["round"] == rounds,
        what=f"{job_id} dead in round {rounds}",
    )


def poison(env: dict[str, str], prefix: str) -> str:
    job_id = unique(prefix)
    jobs_json(
        env, "schedule", "poison", "--id", job_id, "--handler", "test.permanent", "--in", "0s"
    )
    dead_job(env, job_id, 1)
    return job_id


def until_printed(line: str, env: dict[str, str], bound: dict[str, str], text: str) -> str:
    """Paste a listing line until it shows ``text`` (visibility lags a moment behind)."""
    output: str = eventually_sync(
        lambda: paste(line, env, bound), lambda out: text in out, timeout=20, what=text
    )
    return output


@pytest.mark.devserver
def test_dead_letter_blocks_pasted_line_by_line(own_server: dict[str, str], tmp_path: Path) -> None:
    env = own_server
    workers = Workers(env, tmp_path)
    workers.start()
    try:
        ours = block_after("\n# The dead-letter queue\n")
        assert [line.split()[:3] for line in ours][:4] == [
            ["jobctl", "dlq", "list"],
            ["jobctl", "status", "demo-031502-poison"],
            ["jobctl", "dlq", "requeue"],
            ["jobctl", "dlq", "discard"],
        ]
        job = poison(env, "demo-poison")
        bound = {"demo-031502-poison": job}
        until_printed(ours[0], env, bound, job)
        assert job in paste(ours[1], env, bound)
        paste(ours[2], env, bound)
        dead_job(env, job, 2)  # requeued, failed again (a permanent error), parked again
        paste(ours[3], env, bound)
        wait_for(env, job, "discarded")
        for line in ours[4:]:
            paste(line, env, bound)
        assert job in paste("jobctl dlq log", env, {})

        bare = block_after("The same with nothing but the `temporal` CLI")
        assert len(bare) == 5 and all(line.startswith("temporal workflow ") for line in bare)
        job = poison(env, "demo-poison")
        bound = {"demo-031502-poison": job}
        until_printed(bare[0], env, bound, job)
        for rounds, line in enumerate(bare[1:4], start=2):
            paste(line, env, bound)
            dead_job(env, job, rounds)  # each requeue: a fresh round that fails again
        assert job in paste(bare[4], env, bound)
    finally:
        workers.stop_all()


# -- the curl block ---------------------------------------------------------------------------


def answer_of(output: str) -> Any:
    return json.loads(output)


@pytest.mark.devserver
def test_curl_block_pasted_line_by_line(stack: Stack) -> None:
    lines = block_after("\n# HTTP API\n")
    assert lines[0] == "API=http://127.0.0.1:8000"
    env = {**stack.env, "API": stack.api.url}
    invoice, digest = unique("invoice"), unique("digest")
    dead = poison(stack.env, "demo-poison")
    with serve() as endpoint:
        bound = {
            "invoice-42": invoice,
            '"id": "digest"': f'"id": "{digest}"',
            "jobs/digest": f"jobs/{digest}",
            "https://billing.internal/send": f"{endpoint.url}/status/503",
            "demo-031502-poison": dead,
        }
        answers = [answer_of(paste(line, env, bound)) for line in lines[1:]]
        errors = [(line, a) for line, a in zip(lines[1:], answers, strict=True) if "error" in a]
        assert errors == []
        assert answers[0]["job_id"] == invoice and answers[0]["created"] is True
        wait_for(stack.env, invoice, "cancelled")  # triggered (503: retrying), then cancelled
        assert endpoint.hits and all(h.path == "/status/503" for h in endpoint.hits)
    patched = jobs_json(stack.env, "status", digest)
    assert (patched["cron"], patched["timezone"]) == ("30 8 * * MON-FRI", "Europe/Paris")
    dead_job(stack.env, dead, 2)  # the DLQ line requeued it; it failed and parked again
    jobs_json(stack.env, "cancel", digest)


# -- the starter scripts ----------------------------------------------------------------------


@pytest.mark.devserver
def test_starter_script_lines_pasted_line_by_line(cli: dict[str, str], workers: Workers) -> None:
    workers.start()
    lines = block_after("**Starter scripts.**")
    assert [line.split()[:3] for line in lines] == [
        ["python", "-m", "jobctl.starter.schedule_oneshot"],
        ["python", "-m", "jobctl.starter.schedule_cron"],
        ["python", "-m", "jobctl.starter.requeue_dead"],
    ]
    dead = poison(cli, "readme-dead")
    printed = [paste(line, cli, {"JOB_ID": dead}) for line in lines]
    one_shot = printed[0].split(":", 1)[0]
    cron_id = printed[1].split(":", 1)[0]
    assert printed[0].startswith(f"{one_shot}: scheduled")
    assert printed[1].count(f"{cron_id}: a slot at") == 3
    assert printed[2].startswith(f"{dead}: requeued")
    assert jobs_json(cli, "status", one_shot)["status"] == "scheduled"  # due in 30 s
    report = jobs_json(cli, "status", cron_id)
    assert (report["cron"], report["timezone"]) == ("0 9 * * MON-FRI", "Europe/Paris")
    dead_job(cli, dead, 2)
    for job_id in (cron_id, one_shot):
        jobs_json(cli, "cancel", job_id)


# -- the benchmark lines: each names a module and flags that exist ------------------------------


def bench_lines() -> list[str]:
    return [line for line in block_after("One command per benchmark") if "-m bench." in line]


def test_the_readme_lists_every_benchmark() -> None:
    listed = {line.split()[2] for line in bench_lines()}
    modules = {
        f"bench.{path.stem}"
        for path in (ROOT / "bench").glob("*.py")
        if "__main__" in path.read_text() and path.stem not in {"report", "baseline", "peer"}
    }
    assert listed == modules


# Every benchmark's ``python -m bench.X --help``, in one process: each module imports Temporal,
# PostgreSQL drivers and the project: 3-6 s apiece in a loaded parallel pass (47 s for 15 lines).
HELP_ALL = """
import contextlib, io, json, runpy, sys
helps = {}
for module in sys.argv[1:]:
    out, code = io.StringIO(), None
    sys.argv = [module, "--help"]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as done:
        code = done.code
    except Exception as error:
        code = repr(error)
    helps[module] = {"code": code, "out": out.getvalue()}
print(json.dumps(helps))
"""


@pytest.fixture(scope="module")
def bench_helps() -> dict[str, dict[str, Any]]:
    """Each README benchmark module's exit code and output for ``--help``, as ``python -m``
    runs it (runpy, ``__main__``)."""
    modules = sorted({line.split()[2] for line in bench_lines()})
    answer = subprocess.run(
        [sys.executable, "-c", HELP_ALL, *modules],
        env=dict(cli_env("localhost:1", "unused")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert answer.returncode == 0, answer.stderr
    helps: dict[str, dict[str, Any]] = json.loads(answer.stdout.splitlines()[-1])
    return helps


@pytest.mark.parametrize("line", bench_lines())
def test_each_benchmark_line_parses_its_flags(
    line: str, bench_helps: dict[str, dict[str, Any]]
) -> None:
    """The module answers ``--help``, and every flag the README's line (and its comment)
    names is in that help."""
    module = line.split()[2]
    answer = bench_helps[module]
    output = answer["out"]
    assert answer["code"] == 0 and output.startswith("usage: "), answer
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line))
    assert flags <= set(re.findall(r"--[a-z][a-z-]*", output)), (flags, output)


# -- `bash scripts/demo`: the stack and its demo, until the demo settles; then Ctrl-C ----------


@pytest.mark.devserver  # runs the whole stack: a dev server, a worker, the API
def test_scripts_demo_runs_the_stack_and_the_demo_settles(tmp_path: Path) -> None:
    """``scripts/demo`` prepares the venv, then execs ``jobctl dev --demo`` with its arguments;
    that stack is run here on free ports (the README's default ports may be taken) until the
    demo prints its closing hint, each job settled: the poison one dead, the flaky one done."""
    script = (ROOT / "scripts" / "demo").read_text().splitlines()
    assert script[-1] == 'exec .venv/bin/jobs dev --demo "$@"'
    assert "bash scripts/demo" in block_after("## Two commands")[0]
    final = run_demo(BIN / "jobs", tmp_path / "state")
    assert final.get("poison") == "dead" and final.get("flaky") == "done", final
