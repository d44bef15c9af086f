"""The scorer and a sandbox that refuses requests for their size: a refusal is split, never a group's SE."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.servers import sandbox_server
from codegym_evaluator.tasks import Task
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app

from .test_scoring import Recording

pytestmark = pytest.mark.anyio
SANDBOX = "http://sandbox"
LIMIT = 100_000  # the server's body limit, in bytes

DOUBLE = Task(
    "double",
    "Print twice the integer read.",
    "stdio",
    [{"stdin": "1\n", "expected_stdout": "2\n"}, {"stdin": "5\n", "expected_stdout": "10\n"}],
)
RIGHT = "print(int(input()) * 2)"
WRONG = "print(0)"


def padded(code: str, size: int) -> str:
    return f"{code}\n# {'x' * size}\n"


@pytest.fixture
async def small() -> AsyncIterator[Recording]:
    """A real sandbox app whose requests may be at most ``LIMIT`` bytes, recording the paths asked for."""
    app = create_app(Settings(backend="local", workers=2, max_body_bytes=LIMIT))
    async with app.router.lifespan_context(app):
        yield Recording(httpx.ASGITransport(app=app))


async def test_a_program_too_large_fails_alone_and_takes_no_other_with_it(small: Recording) -> None:
    # One padded wrong answer in a group put the whole group over the limit: every sample was SE, and SE is left
    # out of pass@k (a submitter dropped the tasks it got wrong) and masked in rewards.
    group = [RIGHT, WRONG, padded(WRONG, 2 * LIMIT), padded(RIGHT, LIMIT // 4)]
    async with Scorer(SANDBOX, transport=small, retries=0) as scorer:
        scores = await scorer.score_group(DOUBLE, group, extract=False)
    assert [s.verdict for s in scores] == ["AC", "WA", "CE", "AC"]
    refused = scores[2]
    assert refused.judged and refused.passed == 0 and refused.total == 2
    assert "refuses this program for its size" in (refused.error or "") and "413" in (refused.error or "")


async def test_a_group_too_large_together_is_judged_in_parts(small: Recording) -> None:
    # Eight right answers that each fit but not together: all AC, none SE ("send fewer programs per request").
    group = [padded(RIGHT, LIMIT // 5) + f"# sample {i}\n" for i in range(8)]
    async with Scorer(SANDBOX, transport=small, retries=0) as scorer:
        scores = await scorer.score_group(DOUBLE, group, extract=False)
    assert [s.verdict for s in scores] == ["AC"] * 8
    assert small.paths.count("/v1/evaluate") > 1


async def test_a_task_too_large_for_the_server_stays_a_sandbox_error(small: Recording) -> None:
    # The tests alone are over the limit: no program can be judged here, and none is blamed for it.
    huge = Task("huge", "p", "stdio", [{"stdin": "1\n" * LIMIT, "expected_stdout": "2\n"}])
    async with Scorer(SANDBOX, transport=small, retries=0) as scorer:
        scores = await scorer.score_group(huge, [RIGHT, WRONG], extract=False)
    assert [s.verdict for s in scores] == ["SE", "SE"]
    assert all("413" in (s.error or "") for s in scores)


async def test_a_group_over_the_servers_runs_per_request_is_judged_in_parts() -> None:
    # 422 ("split the request"), as for tests that, written into each program's input, come to too much together.
    app = create_app(Settings(backend="local", workers=2, max_runs_per_request=4))
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), Scorer(SANDBOX, transport=transport, retries=0) as scorer:
        scores = await scorer.score_group(DOUBLE, [f"{RIGHT}  # {i}" for i in range(6)] + [WRONG], extract=False)
    assert [s.verdict for s in scores] == ["AC"] * 6 + ["WA"]


async def test_a_program_far_over_a_servers_body_limit_fails_alone_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    # A real server refuses such a body on its length and used to close the connection under the rest of it:
    # the client never saw the 413, and the group was SE however it was split.
    monkeypatch.setenv("CODEGYM_SANDBOX_MAX_BODY_BYTES", str(LIMIT))
    with sandbox_server(workers=1) as server:
        async with Scorer(server.url, retries=0) as scorer:
            scores = await scorer.score_group(DOUBLE, [RIGHT, padded(WRONG, 40 * LIMIT)], extract=False)
    assert [s.verdict for s in scores] == ["AC", "CE"], [s.error for s in scores]
