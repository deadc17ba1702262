"""What the tests share, in one place; test modules import from here, never from each other.

* ``poll``: ``eventually`` / ``eventually_sync``, the one polling loop.
* ``temporal``: an in-process worker (``running_worker``) and ``end_singletons``.
* ``jobs``, ``cron``, ``dlq``: driving jobs, crons and the DLQ on the time-skipping server.
* ``processes``: ``jobs`` CLI calls, worker and API subprocesses (the real-process tests).
* ``api``: the module-scoped ``Stack`` and waiting on a job over HTTP.
* ``prometheus``, ``cronexpr``, ``httpserver``: metrics parsing, cron expression strategies,
  a loopback HTTP endpoint.
* ``drills``, ``sqlite_fixtures``: the failure drills' records, report and file-backed server.
* ``slowfirst``: a plugin ``scripts/test`` loads (``-p``) to hand the slowest files out first.
"""
