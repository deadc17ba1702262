"""Property-based fuzzing of the API's own OpenAPI document (schemathesis), against a real
dev server and worker: no 5xx, and every answer matches the schema it claims.

Driven through hypothesis directly (schemathesis's pytest plugin does not support pytest 9).
"""

from __future__ import annotations

from typing import Any, cast

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from tests.helpers.api import Stack

pytestmark = pytest.mark.devserver
EXAMPLES_PER_OPERATION = 25
# Everything about the answers. Not "positive_data_acceptance": a schema-valid body can still
# be refused with 422 for rules JSON Schema cannot say (exactly one of run_at/delay/cron, a
# handler some worker runs, timeout >= lease, a cron that can fire, ...).
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]


def test_no_server_errors_and_answers_match_the_schema(stack: Stack) -> None:
    schema = schemathesis.openapi.from_url(f"{stack.api.url}/openapi.json")
    operations = [cast(Any, result).ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12
    calls: dict[str, int] = {}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            response = case.call_and_validate(checks=CHECKS)
            key = f"{case.method} {case.path} {response.status_code}"
            calls[key] = calls.get(key, 0) + 1

        check()
    assert sum(calls.values()) >= 8 * len(operations), calls  # really exercised, not vacuous
