"""Text cut to a number of characters, marked with an ellipsis: the one home of that rule
(notes, errors, refusal reasons, board cells). Pure; byte limits live in ``uitext.clip`` and
``activities.failure_size``, which cut to bytes and say how much they cut."""

from __future__ import annotations


def ellipsize(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit - 1`` and "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
