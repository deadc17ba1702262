"""Throwaway projects for tests: write their files, find a venv's site-packages."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path


def write(base: Path, files: dict[str, str]) -> Path:
    """Each ``name: text`` under ``base`` (text dedented), parents created; ``base``."""
    for name, text in files.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return base


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
