"""Tracing: one trace from ``jobctl schedule`` / ``POST /jobs`` through the workflow to the
handler, and nothing at all when tracing is off.

The end-to-end tests run a real worker in-process on the session's dev server, built on the
same tracing client, with spans kept in memory; the CLI test runs the real ``jobs`` process
against a tiny OTLP/HTTP collector, which proves the exporter, the service name and the flush
before ``os._exit``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor

from jobctl.connection import tracing
from jobctl.connection.client import connect
from jobctl.starter.api import create_app
from jobctl.starter.cli import cli
from jobctl.starter.dev.devserver import DevServer
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.processes import ROOT, cli_env, jobs
from tests.helpers.temporal import running_worker

SWITCHES = (
    tracing.OTLP_ENDPOINT_ENV,
    tracing.OTLP_TRACES_ENDPOINT_ENV,
    tracing.CONSOLE_ENV,
    tracing.SERVICE_NAME_ENV,
    tracing.SDK_DISABLED_ENV,
)


@pytest.fixture(autouse=True)
def fresh_tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test decides afresh, with no switch set, and leaves nothing decided behind."""
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tracing, "_role", None)
    tracing.reset()
    yield
    tracing.reset()


@pytest.fixture
def memory() -> InMemorySpanExporter:
    """Tracing on, every span kept in memory as it ends."""
    exporter = InMemorySpanExporter()
    tracing.set_role("test")
    tracing.configure([SimpleSpanProcessor(exporter)])
    return exporter


