"""``jobs``: schedule and control jobs, run a worker or the whole embedded stack.

Exit codes: 0 success, 1 unexpected error, 2 invalid input, 3 unknown job, 4 job id taken,
5 invalid transition, 6 Temporal unreachable. The process ends with ``os._exit`` after
flushing, because the Temporal SDK can crash during interpreter teardown (sdk-python #300)
and turn a success into a SIGABRT for the calling script.

One module per command group: :mod:`~starter.cli.jobs` (schedule, status, list and the
controls), :mod:`~starter.cli.cron`, :mod:`~starter.cli.dlq`, :mod:`~starter.cli.processes`
(worker, api, dev); :mod:`~starter.cli.main` assembles the group and the entry point.
"""

from jobctl.starter.cli.main import cli, main, run

__all__ = ["cli", "main", "run"]
