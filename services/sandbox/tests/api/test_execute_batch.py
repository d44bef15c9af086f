"""``POST /execute_batch``: open-r1's routed ``e2b`` and ``morph`` providers, on every backend.

The items are read here the way those clients read them: the E2B client builds an ``Execution`` from
``execution`` (its ``text`` is the main result's text) and the MorphCloud client takes ``text`` and
``exception_str``; open-r1 turns the text into the reward with ``float``.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from codegym_sandbox.api import execute_batch
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import settings_for

# A reward script of the kind open-r1's code_reward sends: run a completion on each test in a process of
# its own, compare the output line by line, and end with an expression, the pass rate.
REWARD_SCRIPT = """
import json, subprocess

def pass_rate(code, cases):
    passed = 0
    for case in cases:
        try:
            done = subprocess.run(["python3", "-c", code], input=case["input"], text=True,
                                  capture_output=True, timeout=5)
        except subprocess.TimeoutExpired:
            continue
        if done.returncode == 0 and done.stdout.strip().split("\\n") == case["output"].strip().split("\\n"):
            passed += 1
    return passed / len(cases)

cases = json.loads({cases})
pass_rate({code}, cases)
"""
CASES = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}]


def script(code: str) -> str:
    return REWARD_SCRIPT.format(code=json.dumps(code), cases=json.dumps(json.dumps(CASES)))


def e2b_text(item: dict[str, Any]) -> str | None:
    """``Execution.text`` as the E2B client computes it from an item."""
    execution = item["execution"]
    if execution is None:
        return None
    return next((r["text"] for r in execution["results"] if r.get("is_main_result")), None)


def batch(client: TestClient, scripts: list[str], **fields: Any) -> list[dict[str, Any]]:
    r = client.post("/execute_batch", json={"scripts": scripts, "timeout": 30, "request_timeout": 28, **fields})
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()
    assert len(items) == len(scripts)
    return items


def test_reward_scripts_give_their_pass_rate_to_both_clients(client: TestClient) -> None:
    right = "a, b = map(int, input().split())\nprint(a + b)"
    half = "a, b = map(int, input().split())\nprint(a + b if a == 1 else 0)"
    wrong = "print(input())"
    crash = "raise SystemExit(3)"
    items = batch(client, [script(c) for c in (right, half, wrong, crash)], languages=["python"] * 4)
    assert [float(e2b_text(i) or "nan") for i in items] == [1.0, 0.5, 0.0, 0.0]
    assert [float(i["text"]) for i in items] == [1.0, 0.5, 0.0, 0.0]
    assert all(i["exception_str"] is None and i["execution"]["error"] is None for i in items)
    assert all(i["execution"]["execution_count"] == 1 for i in items)


def test_a_cell_that_raises_reports_the_exception_as_a_kernel_does(client: TestClient) -> None:
    (item,) = batch(client, ["print('before')\nx = 1\nraise ValueError(f'boom {x}')\n"])
    error = item["execution"]["error"]
    assert error["name"] == "ValueError" and error["value"] == "boom 1" and "Traceback" in error["traceback"]
    assert item["execution"]["logs"]["stdout"] == ["before\n"] and item["execution"]["results"] == []
    assert item["text"] is None and item["exception_str"] == "ValueError: boom 1"


def test_only_a_last_expression_that_is_not_none_is_a_main_result(client: TestClient) -> None:
    items = batch(client, ["x = 2\nx * 21", "print('no result')", "None", "'a' + 'b'", "import math\nmath.pi"])
    assert [i["text"] for i in items] == ["42", None, None, "'ab'", repr(3.141592653589793)]
    assert items[1]["execution"]["logs"]["stdout"] == ["no result\n"]


def test_a_syntax_error_a_timeout_and_an_unknown_language(client: TestClient) -> None:
    items = batch(
        client, ["def f(:\n  pass", "while True: pass", "print(1)"], timeout=1, languages=["python", "python", "cobol"]
    )
    assert items[0]["execution"]["error"]["name"] == "SyntaxError"
    assert items[1]["execution"]["error"]["name"] == "TimeoutError"
    assert items[2]["execution"] is None and "cobol" in items[2]["exception_str"]


def test_other_languages_run_as_programs(client: TestClient) -> None:
    (item,) = batch(client, ["echo hi; exit 4"], languages=["bash"])
    assert item["execution"]["logs"]["stdout"] == ["hi\n"] and item["text"] is None
    assert item["execution"]["error"]["name"] == "Error" and item["execution"]["error"]["value"] == "exit status 4"


def test_scripts_run_at_once(client: TestClient) -> None:
    """Eight scripts that sleep a second each come back together, not one after another."""
    import time

    started = time.monotonic()
    items = batch(client, ["import time\ntime.sleep(1)\n7"] * 8)
    assert [i["text"] for i in items] == ["7"] * 8
    assert time.monotonic() - started < 6


# Lone surrogates wherever a script can put one: no JSON answer can carry them as they are.
SURROGATE_SCRIPTS = {
    "main-result": "class A:\n    def __repr__(self):\n        return 'a\\ud800b'\nA()",
    "error": "raise ValueError('a\\ud800b')",
    "stdout": "print('a\\ud800b')\n1",
    "descriptors": "import os\nos.write(1, b'a\\xed\\xa0\\x80b')\nos.write(2, b'a\\xed\\xa0\\x80b')\n1",
}


@pytest.mark.parametrize("where", sorted(SURROGATE_SCRIPTS))
def test_a_lone_surrogate_comes_back_representable(client: TestClient, where: str) -> None:
    (item,) = batch(client, [SURROGATE_SCRIPTS[where]])
    json.dumps(item, ensure_ascii=False).encode("utf-8")  # strict: no lone surrogate in any string
    shown = json.dumps(item)
    assert any(mark in shown for mark in ("\\\\ud800", "\\ufffd")), item


def test_the_script_is_no_file_the_programs_it_runs_can_read(client: TestClient) -> None:
    """The script (open-r1's holds the expected outputs) reaches the kernel over a pipe: its children find
    no trace of it in the working directory."""
    script = (
        "import os, subprocess\nsecret = 'NEEDLE' + '-IN-THE-SCRIPT'\n"
        "subprocess.run(['grep', '-r', '-l', 'NEEDLE', '.'], capture_output=True, text=True).stdout"
    )
    (item,) = batch(client, [script])
    assert item["text"] == "''", item


def test_a_script_whose_kernel_ends_has_no_main_result(client: TestClient) -> None:
    items = batch(
        client,
        [
            "open('.main_result', 'w').write('1.0')\nimport os\nos._exit(0)\n1.0",
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n1.0",
        ],
    )
    assert [i["text"] for i in items] == [None, None], items
    assert items[0]["execution"]["error"]["name"] == "DeadKernelError", items


def test_a_batch_is_admitted_whole_and_leaves_nothing_running() -> None:
    """A batch was run script by script: the first script refused past the queue answered 503 at once, and the
    scripts already queued ran on for nobody, holding the queue (every other client refused meanwhile). It is
    now admitted or refused whole, as /v1/evaluate's group is; past max_runs_per_request it is a 422."""
    settings = settings_for("local", queue_size=3, max_workers=2, max_runs_per_request=12)
    with TestClient(create_app(settings)) as client:
        too_many = client.post("/execute_batch", json={"scripts": ["1"] * 13})
        assert too_many.status_code == 422 and "max_runs_per_request" in too_many.text
        sleepers = {"scripts": [f"import time\ntime.sleep(1)\n{i}" for i in range(6)], "timeout": 10}
        answers: list[Any] = []
        first = threading.Thread(target=lambda: answers.append(client.post("/execute_batch", json=sleepers)))
        first.start()
        try:
            time.sleep(0.5)
            second = client.post("/execute_batch", json=sleepers)  # admitted too: the first holds its window only
        finally:
            first.join()  # the app's end waits for it
        for answer in (answers[0], second):  # refused halfway before: 504, its runs left going
            assert answer.status_code == 200, answer.text
            assert [item["text"] for item in answer.json()] == [str(i) for i in range(6)]
        ready = client.get("/readyz").json()
        assert ready["queued"] == 0 and ready["busy"] == 0, ready  # nothing of either runs on


def test_a_large_admitted_request_takes_turns_with_other_clients() -> None:
    """Admitted whole, a request's runs entered the queue together: one batch far past the queue's bound held it
    full for as long as it ran, and every other client was refused (at the defaults, a batch of 262,144 scripts
    for hours). Its runs now enter the pool a window at a time (``max_workers``): the next client is admitted,
    and its run waits behind that window only."""
    settings = settings_for("local", queue_size=4, max_workers=2, max_runs_per_request=100)
    with TestClient(create_app(settings)) as client:
        sleepers = {"scripts": [f"import time\ntime.sleep(0.3)\n{i}" for i in range(20)], "timeout": 10}
        answers: list[Any] = []
        batch = threading.Thread(target=lambda: answers.append(client.post("/execute_batch", json=sleepers)))
        batch.start()
        try:
            time.sleep(0.5)
            queued = client.get("/readyz").json()["queued"]
            other = client.post("/v1/execute", json={"language": "python", "code": "print(7)", "cache": False})
            running = batch.is_alive()
        finally:
            batch.join()  # the app's end waits for it
        assert queued <= 2  # its window, not its twenty runs
        assert other.status_code == 200 and other.json()["verdict"] == "AC", other.text
        assert running  # answered while the batch still ran: it took its turn
        assert answers[0].status_code == 200 and [i["text"] for i in answers[0].json()] == [str(i) for i in range(20)]


def test_one_clients_requests_share_one_window_so_another_client_is_not_refused() -> None:
    """Each admitted request had a window of its own: eleven requests of one client filled the queue (1,024 at
    the defaults) and every other client was refused, or waited behind a thousand of its runs. A client's
    admitted requests now share one window: another client's run is admitted and waits for a worker only."""
    settings = settings_for("local", queue_size=4, max_workers=2, max_runs_per_request=100)
    with TestClient(create_app(settings)) as client:
        sleepers = {"scripts": [f"import time\ntime.sleep(0.3)\n{i}" for i in range(8)], "timeout": 10}
        answers: list[Any] = []
        floods = [
            threading.Thread(target=lambda: answers.append(client.post("/execute_batch", json=sleepers)))
            for _ in range(3)
        ]
        for flood in floods:
            flood.start()
        try:
            time.sleep(0.5)
            queued = client.get("/readyz").json()["queued"]
            client._transport.client = ("192.0.2.7", 50000)  # type: ignore[attr-defined]  # another address
            other = client.post("/v1/execute", json={"language": "python", "code": "print(7)", "cache": False})
            running = any(flood.is_alive() for flood in floods)
        finally:
            for flood in floods:
                flood.join()  # the app's end waits for them
        assert queued <= 2  # one window for the client's three requests
        assert other.status_code == 200 and other.json()["verdict"] == "AC", other.text
        assert running
        assert [a.status_code for a in answers] == [200] * 3


def test_a_batch_answer_shows_each_script_its_share(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch holds its items until its last script ends: what it keeps of each is its share of one answer's
    bound, in bytes of JSON (a control character is six), every text of it (a traceback too), so that the answer
    does not grow with the count of scripts times the output limit."""
    monkeypatch.setattr(execute_batch, "ANSWER_BYTES", 96 << 10)
    loud = "import sys\nsys.stdout.write('\\x01' * 100_000)\nsys.stderr.write('e' * 100_000)\n'x' * 100_000"
    raises = "raise ValueError('\\x02' * 100_000)"
    bash = "head -c 100000 /dev/zero | tr '\\0' '\\1'; head -c 100000 /dev/zero >&2; exit 3"
    r = client.post(
        "/execute_batch",
        json={
            "scripts": [loud, raises, bash, loud],
            "languages": ["python", "python", "bash", "python"],
            "timeout": 30,
        },
    )
    assert r.status_code == 200 and len(r.content) < 96 << 10, len(r.content)
    items = r.json()
    assert "ValueError" in items[1]["exception_str"] and items[2]["execution"]["logs"]["stdout"]
    (alone,) = batch(client, [loud])
    assert len(json.dumps(alone["execution"]["logs"]["stdout"][0])) > 10_000  # a script alone keeps more
