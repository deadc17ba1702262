"""The search attributes every job and cron workflow carries (registered on every server we
start), as typed keys built from their names in :mod:`workflows.names`."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

from jobctl.workflows import names

JOB_STATUS = SearchAttributeKey.for_keyword(names.SA_JOB_STATUS)
JOB_NAME = SearchAttributeKey.for_keyword(names.SA_JOB_NAME)
JOB_HANDLER = SearchAttributeKey.for_keyword(names.SA_JOB_HANDLER)
JOB_RUN_AT = SearchAttributeKey.for_datetime(names.SA_JOB_RUN_AT)
SEARCH_ATTRIBUTES = (JOB_STATUS, JOB_NAME, JOB_HANDLER, JOB_RUN_AT)
# Temporal's own, not registered by us (see connection.build).
BUILD_IDS = SearchAttributeKey.for_keyword_list(names.SA_BUILD_IDS)
