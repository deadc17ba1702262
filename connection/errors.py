"""The base errors both sides raise: the client side (CLI exit codes, API status codes) and the
worker (bad settings) share them. Client-only errors (``JobNotFound``, ``JobExists``,
``InvalidTransition``) live in :mod:`starter.errors`, on top of these."""

from __future__ import annotations

from pydantic import ValidationError


class JobsError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class SpecError(JobsError):
    """Invalid input. ``problems`` lists (field, reason), one per problem."""

    exit_code = 2

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {reason}" for field, reason in problems))

    @classmethod
    def from_validation(cls, err: ValidationError) -> SpecError:
        problems = []
        for item in err.errors():
            field = ".".join(str(part) for part in item["loc"])
            field = field or str((item.get("ctx") or {}).get("fields", "spec"))
            reason = item["msg"].removeprefix("Value error, ")
            problems.append((field, reason))
        return cls(problems)


class TemporalUnavailable(JobsError):
    exit_code = 6


class NotServing(TemporalUnavailable):
    """The server answered its health check, but not with SERVING (a frontend draining before
    it stops answers so): it is reachable and must not be counted on."""
