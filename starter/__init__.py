"""The client side: the operations library, the CLI, the API, the board, the dev stack, the
Python client (:mod:`starter.jobsclient`) and short starter scripts."""

from connection.ownpackages import PackageClash as _PackageClash
from connection.ownpackages import require_own_packages as _require_own_packages

# A project's own top-level `workflows` (or `activities`...) shadowing ours stops the process
# here, in one line saying what to rename, not later with an ImportError somewhere unrelated.
try:
    _require_own_packages()
except _PackageClash as _clash:
    raise SystemExit(f"error: {_clash}") from None
