"""worker.py imports nothing from the client side (``starter``).

import-linter checks the packages (``[tool.importlinter]`` in pyproject.toml), but it builds its
graph from packages only and worker.py is a module, so this checks worker.py's own imports:
module level, inside functions and under ``TYPE_CHECKING`` alike. Exits 1 on a violation.

    python scripts/check_worker_imports.py  # from the repository root (scripts/test runs it)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

FORBIDDEN = ("starter",)


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def main() -> int:
    path = Path(__file__).resolve().parent.parent / "worker.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = [
        (line, module)
        for line, module in imported_modules(tree)
        if module.split(".")[0] in FORBIDDEN
    ]
    for line, module in bad:
        print(f"worker.py:{line}: imports {module} (the worker never imports the client side)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
