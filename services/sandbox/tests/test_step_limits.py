"""The memory limits the server chooses itself (its default, a compile's) fit its memory budget; what a request
asks for does not, and is refused where the budget cannot hold it (``step_limits.py``)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from codegym_sandbox import languages
from codegym_sandbox.backends.memory import MemoryBudget
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from codegym_sandbox.step_limits import BEYOND_LIMIT_MB, COMPILE_MEMORY_MB, fitted_mb, held_mb, runs_room_mb
from fastapi.testclient import TestClient


def test_a_limit_the_server_chose_fits_what_the_budget_holds_beside_what_it_holds_for_a_step() -> None:
    settings = Settings()
    held = held_mb(settings)  # an exchange's outputs (128 MiB by default), and a MiB for files
    assert held == 129
    assert BEYOND_LIMIT_MB == 64  # a node, JVM or compiler step is charged the supervisors' share too
    assert fitted_mb(1024, settings, 24_000) == 1024
    # Within what the runs are sure of: half of the budget, the other half the sessions' (round 56).
    assert runs_room_mb(settings, 1000) == 500
    assert fitted_mb(1024, settings, 1000) == 500 - 129 - 64
    no_sessions = Settings(sessions={"max_sessions": 0})
    assert runs_room_mb(no_sessions, 1000) == 1000 and fitted_mb(1024, no_sessions, 1000) == 1000 - 129 - 64
    # Where the runs' room is too small, within the whole budget; where that is too, left to be refused.
    assert fitted_mb(1024, settings, 300) == 300 - 129 - 64
    assert fitted_mb(1024, settings, 129 + 64 + 31) == 1024


C = '#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n'


def test_on_a_budget_below_the_default_limit_every_language_runs_and_only_an_ask_past_it_is_refused() -> None:
    """A 600 MiB budget (a small container's): the default limit (1 GiB), a compile's (4 GiB: the largest run
    limit) and a JVM's or node's charge (the largest limit: no address space bound of their own) each asked for
    more than it holds, and every run of every language was refused with 422."""
    with TestClient(create_app(Settings(backend="local", workers=1, memory_budget_mb=600, cache_entries=0))) as client:
        for language, code in (("python", "print('hi')"), ("c", C), ("nodejs", "console.log('hi')")):
            answer = client.post("/v1/execute", json={"language": language, "code": code})
            assert answer.status_code == 200 and answer.json()["verdict"] == "AC", (language, answer.text)
            assert answer.json()["run"]["stdout"] == "hi\n"
        # The default is fitted (300 - 129 - 64 MiB): a program that needs more is MLE, judged, not refused; the
        # server says which limit that is, so a verdict that hangs on the server's memory can be told apart.
        assert client.get("/readyz").json()["default_memory_mb"] == 300 - 129 - 64
        grows = {"language": "python", "code": "b = bytearray(200 << 20)\nprint(len(b))"}
        assert client.post("/v1/execute", json=grows).json()["verdict"] == "MLE"
        # What a request asks for is its own: past the budget, refused, saying why.
        asked = client.post("/v1/execute", json={**grows, "limits": {"memory_mb": 1024}})
        assert asked.status_code == 422 and "memory budget (600 MiB" in asked.json()["detail"], asked.text


def test_a_node_run_is_charged_what_its_workers_cgroup_holds_it_to_where_one_does() -> None:
    """V8 and the JVM start under no address-space limit, so the budget charged their runs the largest limit
    (4 GiB): five filled the 24 GiB machine's budget. Where the worker's memory cgroup holds a run to its limit,
    they are admitted by a share as any other run, and charged what they hold."""
    settings = Settings(backend="local", workers=1, memory_budget_mb=2000, cache_entries=0)
    with TestClient(create_app(settings)) as client:
        backend = client.app.state.executor.backend  # type: ignore[attr-defined]
        code = "setTimeout(() => console.log('hi'), 1500)"
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(client.post, "/v1/execute", json={"language": "nodejs", "code": code})
            time.sleep(0.8)  # asleep, and read by the memory tick
            held = client.get("/readyz").json()["memory_held_mb"]
            assert answer.result(timeout=30).json()["verdict"] == "AC"
        if backend.reads_memory:
            assert held < 300, held  # its share (64 MiB), what it holds, and the server's part (9 MiB)
        else:
            assert held == 2000, held  # only sampled by its box: the largest limit, at most the budget's room


def test_on_a_small_budget_compiled_jvm_runs_and_exchanges_of_many_tests_with_inputs_are_judged_not_refused() -> None:
    """Round 56: a compiler, a JVM and node have no address-space limit, and the budget charges them the
    supervisors' share beyond their limit (where the worker's memory cgroup holds them): fitted to the budget
    without it, every Java, Kotlin and TypeScript program was refused with 422, and a node program of more than 8
    tests. And an exchange was cut by its tests' outputs alone: 32 tests of 100 KB of input each held more than
    the default limit was fitted beside, and the whole request was refused."""
    settings = Settings(backend="local", workers=1, memory_budget_mb=1024, cache_entries=0)  # a 2 GiB container's
    with TestClient(create_app(settings)) as client:
        executor = client.app.state.executor  # type: ignore[attr-defined]
        java = "public class Main { public static void main(String[] a) { System.out.println(42); } }"
        for language, code in (("java", java), ("typescript", "console.log(42);")):
            if executor.missing_tools(languages.LANGUAGES[language]):
                continue  # its toolchain is not installed here: nothing of it runs
            answer = client.post("/v1/execute", json={"language": language, "code": code})
            assert answer.status_code == 200 and answer.json()["verdict"] == "AC", (language, answer.text)
        tests = [{"stdin": "", "expected_stdout": "hi\n"}] * 18
        node = {"language": "nodejs", "programs": ["console.log('hi')"], "tests": tests}
        answer = client.post("/v1/evaluate", json=node)
        assert answer.status_code == 200, answer.text
        assert [t["verdict"] for t in answer.json()["results"][0]["tests"]] == ["AC"] * 18
        echo = "import sys\nprint(len(sys.stdin.read()))"
        tests = [{"stdin": "x" * 100_000, "expected_stdout": "100000\n"}] * 32
        answer = client.post("/v1/evaluate", json={"language": "python", "programs": [echo], "tests": tests})
        assert answer.status_code == 200, answer.text
        assert [t["verdict"] for t in answer.json()["results"][0]["tests"]] == ["AC"] * 32


@pytest.mark.parametrize("budget_mb", [1024, 2048, 3072, 7168])
def test_a_run_of_the_default_limit_is_admitted_beside_sessions_holding_their_whole_share(budget_mb: int) -> None:
    """Round 56: fitted within the whole budget, the default limit of a 2 GiB container (1 GiB budget) was 831 MiB,
    charged whole where no cgroup reads what a run holds (the container backends) or past the budget's margin; one
    idle session of 512 MiB then made every run of every client that asked for no limit wait for as long as it
    lived. Charged whole, beside sessions that hold all they may, it is admitted at once."""
    settings = Settings(memory_budget_mb=budget_mb)

    async def main() -> None:
        budget = MemoryBudget(budget_mb)
        await budget.acquire(int(budget_mb * settings.sessions.memory_share))  # the sessions' whole share
        for chosen in (settings.limits.memory_mb, max(settings.limits.max_memory_mb, COMPILE_MEMORY_MB)):
            limit = fitted_mb(chosen, settings, budget_mb) + BEYOND_LIMIT_MB
            lease = await asyncio.wait_for(budget.acquire(limit, 0.0, None, held_mb(settings), "a client"), 1)
            budget.release(lease)

    asyncio.run(main())
