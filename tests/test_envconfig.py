"""Where `connect` connects: temporal.toml profiles, TEMPORAL_* variables, explicit arguments.

No server needed: `connect_options` builds the `Client.connect` keyword arguments, and
`connect` is checked with `Client.connect` replaced by a recorder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import TLSConfig

from jobctl.connection import client as client_module
from jobctl.connection.client import (
    DEFAULT_ADDRESS,
    DEFAULT_NAMESPACE,
    config_file,
    connect,
    connect_options,
    temporal_address,
)
from jobctl.starter.errors import SpecError, TemporalUnavailable

TWO_PROFILES = """
[profile.default]
address = "default.example.com:7233"
namespace = "ns-default"

[profile.staging]
address = "staging.example.com:7233"
namespace = "ns-staging"
api_key = "staging-api-key"

[profile.staging.tls]
server_name = "staging.internal"

[profile.staging.grpc_meta]
team = "jobs"
"""


@pytest.fixture
def toml(tmp_path: Path) -> Path:
    path = tmp_path / "temporal.toml"
    path.write_text(TWO_PROFILES)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty home directory: no default temporal.toml can leak in from the real one."""
    path = tmp_path / "home"
    path.mkdir()
    return path


def env_with(home: Path, **values: str) -> dict[str, str]:
    return {"HOME": str(home), "PATH": os.environ.get("PATH", ""), **values}


