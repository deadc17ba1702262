"""``jobctl``'s public names: the one list, each one loadable, typed; and a worker-side import
of ``jobctl.workflows`` / ``jobctl.activities`` loads no client-side module."""

from __future__ import annotations

import subprocess
import sys

import jobctl
from jobctl import _PUBLIC


def test_the_public_list_is_the_loadable_list() -> None:
    assert jobctl.__all__ == sorted(_PUBLIC)
    for name in jobctl.__all__:
        assert getattr(jobctl, name) is not None, name
    assert jobctl.SpecError.exit_code == 2 and jobctl.TemporalUnavailable.exit_code == 6
    assert "JobsClient" in dir(jobctl)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        _ = jobctl.Nothing
    except AttributeError as err:
        assert "no attribute 'Nothing'" in str(err)
    else:
        raise AssertionError("jobctl.Nothing resolved")


def test_the_worker_side_imports_no_client_side_module() -> None:
    probe = (
        "import sys, jobctl.worker, jobctl.activities.registry\n"
        "print(sorted(m for m in sys.modules if m.startswith('jobctl.starter')))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert loaded.stdout.strip() == "[]"
