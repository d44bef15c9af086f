"""The Helm chart in k8s/codegym: lints, renders, and every manifest is valid for Kubernetes.

Rendered for the default values and for ``ci/full-values.yaml`` (every optional part on); each manifest is
validated strictly against the Kubernetes API schemas of the oldest and newest versions the chart targets
(kubernetes-validate ships them), the ServiceMonitor against tests/deploy/schemas/servicemonitor.json.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from deploy_tools import ROOT, tool, trainer_cli

CHART = ROOT / "k8s" / "codegym"
VALUES = {
    "default": None,
    "full": CHART / "ci" / "full-values.yaml",
    "sessions": CHART / "ci" / "sessions-values.yaml",
}
KUBERNETES_VERSIONS = ["1.33.0", "1.37.0"]
SERVICE_MONITOR = json.loads((Path(__file__).parent / "schemas" / "servicemonitor.json").read_text())


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("helm"), *args], capture_output=True, text=True, timeout=60)


@cache
def render(values: str, *sets: str) -> tuple[dict[str, Any], ...]:
    """The chart's manifests for a values file of VALUES, with extra ``--set`` options."""
    args = ["template", "rel", str(CHART), "--namespace", "codegym"]
    if VALUES[values] is not None:
        args += ["-f", str(VALUES[values])]
    for option in sets:
        args += ["--set", option]
    done = helm(*args)
    assert done.returncode == 0, done.stderr
    return tuple(d for d in yaml.safe_load_all(done.stdout) if d)


def find(manifests: tuple[dict[str, Any], ...], kind: str, component: str) -> dict[str, Any]:
    for m in manifests:
        if m["kind"] == kind and m["metadata"]["labels"]["app.kubernetes.io/component"] == component:
            return m
    raise AssertionError(f"no {kind} for {component}")


@pytest.mark.parametrize("values", VALUES)
def test_chart_lints(values: str) -> None:
    args = ["lint", "--strict", str(CHART)]
    if VALUES[values] is not None:
        args += ["-f", str(VALUES[values])]
    done = helm(*args)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("values", VALUES)
def test_every_manifest_is_valid_kubernetes(values: str, version: str) -> None:
    manifests = render(values)
    for m in manifests:
        if m["kind"] == "ServiceMonitor":
            jsonschema.validate(m, SERVICE_MONITOR)
        else:
            kubernetes_validate.validate(m, version, strict=True)


def test_default_and_full_values_render_the_expected_resources() -> None:
    kinds = {(m["kind"], m["metadata"]["name"]) for m in render("default")}
    assert kinds == {
        ("Secret", "rel-codegym-tokens"),
        ("Deployment", "rel-codegym-sandbox"),
        ("Service", "rel-codegym-sandbox"),
        ("HorizontalPodAutoscaler", "rel-codegym-sandbox"),
        ("PodDisruptionBudget", "rel-codegym-sandbox"),
        ("NetworkPolicy", "rel-codegym-sandbox"),
        ("Deployment", "rel-codegym-evaluator"),
        ("Service", "rel-codegym-evaluator"),
    }
    full = {m["kind"] for m in render("full")}
    assert {"Job", "ConfigMap", "ServiceMonitor"} <= full
    assert "Secret" not in full  # auth.existingSecret: the chart makes none


def test_values_schema_rejects_typos_and_wrong_types() -> None:
    done = helm("template", "rel", str(CHART), "--set", "sandbox.wrokers=4")
    assert done.returncode != 0 and "wrokers" in done.stderr
    done = helm("template", "rel", str(CHART), "--set", "sandbox.autoscaling.targetCPUUtilizationPercentage=150")
    assert done.returncode != 0 and "targetCPUUtilizationPercentage" in done.stderr
    done = helm("template", "rel", str(CHART), "--set-json", 'trainer.sandboxUrls=["sandbox:8080"]')
    assert done.returncode != 0 and "sandboxUrls" in done.stderr


def test_sandbox_egress_is_denied() -> None:
    policy = find(render("default"), "NetworkPolicy", "sandbox")["spec"]
    assert "Egress" in policy["policyTypes"] and policy["egress"] == []
    sources = [
        peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for peer in policy["ingress"][0]["from"]
    ]
    assert sources == ["evaluator", "trainer"]