@pytest.fixture
def clean_environ(monkeypatch: pytest.MonkeyPatch, home: Path) -> pytest.MonkeyPatch:
    """os.environ without any TEMPORAL_* / JOBS_ENCRYPTION_* setting, for `connect()` itself."""
    for name in list(os.environ):
        if name.startswith(("TEMPORAL_", "JOBS_ENCRYPTION_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return monkeypatch


def test_no_file_and_no_environment_is_the_local_dev_server(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A temporal.toml under this process's own HOME must not leak into another environment.
    decoy = tmp_path / "decoy"
    (decoy / ".config" / "temporalio").mkdir(parents=True)
    (decoy / ".config" / "temporalio" / "temporal.toml").write_text(TWO_PROFILES)
    monkeypatch.setenv("HOME", str(decoy))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    options = connect_options(environ=env_with(home))
    assert options["target_host"] == DEFAULT_ADDRESS == "localhost:7233"
    assert options["namespace"] == DEFAULT_NAMESPACE == "default"
    assert "tls" not in options and "api_key" not in options and "rpc_metadata" not in options
    assert options["data_converter"] is pydantic_data_converter
    assert temporal_address(env_with(home)) == "localhost:7233"


def test_the_profile_comes_from_temporal_profile(toml: Path, home: Path) -> None:
    default = connect_options(environ=env_with(home, TEMPORAL_CONFIG_FILE=str(toml)))
    assert (default["target_host"], default["namespace"]) == (
        "default.example.com:7233",
        "ns-default",
    )
    assert "api_key" not in default and "tls" not in default

    staging = connect_options(
        environ=env_with(home, TEMPORAL_CONFIG_FILE=str(toml), TEMPORAL_PROFILE="staging")
    )
    assert (staging["target_host"], staging["namespace"]) == (
        "staging.example.com:7233",
        "ns-staging",
    )
    assert staging["api_key"] == "staging-api-key"
    assert isinstance(staging["tls"], TLSConfig) and staging["tls"].domain == "staging.internal"
    assert staging["rpc_metadata"] == {"team": "jobs"}
    assert staging["data_converter"] is pydantic_data_converter


def test_the_default_file_location_is_the_user_config_directory(home: Path) -> None:
    if sys.platform != "linux":
        pytest.skip("the default location checked here is the Linux one")
    default_file = home / ".config" / "temporalio" / "temporal.toml"
    assert config_file(env_with(home)) == default_file
    default_file.parent.mkdir(parents=True)
    default_file.write_text(TWO_PROFILES)
    assert temporal_address(env_with(home)) == "default.example.com:7233"
    xdg = home / "xdg"
    assert config_file(env_with(home, XDG_CONFIG_HOME=str(xdg))) == (
        xdg / "temporalio" / "temporal.toml"
    )


def test_the_environment_overrides_the_file_and_arguments_override_both(
    toml: Path, home: Path
) -> None:
    env = env_with(
        home,
        TEMPORAL_CONFIG_FILE=str(toml),
        TEMPORAL_PROFILE="staging",
        TEMPORAL_ADDRESS="env.example.com:7233",
        TEMPORAL_NAMESPACE="ns-env",
        TEMPORAL_API_KEY="env-api-key",
    )
    options = connect_options(environ=env)
    assert (options["target_host"], options["namespace"], options["api_key"]) == (
        "env.example.com:7233",
        "ns-env",
        "env-api-key",
    )
    assert temporal_address(env) == "env.example.com:7233"  # the address actually used
    explicit = connect_options("localhost:9999", "ns-arg", environ=env)
    assert (explicit["target_host"], explicit["namespace"]) == ("localhost:9999", "ns-arg")
    assert explicit["api_key"] == "env-api-key"  # only address and namespace are overridden
    extra = connect_options(environ=env, api_key="option-key", identity="me")
    assert (extra["api_key"], extra["identity"]) == ("option-key", "me")


def write_pems(directory: Path) -> dict[str, Path]:
    files = {}
    for name in ("client.pem", "client.key", "ca.pem"):
        files[name] = directory / name
        files[name].write_text(f"-----BEGIN TEST-----\n{name}\n-----END TEST-----\n")
    return files


def test_tls_files_from_the_environment_reach_the_connect_options(
    tmp_path: Path, home: Path
) -> None:
    pems = write_pems(tmp_path)
    options = connect_options(
        environ=env_with(
            home,
            TEMPORAL_ADDRESS="tls.example.com:7233",
            TEMPORAL_TLS_CLIENT_CERT_PATH=str(pems["client.pem"]),
            TEMPORAL_TLS_CLIENT_KEY_PATH=str(pems["client.key"]),
            TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(pems["ca.pem"]),
            TEMPORAL_TLS_SERVER_NAME="tls.internal",
        )
    )
    tls = options["tls"]
    assert isinstance(tls, TLSConfig)
    assert tls.client_cert == pems["client.pem"].read_bytes()
    assert tls.client_private_key == pems["client.key"].read_bytes()
    assert tls.server_root_ca_cert == pems["ca.pem"].read_bytes()
    assert tls.domain == "tls.internal"
    assert "api_key" not in options


def test_tls_files_from_a_profile_and_tls_switched_off(tmp_path: Path, home: Path) -> None:
    pems = write_pems(tmp_path)
    toml = tmp_path / "mtls.toml"
    toml.write_text(
        f"""
[profile.mtls]
address = "mtls.example.com:7233"
[profile.mtls.tls]
client_cert_path = "{pems["client.pem"]}"
client_key_path = "{pems["client.key"]}"
"""
    )
    env = env_with(home, TEMPORAL_CONFIG_FILE=str(toml), TEMPORAL_PROFILE="mtls")
    tls = connect_options(environ=env)["tls"]
    assert isinstance(tls, TLSConfig) and tls.client_cert == pems["client.pem"].read_bytes()
    assert tls.client_private_key == pems["client.key"].read_bytes()
    # An API key alone turns TLS on; TEMPORAL_TLS=false turns it off again.
    keyed = connect_options(environ=env_with(home, TEMPORAL_API_KEY="k"))
    assert keyed["api_key"] == "k" and keyed["tls"] is True
    off = connect_options(environ=env_with(home, TEMPORAL_API_KEY="k", TEMPORAL_TLS="false"))
    assert off["api_key"] == "k" and off["tls"] is False


async def test_connect_hands_the_profile_to_client_connect(
    toml: Path, clean_environ: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    sentinel = object()

    async def recorder(target_host: str, **kwargs: Any) -> Any:
        calls.append((target_host, kwargs))
        return sentinel

    clean_environ.setattr(Client, "connect", staticmethod(recorder))
    clean_environ.setenv("TEMPORAL_CONFIG_FILE", str(toml))
    clean_environ.setenv("TEMPORAL_PROFILE", "staging")
    assert await connect() is sentinel
    target, kwargs = calls[-1]
    assert target == "staging.example.com:7233"
    assert kwargs["namespace"] == "ns-staging" and kwargs["api_key"] == "staging-api-key"
    assert isinstance(kwargs["tls"], TLSConfig) and kwargs["tls"].domain == "staging.internal"
    assert kwargs["rpc_metadata"] == {"team": "jobs"}
    assert kwargs["data_converter"] is pydantic_data_converter
    await connect("localhost:7233", "default")
    assert calls[-1][0] == "localhost:7233" and calls[-1][1]["namespace"] == "default"


def test_a_missing_profile_is_a_clear_error(toml: Path, home: Path) -> None:
    env = env_with(home, TEMPORAL_CONFIG_FILE=str(toml), TEMPORAL_PROFILE="prod")
    with pytest.raises(SpecError) as missing:
        connect_options(environ=env)
    [(field, reason)] = missing.value.problems
    assert field == "TEMPORAL_PROFILE"
    assert reason == f"no profile 'prod' in {toml}; profiles there: default, staging"
    with pytest.raises(SpecError) as no_file:
        connect_options(environ=env_with(home, TEMPORAL_PROFILE="prod"))
    assert no_file.value.problems[0][0] == "TEMPORAL_PROFILE"
    assert "no profile 'prod'" in no_file.value.problems[0][1]
    assert no_file.value.problems[0][1] == (
        f"no profile 'prod': there is no {config_file(env_with(home))}"
    )


def test_a_missing_or_broken_config_file_is_a_clear_error(tmp_path: Path, home: Path) -> None:
    gone = tmp_path / "gone.toml"
    with pytest.raises(SpecError) as missing:
        connect_options(environ=env_with(home, TEMPORAL_CONFIG_FILE=str(gone)))
    assert missing.value.problems == [("TEMPORAL_CONFIG_FILE", f"no such file: {gone}")]
    broken = tmp_path / "broken.toml"
    broken.write_text("[profile.default\naddress = ")
    with pytest.raises(SpecError) as bad:
        connect_options(environ=env_with(home, TEMPORAL_CONFIG_FILE=str(broken)))
    assert bad.value.problems[0][0] == "TEMPORAL_CONFIG_FILE"
    assert str(broken) in bad.value.problems[0][1] and "TOML" in bad.value.problems[0][1]


def test_an_unreadable_certificate_names_the_file(tmp_path: Path, home: Path) -> None:
    gone = tmp_path / "nope.pem"
    with pytest.raises(SpecError) as err:
        connect_options(environ=env_with(home, TEMPORAL_TLS_CLIENT_CERT_PATH=str(gone)))
    assert err.value.problems[0][0] == "tls" and str(gone) in err.value.problems[0][1]


async def test_unreachable_names_the_address_the_profile_chose(
    tmp_path: Path, clean_environ: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "down.toml"
    toml.write_text('[profile.down]\naddress = "127.0.0.1:1"\n')
    clean_environ.setenv("TEMPORAL_CONFIG_FILE", str(toml))
    clean_environ.setenv("TEMPORAL_PROFILE", "down")
    assert client_module.temporal_address() == "127.0.0.1:1"
    with pytest.raises(TemporalUnavailable) as err:
        await connect()
    assert str(err.value).startswith("cannot reach Temporal at 127.0.0.1:1: ")
