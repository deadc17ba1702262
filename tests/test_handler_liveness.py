"""Issue 41: which workers serve a handler now (dev server): Temporal's pollers of the
handler's queue. A stopped worker leaves the list within about a minute; its own file, so
its minute of waiting runs beside the other routing tests, not after them."""

from __future__ import annotations

import uuid
from functools import partial

from temporalio.client import Client

from jobctl.starter import operations
from jobctl.starter.operations import handler_watch
from tests.helpers.poll import eventually
from tests.helpers.temporal import live_now
from tests.test_handler_routing import PLUGIN, worker_of


async def test_a_stopped_worker_leaves_the_live_list_within_about_a_minute(
    dev_client: Client,
) -> None:
    queue = f"live-{uuid.uuid4().hex[:8]}"
    async with worker_of(dev_client, queue, "plugin", "log", PLUGIN, publish=True):
        handler_watch._seen.clear()
        listing = await operations.handler_listing(dev_client, queue)
    live = {h.name: [w.worker for w in h.live] for h in listing.handlers}
    assert live[PLUGIN] == ["plugin"] and live["log"] == ["plugin"]
    assert live["http.post"] == []  # built-in, but this worker does not serve it

    # The server answers an idle poll within about a minute; a stopped worker polls no more.
    bound = handler_watch.LIVE_WITHIN.total_seconds() + 15
    plugin_live = partial(live_now, dev_client, queue, PLUGIN)
    assert await eventually(plugin_live, lambda found: found == [], timeout=bound) == []
