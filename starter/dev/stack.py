"""``jobctl dev``: the whole stack in one foreground process.

The Temporal dev server keeps its state in ``<state dir>/temporal.db``, so a second
``jobctl dev`` on the same directory finds every job still there. Ctrl-C stops everything.

It runs a worker in this process, so it imports the worker side (``worker``): with
:mod:`starter.dev.launch`, the only client-side module allowed to.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from jobctl.connection.client import connect
from jobctl.connection.errors import SpecError
from jobctl.starter.api import server as api_server
from jobctl.starter.dev.demo import run_demo
from jobctl.starter.dev.devserver import DevServer, taken_ports
from jobctl.worker import WorkerSettings, build_worker, metrics_runtime, publish_handlers


async def run_dev_stack(state_dir: str, port: int, ui_port: int, api_port: int, demo: bool) -> None:
    taken = taken_ports({"--port": port, "--ui-port": ui_port, "--api-port": api_port})
    if taken:
        raise SpecError(taken)
    state = Path(state_dir).resolve()
    server = DevServer(
        db_file=state / "temporal.db", port=port, ui_port=ui_port, log_path=state / "temporal.log"
    )
    print(f"starting Temporal dev server (state in {server.db_file}) ...", flush=True)
    client = await server.start()
    os.environ["TEMPORAL_ADDRESS"] = server.address  # for anything this process starts
    os.environ.setdefault("JOBS_UI_URL", f"http://localhost:{ui_port}")  # the board's links
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    settings = WorkerSettings()
    # With JOBS_METRICS_PORT the worker's client records into a Prometheus runtime.
    runtime = metrics_runtime(settings)
    if runtime is not None:
        client = await connect(server.address, "default", runtime=runtime)
    job_worker = build_worker(client, settings)  # loads JOBS_HANDLER_MODULES
    await publish_handlers(client, settings, job_worker.activities.registry)
    # The API schedules through the worker's client: a job due now starts on this worker
    # straight from the start's answer (eager start, operations.starting).
    http = api_server("127.0.0.1", api_port, embedded=True, client=client)
    api_task = asyncio.create_task(http.serve())
    try:
        async with job_worker.running() as worker:
            print(f"Temporal:  {server.address}  (export TEMPORAL_ADDRESS={server.address})")
            print(f"Web UI:    http://localhost:{ui_port}/namespaces/default/workflows")
            print(f"API:       http://127.0.0.1:{api_port}  (docs: /docs)")
            print(f"board:     http://127.0.0.1:{api_port}/")
            print(f"worker:    polling task queue {worker.config()['task_queue']!r}")
            if settings.metrics_port is not None:
                host = settings.metrics_host
                print(f"metrics:   http://{host}:{settings.metrics_port}/metrics")
            print("Ctrl-C stops everything.", flush=True)
            if demo:
                demo_task = asyncio.create_task(run_demo(client))
                await asyncio.wait(
                    [demo_task, asyncio.create_task(stop.wait())],
                    return_when=asyncio.FIRST_COMPLETED,
                )
            await stop.wait()
            print("\nstopping ...", flush=True)
    finally:
        http.should_exit = True
        await api_task
        job_worker.close()
        server.stop()
        print("stopped.", flush=True)
