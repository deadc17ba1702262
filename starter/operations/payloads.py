"""A typed handler's payload checked at the door, against the JSON schema its workers
published (``jsonschema``): the client side never imports a handler module.

The check is JSON Schema's, so JSON types are strict (``"5"`` is not an integer; pydantic's
lax mode would accept it at run time); what a schema cannot say (a model's own validators)
is checked by the worker before the handler runs. A schema this process cannot use (not a
valid schema, a reference it cannot resolve: nothing is fetched) checks nothing here.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

from jobctl.workflows.textclip import ellipsize

MAX_PROBLEMS = 20  # problems reported per payload
MAX_MESSAGE = 200  # characters of one problem
SHOWN_INPUT = 40  # characters of the input a problem quotes


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> Any:
    """A validator for a schema (as canonical JSON text), or None if it is no valid schema."""
    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return None
    return cls(schema)


def _where(error: Any, *more: str) -> str:
    return ".".join(["payload", *(str(part) for part in error.absolute_path), *more])


def _closest(error: Any) -> list[Any]:
    """An ``anyOf``/``oneOf`` failure as the errors of its closest branch: the one branch
    that is not a bare ``null`` (an optional field), else jsonschema's best match."""
    if not error.context:
        return [error]
    branches: dict[Any, list[Any]] = {}
    for sub in error.context:
        if not (sub.validator == "type" and sub.validator_value == "null"):
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    if len(branches) == 1:
        return [detail for sub in next(iter(branches.values())) for detail in _closest(sub)]
    return [best_match(error.context)]


def _problems(error: Any) -> list[tuple[str, str]]:
    """One failure as (field, reason): a missing or unexpected field is named as a field."""
    instance = error.instance if isinstance(error.instance, dict) else {}
    if error.validator == "required" and isinstance(error.validator_value, list):
        missing = [name for name in error.validator_value if name not in instance]
        return [(_where(error, str(name)), "is required") for name in missing]
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = error.schema.get("properties") or {}
        extra = [str(key) for key in instance if key not in known]
        return [(_where(error, key), "is not a field of this payload") for key in extra]
    return [(_where(error), _message(error))]


def _message(error: Any) -> str:
    """jsonschema's message, the input it quotes first cut short: ``'xxx…' is too long``."""
    text, quoted = error.message, repr(error.instance)
    if text.startswith(quoted) and len(quoted) > SHOWN_INPUT:
        text = ellipsize(quoted, SHOWN_INPUT) + text[len(quoted) :]
    return ellipsize(" ".join(text.split()), MAX_MESSAGE)


def payload_problems(schema: dict[str, Any], payload: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, reason) for each way ``payload`` breaks ``schema``, at most MAX_PROBLEMS,
    ordered by field; empty when it validates (or the schema is unusable here)."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    if validator is None:
        return []
    try:
        errors = list(validator.iter_errors(payload))
    except Exception:  # an unresolvable $ref and the like: the schema's fault, not the caller's
        return []
    found = {item for error in errors for detail in _closest(error) for item in _problems(detail)}
    return [(ellipsize(field, MAX_MESSAGE), reason) for field, reason in sorted(found)][
        :MAX_PROBLEMS
    ]
