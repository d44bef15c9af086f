"""The modules assert tests import first are imported once for all the runs of those tests, not again in each.

Each run of a set of tests is judged in a fork of the judge that holds them compiled (``agent/assert_checker.py``).
The fork imported the tests' modules again, run after run: ``import scipy.stats`` took most of a 1 s limit, and
an honest program was TLE. The judge now imports, before it forks, the modules the tests import before anything
else of theirs runs (never the program's), and each run's fork finds them imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

from .suite import BACKENDS, hostile_settings

RIGHT = "def add(a, b):\n    return a + b\n"
# Modules of the judge's own path: one that records the process its body ran in and a mark of each time it ran, one
# whose import fails halfway.
MODULES = {
    "counted.py": "import os\n\nRAN_IN = os.getpid()\nMARK = os.urandom(8).hex()\n",
    "half_imported.py": "import counted\n\nraise ValueError('half imported')\n",
}


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A local server whose programs' (and judges') packages are :data:`MODULES`."""
    if "local" not in BACKENDS:
        pytest.skip("the runtime packages are made here for the local backend only")
    packages = tmp_path_factory.mktemp("packages")
    packages.chmod(0o755)
    for name, text in MODULES.items():
        (packages / name).write_text(text)
        (packages / name).chmod(0o644)
    settings = hostile_settings("local", runtime_packages=str(packages))
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def _results(client: TestClient, tests: str, programs: list[str]) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"language": "python", "programs": programs, "tests": [{"assert_code": tests}]}
    r = client.post("/v1/evaluate", json={**body, "cache": False, "limits": {"timeout_s": 5}})
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    return results


def test_the_tests_first_imports_run_in_no_runs_process(judged: TestClient) -> None:
    """The module's body ran before the run's fork, in its judge: no run pays for it again."""
    tests = "import counted\nimport os\n\ndef test_imported_before():\n    assert counted.RAN_IN != os.getpid()\n"
    tests += "    assert add(1, 2) == 3\n"
    # After an import of the program's too (asked of the program's process, as the tests run).
    for first in ("", "from solution import add\n", "from solution import *\n"):
        assert [r["verdict"] for r in _results(judged, first + tests, [RIGHT] * 3)] == ["AC"] * 3, first


def test_the_tests_first_imports_run_once_for_the_runs_of_a_series(judged: TestClient) -> None:
    """One judge for the runs of one set of tests in a series, so one import: the box ended the series where the
    run's fork of the judge was still exiting as the checker answered, and the next run's new checker imported the
    tests' modules again (as often as every other run)."""
    tests = "import counted\nimport sys\n\nprint(counted.MARK, file=sys.stderr)\nassert add(1, 2) == 3\n"
    results = _results(judged, tests, [RIGHT] * 6)
    assert [r["verdict"] for r in results] == ["AC"] * 6, results
    assert len({r["tests"][0]["stderr"] for r in results}) == 1, [r["tests"][0]["stderr"] for r in results]


def test_an_import_after_the_tests_own_code_is_theirs_to_make(judged: TestClient) -> None:
    """What runs before it (a warnings filter, the environment set) may change what the import does: the run makes
    it, as the tests' code comes to it."""
    tests = "import os\nos.environ['X'] = '1'\nimport counted\n\nassert counted.RAN_IN == os.getpid()\n"
    tests += "assert add(1, 2) == 3\n"
    assert [r["verdict"] for r in _results(judged, tests, [RIGHT] * 2)] == ["AC"] * 2


def test_an_import_that_fails_fails_in_every_run_as_it_did(judged: TestClient) -> None:
    tests = "import os\nimport half_imported\nimport counted\n\nassert add(1, 2) == 3\n"
    for result in _results(judged, tests, [RIGHT] * 3):
        stderr = result["tests"][0]["stderr"]
        assert result["verdict"] == "RE", result
        assert 'half_imported.py", line 3' in stderr and "ValueError: half imported" in stderr, stderr


def test_numpys_generator_imported_before_a_run_draws_anew_in_each(hostile: TestClient) -> None:
    """numpy seeds its global generator when it is imported and not again in a fork: every run of the tests drew
    the same numbers from a judge that imported it, where a new process (pytest's, or the run's own import) draws
    new ones."""
    tests = "import numpy.random\nimport sys\n\nprint(numpy.random.randint(1 << 62), file=sys.stderr)\n"
    tests += "assert add(1, 2) == 3\n"
    results = _results(hostile, tests, [RIGHT] * 4)
    assert [r["verdict"] for r in results] == ["AC"] * 4, results
    assert len({r["tests"][0]["stderr"] for r in results}) == 4, results
