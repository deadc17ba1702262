"""The embedded dev server's start (starter/dev/devserver.py): a server that exits before it
is ready is started again, on a new port when the port was ours to pick, and a start that
keeps failing says why (the server's own output)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

from jobctl.starter.dev import devserver
from jobctl.starter.dev.devserver import DevServer, ServerExited

pytestmark = pytest.mark.devserver


@contextmanager
def listening(port: int) -> Iterator[None]:
    """Someone else listening on ``port`` (loopback) for the duration."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
        yield


async def test_a_picked_port_taken_before_the_start_is_picked_again() -> None:
    server = DevServer(db_file=None)
    taken = server.port
    try:
        with listening(taken):
            client = await server.start()
        assert server.port != taken
        assert server.process is not None and server.process.poll() is None
        assert (
            await client.workflow_service.get_system_info(GetSystemInfoRequest())
        ).server_version
        # A restart keeps the port its clients know.
        picked = server.port
        server.stop()
        await server.start()
        assert server.port == picked and server.process.poll() is None
    finally:
        server.stop()


async def test_a_given_port_that_stays_taken_fails_with_the_servers_own_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(devserver, "START_TRIES", 2)  # one retry shows it; three take longer
    probe = DevServer(db_file=None)  # a free port, handed over as the user's choice
    server = DevServer(db_file=None, port=probe.port)
    with listening(server.port), pytest.raises(ServerExited) as failed:
        await server.start()
    server.stop()
    message = str(failed.value)
    assert server.port == probe.port and str(probe.port) in message  # the port asked for
    # The server's own reason, from the last start.
    assert "address already in use" in message.split("output: ", 1)[1], message
    assert message.count("exited with") == 1


@pytest.mark.parametrize("flag", ["--port", "--ui-port", "--api-port"])
def test_jobctl_dev_on_a_taken_port_refuses_in_one_line_naming_the_flag(
    tmp_path: Path, flag: str
) -> None:
    """Issue 41: another stack (or anything) on one of ``jobctl dev``'s ports: exit 2 with a
    line naming the port and the flag that changes it; no server starts, no state written."""
    found: list[int] = []
    while len(found) < 3:  # the OS may hand the same free port out twice (CI once)
        port = devserver.free_port()
        if port not in found:
            found.append(port)
    ports = dict(zip(("--port", "--ui-port", "--api-port"), found, strict=True))
    args = [str(Path(sys.executable).parent / "jobctl"), "dev", "--state-dir", str(tmp_path / "s")]
    for name, port in ports.items():
        args += [name, str(port)]
    with listening(ports[flag]):
        answer = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert answer.returncode == 2, answer
    taken = ports[flag]
    expected = (
        f"error: {flag}: port {taken} is taken (another `jobctl dev`?); choose another with {flag}"
    )
    assert answer.stderr.strip().splitlines() == [expected]
    assert "starting Temporal" not in answer.stdout
    assert not (tmp_path / "s").exists()
