"""compose.yaml: valid against the compose specification, resolvable by docker compose, hardened."""

from __future__ import annotations

import json
import os
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from deploy_tools import ROOT, compose_binary, trainer_cli

COMPOSE_FILES = [ROOT / "compose.yaml", ROOT / "compose.docker-backend.yaml"]
PROFILES = [[], ["cpu"], ["gpu"], ["cpu", "train"], ["gpu", "train-gpu"]]
ENV = {
    "CODEGYM_SANDBOX_API_TOKEN": "test-token",
    "CODEGYM_EVALUATOR_API_TOKEN": "eval-token",
    "CODEGYM_DOCKER_GID": "999",
}


def compose_schema() -> dict[str, Any]:
    """The compose specification's JSON schema, as vendored by check-jsonschema."""
    files = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema: dict[str, Any] = json.loads(files.joinpath("compose-spec.json").read_text())
    return schema


class _TaggedLoader(yaml.SafeLoader):
    """Reads compose's merge tags (``!override``, ``!reset``) as the plain values they carry."""


def _untag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    return loader.construct_scalar(node)


_TaggedLoader.add_multi_constructor("!", _untag)


def compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CODEGYM_", "COMPOSE_"))}
    return subprocess.run(
        [compose_binary(), *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def resolved(files: list[Path], profiles: list[str]) -> dict[str, Any]:
    args = [a for f in files for a in ("-f", str(f))] + [a for p in profiles for a in ("--profile", p)]
    done = compose(*args, "config", "--format", "json", env=ENV)
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)
    return config


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: p.name)
def test_file_validates_against_the_compose_spec(path: Path) -> None:
    document = yaml.load(path.read_text(), Loader=_TaggedLoader)  # a SafeLoader subclass
    jsonschema.validate(document, compose_schema())


@pytest.mark.parametrize("profiles", PROFILES, ids=lambda p: "+".join(p) or "default")
def test_every_profile_resolves_to_a_valid_configuration(profiles: list[str]) -> None:
    config = resolved(COMPOSE_FILES[:1], profiles)
    jsonschema.validate(config, compose_schema())
    assert {"sandbox", "evaluator"} <= set(config["services"])
    for name, service in config["services"].items():
        if name in ("evaluator", "trainer", "trainer-gpu"):
            assert service["depends_on"]["sandbox"]["condition"] == "service_healthy"
        if not name.startswith("trainer"):  # a one-shot job needs no health check
            assert service["healthcheck"]["test"], f"{name} has no health check"


def test_profiles_pick_the_model_server() -> None:
    assert "model" in resolved(COMPOSE_FILES[:1], ["cpu"])["services"]
    gpu = resolved(COMPOSE_FILES[:1], ["gpu"])["services"]
    assert {"vllm", "trl-vllm"} <= set(gpu) and "model" not in gpu
    device = gpu["vllm"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]


def test_a_missing_token_is_refused_with_a_message() -> None:
    done = compose("config", "-q", env={"CODEGYM_EVALUATOR_API_TOKEN": "e"})
    assert done.returncode != 0
    assert "set CODEGYM_SANDBOX_API_TOKEN to a secret string" in done.stderr
    done = compose("config", "-q", env={"CODEGYM_SANDBOX_API_TOKEN": "s"})
    assert done.returncode != 0
    assert "set CODEGYM_EVALUATOR_API_TOKEN to a secret string" in done.stderr


def test_sandbox_is_hardened_and_has_no_docker_socket_by_default() -> None:
    sandbox = resolved(COMPOSE_FILES[:1], ["cpu"])["services"]["sandbox"]
    assert sandbox["read_only"] is True
    assert sandbox["cap_drop"] == ["ALL"] and not sandbox.get("cap_add")
    assert "no-new-privileges:true" in sandbox["security_opt"]
    assert not sandbox.get("privileged")
    assert not any("docker.sock" in str(v) for v in sandbox.get("volumes", []))
    assert all(p["host_ip"] == "127.0.0.1" for p in sandbox["ports"])
    assert sandbox["environment"]["CODEGYM_SANDBOX_BACKEND"] == "local"


def test_docker_backend_is_an_explicit_opt_in() -> None:
    sandbox = resolved(COMPOSE_FILES, ["cpu"])["services"]["sandbox"]
    assert sandbox["environment"]["CODEGYM_SANDBOX_BACKEND"] == "docker"
    assert any(v["target"] == "/var/run/docker.sock" for v in sandbox["volumes"])
    # the containers isolate the programs: Docker's own seccomp profile stays on for the server
    assert sandbox["security_opt"] == ["no-new-privileges:true"]


def test_named_volumes_hold_models_and_results() -> None:
    config = resolved(COMPOSE_FILES[:1], ["cpu", "train"])
    assert {"models", "results"} <= set(config["volumes"])
    mounts = {v["source"]: v["target"] for v in config["services"]["trainer"]["volumes"] if v["type"] == "volume"}
    assert mounts == {"results": "/results", "models": "/models"}


def _settings_class(service: str) -> Any:
    """The settings class that reads a service's environment (the trainer's from its source tree if need be)."""
    if service == "sandbox":
        from codegym_sandbox.config import Settings

        return Settings
    if service == "evaluator":
        from codegym_evaluator.service.settings import EvaluatorSettings

        return EvaluatorSettings
    return trainer_cli().TrainConfig


@pytest.mark.parametrize("service", ["sandbox", "evaluator", "trainer", "trainer-gpu"])
def test_services_accept_the_settings_compose_gives_them(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = resolved(COMPOSE_FILES[:1], ["gpu", "train", "train-gpu"])
    for name in list(os.environ):
        if name.startswith("CODEGYM_"):
            monkeypatch.delenv(name)
    env = {k: str(v) for k, v in config["services"][service]["environment"].items()}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    prefix = {"sandbox": "CODEGYM_SANDBOX_", "evaluator": "CODEGYM_EVALUATOR_"}.get(service, "CODEGYM_TRAINER_")
    assert any(k.startswith(prefix) for k in env)
    settings = _settings_class(service)()
    for name in env:
        if name.startswith(prefix):  # every variable compose sets is a field the service reads
            field = name.removeprefix(prefix).lower()
            assert field in type(settings).model_fields, f"{service}: {name} is no setting of the service"
    if service != "sandbox":
        assert "http://sandbox:8080" in settings.sandbox_url
