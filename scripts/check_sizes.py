"""Size limits a newcomer can rely on: no module over 400 lines, no function over 60. A module
that defines a workflow (a ``@workflow.defn`` class) may have up to 700: one workflow, its
state, run loop and handlers, read in one file (its decisions live in pure modules).

Checked: every ``.py`` file in workflows/, activities/, connection/, starter/ (the board's
static files are not Python and are not checked) and worker.py. A function counts from its
``def`` line to its last line, docstring and nested functions included (a nested function is
also checked on its own). Prints one line per violation and exits 1 if there is any.

    python scripts/check_sizes.py          # from the repository root (scripts/test runs it)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_MODULE_LINES = 400
MAX_WORKFLOW_MODULE_LINES = 700
MAX_FUNCTION_LINES = 60
PACKAGES = ("workflows", "activities", "connection", "starter")
MODULES = ("worker.py",)


def checked_files(root: Path) -> list[Path]:
    files = [root / name for name in MODULES if (root / name).is_file()]
    for package in PACKAGES:
        files.extend(sorted((root / package).rglob("*.py")))
    return files


def defines_workflow(tree: ast.Module) -> bool:
    """A top-level class decorated ``@workflow.defn`` (bare or called)."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if ast.unparse(target) == "workflow.defn":
                    return True
    return False


def violations(path: Path, shown_as: str) -> list[str]:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    found = []
    lines = len(text.splitlines())
    limit = MAX_WORKFLOW_MODULE_LINES if defines_workflow(tree) else MAX_MODULE_LINES
    if lines > limit:
        found.append(f"{shown_as}: module has {lines} lines (limit {limit})")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(
                    f"{shown_as}:{node.lineno}: function {node.name} has {length} lines"
                    f" (limit {MAX_FUNCTION_LINES})"
                )
    return found


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    found = [
        line
        for path in checked_files(root)
        if "__pycache__" not in path.parts
        for line in violations(path, str(path.relative_to(root)))
    ]
    for line in found:
        print(line)
    if found:
        print(f"check_sizes: {len(found)} over the limits", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
