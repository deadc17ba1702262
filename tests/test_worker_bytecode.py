"""The worker writes bytecode for the workflow modules, which the sandbox re-imports for every
workflow run: without it (PYTHONDONTWRITEBYTECODE) each run compiled their source again."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import workflows.job_workflow
from worker import sandbox_runner


def test_building_the_sandbox_runner_leaves_bytecode_for_the_workflow_modules() -> None:
    source = workflows.job_workflow.__file__
    assert source is not None
    cached = Path(importlib.util.cache_from_source(source))
    cached.unlink(missing_ok=True)
    sandbox_runner()
    assert cached.is_file()
    # Valid for the current source: the import system would load it rather than compile.
    assert cached.stat().st_mtime >= Path(source).stat().st_mtime
