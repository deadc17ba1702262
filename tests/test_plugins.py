"""Handlers that install like plugins, and living beside a Temporal app.

* A package declaring ``[project.entry-points."jobs.handlers"]`` is built and pip-installed
  into a temporary venv (offline: a tiny in-tree PEP 517 backend, since neither network nor
  ``wheel`` is at hand); that venv's ``jobctl worker`` serves its typed handler with no
  ``JOBS_HANDLER_MODULES``. The venv sees this project through a ``.pth`` that adds our
  venv's site-packages (``--system-site-packages`` would add the base interpreter's, which
  has none of our dependencies).
* A name registered by two modules stops the worker at start-up, naming both.
* A Temporal app with its packages inside its own (``myapp.workflows``) runs handlers in our
  worker and calls our client from its own process (an app with top-level ``workflows`` and
  the rest: tests/test_installed_package.py).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import sysconfig
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import Client

from jobctl.starter import operations
from jobctl.starter.dev.devserver import DevServer, die_with_parent
from jobctl.starter.errors import SpecError
from jobctl.workflows.models import JobReport
from tests.helpers.files import site_packages, write
from tests.helpers.poll import eventually
from tests.helpers.processes import JOBS, cli_env, kill_group
from tests.helpers.temporal import end_singletons

BACKEND = '''
"""A minimal PEP 517 backend: a pure wheel of the packages here, with [project]'s name,
version and entry points."""
import base64, hashlib, tomllib, zipfile
from pathlib import Path


def _line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    dist = f"{project['name'].replace('-', '_')}-{project['version']}"
    groups = project.get("entry-points", {})
    entry_points = "".join(
        f"[{group}]\\n" + "".join(f"{k} = {v}\\n" for k, v in points.items())
        for group, points in groups.items()
    )
    files = {
        path.as_posix(): path.read_bytes()
        for package in sorted(Path(".").iterdir()) if (package / "__init__.py").is_file()
        for path in sorted(package.rglob("*.py"))
    }
    files[f"{dist}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\\nName: {project['name']}\\nVersion: {project['version']}\\n"
    ).encode()
    files[f"{dist}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    )
    files[f"{dist}.dist-info/entry_points.txt"] = entry_points.encode()
    name = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / name, "w") as wheel:
        for arcname, data in files.items():
            wheel.writestr(arcname, data)
        record = [_line(arcname, data) for arcname, data in files.items()]
        record.append(f"{dist}.dist-info/RECORD,,")
        wheel.writestr(f"{dist}.dist-info/RECORD", "\\n".join(record))
    return name
'''

PLUGIN_PYPROJECT = """
[build-system]
requires = []
build-backend = "jobs_test_backend"
backend-path = ["."]

[project]
name = "billing-jobs"
version = "0.0.1"

[project.entry-points."jobs.handlers"]
billing = "billing_jobs.handlers"
"""

PLUGIN_HANDLERS = """
from pydantic import BaseModel
from jobctl.activities.registry import JobContext, handler


class Charge(BaseModel):
    customer: str


@handler("billing.charge", payload=Charge)
def charge(ctx: JobContext[Charge]) -> dict:
    return {"charged": ctx.payload.customer, "type": type(ctx.payload).__name__}
"""

DUPLICATE = """
from jobctl.activities.registry import handler


@handler("billing.charge")
def charge(ctx):
    return None
"""

GREETING = """
from temporalio import workflow


@workflow.defn(name="Greeting")
class GreetingWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"hello {name}"
"""

APP_JOBS = """
from jobctl import handler
from {package}.greeting import GreetingWorkflow


@handler("app.greet")
def greet(ctx):
    return {{"workflow": GreetingWorkflow.__name__, "who": ctx.payload.get("who")}}
