"""A pytest plugin for ``bash scripts/test``'s parallel pass: the slowest test files first.

pytest-xdist's ``--dist loadfile`` hands out one file at a time, in queue order. By default it
orders the queue by number of tests (``--loadscope-reorder``), so the many-case hostile files
went first and the drills (few tests, minutes of waiting) last, where one of them could hold a
worker long after the others had finished. ``scripts/test`` passes ``--no-loadscope-reorder``
and this plugin (``-p tests.helpers.slowfirst``) orders the collection longest file first (the
longest-processing-time rule): the short files fill the gaps at the end.

``SECONDS`` are rough per-file times: each file's tests summed (setup, call and teardown, as
``pytest --junitxml`` reports them) in a three-worker run of the full suite, rounded to 5 s,
less the cuts made since. They only steer the order: a stale figure costs minutes, never a
result. Refresh them when a file's time changes a lot, or add a new slow file. Files not
listed keep their collection order after the listed ones.
"""

from __future__ import annotations

import pytest

SECONDS: dict[str, float] = {
    "tests/test_drills_load.py": 110,
    "tests/test_handler_liveness.py": 80,
    "tests/test_handler_routing.py": 70,
    "tests/test_dlq_devserver.py": 75,
    "tests/test_priority.py": 85,
    "tests/test_dispatch.py": 80,
    "tests/test_readme_blocks.py": 80,
    "tests/test_board_browser.py": 70,
    "tests/test_cli.py": 65,
    "tests/test_cancel.py": 50,
    "tests/test_cron_workflow.py": 50,
    "tests/test_drill_concurrency.py": 35,
    "tests/test_poison_drill.py": 45,
    "tests/hostile/test_signals.py": 40,
    "tests/test_dispatch_lead.py": 40,
    "tests/test_server_work.py": 40,
    "tests/test_drills.py": 35,
    "tests/test_failure_size.py": 35,
    "tests/test_start_record.py": 35,
    "tests/hostile/test_cli_hostile.py": 30,
    "tests/test_cron_lean_waits.py": 30,
    "tests/test_status_listing.py": 30,
    "tests/test_api_fuzz.py": 20,
    "tests/test_cron_backfill.py": 20,
    "tests/test_dst_policy.py": 20,
    "tests/test_lean_job.py": 20,
    "tests/hostile/test_api_http.py": 15,
    "tests/hostile/test_priority_fields.py": 15,
    "tests/test_api.py": 50,
    "tests/test_rate_limit.py": 40,  # new on 2026-12-07: their authors' timings
    "tests/hostile/test_batches.py": 30,
    "tests/test_memory_bounds.py": 30,
    "tests/test_installed_package.py": 30,
    "tests/hostile/test_rate_signals.py": 20,
    "tests/test_batch_workflow.py": 15,
    "tests/test_dependencies.py": 20,
    "tests/test_limits_listing.py": 10,
    "tests/test_concurrency.py": 15,
    "tests/test_cron_first_slot.py": 15,
    "tests/test_jobsclient.py": 15,
    "tests/test_lean_cron_dlq.py": 15,
    "tests/test_metrics.py": 15,
    "tests/test_readme_tour.py": 15,
    "tests/hostile/test_backfill.py": 10,
    "tests/hostile/test_bulk.py": 10,
    "tests/hostile/test_concurrency_signals.py": 10,
    "tests/hostile/test_dst_preview.py": 10,
    "tests/hostile/test_http_post.py": 10,
    "tests/test_audit.py": 10,
    "tests/test_cronwalk.py": 10,
    "tests/test_devserver.py": 10,
}


def weight(item: pytest.Item) -> float:
    return SECONDS.get(item.nodeid.split("::", 1)[0], 0.0)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Stable: a file's tests keep their order, unlisted files keep theirs."""
    items.sort(key=lambda item: -weight(item))
