"""The compose stack (docker-compose.yml, Dockerfile, deploy/temporal/), checked without Docker.

The file is validated against the Compose specification (``check-jsonschema``'s vendored
copy, so offline), then read as YAML for what the schema cannot know: which services exist,
that images are pinned, the start order, the search attributes the setup step registers, the
API's token, and the Dockerfile's default command. Each check is a function returning the
problems it finds; the real files must have none, and ``test_each_check_can_fail`` breaks a
copy of them once per check to show that check notices.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobctl.starter.api import is_loopback
from jobctl.starter.dev.devserver import SERVER_DYNAMIC_CONFIG, search_attribute_flags

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

SCHEMA_SETUP = "temporal-schema"
SETUP = "temporal-setup"
SERVICES = {"postgresql", SCHEMA_SETUP, "temporal", SETUP, "ui", "worker", "api"}
# (service, dependency, condition): the start order the stack relies on.
DEPENDENCIES = [
    (SCHEMA_SETUP, "postgresql", "service_healthy"),
    ("temporal", SCHEMA_SETUP, "service_completed_successfully"),
    (SETUP, "temporal", "service_healthy"),
    ("worker", SETUP, "service_completed_successfully"),
    ("api", SETUP, "service_completed_successfully"),
]
ADMIN_TOOLS, SERVER = "temporalio/admin-tools", "temporalio/server"

Compose = dict[str, Any]


def load_compose() -> Compose:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict), "docker-compose.yml is not a mapping"
    # Through JSON: YAML merge keys (<<: *jobs-app) share nested mappings between services,
    # and a test that breaks one service must not break the others with it.
    plain: Compose = json.loads(json.dumps(data))
    return plain


def check_jsonschema(path: Path) -> subprocess.CompletedProcess[str]:
    """Validate ``path`` against the Compose spec that ships inside check-jsonschema."""
    exe = Path(sys.executable).with_name("check-jsonschema")
    found = str(exe) if exe.exists() else shutil.which("check-jsonschema")
    assert found, "check-jsonschema is not installed (pip install check-jsonschema)"
    return subprocess.run(
        [found, "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def services(compose: Compose) -> dict[str, Any]:
    found = compose.get("services")
    return found if isinstance(found, dict) else {}


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping, whichever of the two Compose forms it uses."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(str(item).partition("=")[::2] for item in env)
    return {str(key): "" if value is None else str(value) for key, value in env.items()}


def words(command: object) -> list[str]:
    if isinstance(command, str):
        return command.split()
    return [str(part) for part in command] if isinstance(command, list) else []


# -- the checks -------------------------------------------------------------------------


def missing_services(compose: Compose) -> list[str]:
    return sorted(SERVICES - set(services(compose)))


def image_problems(compose: Compose) -> list[str]:
    """Every service names an image with a literal tag (or digest) that is not ``latest``;
    the Temporal server and its admin tools (schema migrations) are the same release; the
    image built from this checkout carries the package version."""
    problems = []
    tags: dict[str, str] = {}
    for name, service in services(compose).items():
        image = str(service.get("image", ""))
        if not image:
            problems.append(f"{name}: no image")
            continue
        if "@sha256:" in image:
            continue  # a digest pins harder than a tag
        repository, _, tag = (
            image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
        )
        if not tag or tag == "latest" or "$" in image:
            problems.append(f"{name}: image {image!r} is not pinned to a tag")
        tags[repository] = tag
        if "build" in service:
            version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
            if tag != version:
                problems.append(f"{name}: built image tag {tag!r} is not the version {version}")
    if tags.get(SERVER) != tags.get(ADMIN_TOOLS):
        problems.append(f"{SERVER}:{tags.get(SERVER)} but {ADMIN_TOOLS}:{tags.get(ADMIN_TOOLS)}")
    return problems


def dependency_problems(compose: Compose) -> list[str]:
    """The start order above, and conditions that can come true: ``service_healthy`` on a
    service with a healthcheck, ``service_completed_successfully`` on one that may exit."""
    found = services(compose)
    problems = []
    for name, dependency, condition in DEPENDENCIES:
        depends = found.get(name, {}).get("depends_on") or {}
        actual = depends.get(dependency, {}).get("condition") if isinstance(depends, dict) else None
        if actual != condition:
            problems.append(f"{name} -> {dependency}: {actual!r}, want {condition!r}")
    for name, service in found.items():
        depends = service.get("depends_on") or {}
        for dependency, rule in depends.items() if isinstance(depends, dict) else ():
            target = found.get(dependency, {})
            condition = rule.get("condition")
            check = target.get("healthcheck") or {}
            if condition == "service_healthy" and (not check.get("test") or check.get("disable")):
                problems.append(f"{name} waits for {dependency} healthy; it has no healthcheck")
            if condition == "service_completed_successfully" and target.get("restart") in (
                "always",
                "unless-stopped",
            ):
                problems.append(f"{name} waits for {dependency} to exit; it restarts forever")
    return problems


def mounted_script(compose: Compose, name: str) -> Path | None:
    """The host file behind the ``.sh`` a service runs, through its bind mounts."""
    service = services(compose).get(name, {})
    argv = words(service.get("entrypoint")) + words(service.get("command"))
    script = next((arg for arg in argv if arg.endswith(".sh")), None)
    for volume in service.get("volumes") or []:
        source, _, rest = str(volume).partition(":")
        target = rest.split(":")[0]
        if script and source.startswith(".") and script.startswith(target.rstrip("/") + "/"):
            return ROOT / source / script[len(target.rstrip("/")) + 1 :]
    return None


def schema_setup_problems(compose: Compose) -> list[str]:
    """The schema step runs temporal-sql-tool (postgres12) on both databases."""
    script = mounted_script(compose, SCHEMA_SETUP)
    if script is None or not script.is_file():
        return [f"{SCHEMA_SETUP}: runs no script mounted from this checkout ({script})"]
    text = script.read_text()
    needed = ["temporal-sql-tool", "--plugin postgres12", "create", "setup-schema", "update-schema"]
    problems = [f"{script.name}: no {word!r}" for word in needed if word not in text]
    for database in ("temporal", "temporal_visibility"):
        if not re.search(rf"^setup_database {database} ", text, re.MULTILINE):
            problems.append(f"{script.name}: database {database} is not set up")
    return problems


def expected_search_attributes() -> dict[str, str]:
    """NAME -> CLI type for workflows.models.SEARCH_ATTRIBUTES (the dev server's own flags)."""
    flags = search_attribute_flags()
    return dict(value.split("=", 1) for value in flags[1::2])


def search_attribute_problems(compose: Compose) -> list[str]:
    """The setup step registers exactly the model's search attributes, each with its type."""
    env = environment(services(compose).get(SETUP, {}))
    registered: dict[str, str] = {}
    for pair in env.get("JOBS_SEARCH_ATTRIBUTES", "").split():
        name, _, kind = pair.partition("=")
        registered[name] = kind
    expected = expected_search_attributes()
    problems = [
        f"{name}: registered as {registered.get(name)!r}, want {kind!r}"
        for name, kind in expected.items()
        if registered.get(name) != kind
    ]
    problems += [f"{name}: not in workflows.models" for name in registered.keys() - expected]
    script = mounted_script(compose, SETUP)
    if script is None or not script.is_file():
        return [*problems, f"{SETUP}: runs no script mounted from this checkout ({script})"]
    text = script.read_text()
    loop = re.search(r"for (\w+) in \$JOBS_SEARCH_ATTRIBUTES; do\n(.*?)\ndone", text, re.DOTALL)
    body = " ".join(loop[2].replace("\\\n", " ").split()) if loop else ""
    var = loop[1] if loop else "?"
    arguments = f'--name "${{{var}%%=*}}" --type "${{{var}#*=}}"'
    if "temporal operator search-attribute create " not in body or arguments not in body:
        problems.append(f"{script.name}: does not create each of JOBS_SEARCH_ATTRIBUTES")
    if "operator namespace create" not in text:
        problems.append(f"{script.name}: does not create the namespace")
    return problems


def scaling_problems(compose: Compose) -> list[str]:
    """``--scale worker=N`` needs a worker without a fixed name or a published host port."""
    worker = services(compose).get("worker", {})
    problems = [f"worker has {key}" for key in ("container_name", "ports") if worker.get(key)]
    if words(worker.get("command")) not in ([], ["jobs", "worker"]):
        problems.append(f"worker runs {worker.get('command')!r}")
    return problems


def api_problems(compose: Compose) -> list[str]:
    """The API binds beyond loopback, so (as starter.api.check_binding demands) it gets its
    bearer token from the environment, never a value written into the file."""
    api = services(compose).get("api", {})
    argv = words(api.get("command"))
    if argv[:2] != ["jobs", "api"] or "--host" not in argv[:-1]:
        return [f"api runs {argv!r}, not jobs api --host ..."]
    host = argv[argv.index("--host") + 1]
    token = environment(api).get("JOBS_API_TOKEN", "")
    if not is_loopback(host) and not re.fullmatch(r"\$\{JOBS_API_TOKEN:\?[^}]+\}", token):
        return [f"api binds {host} with JOBS_API_TOKEN={token!r}; want ${{JOBS_API_TOKEN:?...}}"]
    return []


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    logical = re.sub(r"\\\n", " ", text)
    found = []
    for line in logical.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def dockerfile_problems(text: str) -> list[str]:
    """The final stage: a pinned python:3.11-slim base, a non-root user, ``jobctl worker``."""
    instructions = dockerfile_instructions(text)
    starts = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    if not starts:
        return ["no FROM"]
    final = instructions[starts[-1] :]
    problems = []
    base = final[0][1].split()[0]
    if not base.startswith("python:3.11-slim"):
        problems.append(f"final stage is FROM {base}")
    users = [rest for keyword, rest in final if keyword == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append(f"final stage runs as {users[-1] if users else 'root'}")
    commands = [rest for keyword, rest in final if keyword == "CMD"]
    try:
        command = json.loads(commands[-1]) if commands else None
    except json.JSONDecodeError:
        command = commands[-1]  # shell form: runs under /bin/sh -c, not as PID 1
    if command != ["jobs", "worker"]:
        problems.append(f"CMD is {command!r}, want the exec form of jobs worker")
    for keyword, rest in instructions:
        image = rest.split()[0] if keyword == "FROM" and rest else ""
        if image and (":" not in image or image.endswith(":latest")):
            problems.append(f"FROM {image} is not pinned to a tag")
    return problems + copy_problems(instructions)


def copy_problems(instructions: list[tuple[str, str]]) -> list[str]:
    """The build copies what the wheel is made of: jobctl/ and every folder it links in."""
    copied = {
        word.strip("./")
        for keyword, rest in instructions
        if keyword == "COPY"
        for word in rest.split()[:-1]
        if not word.startswith("--")
    }
    needed = {"jobctl", *(link.name for link in (ROOT / "jobctl").iterdir() if link.is_symlink())}
    return [f"the build does not COPY {name}" for name in sorted(needed - copied)]


CHECKS: dict[str, Callable[[Compose], list[str]]] = {
    "services": missing_services,
    "images": image_problems,
    "dependencies": dependency_problems,
    "schema setup": schema_setup_problems,
    "search attributes": search_attribute_problems,
    "scaling": scaling_problems,
    "api": api_problems,
}


# -- the tests ---------------------------------------------------------------------------


def test_compose_file_follows_the_compose_spec() -> None:
    result = check_jsonschema(COMPOSE_FILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_bogus_depends_on_condition_fails_the_schema(tmp_path: Path) -> None:
    broken = load_compose()
    broken["services"]["worker"]["depends_on"][SETUP]["condition"] = "service_bogus"
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken, sort_keys=False))
    result = check_jsonschema(path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "service_bogus" in result.stdout + result.stderr


@pytest.mark.parametrize("check", CHECKS)
def test_compose_stack(check: str) -> None:
    assert CHECKS[check](load_compose()) == []


def test_dockerfile_runs_a_jobs_worker_as_non_root() -> None:
    assert dockerfile_problems(DOCKERFILE.read_text()) == []


def test_search_attributes_come_from_the_model() -> None:
    # The expectation is derived, not copied: four names, the types the design states.
    assert expected_search_attributes() == {
        "JobStatus": "Keyword",
        "JobName": "Keyword",
        "JobHandler": "Keyword",
        "JobRunAt": "Datetime",
    }


def _set(path: str, value: Any) -> Callable[[Compose], None]:
    """A mutation: set ``value`` at a dotted path under ``services`` (None deletes)."""

    def mutate(compose: Compose) -> None:
        *parents, last = path.split(".")
        node = compose["services"]
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value

    return mutate


def _env(name: str, key: str, value: str | None) -> Callable[[Compose], None]:
    def mutate(compose: Compose) -> None:
        env = compose["services"][name]["environment"]
        if value is None:
            del env[key]
        else:
            env[key] = value

    return mutate


SA = "JOBS_SEARCH_ATTRIBUTES"
SA_CHECK = "search attributes"
BREAKAGES: list[tuple[str, Callable[[Compose], None]]] = [
    ("services", _set("ui", None)),
    ("images", _set("ui.image", "temporalio/ui:latest")),
    ("images", _set("ui.image", "temporalio/ui")),
    ("images", _set("postgresql.image", "postgres:${POSTGRES_TAG}")),
    ("images", _set("temporal-setup.image", "temporalio/admin-tools:1.30.0")),
    ("images", _set("worker.image", "jobs-scheduler:dev")),
    ("dependencies", _set("worker.depends_on.temporal-setup.condition", "service_started")),
    ("dependencies", _set("api.depends_on", None)),
    ("dependencies", _set("temporal.depends_on.temporal-schema.condition", "service_healthy")),
    ("dependencies", _set("temporal-schema.depends_on.postgresql.condition", "service_started")),
    ("dependencies", _set("postgresql.healthcheck", None)),
    ("dependencies", _set("temporal-setup.restart", "unless-stopped")),
    ("schema setup", _set("temporal-schema.volumes", [])),
    ("schema setup", _set("temporal-schema.entrypoint", ["/bin/sh", "/deploy/nope.sh"])),
    ("schema setup", _set("temporal-schema.entrypoint", ["sh", "/deploy/setup-namespace.sh"])),
    (SA_CHECK, _env(SETUP, SA, "JobStatus=Keyword JobName=Keyword JobHandler=Keyword")),
    (
        SA_CHECK,
        _env(SETUP, SA, "JobStatus=Keyword JobName=Keyword JobHandler=Keyword JobRunAt=Keyword"),
    ),
    (
        SA_CHECK,
        _env(SETUP, SA, "JobStatus=Keyword JobName=Text JobHandler=Keyword JobRunAt=Datetime"),
    ),
    (SA_CHECK, _env(SETUP, SA, None)),
    (
        SA_CHECK,
        _set("temporal-setup.entrypoint", ["/bin/sh", "/deploy/setup-schema.sh"]),
    ),
    ("scaling", _set("worker.container_name", "jobs-worker")),
    ("scaling", _set("worker.ports", ["9000:9000"])),
    ("scaling", _set("worker.command", ["jobs", "api"])),
    ("api", _env("api", "JOBS_API_TOKEN", "hunter2")),
    ("api", _env("api", "JOBS_API_TOKEN", None)),
    ("api", _set("api.command", ["jobs", "worker"])),
]


@pytest.mark.parametrize(
    ("check", "breakage"), BREAKAGES, ids=[f"{check}-{i}" for i, (check, _) in enumerate(BREAKAGES)]
)
def test_each_check_can_fail(check: str, breakage: Callable[[Compose], None]) -> None:
    broken = load_compose()
    breakage(broken)
    assert CHECKS[check](broken) != []


def test_the_api_token_rule_is_the_apis_own() -> None:
    # A loopback bind needs no token (starter.api.check_binding): no problem to report then.
    compose = load_compose()
    compose["services"]["api"]["command"] = ["jobs", "api", "--host", "127.0.0.1"]
    _env("api", "JOBS_API_TOKEN", None)(compose)
    assert api_problems(compose) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('CMD ["jobs", "worker"]', 'CMD ["jobs", "api"]'),
        ('CMD ["jobs", "worker"]', "CMD jobs worker"),
        ("USER 10001:10001", "USER root"),
        ("USER 10001:10001", ""),
        ("FROM python:3.11-slim AS build", "FROM python AS build"),
        ("FROM python:3.11-slim\n", "FROM python:latest\n"),
        ("COPY jobctl ./jobctl\n", ""),
        ("COPY workflows ./workflows\n", ""),
        ("README.md worker.py ./", "README.md ./"),
    ],
)
def test_each_dockerfile_check_can_fail(old: str, new: str) -> None:
    text = DOCKERFILE.read_text()
    assert old in text
    assert dockerfile_problems(text.replace(old, new)) != []