"""


@pytest.fixture(scope="module")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary venv with the plugin package pip-installed, and a ``jobs`` script."""
    base = tmp_path_factory.mktemp("plugin")
    plugin = write(
        base / "billing-jobs",
        {
            "pyproject.toml": PLUGIN_PYPROJECT,
            "jobs_test_backend.py": BACKEND,
            "billing_jobs/__init__.py": "",
            "billing_jobs/handlers.py": PLUGIN_HANDLERS,
        },
    )
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    ours = sysconfig.get_path("purelib")
    (site_packages(venv) / "_jobs_scheduler.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n"
    )
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    installed = subprocess.run(
        [*install, "--no-build-isolation", str(plugin)], capture_output=True, text=True, timeout=120
    )
    assert installed.returncode == 0, installed.stderr
    jobs = venv / "bin" / "jobs"  # what pip writes for our console script
    jobs.write_text(
        f"#!{python}\nimport sys\nfrom jobctl.starter.cli import main\nsys.exit(main())\n"
    )
    jobs.chmod(0o755)
    return venv


class Process:
    """A worker subprocess started in ``cwd``; killed (its group, by pid) at the end."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, log: Path):
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                command,
                env=env,
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def output(self) -> str:
        return self.log.read_text()

    def wait_polling(self) -> None:
        deadline = time.monotonic() + 60
        while "polling task queue" not in self.output():
            assert self.proc.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.1)

    def stop(self) -> None:
        kill_group(self.proc)


def clean_env(address: str, queue: str, **extra: str) -> dict[str, str]:
    """The test server and queue; no JOBS_HANDLER_MODULES or PYTHONPATH unless given."""
    env = cli_env(address, queue)
    del env["JOBS_HANDLER_MODULES"], env["PYTHONPATH"]
    return {**env, **extra}


@pytest.fixture
async def queue(dev_client: Client) -> AsyncIterator[str]:
    yield f"plugin-{uuid.uuid4().hex[:8]}"
    await end_singletons(dev_client)


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()


async def run_job(client: Client, queue: str, handler: str, payload: dict[str, str]) -> object:
    job_id = f"plugin-{uuid.uuid4().hex[:10]}"
    data = {"id": job_id, "name": "plugin", "handler": handler, "payload": payload, "delay": 0}
    await operations.schedule(client, data, now=datetime.now(UTC), task_queue=queue)
    report = await eventually(
        lambda: operations.status(client, job_id),
        lambda report: report.status in ("done", "dead"),
        timeout=60,
        what=f"{job_id} finished",
    )
    assert isinstance(report, JobReport) and report.status == "done", report
    return report.result


async def test_an_installed_plugin_is_served_with_no_configuration(
    dev_server: DevServer,
    dev_client: Client,
    plugin_venv: Path,
    queue: str,
    processes: list[Process],
    tmp_path: Path,
) -> None:
    env = clean_env(dev_server.address, queue)
    worker = Process([str(plugin_venv / "bin" / "jobs"), "worker"], env, tmp_path, tmp_path / "w")
    processes.append(worker)
    worker.wait_polling()
    result = await run_job(dev_client, queue, "billing.charge", {"customer": "acme"})
    assert result == {"charged": "acme", "type": "Charge"}
    with pytest.raises(SpecError) as refused:  # its schema was published: checked at the door
        await operations.schedule(
            dev_client, {"name": "x", "handler": "billing.charge", "delay": 0}, task_queue=queue
        )
    assert refused.value.problems == [("payload.customer", "is required")]


def test_a_name_registered_twice_stops_the_worker_naming_both(
    dev_server: DevServer, plugin_venv: Path, tmp_path: Path
) -> None:
    write(tmp_path, {"dup_billing.py": DUPLICATE})
    env = clean_env(
        dev_server.address, "nowhere", JOBS_HANDLER_MODULES="dup_billing", PYTHONPATH=str(tmp_path)
    )
    answer = subprocess.run(
        [plugin_venv / "bin" / "jobs", "worker"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answer.returncode == 2, answer
    assert "handler 'billing.charge' is registered twice" in answer.stderr
    assert "'billing_jobs.handlers'" in answer.stderr and "'dup_billing'" in answer.stderr
    assert "Traceback" not in answer.stderr


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("raise RuntimeError('boom at import')", "raised RuntimeError: boom at import"),
        ("import sys\nsys.exit(5)", "called sys.exit(5)"),
        ("x = {}['missing']", "raised KeyError: 'missing'"),
    ],
    ids=["exception", "sys-exit", "key-error"],
)
def test_a_plugin_failing_at_import_stops_the_worker_in_one_line_naming_it(
    dev_server: DevServer, tmp_path: Path, body: str, said: str
) -> None:
    """Whatever a handler module raises or exits with while imported, the worker refuses to
    start (exit 2) with one line naming where it came from, the module and the error."""
    write(tmp_path, {"broken_plugin.py": body + "\n"})
    env = clean_env(
        dev_server.address,
        "nowhere",
        JOBS_HANDLER_MODULES="broken_plugin",
        PYTHONPATH=str(tmp_path),
    )
    jobctl = Path(sys.executable).parent / "jobctl"
    answer = subprocess.run(
        [jobctl, "worker"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert answer.returncode == 2, answer
    [line] = answer.stderr.strip().splitlines()
    assert line == f"error: JOBS_HANDLER_MODULES: importing 'broken_plugin' {said}"


# -- beside a Temporal app ------------------------------------------------------------------


def temporal_app(base: Path, package: str) -> Path:
    """A Temporal app's layout: ``<package>/`` (workflows) and a sibling activities package,
    and a jobs handler module importing the app's own workflow."""
    root = package.rpartition(".")[0]
    prefix = f"{root.replace('.', '/')}/" if root else ""
    files = {
        f"{prefix}workflows/__init__.py": "",
        f"{prefix}workflows/greeting.py": GREETING,
        f"{prefix}activities/__init__.py": "",
        f"{prefix}activities/greet.py": "def greet(name: str) -> str:\n    return name\n",
        f"{prefix}app_jobs.py": APP_JOBS.format(package=package),
    }
    if root:
        files[f"{prefix}__init__.py"] = ""
    return write(base, files)


