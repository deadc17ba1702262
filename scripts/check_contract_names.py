"""Every Temporal name in workflows/names.py is documented in docs/CONTRACT.md.

names.py is the one home of the names in code; docs/CONTRACT.md is where users read them. A
name added there and not here fails this check (each value must appear in backquotes).

    python scripts/check_contract_names.py  # from the repository root (scripts/test runs it)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def defined_names(source: str) -> dict[str, str]:
    """Module-level ``NAME: Final = "value"`` (or ``NAME = "value"``) assignments."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        constant = value.value if isinstance(value, ast.Constant) else None
        if isinstance(target, ast.Name) and isinstance(constant, str):
            found[target.id] = constant
    return found


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    names = defined_names((root / "workflows" / "names.py").read_text(encoding="utf-8"))
    contract = (root / "docs" / "CONTRACT.md").read_text(encoding="utf-8")
    missing = {name: value for name, value in names.items() if f"`{value}`" not in contract}
    for name, value in sorted(missing.items()):
        print(f"docs/CONTRACT.md does not mention `{value}` (workflows/names.py {name})")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
