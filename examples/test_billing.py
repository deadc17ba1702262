"""Testing handlers and a Berlin cron with jobctl.testing: `pytest examples/` (no server)."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from jobctl import cron_preview
from jobctl.testing import job_test_env

# Berlin's clocks go forward on 28 March 2027: 02:30 does not exist that night.
START = datetime(2027, 3, 27, tzinfo=ZoneInfo("Europe/Berlin"))


async def test_a_charge_a_day_ahead_runs_with_its_payload() -> None:
    async with job_test_env("billing_handlers") as env:
        job = await env.schedule(
            "charge", handler="billing.charge", in_="1d", payload={"amount_cents": 1250}
        )
        report = await env.settled(job)
    assert report.status == "done" and report.result == {"charged": 1250}
    assert [(c.payload, c.attempt) for c in env.calls] == [({"amount_cents": 1250}, 1)]


async def test_a_failing_charge_goes_dead_after_its_attempts_and_a_requeue_runs_it_again() -> None:
    async with job_test_env("billing_handlers") as env:
        job = await env.schedule("flaky", handler="billing.flaky", in_="1h", max_attempts=3)
        assert (await env.settled(job)).status == "dead"
        await env.requeue(job)
        assert (await env.settled(job)).status == "dead"
    assert [c.attempt for c in env.calls] == [1, 2, 3, 4, 5, 6]


async def test_the_nightly_report_fires_as_cron_preview_says_across_the_spring_change() -> None:
    async with job_test_env("billing_handlers") as env:
        end = START + timedelta(days=3)
        await env.schedule(
            "nightly",
            handler="billing.report",
            cron="30 2 * * *",
            tz="Europe/Berlin",
            start=START.isoformat(),
            end=end.isoformat(),
        )
        await env.sleep(end + timedelta(hours=1) - await env.now())
    expected = cron_preview("30 2 * * *", "Europe/Berlin", START, 3)
    assert [c.scheduled_at for c in env.calls] == [datetime.fromisoformat(s.utc) for s in expected]
