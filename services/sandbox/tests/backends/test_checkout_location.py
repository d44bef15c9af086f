"""The local backend works wherever the checkout, its venv, the runtime packages and the toolchains lie.

The agents' root is put together on a tmpfs over the host's ``/tmp`` and every box mounts a ``/tmp`` of its
own, so a checkout cloned under ``/tmp`` once lost its runtime packages (no worker started), and a toolchain
there would be hidden from programs. Where a toolchain cannot be shown at all (where the box mounts file
systems of its own), the server refuses to start and says what to change.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from codegym_sandbox.agent import isolation
from codegym_sandbox.backends.local import SOURCE, MisplacedToolchain, runtime_packages
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

# The server, run from the copied checkout by the venv made under /tmp: one program through /run_code.
SERVER = """
import json, sys
import codegym_sandbox
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

with TestClient(create_app(Settings(backend="local", workers=1, cache_entries=0))) as client:
    answer = client.post("/run_code", json={"language": "python", "code": sys.argv[1]}).json()
print(json.dumps({"package": codegym_sandbox.__file__, "run": answer["run_result"]}))
"""
PROGRAM = """
import os, sortedcontainers
print(list(sortedcontainers.SortedList([3, 1, 2])))
print(sorted(os.listdir({rustup!r})))
try:
    open(os.path.join({rustup!r}, "planted"), "w")
except OSError:
    print("read-only")
"""


@pytest.fixture
def under_tmp() -> Iterator[Path]:
    """A fresh directory under /tmp itself (where CI's clone may not be, and pytest's own may not be)."""
    top = Path(tempfile.mkdtemp(prefix="codegym-clone-", dir="/tmp"))
    try:
        yield top
    finally:
        shutil.rmtree(top)


def _copy_checkout(top: Path) -> tuple[Path, Path]:
    """The sandbox's source and its runtime packages (the one this test imports) copied under ``top`` as a
    checkout has them, and a venv under ``top`` that runs the server from that copy."""
    checkout = top / "checkout"
    shutil.copytree(SOURCE, checkout / "services" / "sandbox" / "src", ignore=shutil.ignore_patterns("__pycache__"))
    packages = runtime_packages(Settings())
    assert packages and os.path.isdir(packages), f"no runtime packages at {packages}: run scripts/setup"
    site = checkout / ".runtime" / "site-packages"
    for name in os.listdir(packages):
        if name.startswith("sortedcontainers"):
            shutil.copytree(Path(packages) / name, site / name)
    venv = top / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    (python_lib,) = (venv / "lib").glob("python3*/site-packages")
    # The copy first, then this environment's packages (fastapi, pydantic) without its .pth files, which
    # would put the original checkout's codegym_sandbox back on the path.
    (python_lib / "checkout.pth").write_text(f"{checkout / 'services' / 'sandbox' / 'src'}\n")
    (python_lib / "server_deps.pth").write_text("".join(f"{p}\n" for p in sys.path if p.endswith("site-packages")))
    return checkout, venv / "bin" / "python"


def test_a_checkout_venv_runtime_packages_and_toolchain_under_tmp_serve_programs(under_tmp: Path) -> None:
    """The issue's first run, from a checkout under /tmp: workers start, a program imports a runtime package
    (from the checkout's .runtime under /tmp) and sees a toolchain's directory that lies under /tmp."""
    checkout, python = _copy_checkout(under_tmp)
    rustup = under_tmp / "rustup"  # a toolchain's home (rust's is bound into the root) under /tmp
    (rustup / "toolchains").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEGYM_SANDBOX_", "PYTHON"))}
    env["RUSTUP_HOME"] = str(rustup)
    done = subprocess.run(
        [python, "-c", SERVER, PROGRAM.format(rustup=str(rustup))],
        cwd=under_tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["package"].startswith(str(checkout)), answer["package"]
    run = answer["run"]
    assert (run["return_code"], run["stdout"]) == (0, "[1, 2, 3]\n['toolchains']\nread-only\n"), run


@pytest.mark.parametrize("place", [isolation.SCRATCH, isolation.SHM, "/tmp/.stage"])
def test_a_toolchain_where_the_box_mounts_its_own_file_systems_stops_the_server(
    place: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No root can show a toolchain under the scratch directory, the stage or /dev/shm: the server refuses
    to start and names the directory and what to change, instead of workers that fail at every start."""
    existed = os.path.isdir(place)
    os.makedirs(place, exist_ok=True)
    home = tempfile.mkdtemp(prefix="codegym-rustup-", dir=place)
    try:
        monkeypatch.setenv("RUSTUP_HOME", home)
        with pytest.raises(MisplacedToolchain) as refused, TestClient(create_app(Settings(backend="local"))):
            pass
    finally:
        shutil.rmtree(home)
        if not existed:
            os.rmdir(place)
    assert home in str(refused.value) and "elsewhere" in str(refused.value)
