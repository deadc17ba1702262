"""Cron syntax: five or six fields read strictly, every refusal naming its field.

Vixie cron's syntax plus croniter's ``L``, ``W`` and ``#``: lists, ``a-b`` ranges (never
backwards: ``23-1`` is refused with ``23,0-1`` suggested), ``*/n``, ``a-b/n`` and ``a/n`` steps
(1 up to the width of their range), month and weekday names (JAN, MON: three letters, any
case). Day-of-month ``L`` (last day) and ``15W`` (the weekday nearest the 15th); day-of-week
``5#2`` (2nd Friday, 1-5) and ``5L`` or ``L5`` (last Friday); 0 and 7 are Sunday. Refused:
other field counts, ``@daily`` and friends (the message gives the fields to write), ``?``,
hashed ``H`` and random ``R`` values, non-ASCII, line breaks, more than 120 characters.

Messages read ``<field> field '<item as written>' <problem>``; the caller adds which
expression (``cron: hour field '23-1' runs backwards ...``). Pure: passed through the
workflow sandbox by way of :mod:`workflows.cronmath`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_EXPRESSION_LENGTH = 120
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_SEPARATOR = re.compile(r"[ \t]+")
_FIELD_CHARS = re.compile(r"[A-Za-z0-9*/,#-]")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


class CronError(ValueError):
    """An expression (or a date) we refuse, with a message fit for a user."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int  # the highest value written (7 for day-of-week, another Sunday)
    star_high: int  # the highest value ``*`` covers
    names: tuple[str, ...] = ()  # names for low, low + 1, ...

    def fail(self, text: str, problem: str) -> CronError:
        return CronError(f"{self.name} field {text!r} {problem}")


SECOND = _Field("second", 0, 59, 59)
MINUTE = _Field("minute", 0, 59, 59)
HOUR = _Field("hour", 0, 23, 23)
DAY_OF_MONTH = _Field("day-of-month", 1, 31, 31)
MONTH = _Field("month", 1, 12, 12, _MONTHS)
DAY_OF_WEEK = _Field("day-of-week", 0, 7, 6, _WEEKDAYS)


@dataclass(frozen=True)
class Days:
    """Which days match: the day-of-month, month and day-of-week fields together."""

    dom: frozenset[int]
    dom_last: bool  # L
    dom_nearest: frozenset[int]  # nW: the weekday nearest the nth
    months: frozenset[int]
    dow: frozenset[int]  # 0 = Sunday
    dow_nth: frozenset[tuple[int, int]]  # (weekday, n): 5#2
    dow_last: frozenset[int]  # 5L
    both: bool  # Vixie: a field starts with '*', so a day must match both (else either)


@dataclass(frozen=True)
class Fields:
    """A read expression: the fields as written and the values they match."""

    texts: tuple[str, ...]  # 5 or 6, as written
    seconds: tuple[int, ...]  # (0,) for 5 fields
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: Days

    @property
    def expression(self) -> str:
        return " ".join(self.texts)


@dataclass
class _Values:
    """What one field's items add up to."""

    plain: set[int] = field(default_factory=set)
    last: bool = False
    nearest: set[int] = field(default_factory=set)
    nth: set[tuple[int, int]] = field(default_factory=set)
    last_weekday: set[int] = field(default_factory=set)


def read(expression: str) -> Fields:
    """Read an expression strictly; raises :class:`CronError` naming the field and problem."""
    texts = _split(expression)
    padded = texts if len(texts) == 6 else ["0", *texts]
    specs = (SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)
    second, minute, hour, dom, month, dow = (
        _parse_field(spec, text) for spec, text in zip(specs, padded, strict=True)
    )
    days = Days(
        dom=frozenset(dom.plain),
        dom_last=dom.last,
        dom_nearest=frozenset(dom.nearest),
        months=frozenset(month.plain),
        dow=frozenset(d % 7 for d in dow.plain),
        dow_nth=frozenset(dow.nth),
        dow_last=frozenset(dow.last_weekday),
        both=padded[3].startswith("*") or padded[5].startswith("*"),
    )
    return Fields(
        texts=tuple(texts),
        seconds=tuple(sorted(second.plain)),
        minutes=tuple(sorted(minute.plain)),
        hours=tuple(sorted(hour.plain)),
        days=days,
    )


def _split(expression: str) -> list[str]:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CronError(
            f"is {len(expression)} characters long; the limit is {MAX_EXPRESSION_LENGTH}"
        )
    if _CONTROL.search(expression):
        raise CronError(
            "must be one line: separate the fields with spaces (no line breaks or control "
            "characters)"
        )
    odd_space = next((c for c in expression if c.isspace() and c not in " \t"), None)
    if odd_space is not None:
        raise CronError(f"has the space character {odd_space!r}; separate the fields with spaces")
    stripped = expression.strip(" \t")
    if stripped.startswith("@"):
        alias = stripped.lower()
        hint = f"; write {_ALIASES[alias]!r} instead" if alias in _ALIASES else ""
        raise CronError(f"{stripped!r}: shortcuts like @daily are not supported{hint}")
    texts = _SEPARATOR.split(stripped) if stripped else []
    if len(texts) not in (5, 6):
        raise CronError(
            f"has {len(texts)} fields; use 5 (minute hour day-of-month month day-of-week) "
            "or 6 with seconds first (second minute hour day-of-month month day-of-week)"
        )
    return texts


