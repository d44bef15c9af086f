"""The verl tool against verl's own ``BaseTool`` and ``ToolAgentLoop`` and a real sandbox server on loopback.

Every call goes through verl's ``ToolAgentLoop._call_tool`` (create, execute, release around each call, as verl
runs them), so a session kept on the instance instead of the trajectory, or ended by ``release``, fails here.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from codegym_evaluator.verl_tool import CodeInterpreterTool
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema
from verl.tools.tool_registry import initialize_tools_from_config

with warnings.catch_warnings():  # ray, imported by verl's agent loop, warns of its own API on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop
    from verl.experimental.agent_loop.tool_parser import FunctionCall

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from load_bench import ServerProcess  # the real-server helper the load and security tests use too

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "verl_tool_config.yaml"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ServerProcess({"CODEGYM_SANDBOX_BACKEND": "local"}, ["--workers", "1", "--log-level", "warning"]).start()
    try:
        yield server.url
    finally:
        server.stop()


class Rollout:
    """verl's side of a rollout: its tool loop (the one method that calls tools) and one trajectory's data."""

    def __init__(self, tool: CodeInterpreterTool) -> None:
        self.tool = tool
        self.loop = SimpleNamespace(
            tools={tool.name: tool}, max_tool_response_length=10_000, tool_response_truncate_side="middle"
        )

    def trajectory(self, request_id: str | None = None) -> AgentData:
        return AgentData(
            messages=[],
            image_data=None,
            video_data=None,
            audio_data=None,
            mm_processor_kwargs=None,
            metrics={},
            request_id=request_id or uuid.uuid4().hex,
            tools_kwargs={},
        )

    async def call(self, agent_data: AgentData, code: str) -> str:
        call = FunctionCall(name=self.tool.name, arguments=json.dumps({"code": code}))
        response, reward, _ = await ToolAgentLoop._call_tool(self.loop, call, agent_data.tools_kwargs, agent_data)
        assert reward == 0.0
        text: str = response.text
        return text


def tool_at(url: str, **config: Any) -> CodeInterpreterTool:
    return CodeInterpreterTool({"type": "native", "sandbox_url": url, **config})


def session_status(url: str, session_id: str) -> int:
    return httpx.get(f"{url}/v1/sessions/{session_id}", timeout=10).status_code


def test_the_yaml_example_builds_the_tool_through_verls_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    (tool,) = initialize_tools_from_config(str(EXAMPLE))
    assert isinstance(tool, CodeInterpreterTool) and isinstance(tool, BaseTool)
    assert isinstance(tool.tool_schema, OpenAIFunctionToolSchema)
    assert tool.name == "code_interpreter"
    assert tool.settings.ttl_s == 300 and tool.settings.urls() == ["http://127.0.0.1:8080"]
    # Without a tool_schema the tool gives its own, the same as the example's; the URL from the environment.
    monkeypatch.setenv("CODEGYM_SANDBOX_URL", "http://sandbox:9000")
    bare = CodeInterpreterTool({"type": "native"}, None)
    assert bare.get_openai_tool_schema() == tool.tool_schema
    assert bare.settings.urls() == ["http://sandbox:9000"]
    with pytest.raises(ValueError, match="sandbox_ulr"):
        CodeInterpreterTool({"type": "native", "sandbox_ulr": "http://x"})


def test_without_verl_the_evaluator_imports_and_the_tool_says_what_to_install() -> None:
    hide = "import sys; sys.modules['verl'] = None; import codegym_evaluator, codegym_evaluator.trl_reward; "
    ok = subprocess.run([sys.executable, "-c", hide + "print('ok')"], capture_output=True, text=True)
    assert ok.stdout.strip() == "ok", ok.stderr
    tool = subprocess.run(
        [sys.executable, "-c", hide + "import codegym_evaluator.verl_tool"], capture_output=True, text=True
    )
    assert tool.returncode == 1 and "ImportError" in tool.stderr and "pip install verl" in tool.stderr


def test_state_persists_across_the_calls_of_one_trajectory(url: str) -> None:
    async def main() -> None:
        rollout = Rollout(tool_at(url))
        trajectory = rollout.trajectory()
        assert await rollout.call(trajectory, "x = 1\nimport math") == "(the cell printed nothing and has no value)"
        assert (await rollout.call(trajectory, "print(x)")).strip() == "1"
        assert (await rollout.call(trajectory, "math.factorial(x + 4)")).strip() == "120"
        ((sid, name),) = rollout.tool.sessions().items()  # one session for three calls, each its own instance
        assert name == trajectory.request_id
        assert session_status(url, sid) == 200  # release ended none of them
        # a quarter GiB, not the server's half: twice the trajectories fit in the sessions' share of its memory
        assert httpx.get(f"{url}/v1/sessions/{sid}", timeout=10).json()["memory_mb"] == 256
        await rollout.tool.aclose()
        assert session_status(url, sid) == 410

    asyncio.run(main())


def test_two_trajectories_do_not_see_each_other(url: str) -> None:
    async def main() -> None:
        rollout = Rollout(tool_at(url))
        a, b = rollout.trajectory(), rollout.trajectory()
        await rollout.call(a, "secret = 42")
        assert "NameError" in await rollout.call(b, "print(secret)")
        assert (await rollout.call(a, "secret")).strip() == "42"
        assert len(rollout.tool.sessions()) == 2
        await rollout.tool.aclose()

    asyncio.run(main())


def test_trajectories_of_one_name_do_not_share_a_session(url: str) -> None:
    """verl's ``rollout.full_determinism`` names sample i of every step ``det-i``: the next step's trajectory
    must not get the previous one's interpreter, and one that verl dropped has its session ended."""

    async def main() -> None:
        rollout = Rollout(tool_at(url))
        step_1 = rollout.trajectory(ToolAgentLoop._make_request_id(0, True))
        await rollout.call(step_1, "secret = 'step 1'\nimport builtins\nbuiltins.print = lambda *a, **k: None")
        step_2 = rollout.trajectory(ToolAgentLoop._make_request_id(0, True))
        assert step_1.request_id == step_2.request_id == "det-0"
        seen = await rollout.call(step_2, "print('hi')\nsecret")
        assert seen.startswith("hi\n") and "NameError" in seen
        (first, second) = rollout.tool.sessions()  # both trajectories live, each in its own session
        assert session_status(url, first) == session_status(url, second) == 200
        del step_1  # verl drops a trajectory's data at its end: its session ends, the other's stays
        gc.collect()
        deadline = time.monotonic() + 10
        while session_status(url, first) != 410:
            assert time.monotonic() < deadline, "the dropped trajectory's session was not ended"
            await asyncio.sleep(0.1)
        assert list(rollout.tool.sessions()) == [second] and session_status(url, second) == 200
        assert (await rollout.call(step_2, "1 + 1")).strip() == "2"
        await rollout.tool.aclose()

    asyncio.run(main())


