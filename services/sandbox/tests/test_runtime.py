"""What the agents' root is made of (agent/runtime.py), decided before any mount: the parts that need no namespace.

What programs then see, on every backend, is tested from inside the sandbox by tests/security/test_answer_keys.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from codegym_sandbox import languages
from codegym_sandbox.agent import runtime
from codegym_sandbox.backends.local import CHECKOUT, SOURCE, LocalBackend, agent_env, worker_view
from codegym_sandbox.backends.worker import ProcessWorker
from codegym_sandbox.config import Settings


def test_binds_are_real_outermost_directories_and_links_are_made_again() -> None:
    binds, links = runtime._plan(["/usr", "/usr/bin", "/bin", "/no/such/dir"], hide=[], always=[])
    assert binds == ["/usr"]
    if os.path.islink("/bin"):  # a merged /usr: /bin leads into it
        assert ("/bin", os.readlink("/bin")) in links


def test_a_toolchain_inside_a_hidden_directory_is_left_out() -> None:
    assert runtime._plan(["/usr/share"], hide=["/usr"], always=[]) == ([], [])
    # ... but for the interpreter's installation, without which no Python runs.
    assert runtime._plan(["/usr/share"], hide=["/usr"], always=["/usr/share"]) == (["/usr/share"], [])


def test_what_the_root_makes_itself_is_never_bound() -> None:
    assert runtime._plan(["/etc", "/proc", "/dev", "/sys/devices"], hide=[], always=[]) == ([], [])


def test_site_packages_directories_of_the_interpreters_version_get_the_runtime_packages() -> None:
    binds = ["/usr", os.path.realpath(sys.base_prefix)]
    runtime_dirs, others = runtime._site_dirs(binds)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    assert runtime_dirs and all(version in p.split("/") for p in runtime_dirs)
    assert all(any(runtime._within(p, top) for top in binds) for p in runtime_dirs + others)
    if os.path.isdir("/usr/lib/python3/dist-packages"):  # Debian's, of no version: always covered empty
        assert "/usr/lib/python3/dist-packages" in others


def test_python_for_programs_keeps_the_standard_library_and_site_packages_only() -> None:
    """As the agent starts (-S, its source on the path): afterwards only what `python3 main.py` would have."""
    code = (
        "import json, sys\nfrom codegym_sandbox.agent import runtime\nruntime.python_for_programs()\n"
        "import site\nprint(json.dumps({'path': sys.path, 'site': site.getsitepackages()}))\n"
    )
    python = languages.base_python()
    out = subprocess.run(
        [python, "-s", "-S", "-c", code],
        cwd=SOURCE,
        env={**agent_env(), "PYTHONPATH": str(SOURCE)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = json.loads(out)
    assert str(SOURCE) not in found["path"] and "" not in found["path"]
    assert next(p for p in found["site"] if os.path.isdir(p)) in found["path"]


def test_agents_run_on_the_base_interpreter_with_no_server_path_in_sight() -> None:
    view = worker_view(Settings(backend="local"))
    assert str(SOURCE) in view["hide"]
    if CHECKOUT is not None:
        assert str(CHECKOUT) in view["hide"]
    if sys.prefix != sys.base_prefix:
        assert sys.prefix in view["hide"]
    backend = LocalBackend(1, 1, {}, None)
    zygote = backend.zygote  # the agents' parent, where the kernel has pidfds: they inherit all of this
    assert zygote.argv == [languages.base_python(), "-s", "-S", "-m", "codegym_sandbox.agent.worker_zygote"]
    assert "PYTHONPATH" not in zygote.env and not any(str(SOURCE) in value for value in zygote.env.values())
    backend.forking = False
    worker = backend.make_worker(0)
    assert isinstance(worker, ProcessWorker)
    assert worker.argv == [languages.base_python(), "-s", "-S", "-m", "codegym_sandbox.agent"]
    assert worker.env is not None and "PYTHONPATH" not in worker.env
    assert not any(str(SOURCE) in value for value in worker.env.values())
