"""The blocking scorer against a real sandbox server on loopback, as a synchronous reward function uses it."""

from __future__ import annotations

import pytest
from codegym_evaluator.blocking import BlockingScorer
from codegym_evaluator.servers import sandbox_server
from codegym_evaluator.tasks import Task

ADD = Task("add", "sum", "stdio", [{"stdin": "1 2", "expected_stdout": "3"}])


def test_blocking_calls_reuse_one_client() -> None:
    with sandbox_server(workers=1) as server, BlockingScorer(server.url, concurrency=2) as scorer:
        first = scorer.score_group(ADD, ["print(sum(map(int, input().split())))", "print(4)"])
        groups = scorer.score_groups([(ADD, ["print(3)"]), (ADD, ["print(", "1/0"])])
        runs = scorer.execute_many(["print('ok')"])
    assert [s.verdict for s in first] == ["AC", "WA"]
    assert [[s.verdict for s in g] for g in groups] == [["AC"], ["CE", "RE"]]
    assert runs[0].stdout == "ok\n"
    with pytest.raises(RuntimeError, match="closed"):
        scorer.score_group(ADD, ["print(3)"])