def test_a_sessions_calls_reach_the_pod_its_id_names() -> None:
    manifests = render("sessions")
    sandbox = find(manifests, "StatefulSet", "sandbox")
    assert not [m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"] == "rel-codegym-sandbox"]
    assert sandbox["spec"]["serviceName"] == "rel-codegym-sandbox-pods"
    env = {e["name"]: e for e in sandbox["spec"]["template"]["spec"]["containers"][0]["env"]}
    # pod N makes ids "N-...": the pod-index label (Kubernetes >= 1.28) is a valid SERVER_ID ([a-z0-9]{1,16})
    index = env["CODEGYM_SANDBOX_SERVER_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert index == "metadata.labels['apps.kubernetes.io/pod-index']"
    hpa = find(manifests, "HorizontalPodAutoscaler", "sandbox")["spec"]["scaleTargetRef"]
    assert (hpa["kind"], hpa["name"]) == ("StatefulSet", "rel-codegym-sandbox")
    pods = find(manifests, "Service", "sandbox-pods")["spec"]
    assert pods["clusterIP"] == "None" and pods["selector"]["app.kubernetes.io/component"] == "sandbox"
    # the ServiceMonitor scrapes the sandbox Service alone: each pod once
    monitor = find(manifests, "ServiceMonitor", "sandbox")["spec"]["selector"]["matchLabels"]
    assert [
        m["metadata"]["name"]
        for m in manifests
        if m["kind"] == "Service" and all(m["metadata"]["labels"].get(k) == v for k, v in monitor.items())
    ] == ["rel-codegym-sandbox"]

    conf = find(manifests, "ConfigMap", "sandbox-router")["data"]["nginx.conf"]
    route = re.search(r'location ~ "(.+)" \{\s*proxy_next_upstream off;\s*proxy_pass (\S+);', conf)
    assert route is not None, conf
    pattern, target = route.groups()
    assert target == "http://rel-codegym-sandbox-$1.rel-codegym-sandbox-pods.codegym.svc.cluster.local:8080"
    # nginx's PCRE and Python's re agree on this pattern: a session's calls go to its pod, nothing else does
    for path, pod in [("/v1/sessions/3-AbC_d-9/execute", "3"), ("/v1/sessions/12-x", "12"), ("/v1/sessions", None),
                      ("/v1/sessions/", None), ("/v1/execute", None), ("/v1/sessions/beta-x", None)]:  # fmt: skip
        match = re.match(pattern, path)
        assert (match.group(1) if match else None) == pod, path
    assert "proxy_pass http://sandbox;" in conf and "server rel-codegym-sandbox.codegym.svc.cluster.local:8080;" in conf
    # NeMo-Skills' sessions hash on their X-Session-ID over the pods always there (autoscaling's least replicas)
    nemo = re.search(r"upstream nemo_skills \{(.*?)\}", conf, re.S)
    assert nemo is not None and "hash $http_x_session_id consistent;" in nemo.group(1), conf
    ring = re.findall(r"server rel-codegym-sandbox-(\d+)\.rel-codegym-sandbox-pods\S+:8080 resolve;", nemo.group(1))
    assert ring == ["0", "1"], nemo.group(1)
    nemo_route = re.search(
        r'location ~ "(\^/\(execute\|sessions\)[^"]*)" \{\s*proxy_next_upstream off;\s*proxy_pass http://nemo_skills;',
        conf,
    )
    assert nemo_route is not None, conf
    for path, hashed in [("/execute", True), ("/sessions", True), ("/sessions/abc", True), ("/v1/sessions/3-x", False),
                         ("/v1/execute", False), ("/executes", False)]:  # fmt: skip
        assert bool(re.match(nemo_route.group(1), path)) == hashed, path

    router = find(manifests, "Deployment", "sandbox-router")["spec"]["template"]["spec"]
    assert restricted_violations(router) == []
    assert router["containers"][0]["command"][:3] == ["nginx", "-c", "/etc/codegym/nginx.conf"]
    assert find(manifests, "Service", "sandbox-router")["spec"]["ports"][0]["port"] == 8080
    # the router admits the sandbox's clients alone, and the sandbox admits the router
    policy = find(manifests, "NetworkPolicy", "sandbox")["spec"]["ingress"][0]["from"]
    assert [p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in policy] == [
        "evaluator",
        "trainer",
        "sandbox-router",
    ]
    router_policy = find(manifests, "NetworkPolicy", "sandbox-router")["spec"]
    sources = [
        p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in router_policy["ingress"][0]["from"]
    ]
    assert sources == ["evaluator", "trainer"]
    assert router_policy["egress"][0]["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "sandbox"


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Where a pod spec breaks the PodSecurity `restricted` profile (the rules that apply to these pods)."""
    problems = []
    pod_ctx = pod.get("securityContext", {})
    for c in pod["containers"]:
        ctx = c.get("securityContext", {})
        name = c["name"]
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation must be false")
        if ctx.get("capabilities", {}).get("drop") != ["ALL"] or ctx.get("capabilities", {}).get("add"):
            problems.append(f"{name}: capabilities must drop ALL and add none")
        if not (ctx.get("runAsNonRoot") or pod_ctx.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot must be true")
        seccomp = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost, not {seccomp}")
        if ctx.get("privileged"):
            problems.append(f"{name}: privileged")
        if ctx.get("procMount", "Default") != "Default" and pod.get("hostUsers", True):
            problems.append(f"{name}: procMount Unmasked needs hostUsers: false")
    if any("hostPath" in v for v in pod.get("volumes", [])):
        problems.append("hostPath volume")
    return problems


def test_pods_meet_the_restricted_profile_where_the_backend_allows() -> None:
    full = render("full")
    for kind, component in [("Deployment", "sandbox"), ("Deployment", "evaluator"), ("Job", "trainer")]:
        pod = find(full, kind, component)["spec"]["template"]["spec"]
        assert restricted_violations(pod) == [], component
    # the default sandbox turns seccomp off for its own per-program filters: the one rule it breaks
    sandbox = find(render("default"), "Deployment", "sandbox")["spec"]["template"]["spec"]
    assert restricted_violations(sandbox) == [
        "sandbox: seccompProfile must be RuntimeDefault or Localhost, not Unconfined"
    ]
    assert sandbox["hostUsers"] is False and sandbox["automountServiceAccountToken"] is False


def test_runtime_class_and_gpus_are_set_from_values() -> None:
    full = render("full")
    assert find(full, "Deployment", "sandbox")["spec"]["template"]["spec"]["runtimeClassName"] == "gvisor"
    trainer = find(full, "Job", "trainer")["spec"]["template"]["spec"]["containers"][0]
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == 4
    env = {e["name"]: e for e in trainer["env"]}
    assert env["CODEGYM_TRAINER_VLLM_MODE"]["value"] == "colocate"
    assert env["CODEGYM_TRAINER_SANDBOX_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "sandbox-api-token"
    vllm = find(full, "Deployment", "vllm")["spec"]["template"]["spec"]["containers"][0]
    assert vllm["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_trainer_gets_every_sandbox_url() -> None:
    args = find(render("full"), "Job", "trainer")["spec"]["template"]["spec"]["containers"][0]["args"]
    urls = [args[i + 1] for i, a in enumerate(args) if a == "--sandbox-url"]
    assert urls == ["http://sandbox-a.codegym.svc:8080", "http://sandbox-b.codegym.svc:8080"]
    default = find(render("default", "trainer.enabled=true"), "Job", "trainer")["spec"]["template"]["spec"]
    args = default["containers"][0]["args"]
    assert args[args.index("--sandbox-url") + 1] == "http://rel-codegym-sandbox:8080"


def test_hpa_scales_on_queue_depth_when_asked() -> None:
    metrics = find(render("full"), "HorizontalPodAutoscaler", "sandbox")["spec"]["metrics"]
    assert [m["type"] for m in metrics] == ["Resource", "Pods"]
    assert metrics[1]["pods"]["metric"]["name"] == "codegym_sandbox_queue_depth"
    assert len(find(render("default"), "HorizontalPodAutoscaler", "sandbox")["spec"]["metrics"]) == 1


def test_evaluator_reaches_the_sandbox_with_both_tokens_from_the_secret() -> None:
    env = find(render("full"), "Deployment", "evaluator")["spec"]["template"]["spec"]["containers"][0]["env"]
    values = {e["name"]: e.get("value") for e in env}
    assert json.loads(values["CODEGYM_EVALUATOR_SANDBOX_URL"]) == ["http://rel-codegym-sandbox:8080"]
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in env if "valueFrom" in e}
    assert secrets == {
        "CODEGYM_EVALUATOR_SANDBOX_TOKEN": {"name": "codegym-tokens", "key": "sandbox-api-token"},
        "CODEGYM_EVALUATOR_API_TOKEN": {"name": "codegym-tokens", "key": "evaluator-api-token"},
    }


def test_generated_tokens_are_random_and_distinct() -> None:
    secret = next(m for m in render("default") if m["kind"] == "Secret")
    tokens = [base64.b64decode(v).decode() for v in secret["data"].values()]
    assert sorted(secret["data"]) == ["evaluator-api-token", "sandbox-api-token"]
    assert len(set(tokens)) == 2 and all(len(t) == 40 for t in tokens)
    given = next(m for m in render("default", "auth.sandboxToken=s3cret") if m["kind"] == "Secret")
    assert base64.b64decode(given["data"]["sandbox-api-token"]) == b"s3cret"


def test_the_trainer_accepts_the_jobs_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = render("full")
    config_map = next(m for m in full if m["kind"] == "ConfigMap")
    (tmp_path / "train.yaml").write_text(config_map["data"]["train.yaml"])
    container = find(full, "Job", "trainer")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["codegym-train"]
    args = [str(tmp_path / "train.yaml") if a == "/config/train.yaml" else a for a in container["args"]]
    for name in [n for n in os.environ if n.startswith("CODEGYM_")]:
        monkeypatch.delenv(name)
    config = trainer_cli().parse_config(args)
    assert config.sandbox_url == ["http://sandbox-a.codegym.svc:8080", "http://sandbox-b.codegym.svc:8080"]
    assert (config.train_steps, config.group_size, str(config.output_dir)) == (200, 8, "/results")
