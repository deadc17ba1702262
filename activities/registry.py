"""Handlers by stable name, the context they receive, and the errors they may raise.

A handler is a plain function or coroutine function taking one :class:`JobContext`::

    from activities.registry import JobContext, PermanentError, handler

    @handler("billing.charge")
    def charge(ctx: JobContext) -> dict:
        if "customer" not in ctx.payload:
            raise PermanentError("payload has no customer")   # straight to the DLQ
        ...                                                   # any other error is retried

Synchronous handlers run in a worker thread so the lease keeps being renewed; they should
check ``ctx.cancelled`` (or sleep with ``ctx.sleep``) to stop early when the job is cancelled
or the attempt times out, because Python cannot kill a thread.

The names above are defined in :mod:`activities.context` and re-exported here (this import
path is the documented one). This module loads handler modules: the built-ins
(:mod:`activities.builtin`) and the user's, by name, through the same loader.
"""

from __future__ import annotations

import importlib
import os

from activities.context import (
    Handler,
    HandlerRegistry,
    JobContext,
    PermanentError,
    handler,
    registry,
)

__all__ = [
    "BUILTIN_MODULES",
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
# Imported by name, like the user's modules: they import activities.context, never this module.
BUILTIN_MODULES = ("activities.builtin",)


class HandlerModuleError(RuntimeError):
    """A module named in JOBS_HANDLER_MODULES cannot be imported (a deployment mistake)."""


def load_handlers(modules: str | None = None) -> HandlerRegistry:
    """Import the built-in handlers and every module named in ``JOBS_HANDLER_MODULES``.

    ``modules`` (comma-separated import paths) overrides the environment variable. Modules
    register their handlers on import with :func:`handler`.
    """
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    names = modules if modules is not None else os.environ.get(HANDLER_MODULES_ENV, "")
    for module in filter(None, (part.strip() for part in names.split(","))):
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise HandlerModuleError(
                f"{HANDLER_MODULES_ENV}: cannot import {module!r}: {err}"
            ) from err
    return registry
