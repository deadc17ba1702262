"""Handlers by stable name, the context they receive, and the errors they may raise.

A handler is a plain function or coroutine function taking one :class:`JobContext`::

    from jobctl.activities.registry import JobContext, PermanentError, handler

    @handler("billing.charge")
    def charge(ctx: JobContext) -> dict:
        if "customer" not in ctx.payload:
            raise PermanentError("payload has no customer")   # straight to the DLQ
        ...                                                   # any other error is retried

or, with a pydantic model for its payload (checked at the door by the CLI, the API and the
operations library against the schema the worker publishes, and again before it runs)::

    @handler("billing.charge", payload=ChargeRequest)
    def charge(ctx: JobContext[ChargeRequest]) -> dict:
        ctx.payload.customer                                  # a ChargeRequest

Synchronous handlers run in a worker thread so the lease keeps being renewed; they should
check ``ctx.cancelled`` (or sleep with ``ctx.sleep``) to stop early when the job is cancelled
or the attempt times out, because Python cannot kill a thread.

The names above are defined in :mod:`activities.context` and re-exported here (this import
path is the documented one). This module loads handler modules: the built-ins
(:mod:`activities.builtin`), the modules installed packages declare under the entry-point
group ``jobs.handlers``, and those named in ``JOBS_HANDLER_MODULES``, through one loader.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points

from jobctl.activities.context import (
    DuplicateHandler,
    Handler,
    HandlerRegistry,
    JobContext,
    PermanentError,
    handler,
    registry,
)
from jobctl.connection.errors import JobsError

__all__ = [
    "BUILTIN_MODULES",
    "ENTRY_POINT_GROUP",
    "HANDLER_MODULES_ENV",
    "Handler",
    "HandlerModuleError",
    "HandlerRegistry",
    "JobContext",
    "PermanentError",
    "handler",
    "load_handlers",
    "registry",
]

HANDLER_MODULES_ENV = "JOBS_HANDLER_MODULES"
ENTRY_POINT_GROUP = "jobs.handlers"  # [project.entry-points."jobs.handlers"] x = "pkg.module"
# Imported by name, like the user's modules: they import activities.context, never this module.
BUILTIN_MODULES = ("jobctl.activities.builtin",)


class HandlerModuleError(JobsError, RuntimeError):
    """A handler module cannot be loaded (a deployment mistake: it is missing, or raised or
    exited while imported), or two modules register one name: the worker does not start, and
    ``jobctl worker`` exits 2 with one line naming where the module came from (an entry
    point, ``JOBS_HANDLER_MODULES``), the module and the error."""

    exit_code = 2


def _import(module: str, source: str) -> None:
    try:
        importlib.import_module(module)
    except DuplicateHandler as err:
        raise HandlerModuleError(f"{source}: {err}") from err
    except ImportError as err:
        raise HandlerModuleError(f"{source}: cannot import {module!r}: {err}") from err
    except SystemExit as err:  # a plugin that exits while imported must not end us silently
        raise HandlerModuleError(
            f"{source}: importing {module!r} called sys.exit({err.code!r})"
        ) from err
    except Exception as err:
        raise HandlerModuleError(
            f"{source}: importing {module!r} raised {type(err).__name__}: {err}"
        ) from err


def plugin_modules() -> list[tuple[str, str]]:
    """(module, where it was declared) for every ``jobs.handlers`` entry point installed."""
    found = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: (p.name, p.value)):
        dist = point.dist.name if point.dist is not None else "?"
        where = f"entry point {point.name!r} of {dist!r} ({ENTRY_POINT_GROUP})"
        found.append((point.value.partition(":")[0].strip(), where))
    return found


def load_handlers(modules: str | None = None) -> HandlerRegistry:
    """Import the built-in handlers, the modules installed packages declare under the
    ``jobs.handlers`` entry-point group, and every module named in ``JOBS_HANDLER_MODULES``.

    ``modules`` (comma-separated import paths) overrides the environment variable. Modules
    register their handlers on import with :func:`handler`; a name registered by two
    modules, or a module that cannot be imported, is a :class:`HandlerModuleError`.
    """
    for module in BUILTIN_MODULES:
        _import(module, "built-in handlers")
    for module, where in plugin_modules():
        _import(module, where)
    names = modules if modules is not None else os.environ.get(HANDLER_MODULES_ENV, "")
    for module in filter(None, (part.strip() for part in names.split(","))):
        _import(module, HANDLER_MODULES_ENV)
    return registry
