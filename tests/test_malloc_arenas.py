"""The worker process caps glibc's malloc arenas (activities/malloc_arenas.py): counted in a
real process whose threads contend for malloc, with and without the cap."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from jobctl.activities.malloc_arenas import DEFAULT_ARENAS, wanted_arenas
from jobctl.connection.errors import SpecError

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator")

# Eight threads call malloc/free through ctypes (which lets go of the GIL), so they contend
# for the arena and glibc hands out more; then malloc_info lists one <heap> per arena.
COUNT_ARENAS = textwrap.dedent(
    """
    import ctypes, sys, tempfile, threading
    from jobctl.worker import prepare_process
    prepare_process()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.fopen.restype = ctypes.c_void_p
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    def churn():
        for _ in range(20000):
            libc.free(libc.malloc(4096))
    threads = [threading.Thread(target=churn) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    with tempfile.NamedTemporaryFile(suffix=".xml") as out:
        stream = libc.fopen(out.name.encode(), b"w")
        libc.malloc_info(0, stream)
        libc.fclose(stream)
        print(open(out.name).read().count("<heap nr="))
    """
)


def arenas_used(**env: str) -> int:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    done = subprocess.run(
        [sys.executable, "-c", COUNT_ARENAS],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])


@glibc_only
def test_a_worker_process_keeps_at_most_the_default_cap_of_arenas() -> None:
    assert arenas_used() <= DEFAULT_ARENAS
    assert arenas_used(JOBS_MALLOC_ARENAS="1") == 1


@glibc_only
def test_without_the_cap_the_same_threads_take_more_arenas() -> None:
    # The counterfactual that shows the count above can fail: glibc's default allows 8 per core.
    assert arenas_used(JOBS_MALLOC_ARENAS="0") > DEFAULT_ARENAS


def test_the_setting_is_read_strictly_and_yields_to_malloc_arena_max() -> None:
    assert wanted_arenas({}) == DEFAULT_ARENAS
    assert wanted_arenas({"JOBS_MALLOC_ARENAS": " 4 "}) == 4
    assert wanted_arenas({"JOBS_MALLOC_ARENAS": "0"}) is None
    assert wanted_arenas({"MALLOC_ARENA_MAX": "8", "JOBS_MALLOC_ARENAS": "2"}) is None
    for bad in ("-1", "two", "1.5", "99999", "1e3"):
        with pytest.raises(SpecError, match="JOBS_MALLOC_ARENAS"):
            wanted_arenas({"JOBS_MALLOC_ARENAS": bad})
