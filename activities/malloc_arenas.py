"""Caps glibc's malloc arenas in a worker process, so its memory levels off low.

glibc gives a thread that finds the shared arena busy an arena of its own, up to eight per
core, each reserving address space in 64 MiB steps and keeping what it once used. A worker
runs some 36 threads (the SDK's runtime, the handler pool), so under steady load its RSS
climbed by a step of arenas over the first half hour, then stayed: 140 -> 160 MiB at 12 jobs/s,
a rise a short soak mistakes for a leak (docs/PERFORMANCE.md, "Memory under steady load").
With two arenas the same soak stayed flat. Python allocates under its GIL (small objects from
its own pools), so the threads that would contend for an arena are the SDK's few.

``JOBS_MALLOC_ARENAS`` (default 2; 0: glibc's own default) sets the cap. An environment that
sets ``MALLOC_ARENA_MAX`` itself keeps it: glibc read it at start-up and we leave it alone.
Elsewhere than glibc (musl, macOS) nothing changes.
"""

from __future__ import annotations

import ctypes
import os
import platform

from jobctl.connection.errors import SpecError

ARENAS_ENV = "JOBS_MALLOC_ARENAS"
DEFAULT_ARENAS = 2
M_ARENA_MAX = -8  # glibc's malloc.h


def wanted_arenas(environ: dict[str, str] | None = None) -> int | None:
    """The cap to set: None when the process keeps glibc's default (``JOBS_MALLOC_ARENAS=0``,
    or ``MALLOC_ARENA_MAX`` already set); a bad value is a SpecError."""
    env = os.environ if environ is None else environ
    if env.get("MALLOC_ARENA_MAX", "").strip():
        return None
    raw = env.get(ARENAS_ENV, "").strip()
    if not raw:
        return DEFAULT_ARENAS
    if not raw.isdigit() or int(raw) > 1024:
        reason = f"must be a whole number of arenas (0: glibc's default), not {raw!r}"
        raise SpecError([(ARENAS_ENV, reason)])
    return int(raw) or None


def cap_malloc_arenas(environ: dict[str, str] | None = None) -> int | None:
    """Set the cap (call it before the SDK starts its threads); returns the cap set, or None
    when nothing was changed."""
    arenas = wanted_arenas(environ)
    if arenas is None or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)
    return arenas if libc.mallopt(M_ARENA_MAX, arenas) == 1 else None
