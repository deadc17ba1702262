"""How a short-lived client process ends: flushed, then ``os._exit``.

The Temporal SDK's Rust threads can outlive the event loop; during interpreter teardown they
then crash the process (sdk-python #300: SIGABRT, and here SIGSEGV, exit -11, seen once in ~40
runs of a starter script), turning a success into a failure for whatever called us. A process
that has printed its answer therefore skips teardown: spans sent, streams flushed, exit.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

from jobctl.connection import tracing
from jobctl.starter.errors import JobsError


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` without interpreter teardown (see the module docstring)."""
    tracing.shutdown()  # os._exit skips atexit: send the spans now (bounded wait)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def script_exit_code(main: Callable[[], Coroutine[Any, Any, None]]) -> int:
    """Run a starter script's ``main``; its exit code, with a ``JobsError`` as one line."""
    try:
        asyncio.run(main())
    except JobsError as err:  # bad input, unknown job, Temporal unreachable: one line
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except SystemExit as end:  # argparse: --help (0) or a usage error (2)
        return end.code if isinstance(end.code, int) else 1
    except KeyboardInterrupt:
        return 130
    return 0


def run_script(main: Callable[[], Coroutine[Any, Any, None]]) -> NoReturn:
    """The ``if __name__ == "__main__"`` of every starter script."""
    exit_now(script_exit_code(main))