class SlottedData:
    """A trajectory's data that cannot be weak-referenced: the tool holds it while it keys a session on it."""

    __slots__ = ("request_id", "tools_kwargs")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.tools_kwargs: dict[str, Any] = {}


def test_data_without_weak_references_still_keys_its_own_session(url: str) -> None:
    async def main() -> None:
        rollout = Rollout(tool_at(url))
        first, second = SlottedData("det-0"), SlottedData("det-0")
        await rollout.call(first, "secret = 1")
        assert "NameError" in await rollout.call(second, "secret")
        assert (await rollout.call(first, "secret")).strip() == "1"
        assert sorted(rollout.tool.sessions().values()) == ["det-0", "det-0"]
        await rollout.tool.aclose()

    asyncio.run(main())


def test_calls_of_one_turn_at_once_run_one_after_another(url: str) -> None:
    async def main() -> None:
        rollout = Rollout(tool_at(url))
        t = rollout.trajectory()
        # verl gathers a turn's tool calls; the session runs one cell at a time (a second at once answers 409)
        first, second = await asyncio.gather(
            rollout.call(t, "import time\ntime.sleep(0.5)\na = 1"), rollout.call(t, "b = 2")
        )
        assert "sandbox" not in first + second
        assert (await rollout.call(t, "a + b")).strip() == "3"
        assert len(rollout.tool.sessions()) == 1
        await rollout.tool.aclose()

    asyncio.run(main())


def test_errors_and_time_outs_reach_the_model_as_text(url: str) -> None:
    async def main() -> None:
        rollout = Rollout(tool_at(url, cell_timeout_s=1, output_budget=600))
        t = rollout.trajectory()
        await rollout.call(t, "kept = 'still here'")
        error = await rollout.call(t, "def f():\n    return 1 / 0\nf()")
        assert "ZeroDivisionError" in error and "Traceback" in error
        stuck = await rollout.call(t, "while True:\n    pass")
        assert "Time limit" in stuck and "stopped" in stuck
        assert (await rollout.call(t, "kept")).strip() == "'still here'"  # the session lived through both
        long = await rollout.call(t, "print('y' * 10_000)")
        assert len(long) <= 600 and "cut" in long
        missing, _, _ = await rollout.tool.execute("i", {"cod": "1"}, agent_data=t)
        assert "needs `code`" in missing.text
        await rollout.tool.aclose()

        gone = Rollout(CodeInterpreterTool({"type": "native", "sandbox_url": "http://127.0.0.1:9"}))
        text = await gone.call(gone.trajectory(), "1 + 1")
        assert text.startswith("The sandbox could not run the code (a failure of the sandbox, not of the code)")
        await gone.tool.aclose()

    asyncio.run(main())


