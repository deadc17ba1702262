"""A user's handlers, as an app would write them (tested in examples/test_billing.py)."""

from jobctl import JobContext, PermanentError, handler


@handler("billing.charge")
def charge(ctx: JobContext) -> dict[str, int]:
    if ctx.payload["amount_cents"] <= 0:
        raise PermanentError("nothing to charge")
    return {"charged": ctx.payload["amount_cents"]}


@handler("billing.flaky")
def flaky(ctx: JobContext) -> None:
    raise RuntimeError(f"gateway down (attempt {ctx.attempt})")


@handler("billing.report")
def report(ctx: JobContext) -> str:
    return f"report for {ctx.scheduled_at:%Y-%m-%d %H:%M %Z}"