def _parse_field(spec: _Field, text: str) -> _Values:
    for char in text:
        if not _FIELD_CHARS.fullmatch(char):
            raise spec.fail(text, _bad_character(char))
    items = text.split(",")
    if "" in items:
        raise spec.fail(text, "has an empty item in its list (two commas, or one at an end)")
    values = _Values()
    for item in items:
        if not _parse_special(spec, item, values):
            start, stop, step = _parse_range(spec, item)
            values.plain.update(range(start, stop + 1, step))
    return values


def _bad_character(char: str) -> str:
    if char == "?":
        return "uses '?', which cron does not know; write '*' for any value"
    if not char.isascii():
        what = "digit" if char.isdigit() else "character"
        return f"has the non-ASCII {what} {char!r}; use the digits 0-9 and English names"
    return f"has the character {char!r}, which cron does not use"


def _parse_special(spec: _Field, item: str, values: _Values) -> bool:
    """``L``, ``W`` and ``#`` items; False for a plain value, range or step."""
    lowered = item.lower()
    if spec is DAY_OF_MONTH and ("l" in lowered or "w" in lowered):
        nearest = re.fullmatch(r"(\d+)w", lowered)
        if lowered == "l":
            values.last = True
        elif nearest:
            values.nearest.add(_value(spec, nearest[1], item))
        else:
            raise spec.fail(
                item,
                "uses 'L' or 'W' wrongly: 'L' stands alone (the last day of the month) and "
                "'W' follows a day (15W: the weekday nearest the 15th)",
            )
        return True
    if spec is not DAY_OF_WEEK:
        if "#" in item:
            raise spec.fail(item, "uses '#', which only works in day-of-week (5#2: 2nd Friday)")
        return False
    if "#" in item:
        weekday, _, nth = item.partition("#")
        if not weekday:
            raise spec.fail(item, "has nothing before '#'; write a weekday, e.g. '5#2'")
        if not nth:
            raise spec.fail(item, "has nothing after '#'; write which one, e.g. '5#2'")
        if not nth.isdigit() or not 1 <= int(nth) <= 5:
            raise spec.fail(
                item,
                f"asks for occurrence {nth!r} after '#'; use 1-5 (the 1st to 5th such "
                "weekday of the month)",
            )
        values.nth.add((_value(spec, weekday, item) % 7, int(nth)))
        return True
    if lowered.startswith("l") or lowered.endswith("l"):
        weekday = item[1:] if lowered.startswith("l") else item[:-1]
        if not weekday:
            raise spec.fail(item, "needs a weekday with 'L', e.g. '5L' for the last Friday")
        values.last_weekday.add(_value(spec, weekday, item) % 7)
        return True
    return False


def _parse_range(spec: _Field, item: str) -> tuple[int, int, int]:
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not base:
            raise spec.fail(item, f"has nothing before '/'; write '*{item}' for a step")
        if not step_text.isdigit():
            what = repr(step_text) if step_text else "nothing"
            raise spec.fail(item, f"has {what} after '/'; a step is a whole number, e.g. '*/5'")
        step = int(step_text)
        if step == 0:
            raise spec.fail(item, "has step 0; a step is at least 1")
    if base == "*":
        start, stop = spec.low, spec.star_high
    elif "-" in base:
        first, _, last = base.partition("-")
        if not first or not last:
            raise spec.fail(item, f"has a range with no {'start' if not first else 'end'}")
        start, stop = _value(spec, first, item), _value(spec, last, item)
        if start > stop:
            raise spec.fail(
                item,
                f"runs backwards ({start} is after {stop}); ranges do not wrap around, "
                f"write {_wrapped(spec, start, stop)!r}",
            )
    else:
        start = _value(spec, base, item)
        stop = max(spec.star_high, start) if slash else start
    if step > max(stop - start, 0) and slash:
        raise spec.fail(
            item, f"has step {step}, wider than its range {start}-{stop}: write '{start}' alone"
        )
    return start, stop, step


def _wrapped(spec: _Field, start: int, stop: int) -> str:
    """``23-1`` as a list that says what it meant: ``23,0-1``."""
    top = spec.star_high
    parts = [f"{start}-{top}" if start < top else str(start)] if start <= top else []
    parts.append(f"{spec.low}-{stop}" if stop > spec.low else str(spec.low))
    return ",".join(parts)


def _value(spec: _Field, token: str, item: str) -> int:
    lowered = token.lower()
    if token.isdigit():
        number = int(token)
        if not spec.low <= number <= spec.high:
            sunday = " (0 and 7 are Sunday)" if spec is DAY_OF_WEEK else ""
            raise spec.fail(item, f"has {token} outside {spec.low}-{spec.high}{sunday}")
        return number
    if lowered in spec.names:
        return spec.low + spec.names.index(lowered)
    raise spec.fail(item, _not_a_value(spec, token, item))


def _not_a_value(spec: _Field, token: str, item: str) -> str:
    lowered = token.lower()
    if lowered in ("h", "r") or lowered.startswith(("h(", "r(")):
        return "uses hashed (H) or random (R) values, which are not supported"
    if "*" in token:
        return "uses '*' inside a range or list item; '*' stands alone"
    if "-" in token:
        return "has more than one '-'; a range is 'start-end'"
    if not spec.names and (lowered.rstrip("lw").isdigit() or lowered in ("l", "w", "lw")):
        return "uses 'L' or 'W', which only work in day-of-month and day-of-week"
    if spec.names:
        noun = "weekday" if spec is DAY_OF_WEEK else "month"
        names = f"{spec.names[0].upper()}-{spec.names[-1].upper()}"
        what = f"a {noun} ({spec.low}-{spec.high} or {names})"
    else:
        what = f"a number ({spec.low}-{spec.high})"
    return f"is not {what}" if token == item else f"has {token!r}, which is not {what}"
