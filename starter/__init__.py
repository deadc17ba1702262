"""The client side: the operations library, the CLI, the API, the board, the dev stack, the
Python client (:mod:`starter.jobsclient`) and short starter scripts."""

from connection.ownpackages import require_own_packages as _require_own_packages

# A project's own top-level `workflows` (or `activities`...) shadowing ours fails here with
# what to rename, not later with an ImportError in an unrelated place.
_require_own_packages()
