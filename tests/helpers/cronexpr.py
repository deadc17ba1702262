"""Random cron expressions in our syntax (hypothesis strategies), and keeping the accepted."""

from __future__ import annotations

from hypothesis import assume
from hypothesis import strategies as st

from jobctl.workflows.cronmath import Cron, CronError, parse


def field_strategy(low: int, high: int, specials: list[str]) -> st.SearchStrategy[str]:
    number = st.integers(low, high)

    @st.composite
    def item(draw: st.DrawFn) -> str:
        kind = draw(st.sampled_from(["value", "range", "step", "start-step", "special"]))
        a, b = sorted((draw(number), draw(number)))
        if kind == "value":
            return str(a)
        if kind == "range":
            return f"{a}-{b}" if a < b else str(a)
        if kind == "special" and specials:
            return draw(st.sampled_from(specials))
        top = min(high, 6) if high == 7 else high  # day-of-week: '*' and a/n stop at 6
        base = draw(st.sampled_from(["*", f"{a}-{b}", f"{a}"]))
        width = {"*": top - low, f"{a}-{b}": b - a, f"{a}": top - a}[base]
        if width < 1:
            return str(a)
        return f"{base}/{draw(st.integers(1, width))}"

    return st.one_of(st.just("*"), st.lists(item(), min_size=1, max_size=3).map(",".join))


DOM_SPECIALS = ["L", "1W", "15W", "31W"]
DOW_SPECIALS = ["5#2", "1#1", "0#5", "L5", "5L", "FRI", "MON-FRI", "SAT#4"]


@st.composite
def expressions(draw: st.DrawFn, seconds: bool | None = None) -> str:
    """Random expressions in our syntax (many are refused: callers keep the accepted)."""
    fields = [
        draw(field_strategy(0, 59, [])),
        draw(field_strategy(0, 23, [])),
        draw(field_strategy(1, 31, DOM_SPECIALS)),
        draw(field_strategy(1, 12, ["JAN", "FEB-APR", "dec"])),
        draw(field_strategy(0, 7, DOW_SPECIALS)),
    ]
    with_seconds = draw(st.booleans()) if seconds is None else seconds
    if with_seconds:
        fields.insert(0, draw(field_strategy(0, 59, [])))
    return " ".join(fields)


def accepted(expression: str) -> Cron:
    try:
        return parse(expression)
    except CronError:
        assume(False)
        raise
