"""Strict JSON decoding for everything the HTTP API reads (RFC 8259 and I-JSON, RFC 7493).

The stdlib decoder with its hooks, plus one walk over the result. Refused, each with the
place it was found:

* anything but UTF-8 (no BOM, no UTF-16/32 guessing) and lone UTF-16 surrogates (``"\\udc00"``),
  in keys or values: they cannot be stored or re-encoded;
* ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow a double (``1e400``);
* the same key twice in one object, at any depth (which one would win is undefined);
* nesting deeper than :data:`MAX_DEPTH` objects/arrays. The C decoder itself stops at the
  interpreter's recursion limit (a ``RecursionError``, caught here), so ``[[[[...`` 100,000
  deep costs nothing; the walk then refuses anything deeper than the limit before pydantic,
  Temporal's converter or ``json.dumps`` recurse into it.
"""

from __future__ import annotations

import json
import math
from typing import Any

# Deeper than any job spec needs (the spec object, then a payload of at most
# workflows.models.MAX_PAYLOAD_DEPTH levels, which the model checks with a field name).
MAX_DEPTH = 100


class JSONRefused(ValueError):
    """Not strict JSON: ``reason`` says what and where (a JSON path like ``$.payload.a[2]``)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def _constant(name: str) -> Any:
    raise JSONRefused(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONRefused(f"the number {text[:40]} is out of range")
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JSONRefused(f"the key {key[:80]!r} appears twice in one object")
            seen.add(key)
    return obj


_DECODER = json.JSONDecoder(
    parse_float=_float, parse_constant=_constant, object_pairs_hook=_unique, strict=True
)


def loads(raw: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """Decode one JSON document strictly, or raise :class:`JSONRefused`."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        data = _DECODER.decode(text)
    except JSONRefused:
        raise
    except RecursionError as err:
        raise JSONRefused(f"nested deeper than {max_depth} levels") from err
    except UnicodeDecodeError as err:
        raise JSONRefused(f"not UTF-8: {err.reason} at byte {err.start}") from err
    except json.JSONDecodeError as err:
        raise JSONRefused(f"not valid JSON: {err}") from err
    except ValueError as err:  # e.g. an integer over Python's 4,300-digit conversion limit
        raise JSONRefused(f"not valid JSON: {err}") from err
    check(data, max_depth)
    return data


def check(data: Any, max_depth: int = MAX_DEPTH) -> None:
    """Refuse nesting deeper than ``max_depth`` and strings that are not valid Unicode text
    (lone surrogates). Iterative, so the check itself cannot recurse too deeply."""
    stack: list[tuple[Any, str, int]] = [(data, "$", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            _text(value, path)
        elif isinstance(value, dict | list):
            if depth >= max_depth:
                raise JSONRefused(f"nested deeper than {max_depth} levels at {_short(path)}")
            if isinstance(value, dict):
                for key, item in value.items():
                    _text(key, f"{path} (a key)")
                    stack.append((item, f"{path}.{key[:40]}", depth + 1))
            else:
                stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))


def _text(value: str, path: str) -> None:
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(value[err.start])
        raise JSONRefused(
            f"lone UTF-16 surrogate \\u{code:04x} in a string at {_short(path)}"
        ) from err


def _short(path: str) -> str:
    return path if len(path) <= 120 else f"{path[:60]}...{path[-57:]}"
