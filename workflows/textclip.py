"""Text cut to size, the one home of every cut: to a number of characters (notes, errors,
refusal reasons, board cells), to UTF-8 bytes saying how much was cut (failures a worker
sends), and to one line that fits a byte budget as a JSON string (the Web UI's summaries).
Pure, passed through the workflow sandbox."""

from __future__ import annotations

import json

SUMMARY_BYTES = 380  # the server caps a summary at 400 bytes of serialized payload


def ellipsize(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit - 1`` and "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_bytes(text: str, limit: int) -> str:
    """``text`` if it fits ``limit`` UTF-8 bytes, else its head (cut on a code point) and a
    mark saying how long it was: ``"...… [cut: 1048576 bytes]"``, within ``limit``."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    mark = f"… [cut: {len(raw)} bytes]"
    head = raw[: max(limit - len(mark.encode()), 0)].decode(errors="ignore")
    return head + mark


def clip_bytes_tail(text: str, limit: int) -> str:
    """The last ``limit`` bytes of ``text`` (a stack trace's innermost frames), marked when cut."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    mark = f"[cut: {len(raw)} bytes] …"
    tail = raw[len(raw) - max(limit - len(mark.encode()), 0) :].decode(errors="ignore")
    return mark + tail


def _json_bytes(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode())


def clip_line(text: str, limit: int = SUMMARY_BYTES) -> str:
    """One line that fits ``limit`` bytes as a JSON string; cut on a code point, with "…"."""
    text = " ".join(text.split())
    if _json_bytes(text) <= limit:
        return text
    text = text[:limit]
    while text and _json_bytes(text + "…") > limit:
        text = text[:-1]
    return text + "…"