def only(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


# -- the switch ---------------------------------------------------------------------------


def test_the_environment_switches_tracing_on_and_picks_the_exporters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not tracing.enabled({}) and tracing.span_processors({}) == []
    assert not tracing.enabled({tracing.CONSOLE_ENV: "0"})
    assert not tracing.enabled({tracing.CONSOLE_ENV: "1", tracing.SDK_DISABLED_ENV: "true"})

    [console] = tracing.span_processors({tracing.CONSOLE_ENV: "1"})
    assert isinstance(console, SimpleSpanProcessor)
    assert isinstance(console.span_exporter, ConsoleSpanExporter)

    # The exporter reads the standard variables itself, so set the real environment too.
    monkeypatch.setenv(tracing.OTLP_ENDPOINT_ENV, "http://collector:4318")
    processors = tracing.span_processors()
    try:
        [otlp] = processors
        assert isinstance(otlp, BatchSpanProcessor)
        assert isinstance(otlp.span_exporter, OTLPSpanExporter)
        assert otlp.span_exporter._endpoint == "http://collector:4318/v1/traces"
    finally:
        for processor in processors:
            processor.shutdown()
    monkeypatch.setenv(tracing.CONSOLE_ENV, "1")
    both = tracing.span_processors()
    for processor in both:
        processor.shutdown()
    assert [type(p) for p in both] == [BatchSpanProcessor, SimpleSpanProcessor]


def test_service_name_is_jobs_role_unless_otel_service_name() -> None:
    tracing.set_role("api")
    assert tracing.service_name({}) == "jobs-api"
    assert tracing.service_name({tracing.SERVICE_NAME_ENV: "billing-jobs"}) == "billing-jobs"
    provider = tracing.configure([SimpleSpanProcessor(InMemorySpanExporter())], environ={})
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "jobs-api"


@pytest.mark.devserver
async def test_tracing_off_connect_adds_no_interceptor(dev_server: DevServer) -> None:
    client = await connect(dev_server.address, "default")
    assert client.config()["interceptors"] == []
    assert tracing.provider() is None
    with tracing.schedule_span({"handler": "log"}) as span:
        assert span.span is None
    # The contrast: the same connect with tracing on carries the interceptor.
    tracing.configure([SimpleSpanProcessor(InMemorySpanExporter())])
    traced = await connect(dev_server.address, "default")
    [interceptor] = traced.config()["interceptors"]
    assert isinstance(interceptor, TracingInterceptor)


PROBE = """
import asyncio, json, os, sys
from jobctl.connection import tracing
from jobctl.connection.client import connect

async def interceptors():
    client = await connect(sys.argv[1], "default")
    return [type(i).__name__ for i in client.config()["interceptors"]]

names = asyncio.run(interceptors())
with tracing.schedule_span({"handler": "log", "id": "probe-1"}):
    pass
tracing.shutdown()
print(json.dumps({
    "interceptors": names,
    "sdk": "opentelemetry.sdk" in sys.modules,
    "contrib": "temporalio.contrib.opentelemetry" in sys.modules,
}), flush=True)
os._exit(0)
"""


@pytest.mark.devserver
def test_a_process_decides_from_its_environment_and_off_imports_nothing(
    dev_server: DevServer, tmp_path: Path
) -> None:
    script = tmp_path / "probe.py"  # the main script's name is the role: jobs-probe
    script.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    env["PYTHONPATH"] = str(ROOT)

    def probe(**extra: str) -> tuple[dict[str, Any], str]:
        done = subprocess.run(
            [sys.executable, str(script), dev_server.address],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout), done.stderr

    off, off_err = probe()
    assert off == {"interceptors": [], "sdk": False, "contrib": False}
    assert "jobs.schedule" not in off_err

    on, on_err = probe(**{tracing.CONSOLE_ENV: "1"})
    assert on == {"interceptors": ["TracingInterceptor"], "sdk": True, "contrib": True}
    assert '"name": "jobs.schedule"' in on_err  # on stderr: stdout stayed one JSON line
    assert '"service.name": "jobs-probe"' in on_err


# -- one trace, end to end ----------------------------------------------------------------


async def schedule_through(
    entry: Literal["cli", "api"], client: Client, job_id: str, delay: str, task_queue: str
) -> None:
    """Schedule the way a person does: the ``jobctl schedule`` command, or ``POST /jobs``."""
    if entry == "cli":
        args = ["schedule", "traced", "--handler", "demo.sleep", "--payload", '{"seconds": 0}']
        runner = CliRunner()
        # The command runs its own event loop, as in the real process: give it a thread.
        result = await asyncio.to_thread(
            runner.invoke, cli, [*args, "--in", delay, "--id", job_id, "--json"]
        )
        assert result.exit_code == 0, (result.output, result.exception)
        assert json.loads(result.output)["job_id"] == job_id
        return
    app = create_app(token="", client=client, task_queue=task_queue)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        body = {
            "id": job_id,
            "name": "traced",
            "handler": "demo.sleep",
            "payload": {"seconds": 0},
            "delay": delay,
        }
        answer = await http.post("/jobs", json=body)
    assert answer.status_code == 201, answer.text


@pytest.mark.devserver
@pytest.mark.parametrize("entry", ["cli", "api"])
async def test_one_trace_from_schedule_through_the_workflow_to_the_handler(
    entry: Literal["cli", "api"],
    dev_server: DevServer,
    task_queue: str,
    memory: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_server.address)
    monkeypatch.setenv("JOBS_TASK_QUEUE", task_queue)  # the CLI's setting, as in a shell
    monkeypatch.setenv("JOBS_ALLOWED_HANDLERS", "demo.sleep")  # no registry query to wait on
    client = await connect(dev_server.address, "default")  # the worker's client: traced too
    job_id = f"traced-{entry}-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, task_queue):
        await schedule_through(entry, client, job_id, "0", task_queue)
        handle = client.get_workflow_handle(job_id, result_type=JobReport)
        async with asyncio.timeout(60):
            report = await handle.result()
    assert report.status == JobStatus.DONE

    spans = list(memory.get_finished_spans())
    roots = [s for s in spans if s.name == tracing.SCHEDULE_SPAN]
    [root] = [s for s in roots if (s.attributes or {}).get("jobs.job_id") == job_id]
    assert root.parent is None, "the schedule operation is the root"
    attributes = dict(root.attributes or {})
    assert attributes.pop("jobs.next_run_at")  # an ISO time
    assert attributes == {
        "jobs.job_id": job_id,
        "jobs.handler": "demo.sleep",
        "jobs.kind": "one-shot",
        "jobs.created": True,
    }
    trace = [s for s in spans if trace_id(s) == trace_id(root)]
    start = only(trace, "StartWorkflow:JobWorkflow")
    run = only(trace, "RunWorkflow:JobWorkflow")
    start_activity = only(trace, "StartActivity:run_job")
    run_activity = only(trace, "RunActivity:run_job")
    complete = only(trace, "CompleteWorkflow:JobWorkflow")
    assert parent_of(start) == span_id(root)
    # The SDK hangs every workflow-side span on the workflow's context, the StartWorkflow span
    # carried in the header (its workflow spans are zero-length markers, for replay safety):
    # RunWorkflow, StartActivity and CompleteWorkflow are siblings, in that order.
    assert parent_of(run) == span_id(start)
    assert parent_of(start_activity) == span_id(start)
    assert parent_of(complete) == span_id(start)
    assert run.start_time is not None and start_activity.start_time is not None
    assert complete.start_time is not None
    assert run.start_time <= start_activity.start_time <= complete.start_time
    assert parent_of(run_activity) == span_id(start_activity)
    assert (run_activity.attributes or {}).get("temporalWorkflowID") == job_id
    # Nothing of this job landed in another trace.
    elsewhere = [
        s.name
        for s in spans
        if (s.attributes or {}).get("temporalWorkflowID") == job_id
        and trace_id(s) != trace_id(root)
    ]
    assert elsewhere == []
    assert run_activity.resource.attributes["service.name"] == "jobs-test"


@pytest.mark.devserver
async def test_post_jobs_continues_the_callers_trace(
    dev_server: DevServer,
    task_queue: str,
    memory: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBS_ALLOWED_HANDLERS", "log")
    client = await connect(dev_server.address, "default")
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    job_id = f"traced-caller-{uuid.uuid4().hex[:8]}"
    app = create_app(token="", client=client, task_queue=task_queue)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as http:
        answer = await http.post(
            "/jobs",
            json={"id": job_id, "name": "traced", "handler": "log", "delay": "1h"},
            headers={"traceparent": f"00-{caller_trace}-{caller_span}-01"},
        )
    assert answer.status_code == 201, answer.text
    await client.get_workflow_handle(job_id).terminate("test over")
    spans = list(memory.get_finished_spans())
    root = only(spans, tracing.SCHEDULE_SPAN)
    assert root.parent is not None and root.parent.is_remote
    assert (trace_id(root), parent_of(root)) == (int(caller_trace, 16), int(caller_span, 16))
    start = only(spans, "StartWorkflow:JobWorkflow")
    assert (trace_id(start), parent_of(start)) == (trace_id(root), span_id(root))


# -- the CLI process: OTLP out, flushed before os._exit --------------------------------------


@dataclass
class Collector:
    url: str
    paths: list[str] = field(default_factory=list)
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)


@contextmanager
def collector() -> Iterator[Collector]:
    """An OTLP/HTTP trace collector on 127.0.0.1 that keeps what it is sent."""
    got = Collector(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            got.paths.append(self.path)
            got.requests.append(request)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.devserver
async def test_jobs_schedule_exports_its_trace_before_it_exits(
    dev_server: DevServer, dev_client: Client, task_queue: str
) -> None:
    job_id = f"traced-otlp-{uuid.uuid4().hex[:8]}"
    with collector() as otlp:
        env = cli_env(dev_server.address, task_queue, JOBS_ALLOWED_HANDLERS="log")
        env = {k: v for k, v in env.items() if k not in SWITCHES}
        env[tracing.OTLP_ENDPOINT_ENV] = otlp.url
        done = await asyncio.to_thread(
            jobs, env, "schedule", "otlp", "--handler", "log", "--in", "1h", "--id", job_id
        )
    await dev_client.get_workflow_handle(job_id).terminate("test over")
    assert done.returncode == 0, done.stderr
    assert otlp.paths and set(otlp.paths) == {"/v1/traces"}
    spans: dict[str, tuple[Any, str]] = {}  # name: (span, service.name)
    for request in otlp.requests:
        for resource_spans in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}.get(
                "service.name", ""
            )
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans[span.name] = (span, service)
    root, root_service = spans[tracing.SCHEDULE_SPAN]
    start, _ = spans["StartWorkflow:JobWorkflow"]
    assert root_service == "jobs-cli"
    assert {a.key: a.value.string_value for a in root.attributes}["jobs.job_id"] == job_id
    assert root.parent_span_id == b""
    assert (start.trace_id, start.parent_span_id) == (root.trace_id, root.span_id)
