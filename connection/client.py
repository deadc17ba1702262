"""The one client factory: every entry point (CLI, API, worker, demo, tests) connects here.

Where to connect comes from Temporal's own environment configuration
(:mod:`temporalio.envconfig`), so the same settings work for the ``temporal`` CLI, any SDK
and this project:

* a profile in a ``temporal.toml`` file: ``TEMPORAL_CONFIG_FILE``, else the user's config
  directory (``~/.config/temporalio/temporal.toml`` on Linux); the profile is
  ``TEMPORAL_PROFILE``, else ``default``;
* environment variables on top of the profile: ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
  ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``, ``TEMPORAL_TLS_CLIENT_CERT_PATH``,
  ``TEMPORAL_TLS_CLIENT_KEY_PATH``, ``TEMPORAL_TLS_SERVER_CA_CERT_PATH``,
  ``TEMPORAL_TLS_SERVER_NAME``, ``TEMPORAL_GRPC_META_*`` (and their ``*_DATA`` forms);
* explicit ``address`` / ``namespace`` arguments over both.

With no file and no variables it is ``localhost:7233`` / ``default``, plain text: the dev
server. An API key turns TLS on unless the profile says ``disabled = true``. When
``JOBS_ENCRYPTION_KEY`` (or ``_FILE``) is set, payloads are encrypted
(:mod:`connection.codec`). When tracing is on (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``JOBS_TRACE_CONSOLE=1``), clients carry Temporal's OpenTelemetry interceptor, and so do the
workers built on them (:mod:`connection.tracing`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfig, ClientConfigProfile

from jobctl.connection import tracing
from jobctl.connection.codec import codec_from_env
from jobctl.connection.errors import NotServing, SpecError, TemporalUnavailable
from jobctl.workflows import names

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
CONFIG_FILE_ENV = "TEMPORAL_CONFIG_FILE"
PROFILE_ENV = "TEMPORAL_PROFILE"


def task_queue() -> str:
    """The task queue jobs run on: ``JOBS_TASK_QUEUE``, default ``jobs``."""
    return os.environ.get("JOBS_TASK_QUEUE", names.DEFAULT_TASK_QUEUE)


def config_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where the ``temporal.toml`` is looked for (it need not exist): ``TEMPORAL_CONFIG_FILE``,
    else ``temporalio/temporal.toml`` in the user's config directory, as the temporal CLI does."""
    env = os.environ if environ is None else environ
    if env.get(CONFIG_FILE_ENV):
        return Path(env[CONFIG_FILE_ENV]).expanduser()
    home = Path(env.get("HOME") or Path.home())
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    return base / "temporalio" / "temporal.toml"


def load_profile(environ: Mapping[str, str] | None = None) -> ClientConfigProfile:
    """The selected profile with the environment applied on top.

    Raises :class:`SpecError` naming the variable for a missing ``TEMPORAL_CONFIG_FILE``, an
    unknown profile or an unreadable file: a configuration mistake, never "unreachable".
    """
    env = dict(os.environ if environ is None else environ)
    path = config_file(env)
    profile = env.get(PROFILE_ENV) or None
    if env.get(CONFIG_FILE_ENV) and not path.is_file():
        raise SpecError([(CONFIG_FILE_ENV, f"no such file: {path}")])
    source = path if path.is_file() else None
    if profile is not None and source is None:  # the SDK would quietly use no profile at all
        raise SpecError([(PROFILE_ENV, f"no profile {profile!r}: there is no {path}")])
    try:
        return ClientConfigProfile.load(
            profile, config_source=source, disable_file=source is None, override_env_vars=env
        )
    except (RuntimeError, OSError) as err:  # the SDK's ConfigError is a RuntimeError
        if profile is None or "not found" not in str(err):
            raise SpecError([(CONFIG_FILE_ENV, f"cannot load {path}: {err}")]) from err
        known = ", ".join(sorted(_profiles(path, env))) or "none"
        raise SpecError(
            [(PROFILE_ENV, f"no profile {profile!r} in {path}; profiles there: {known}")]
        ) from err


def _profiles(source: Path, env: dict[str, str]) -> list[str]:
    try:
        return list(ClientConfig.load(config_source=source, override_env_vars=env).profiles)
    except (RuntimeError, OSError):
        return []


def data_converter(environ: Mapping[str, str] | None = None) -> DataConverter:
    """The pydantic data converter, with the encryption codec when a key is configured."""
    codec = codec_from_env(environ)
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(pydantic_data_converter, payload_codec=codec)


def connect_options(
    address: str | None = None,
    namespace: str | None = None,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Keyword arguments for ``Client.connect``: the profile (file + environment), then the
    explicit ``address``/``namespace``, then ``options`` (any ``Client.connect`` argument)."""
    profile = load_profile(environ)
    try:
        config: dict[str, Any] = dict(profile.to_client_connect_config())
    except OSError as err:  # a TLS certificate, key or CA file named but not readable
        raise SpecError([("tls", f"cannot read {err.filename}: {err.strerror}")]) from err
    config["target_host"] = address or config.get("target_host") or DEFAULT_ADDRESS
    config["namespace"] = namespace or config.get("namespace") or DEFAULT_NAMESPACE
    config["data_converter"] = data_converter(environ)
    config.update(options)
    return config


def temporal_address(environ: Mapping[str, str] | None = None) -> str:
    """The address ``connect()`` uses without arguments (profile, then ``TEMPORAL_ADDRESS``)."""
    return str(connect_options(environ=environ)["target_host"])


async def connect(
    address: str | None = None, namespace: str | None = None, **options: Any
) -> Client:
    """Connect with the pydantic data converter (the job model is pydantic end to end),
    encrypting payloads when ``JOBS_ENCRYPTION_KEY`` is set, tracing when tracing is on
    (the interceptor goes before any ``interceptors`` option; a worker on this client uses it).

    Settings: see the module docstring; ``options`` go to ``Client.connect`` and win.
    Raises :class:`SpecError` for bad settings (unknown profile, unreadable certificate, bad
    key) and :class:`TemporalUnavailable` when the server cannot be reached.
    """
    kwargs = connect_options(address, namespace, **options)
    traced = tracing.interceptors()  # [] when off: no interceptor, no OpenTelemetry import
    if traced:
        kwargs["interceptors"] = [*traced, *kwargs.get("interceptors", ())]
    target = kwargs.pop("target_host")
    try:
        return await Client.connect(target, **kwargs)
    except RuntimeError as err:  # the SDK reports connection failures as RuntimeError
        raise TemporalUnavailable(f"cannot reach Temporal at {target}: {err}") from err


async def check_serving(client: Client) -> None:
    """One health check; returns only when the server says it is serving. Raises NotServing
    on any other answer (the SDK's ``check_health`` reports that as False rather than as an
    error) and the SDK's error when the server cannot be reached."""
    if not await client.service_client.check_health():
        raise NotServing("Temporal answered its health check: not serving")
