"""This project's top-level package names (``workflows``, ``activities``, ``connection``,
``starter``) and what happens when a user's project has packages of the same names.

Python keeps one module per name in a process: a project's own top-level ``workflows`` or
``activities`` (common in Temporal apps) on ``sys.path`` before ours shadows ours, and the
two cannot be imported side by side. A handler module, or a process using our client, is
fine as long as it does not need its own package of one of these names; otherwise rename
that package (``myapp_workflows``) or move it into the project's own package
(``myapp.workflows``). :func:`require_own_packages` says so at start-up instead of letting
a half-shadowed package fail later in an unrelated place. Standard library only.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

OWN_PACKAGES = ("workflows", "activities", "connection", "starter")
ROOT = Path(__file__).resolve().parents[1]  # where our packages (and worker.py) live


class PackageClash(RuntimeError):
    """A package of ours is shadowed by a project's own package of the same name."""


def advice(*tops: str) -> str:
    """What to do about a project's own packages named ``tops`` (names of ours)."""
    named = ", ".join(repr(top) for top in tops)
    renamed = ", ".join(repr(f"myapp_{top}") for top in tops)
    nested = ", ".join(repr(f"myapp.{top}") for top in tops)
    return (
        f"Python keeps one top-level package per name in a process, so a project's own "
        f"{named} cannot be imported beside jobs-scheduler's (in {ROOT}). Rename yours (e.g. "
        f"{renamed}) or move them into your own package ({nested}), or keep their directory "
        f"off sys.path / PYTHONPATH for this process"
    )


def clash_hint(name: str) -> str:
    """Advice to append to an ImportError of ``name`` when it is one of our package names."""
    top = name.partition(".")[0]
    return f"; {advice(top)}" if top in OWN_PACKAGES else ""


def _ours(name: str) -> set[Path] | None:
    """Where module ``name`` of ours lives; None when we have no module of that name."""
    base = ROOT.joinpath(*name.split("."))
    expected = {base.with_suffix(".py"), base / "__init__.py"}
    return expected if any(path.is_file() for path in expected) else None


def _origin(name: str) -> str | None:
    """The file module ``name`` comes (or would come) from; None for a namespace package."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__file__", None)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.has_location else None


def shadowed() -> list[tuple[str, str]]:
    """(module, where it comes from) for each module of ours, imported or about to be, that
    is not ours: our top-level packages and every loaded submodule of them."""
    names = {*OWN_PACKAGES, *(n for n in sys.modules if n.partition(".")[0] in OWN_PACKAGES)}
    found = []
    for name in sorted(names):
        expected = _ours(name)
        if expected is None:
            continue  # not a module of ours (a submodule of a foreign package of that name)
        origin = _origin(name)
        if origin is None or Path(origin).resolve() not in expected:
            found.append((name, origin or "a namespace package"))
    return found


def require_own_packages() -> None:
    """Raise :class:`PackageClash` naming what to rename if a package of ours is shadowed."""
    clashes = shadowed()
    if clashes:
        tops = sorted({name.partition(".")[0] for name, _ in clashes})
        where = "; ".join(f"{name!r} is {origin}" for name, origin in clashes[:4])
        raise PackageClash(f"modules of ours come from elsewhere ({where}): {advice(*tops)}")
