"""Serving the API with uvicorn (``jobctl api``, ``jobctl dev``): binding rule and server."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator, Mapping

import uvicorn
from temporalio.client import Client

from jobctl.starter.api.app import create_app
from jobctl.starter.api.guards import TOKEN_ENV, load_allowed_hosts, load_tokens
from jobctl.starter.errors import SpecError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | Mapping[str, str] | None) -> None:
    """Anything but loopback needs a token (``JOBS_API_TOKEN`` or ``JOBS_API_TOKENS``):
    refuse to start otherwise."""
    if not is_loopback(host) and not token:
        raise SpecError([("host", f"binding to {host} needs {TOKEN_ENV} set (a bearer token)")])


class EmbeddedServer(uvicorn.Server):
    """uvicorn inside a process that owns its signals (``jobctl dev``): stop with should_exit."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server(
    host: str, port: int, embedded: bool = False, client: Client | None = None
) -> uvicorn.Server:
    """A uvicorn server for the API; refuses a non-loopback host without a token.

    ``client`` (default None: connect from the environment on first use): ``jobctl dev`` hands
    over its worker's, so a job due now starts eagerly on that worker (operations.starting).
    """
    tokens = load_tokens()
    check_binding(host, tokens)
    app = create_app(client=client, tokens=tokens, allowed_hosts=load_allowed_hosts(bind=host))
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    return EmbeddedServer(config) if embedded else uvicorn.Server(config)
