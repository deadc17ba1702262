"""The console script is ``jobctl`` (no shell has a builtin of that name); ``jobs`` stays as
an alias for existing scripts. Both are the same program; ``jobctl`` works as a bare word in
a fresh bash, the way the README's commands are pasted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def fresh_bash(command: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(
        ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_jobctl_is_a_bare_word_in_bash() -> None:
    answer = fresh_bash("jobctl --help")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.startswith("Usage: jobctl ")
    assert "schedule" in answer.stdout and "dlq" in answer.stdout


def test_bare_jobs_in_bash_is_the_shell_builtin_which_is_why_we_renamed() -> None:
    answer = fresh_bash("jobs --help")
    assert "Usage: jobctl" not in answer.stdout  # bash's builtin answered, not us


@pytest.mark.parametrize("name", ["jobctl", "jobs"])
def test_both_names_are_the_same_program(name: str) -> None:
    answer = subprocess.run(
        [str(BIN / name), "schedule", "x", "--handler", "log", "--in", "5s", "--max-attempts", "0"],
        env={"PATH": "/usr/bin:/bin", "TEMPORAL_ADDRESS": "127.0.0.1:1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert answer.returncode == 2, answer.stderr  # refused at the door, before any connection
    assert answer.stderr.startswith("error: max_attempts: ")
