"""Run ``jobctl dev --demo`` on free ports until the demo prints its closing hint; then Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from jobctl.starter.dev.devserver import free_port
from tests.helpers.processes import cli_env, kill_group

CLOSING_HINT = "[demo] in another shell: source .venv/bin/activate"


def run_demo(jobctl: Path, state_dir: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The demo's final status per job kind (``poison``, ``flaky``...); asserts the stack
    exits 0 on SIGINT. ``env`` defaults to the tests' CLI environment for the stack's port."""
    ports = [str(free_port()) for _ in range(3)]
    flags = ["--port", ports[0], "--ui-port", ports[1], "--api-port", ports[2]]
    command = [str(jobctl), "dev", "--demo", "--state-dir", str(state_dir), *flags]
    stack = subprocess.Popen(
        command,
        env={**cli_env(f"localhost:{ports[0]}", "jobs"), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen: list[str] = []
    try:
        assert stack.stdout is not None
        for line in stack.stdout:
            seen.append(line)
            if line.startswith(CLOSING_HINT):
                break
        final = {}
        for line in seen:
            match = re.match(r"\[demo\] (demo-\d+-\w+)\s+(\w+)\s+attempts=", line)
            if match:
                final[match.group(1).rsplit("-", 1)[1]] = match.group(2)
        assert final, "".join(seen)
        stack.send_signal(signal.SIGINT)
        assert stack.wait(timeout=60) == 0, "".join(seen)
        return final
    finally:
        kill_group(stack)