CLIENT = """
import asyncio, sys
from datetime import UTC, datetime

from myapp.workflows.greeting import GreetingWorkflow  # the app's own code
from jobctl.connection.client import connect
from jobctl.starter import operations
from jobctl.starter.process_exit import exit_now


async def main() -> None:
    client = await connect(sys.argv[1], "default")
    spec = {{"id": sys.argv[3], "name": "from the app", "handler": "app.greet",
             "payload": {{"who": GreetingWorkflow.__name__}}, "delay": 0}}
    await operations.schedule(client, spec, now=datetime.now(UTC), task_queue=sys.argv[2])

asyncio.run(main())
exit_now(0)  # as our own scripts end: the SDK's threads can crash interpreter teardown
"""


async def test_an_app_with_nested_packages_runs_handlers_and_calls_the_client(
    dev_server: DevServer,
    dev_client: Client,
    queue: str,
    processes: list[Process],
    tmp_path: Path,
) -> None:
    app = temporal_app(tmp_path / "app", "myapp.workflows")
    env = clean_env(
        dev_server.address,
        queue,
        JOBS_HANDLER_MODULES="myapp.app_jobs",
        PYTHONPATH=str(app),
    )
    worker = Process([JOBS, "worker"], env, app, tmp_path / "worker.log")
    processes.append(worker)
    worker.wait_polling()
    job_id = f"app-{uuid.uuid4().hex[:10]}"
    write(app, {"schedule_one.py": CLIENT.format()})
    scheduled = await asyncio.to_thread(  # the app's own process: its root first on sys.path
        subprocess.run,
        [sys.executable, "schedule_one.py", dev_server.address, queue, job_id],
        cwd=app,
        env={**os.environ, "PYTHONPATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert scheduled.returncode == 0, scheduled.stderr
    report = await eventually(
        lambda: operations.status(dev_client, job_id),
        lambda report: report.status in ("done", "dead"),
        timeout=60,
        what=f"{job_id} finished",
    )
    assert isinstance(report, JobReport)
    assert report.result == {"workflow": "GreetingWorkflow", "who": "GreetingWorkflow"}, report
