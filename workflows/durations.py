"""Parsing of human durations such as ``90``, ``90s``, ``5m``, ``2h`` or ``1h30m``.

Pure and deterministic: imported by the job model, the CLI and the API alike.
"""

from __future__ import annotations

import re

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+")


def parse_duration(value: str | float | int) -> float:
    """Return seconds for ``value``.

    Numbers (and numeric strings) are seconds; strings may chain units, e.g. ``1h30m``.
    Raises ``ValueError`` with a readable message for anything else (including negatives,
    which callers bound-check themselves so they can name their own limits).
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 90, 90s, 5m or 2h")
    if isinstance(value, int | float):
        return float(value)
    text = value.strip().lower()
    try:
        return float(text)
    except ValueError:
        pass
    if not text or not _WHOLE.fullmatch(text):
        raise ValueError(f"{value!r} is not a duration; use e.g. 90, 90s, 5m or 2h")
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _PART.findall(text))


def format_duration(seconds: float) -> str:
    """Short human form: ``7500`` → ``2h5m``, ``90`` → ``1m30s``, ``57.47`` → ``57.5s``."""
    if seconds < 60:
        return f"{seconds:.3g}s"
    whole = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
