"""How the replay check sets up the workflow sandbox (workers run unsandboxed, worker.py
``build_worker``): the modules that define workflows are imported afresh for every run (from
bytecode written first: without it, under PYTHONDONTWRITEBYTECODE, each run compiled their
source again); every other module of ``workflows/`` is shared with every run instead of
being imported again."""

from __future__ import annotations

import importlib.util
import pkgutil
from pathlib import Path

import jobctl.workflows.job_workflow
from jobctl import workflows
from jobctl.worker import WORKFLOWS, sandbox_passthrough, sandbox_runner


def test_building_the_sandbox_runner_leaves_bytecode_for_the_workflow_modules() -> None:
    source = jobctl.workflows.job_workflow.__file__
    assert source is not None
    cached = Path(importlib.util.cache_from_source(source))
    cached.unlink(missing_ok=True)
    sandbox_runner()
    assert cached.is_file()
    # Valid for the current source: the import system would load it rather than compile.
    assert cached.stat().st_mtime >= Path(source).stat().st_mtime


def test_the_sandbox_shares_every_helper_module_and_no_workflow_definition() -> None:
    shared = set(sandbox_passthrough())
    defining = {cls.__module__ for cls in WORKFLOWS}
    everything = {
        m.name for m in pkgutil.walk_packages(workflows.__path__, prefix=f"{workflows.__name__}.")
    }
    assert defining == {
        "jobctl.workflows.job_workflow",
        "jobctl.workflows.cron_workflow",
        "jobctl.workflows.dlq_workflow",
        "jobctl.workflows.registry_workflow",
        "jobctl.workflows.concurrency_workflow",
        "jobctl.workflows.ratelimit_workflow",
        "jobctl.workflows.batch_workflow",
    }
    assert not shared & defining
    assert everything - defining <= shared
    assert {
        "jobctl.workflows.jobstatus",
        "jobctl.workflows.job_rules",
        "jobctl.workflows.models.spec",
        "jobctl.workflows.limiter_calls",
        "jobctl.workflows.rates",
    } <= shared
    assert {"pydantic", "pydantic_core"} <= shared