@pytest.mark.parametrize(
    ("script", "old", "new", "check"),
    [
        ("setup-namespace.sh", '--type "${pair#*=}"', "--type Keyword", SA_CHECK),
        ("setup-namespace.sh", "in $JOBS_SEARCH_ATTRIBUTES", "in JobStatus=Keyword", SA_CHECK),
        ("setup-namespace.sh", "operator namespace create", "operator namespace list", SA_CHECK),
        ("setup-schema.sh", "--plugin postgres12", "--plugin mysql8", "schema setup"),
        ("setup-schema.sh", "setup_database temporal_visibility ", "# ", "schema setup"),
        ("setup-schema.sh", "update-schema", "true", "schema setup"),
    ],
)
def test_each_script_check_can_fail(
    script: str, old: str, new: str, check: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    path = tmp_path / "deploy" / "temporal" / script
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert CHECKS[check](load_compose()) != []


# -- priority and fairness on the compose stack's server ---------------------------------------

DYNAMIC_CONFIG = ROOT / "deploy" / "temporal" / "dynamicconfig.yaml"


def server_config_problems(compose: Compose, config: Any) -> list[str]:
    """The server loads the mounted dynamic config file, and that file turns on what the dev
    server we ship turns on (starter/dev/devserver.py SERVER_DYNAMIC_CONFIG: priority,
    fairness, the visibility rate), unscoped."""
    server = compose["services"]["temporal"]
    path = server.get("environment", {}).get("DYNAMIC_CONFIG_FILE_PATH")
    mounts = [str(v).split(":")[:2] for v in server.get("volumes", [])]
    problems = []
    if ["./deploy/temporal/dynamicconfig.yaml", path] not in mounts:
        problems.append(f"DYNAMIC_CONFIG_FILE_PATH {path!r} is not deploy/temporal's file")
    for key, value in SERVER_DYNAMIC_CONFIG.items():
        if not isinstance(config, dict) or config.get(key) != [{"value": value}]:
            problems.append(f"{key} is not set to {value!r} for every namespace")
    return problems


def test_the_compose_server_has_priority_and_fairness_on() -> None:
    config = yaml.safe_load(DYNAMIC_CONFIG.read_text())
    assert server_config_problems(load_compose(), config) == []


@pytest.mark.parametrize(
    "breakage",
    ["no fairness", "fairness off", "scoped", "not mounted", "other path", "visibility rate"],
)
def test_the_priority_config_check_can_fail(breakage: str) -> None:
    compose = load_compose()
    config = yaml.safe_load(DYNAMIC_CONFIG.read_text())
    server = compose["services"]["temporal"]
    if breakage == "no fairness":
        del config["matching.enableFairness"]
    elif breakage == "fairness off":
        config["matching.enableFairness"] = [{"value": False}]
    elif breakage == "scoped":
        config["matching.useNewMatcher"][0]["constraints"] = {"namespace": "other"}
    elif breakage == "not mounted":
        server["volumes"] = []
    elif breakage == "visibility rate":
        del config["frontend.namespaceRPS.visibility"]
    else:
        server["environment"]["DYNAMIC_CONFIG_FILE_PATH"] = "/etc/temporal/other.yaml"
    assert server_config_problems(compose, config) != []