def test_calc_reward_ends_the_trajectorys_session(url: str) -> None:
    async def main() -> None:
        rollout = Rollout(tool_at(url))
        t = rollout.trajectory()
        await rollout.call(t, "x = 1")
        (sid,) = rollout.tool.sessions()
        assert await rollout.tool.calc_reward("any instance", agent_data=t) == 0.0
        assert session_status(url, sid) == 410 and rollout.tool.sessions() == {}
        # a later call of the trajectory starts a fresh interpreter
        assert "NameError" in await rollout.call(t, "x")
        await rollout.tool.aclose()

    asyncio.run(main())


def test_without_agent_data_the_instance_is_the_trajectory(url: str) -> None:
    async def main() -> None:
        tool = tool_at(url)
        instance, _ = await tool.create()
        await tool.execute(instance, {"code": "x = 5"})
        answer, _, metrics = await tool.execute(instance, {"code": "x * 2"})
        assert answer.text.strip() == "10" and metrics["status"] == "finished"
        (sid,) = tool.sessions()
        await tool.release(instance)
        assert session_status(url, sid) == 410 and tool.sessions() == {}
        await tool.aclose()

    asyncio.run(main())


def test_the_ttl_ends_a_session_the_tool_never_ended(url: str) -> None:
    async def main() -> None:
        rollout = Rollout(tool_at(url, ttl_s=1))
        t = rollout.trajectory()
        await rollout.call(t, "x = 1")
        (sid,) = rollout.tool.sessions()
        deadline = time.monotonic() + 15
        while session_status(url, sid) != 410:  # the server's reaper runs each second
            assert time.monotonic() < deadline, "the leaked session was not ended by its TTL"
            await asyncio.sleep(0.5)
        # the trajectory's next call says its interpreter ended, and runs in a fresh one
        text = await rollout.call(t, "print('x' in globals())")
        assert "had ended" in text and "expired" in text and text.rstrip().endswith("False")
        assert list(rollout.tool.sessions().values()) == [t.request_id] and sid not in rollout.tool.sessions()
        await rollout.tool.aclose()

    asyncio.run(main())


def test_a_cell_whose_interpreter_ended_as_it_ran_is_not_run_again(url: str) -> None:
    # Told only "gone", the tool ran the cell again in a fresh interpreter, as though it had run once.
    async def main() -> None:
        rollout = Rollout(tool_at(url, cell_timeout_s=10))
        t = rollout.trajectory()
        await rollout.call(t, "x = 1")
        (sid,) = rollout.tool.sessions()
        cell = asyncio.ensure_future(rollout.call(t, "import time\ntime.sleep(3)\nprint('done')"))
        await asyncio.sleep(0.7)
        await asyncio.to_thread(httpx.delete, f"{url}/v1/sessions/{sid}", timeout=10)
        text = await cell
        assert "The code ran, but its interpreter ended" in text and "done" not in text, text
        assert rollout.tool.sessions() == {}  # no fresh interpreter ran it again
        assert "NameError" in await rollout.call(t, "x")  # the next call starts a fresh one, as it was told
        await rollout.tool.aclose()

    asyncio.run(main())


def test_after_a_failed_call_the_next_says_whether_its_interpreter_is_gone(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A call cut off on its way (the client gave up: the server ends an abandoned session) answers the sandbox's
    # failure; the next call must not run in a fresh interpreter without saying so (a bare NameError).
    from codegym_sandbox.client import SandboxUnavailable
    from codegym_sandbox.client.sessions import AsyncSession

    async def main() -> None:
        rollout = Rollout(tool_at(url))
        t = rollout.trajectory()
        await rollout.call(t, "x = 1")
        (sid,) = rollout.tool.sessions()
        real = AsyncSession.execute

        async def cut_off(
            self: AsyncSession, code: str, timeout_s: float | None = None, stdin: str | None = None
        ) -> Any:
            httpx.delete(f"{url}/v1/sessions/{sid}")  # what the server does with a session whose call was abandoned
            raise SandboxUnavailable("ReadTimeout")

        monkeypatch.setattr(AsyncSession, "execute", cut_off)
        assert (await rollout.call(t, "x")).startswith("The sandbox could not run the code")
        monkeypatch.setattr(AsyncSession, "execute", real)
        text = await rollout.call(t, "print('x' in globals())")
        assert "had ended" in text and text.rstrip().endswith("False"), text
        await rollout.tool.aclose()

    asyncio.run(main())
