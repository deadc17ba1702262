"""A pytest plugin for ``bash scripts/test``'s parallel pass: the slowest test files first.

pytest-xdist's ``--dist loadfile`` hands out one file at a time, in queue order. By default it
orders the queue by number of tests (``--loadscope-reorder``), so the many-case hostile files
went first and the drills (few tests, minutes of waiting) last, where one of them could hold a
worker long after the others had finished. ``scripts/test`` passes ``--no-loadscope-reorder``
and this plugin (``-p tests.helpers.slowfirst``) orders the collection longest file first (the
longest-processing-time rule): the short files fill the gaps at the end.

``SECONDS`` are rough per-file times: each file's tests summed (setup, call and teardown, as
``pytest --junitxml`` reports them) in a five-worker run of the full suite on a busy machine
(2026-12-07), scaled by 0.55 to a quiet one's pace and rounded to 5 s. They only steer the
order: a stale figure costs minutes, never a result. Refresh them when a file's time changes
a lot, or add a new slow file. Files not listed keep their collection order after the listed
ones.
"""

from __future__ import annotations

import pytest

SECONDS: dict[str, float] = {
    "tests/test_drill_batch.py": 80,  # new this session: estimates from their authors' runs
    "tests/test_rate_limit.py": 40,
    "tests/hostile/test_batches.py": 30,
    "tests/hostile/test_rate_signals.py": 20,
    "tests/test_limits_listing.py": 15,
    "tests/test_batch_workflow.py": 15,
    "tests/test_dlq_devserver.py": 165,
    "tests/test_priority.py": 115,
    "tests/test_cli.py": 95,
    "tests/test_handler_routing.py": 80,
    "tests/test_drills_load.py": 80,
    "tests/test_dispatch.py": 70,
    "tests/test_cron_workflow.py": 65,
    "tests/test_board_browser.py": 60,
    "tests/hostile/test_cli_hostile.py": 60,
    "tests/hostile/test_signals.py": 55,
    "tests/test_readme_blocks.py": 50,
    "tests/test_cancel.py": 45,
    "tests/test_api.py": 45,
    "tests/test_handler_liveness.py": 80,  # one wait of ~75 s: it does not scale with load
    "tests/test_dst_policy.py": 40,
    "tests/test_memory_bounds.py": 35,
    "tests/test_cronwalk.py": 35,
    "tests/test_poison_drill.py": 35,
    "tests/test_drill_concurrency.py": 30,
    "tests/test_server_work.py": 30,
    "tests/test_installed_package.py": 25,
    "tests/test_dispatch_lead.py": 25,
    "tests/test_drills.py": 25,
    "tests/hostile/test_bulk.py": 25,
    "tests/test_lean_job.py": 25,
    "tests/hostile/test_dst_preview.py": 25,
    "tests/test_failure_size.py": 25,
    "tests/test_cron_lean_waits.py": 20,
    "tests/hostile/test_priority_fields.py": 20,
    "tests/test_start_record.py": 20,
    "tests/test_plugins.py": 20,
    "tests/test_api_fuzz.py": 20,
    "tests/test_readme_tour.py": 20,
    "tests/hostile/test_backfill.py": 20,
    "tests/test_status_listing.py": 15,
    "tests/test_cron_backfill.py": 15,
    "tests/hostile/test_status_filter.py": 15,
    "tests/test_devserver.py": 15,
    "tests/test_build_ids.py": 15,
    "tests/test_concurrency.py": 15,
    "tests/test_cronmath.py": 15,
    "tests/test_stalled_worker.py": 15,
    "tests/test_worker_roles.py": 15,
    "tests/test_lean_cron_dlq.py": 15,
    "tests/hostile/test_api_http.py": 15,
    "tests/test_metrics.py": 10,
    "tests/hostile/test_http_post.py": 10,
    "tests/test_testing_kit.py": 10,
    "tests/test_jobsclient.py": 10,
    "tests/test_malloc_arenas.py": 10,
    "tests/test_cron_first_slot.py": 10,
    "tests/hostile/test_cron_expressions.py": 10,
    "tests/test_starter_scripts.py": 10,
    "tests/test_ui_metadata.py": 10,
    "tests/test_bulk.py": 10,
    "tests/test_tracing.py": 10,
    "tests/test_gc_pause.py": 10,
    "tests/test_job_workflow.py": 10,
    "tests/test_handlers.py": 10,
    "tests/test_audit.py": 10,
    "tests/test_codec.py": 10,
}


def weight(item: pytest.Item) -> float:
    return SECONDS.get(item.nodeid.split("::", 1)[0], 0.0)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Stable: a file's tests keep their order, unlisted files keep theirs."""
    items.sort(key=lambda item: -weight(item))
