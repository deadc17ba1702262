"""When a pre-dispatched attempt checks that its job still wants to run, and so until when a
pause can still reach it: one rule for the worker (which checks) and the workflow (which
refuses a pause the check could miss). Pure: workflow code imports it.

An attempt that waits in its worker up to LONG_WAIT (a lone job's lead is 15-30 s) checks
GO_CHECK_AHEAD plus a random part of GO_CHECK_SPREAD before run_at (3-9 s). One that waits
longer, a job of a herd the wake plan spread over a longer notice, checks CHECK_SHARE of its
wait before run_at: the wake plan hands a herd to the workers at a bounded rate, so the
checks and start records that follow the share of each wait keep a bounded rate too (the
wake rate / CHECK_SHARE), where the 3-9 s rule put a whole herd's into the same 6 s (5,000
due together: the checks took 16 s at the median and the herd fired 35 s late at p99).

The workflow accepts a pause of a dispatched job until :func:`pause_cutoff` before run_at,
at least CHECK_MARGIN ahead of any moment its attempt checks: the attempt's wait is never
longer than the workflow's (it starts after it was scheduled), and its clock is never ahead
of the server's (:mod:`activities.server_clock`).
"""

from __future__ import annotations

GO_CHECK_AHEAD = 3.0  # seconds before run_at, at the latest
GO_CHECK_SPREAD = 6.0  # ... plus a random part of this, so a herd does not check at once
LONG_WAIT = 30.0  # a wait up to this long (the default dispatch_lead) checks at 3-9 s
CHECK_SHARE = 0.5  # a longer wait checks this share of it before run_at
CHECK_MARGIN = 1.0  # a pause lands at least this long before the check (the status write)
SHORT_WAIT_CUTOFF = GO_CHECK_AHEAD + GO_CHECK_SPREAD + CHECK_MARGIN  # 10 s: CONTROL_CUTOFF


def check_ahead(wait: float, draw: float) -> float:
    """Seconds before run_at at which an attempt that waits ``wait`` seconds in its worker
    (run_at minus its start, by the server's clock) checks; ``draw`` in [0, 1] picks the
    moment within the 3-9 s window."""
    near = GO_CHECK_AHEAD + draw * GO_CHECK_SPREAD
    if wait <= LONG_WAIT:
        return near
    return max(near, CHECK_SHARE * wait)


def pause_cutoff(wait: float) -> float:
    """Seconds before run_at after which a job dispatched ``wait`` seconds before it (run_at
    minus when the workflow scheduled the attempt) refuses pause: its attempt may have
    checked by then."""
    if wait <= LONG_WAIT:
        return SHORT_WAIT_CUTOFF
    return max(SHORT_WAIT_CUTOFF, CHECK_SHARE * wait + CHECK_MARGIN)
