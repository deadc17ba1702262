"""scripts/check_sizes.py: 400 lines for a module, 700 for one that defines a workflow."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_sizes.py"


def check_sizes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_sizes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def module_text(lines: int, decorator: str | None) -> str:
    head = ["from temporalio import workflow", ""]
    if decorator is not None:
        head += [decorator, "class W:", "    pass"]
    return "\n".join(head + ["x = 1"] * (lines - len(head))) + "\n"


def test_a_workflow_module_may_have_700_lines_and_others_400(tmp_path: Path) -> None:
    sizes = check_sizes()
    path = tmp_path / "m.py"
    cases = [
        (400, None, 0),
        (401, None, 1),
        (700, "@workflow.defn", 0),
        (700, '@workflow.defn(name="w")', 0),
        (701, '@workflow.defn(name="w")', 1),
        (500, "@other.defn", 1),
    ]
    for lines, decorator, expected in cases:
        path.write_text(module_text(lines, decorator))
        found = sizes.violations(path, "m.py")
        assert len(found) == expected, (lines, decorator, found)


def test_the_repository_is_within_its_limits() -> None:
    sizes = check_sizes()
    assert sizes.main() == 0
