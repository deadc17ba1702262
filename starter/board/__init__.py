"""The live job board: ``GET /`` serves one page (plain HTML, CSS and JS shipped in this
package, no CDN, no build step) that polls ``GET /board`` about once a second.

Every card's status is the one rule's (:mod:`workflows.jobstatus`), computed here: the browser
shows what the API computed. One refresh never lists every workflow. Each column is one
visibility count plus one page of its 50 newest workflows (the count is skipped when that page
is the whole column), on the queries ``jobctl list --status`` uses
(:mod:`starter.operations.listing`); ``now`` is the API's clock:

=============  ===========================================================================
scheduled      open crons, open jobs with ``JobRunAt`` after now, and paused jobs (from
               visibility alone: a job triggered early shows here until described)
pending        in flight: open jobs with ``JobRunAt`` at or before now; ``describe`` of the
running        50 newest (8 at a time) sorts them into pending, running and retrying (a
retrying       cancelling job stays in its column, with its status saying so, until it settles)
dead           open and ``dead`` (parked; the card comes from the DLQ entry in the memo),
               and runs that ended failed (they cannot be requeued)
done           ``Completed`` (the newest closed first)
cancelled      ``Canceled``, ``Terminated`` and discarded runs
=============  ===========================================================================

Visibility cannot tell pending, running and retrying apart, so those counts are exact only
when every in-flight job was described (``exact: false`` otherwise: each count is then a
lower bound, out of ``in_flight``).

Successive refreshes within ``JOBS_BOARD_TTL`` seconds (default 1) share one snapshot,
so ten open tabs cost the server what one does. The event log is derived in the browser by
diffing successive snapshots (``board.js``), only for the cards shown.
"""

from jobctl.starter.board.models import Board, BoardColumn, Card, Column, Cost
from jobctl.starter.board.routes import PUBLIC_PATHS, install
from jobctl.starter.board.snapshot import BoardCache, Snapshot, queries

__all__ = [
    "PUBLIC_PATHS",
    "Board",
    "BoardCache",
    "BoardColumn",
    "Card",
    "Column",
    "Cost",
    "Snapshot",
    "install",
    "queries",
]
