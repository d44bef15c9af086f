"""NeMo-Skills' sandbox contract (``POST /execute``, ``/sessions``, ``/health``) on a real server, on every
backend: the answers their client and its callers read, as their server gives them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import pytest
from codegym_sandbox.api.nemo_skills import MAX_ID_CHARS
from fastapi.testclient import TestClient


@pytest.fixture
def sid(client: TestClient) -> Iterator[str]:
    """A session id as their client makes one (a uuid4), deleted after the test."""
    made = str(uuid.uuid4())
    yield made
    client.delete(f"/sessions/{made}", headers={"X-Session-ID": made})


def execute(client: TestClient, code: str, sid: str | None = None, **fields: Any) -> dict[str, Any]:
    """Their client's request: its defaults (timeout 10.0, 1000 characters, Plain), the header when ``sid``."""
    body = {"generated_code": code, "std_input": "", "timeout": 10.0, "language": "ipython",
            "max_output_characters": 1000, "traceback_verbosity": "Plain", **fields}  # fmt: skip
    r = client.post("/execute", json=body, headers={"X-Session-ID": sid} if sid else {})
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def test_an_id_keeps_its_state_and_says_when_its_interpreter_is_new(client: TestClient, sid: str) -> None:
    first = execute(client, "a = 41\nprint('H1')", sid)
    assert first == {"new_session_created": True, "process_status": "completed", "stderr": "", "stdout": "H1\n"}
    second = execute(client, "a += 1; a", sid)
    assert second == {"new_session_created": False, "process_status": "completed", "stderr": "", "stdout": "42\n"}
    other = str(uuid.uuid4())
    try:
        alone = execute(client, "a", other)  # another id: another interpreter, which never saw a
        assert alone["new_session_created"] is True and alone["process_status"] == "error", alone
        assert alone["stdout"].endswith("NameError: name 'a' is not defined\n"), alone
        execute(client, "a = 'mine'", other)
        assert execute(client, "a", sid)["stdout"] == "42\n"
    finally:
        client.delete(f"/sessions/{other}")


def test_a_lost_session_is_new_on_its_next_call_so_their_client_replays(client: TestClient, sid: str) -> None:
    execute(client, "a = 41", sid)
    execute(client, "a += 1", sid)
    r = client.delete(f"/sessions/{sid}", headers={"X-Session-ID": sid})  # as a lost worker leaves it
    assert r.status_code == 200 and r.json() == {"message": f"IPython session {sid} deleted successfully"}
    lost = execute(client, "print(a)", sid)
    assert lost["new_session_created"] is True and lost["process_status"] == "error", lost
    # Their client's replay: DELETE, the completed cells again, then the cell.
    assert client.delete(f"/sessions/{sid}").status_code == 200
    assert execute(client, "a = 41", sid)["new_session_created"] is True
    assert execute(client, "a += 1", sid)["new_session_created"] is False
    assert execute(client, "print(a)", sid) == {
        "new_session_created": False, "process_status": "completed", "stderr": "", "stdout": "42\n"}  # fmt: skip


def test_a_dead_interpreter_is_an_error_and_the_next_call_finds_a_new_one(client: TestClient, sid: str) -> None:
    execute(client, "a = 1", sid)
    dead = execute(client, "import os; os._exit(1)", sid)
    assert dead == {"new_session_created": True, "process_status": "error", "stderr": "connection closed\n",
                    "stdout": ""}  # fmt: skip
    after = execute(client, "'a' in dir()", sid)
    assert after["new_session_created"] is True and after["stdout"] == "False\n", after
    assert execute(client, "1", sid)["new_session_created"] is False
    # Their server restarts the shell at once, so the DELETE their client sends before it replays finds it.
    execute(client, "import os; os._exit(1)", sid)
    assert client.delete(f"/sessions/{sid}").json() == {"message": f"IPython session {sid} deleted successfully"}
    assert client.delete(f"/sessions/{sid}").status_code == 404
    assert execute(client, "1", sid)["new_session_created"] is True


def test_plain_tracebacks_are_in_stdout_as_their_server_writes_them(client: TestClient, sid: str) -> None:
    zero = execute(client, "1 / 0", sid)
    assert zero["process_status"] == "error" and zero["stderr"] == "", zero
    assert zero["stdout"] == "Traceback (most recent call last):\n    1 / 0\nZeroDivisionError: division by zero\n"
    execute(client, "def f():\n    return 1/0", sid)
    called = execute(client, "print('before')\nf()", sid)["stdout"]
    assert (
        called
        == "before\nTraceback (most recent call last):\n    f()\n    return 1/0\nZeroDivisionError: division by zero\n"
    )
    indent = execute(client, "a = 2\n b = 3", sid)
    assert indent["stdout"] == "    b = 3\n    ^\nIndentationError: unexpected indent\n", indent
    library = execute(client, "import json\njson.loads('{')", sid)["stdout"]
    assert "/json/__init__.py:" in library and " in loads\n" in library and "<cell" not in library, library
    assert library.endswith(
        "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)\n"
    )
    exited = execute(client, "import sys; sys.exit()", sid)
    assert exited["process_status"] == "error", exited
    assert exited["stdout"] == "An exception has occurred, use %tb to see the full traceback.\nSystemExit\n"
    assert execute(client, "'still here'", sid)["stdout"] == "'still here'\n"  # neither ended the session


def test_the_other_verbosities(client: TestClient, sid: str) -> None:
    execute(client, "def f():\n    return 1/0", sid)
    minimal = execute(client, "f()", sid, traceback_verbosity="Minimal")
    assert minimal["stdout"] == "ZeroDivisionError: division by zero\n" and minimal["process_status"] == "error"
    for verbosity in ("Context", "Verbose"):  # the whole traceback, untouched: every frame's file and line
        full = execute(client, "f()", sid, traceback_verbosity=verbosity)["stdout"]
        assert full.count(", line ") == 2 and full.endswith("ZeroDivisionError: division by zero\n"), full
        assert execute(client, "5", sid, traceback_verbosity=verbosity)["stdout"] == "Out[0]: 5\n"
        assert execute(client, "print('a', end='')", sid, traceback_verbosity=verbosity)["stdout"] == "a"
    # Their shell dies of an unknown verbosity; here the cell is refused and the session kept.
    bogus = execute(client, "x = 1", sid, traceback_verbosity="Bogus")
    assert bogus["process_status"] == "error" and "Bogus" in bogus["stderr"] and not bogus["new_session_created"]
    assert execute(client, "'x' in dir()", sid)["stdout"] == "False\n"


def test_values_and_streams_are_cleaned_as_at_plain(client: TestClient, sid: str) -> None:
    assert execute(client, "'s'", sid)["stdout"] == "'s'\n"
    assert execute(client, "None", sid)["stdout"] == ""
    assert execute(client, "print('a', end='')", sid)["stdout"] == "a\n"
    assert execute(client, "print('\\n\\nb   ')", sid)["stdout"] == "b\n"
    assert execute(client, "print('\\x1b[31mred\\x1b[0m')\nprint('Out[7]: v')", sid)["stdout"] == "red\nv\n"
    warned = execute(client, "import warnings; warnings.warn('careful')", sid)
    assert warned["process_status"] == "completed" and "UserWarning: careful" in warned["stderr"], warned
    assert execute(client, "if True:\n    y = 3\ny", sid)["stdout"] == "3\n"


def test_each_stream_is_cut_past_max_output_characters(client: TestClient, sid: str) -> None:
    out = execute(client, "print('x'*2000)", sid)["stdout"]
    assert len(out) == 1012 and out.endswith("x<output cut>"), out[-20:]
    exact = execute(client, "print('y'*9)", sid, max_output_characters=10)["stdout"]  # 10 with its newline
    assert exact == "y" * 9 + "\n"
    both = execute(client, "import sys; print('o'*20); print('e'*5, file=sys.stderr)", sid, max_output_characters=5)
    assert both["stdout"] == "ooooo<output cut>" and both["stderr"] == "eeeee<output cut>", both
    assert execute(client, "print(1)", sid, max_output_characters=0)["stdout"] == "<output cut>"
    py = execute(client, "print('z'*50)", language="python", max_output_characters=3)
    assert py == {"process_status": "completed", "stderr": "", "stdout": "zzz<output cut>"}


@pytest.mark.parametrize("language", ["ipython", "python"])
def test_output_past_the_sandboxs_cap_is_marked_cut_whatever_the_limit_asked(
    client: TestClient, sid: str, language: str
) -> None:
    """Past the sandbox's own cap (8 MiB) only the first part is kept: it carries their marker even where it is
    shorter than ``max_output_characters``, as the whole would have been past it. Unmarked, the answer then 8 MiB
    of newlines (which a comparison strips) then anything read as the answer alone."""
    code = "import sys\nprint(3)\nsys.stdout.write('\\n' * (9 << 20))\nprint('wrong')"
    got = execute(client, code, sid if language == "ipython" else None, language=language,
                  max_output_characters=20 << 20, timeout=30.0)  # fmt: skip
    assert got["stdout"].startswith("3\n") and got["stdout"].endswith("<output cut>"), got["stdout"][-40:]
    whole = execute(client, "print(3)", sid if language == "ipython" else None, language=language)
    assert whole["stdout"] == "3\n"


def test_a_cell_past_its_timeout_is_interrupted_and_its_session_kept(client: TestClient, sid: str) -> None:
    execute(client, "a = 42", sid)
    late = execute(client, "import time\ntime.sleep(30)", sid, timeout=1)
    assert late == {"new_session_created": False, "process_status": "timeout",
                    "stderr": "Execution timed out after 1 seconds\n", "stdout": ""}  # fmt: skip
    late = execute(client, "while True: pass", sid, timeout=1.0)
    assert late["process_status"] == "timeout", late
    assert late["stderr"] == "Execution timed out after 1.0 seconds\n", late
    # State stays (their server restarts the shell here, and their client then replays what completed).
    assert execute(client, "a", sid) == {
        "new_session_created": False, "process_status": "completed", "stderr": "", "stdout": "42\n"}  # fmt: skip
    cut = execute(client, "while True: pass", sid, timeout=1, max_output_characters=10)
    assert cut["stderr"] == "Execution <output cut>", cut


def test_python_and_shell_run_statelessly(client: TestClient) -> None:
    for language in ("python", "python3", "pypy3"):
        ran = execute(client, "import sys\nprint(input()[::-1])\nprint('e', file=sys.stderr)", language=language,
                      std_input="olleh\n")  # fmt: skip
        assert ran == {"process_status": "completed", "stderr": "e\n", "stdout": "hello\n"}, (language, ran)
    failed = execute(client, "print('partial')\n1/0", language="python3")  # an exit code is no status here
    assert failed["process_status"] == "completed" and failed["stdout"] == "partial\n", failed
    assert failed["stderr"].endswith("ZeroDivisionError: division by zero\n"), failed
    assert execute(client, "a = 1", language="python") == {"process_status": "completed", "stderr": "", "stdout": ""}
    assert "NameError" in execute(client, "print(a)", language="python")["stderr"]  # nothing kept between runs
    assert execute(client, "echo hi", language="shell") == {"process_status": "completed", "stderr": "",
                                                            "stdout": "hi\n"}  # fmt: skip
    shell = execute(client, "echo out; echo err >&2; exit 3", language="shell")
    assert shell == {"process_status": "error", "stderr": "err\n", "stdout": "out\n"}, shell
    late = execute(client, "import time; time.sleep(30)", language="python", timeout=1)
    assert late == {"process_status": "timeout", "stderr": "Execution timed out after 1 seconds\n", "stdout": ""}
    other = execute(client, "1", language="ruby")
    assert other["process_status"] == "error" and "not served" in other["stderr"], other


def test_bad_requests_answer_their_400_and_clear_4xx(client: TestClient) -> None:
    r = client.post("/execute", json={"generated_code": "1", "timeout": 10.0})  # ipython by default, no header
    assert r.status_code == 400 and r.json() == {"error": "X-Session-ID header required for ipython sessions"}
    bad: list[dict[str, Any]] = [{"timeout": 10.0}, {"generated_code": "1"}]  # each lacks a required field
    bad += [{"generated_code": "1", "timeout": t} for t in ("soon", 0, -1)]
    bad += [{"generated_code": "1", "timeout": 1, "max_output_characters": -1}]
    for body in bad:
        r = client.post("/execute", json={"language": "python", **body})
        assert r.status_code == 422 and "detail" in r.json(), (body, r.text)
    r = client.post("/execute", content=b"generated_code=1", headers={"content-type": "text/plain"})
    assert r.status_code == 415


def test_an_id_past_its_bound_is_refused_before_a_session_is_made(client: TestClient) -> None:
    # Ids are remembered after their sessions end: a bound keeps that memory small. Theirs are uuid4s (36).
    store = client.app.state.sessions  # type: ignore[attr-defined]
    held = set(store.sessions)
    body = {"generated_code": "1", "timeout": 10.0, "language": "ipython"}
    r = client.post("/execute", json=body, headers={"X-Session-ID": "x" * (MAX_ID_CHARS + 1)})
    assert r.status_code == 400, r.text
    assert r.json() == {"error": f"X-Session-ID is longer than {MAX_ID_CHARS} characters, the most this server takes"}
    assert set(store.sessions) == held and not any("x" * MAX_ID_CHARS in k for k in store.ended)
    longest = "y" * MAX_ID_CHARS
    try:
        assert execute(client, "2", longest)["stdout"] == "2\n"
    finally:
        assert client.delete(f"/sessions/{longest}").status_code == 200


def test_sessions_are_listed_and_deleted_with_their_bodies(client: TestClient, sid: str) -> None:
    execute(client, "1", sid)
    listed = client.get("/sessions").json()
    assert listed["backend"] == "ipython"
    entry = listed["sessions"][sid]
    assert entry["backend"] == "ipython" and entry["alive"] is True
    assert entry["created"] <= entry["last_used"] and entry["created"] > 1.7e9, entry
    assert client.delete(f"/sessions/{sid}").json() == {"message": f"IPython session {sid} deleted successfully"}
    assert sid not in client.get("/sessions").json()["sessions"]
    r = client.delete(f"/sessions/{sid}")
    assert r.status_code == 404 and r.json() == {"error": f"IPython session {sid} not found"}


def test_their_ids_never_reach_native_sessions(client: TestClient) -> None:
    native = client.post("/v1/sessions", json={}).json()["session_id"]
    try:
        assert client.post(f"/v1/sessions/{native}/execute", json={"code": "secret = 1"}).status_code == 200
        assert native not in client.get("/sessions").json()["sessions"]
        assert execute(client, "'secret' in dir()", native)["stdout"] == "False\n"
        assert client.delete(f"/sessions/{native}").status_code == 200  # the one its header made, not the native
        assert client.delete(f"/sessions/{native}").status_code == 404
        assert client.post(f"/v1/sessions/{native}/execute", json={"code": "secret"}).json()["display"] == "1"
    finally:
        client.delete(f"/v1/sessions/{native}")


def test_an_id_is_its_clients_own(client: TestClient, sid: str) -> None:
    # Another address sending the same id (a guessed one, or one that leaked) gets a session of its own.
    other = TestClient(client.app, client=("127.0.0.2", 50000))
    other.portal = client.portal  # the server's event loop, which its workers' streams belong to
    execute(client, "secret = 'A'", sid)
    try:
        r = other.delete(f"/sessions/{sid}")  # not its session: as for an id never used
        assert r.status_code == 404 and r.json() == {"error": f"IPython session {sid} not found"}, r.text
        theirs = execute(other, "'secret' in dir()", sid)
        assert theirs["new_session_created"] is True and theirs["stdout"] == "False\n", theirs
        execute(other, "secret = 'B'", sid)
        assert list(other.get("/sessions").json()["sessions"]) == [sid]
        assert other.delete(f"/sessions/{sid}").status_code == 200  # its own, not the first client's
        assert execute(client, "secret", sid) == {
            "new_session_created": False, "process_status": "completed", "stderr": "", "stdout": "'A'\n"}  # fmt: skip
        # Nor does the native API reach it, by whatever name the store keeps it under.
        store = client.app.state.sessions  # type: ignore[attr-defined]
        (key,) = (k for k, s in store.sessions.items() if k.endswith(sid))
        for name in (key, quote(key, safe="")):
            assert client.post(f"/v1/sessions/{name}/execute", json={"code": "secret"}).status_code == 404
            assert client.delete(f"/v1/sessions/{name}").status_code == 404
        assert execute(client, "secret", sid)["stdout"] == "'A'\n"
    finally:
        other.delete(f"/sessions/{sid}")


def test_calls_on_one_id_take_turns(client: TestClient, sid: str) -> None:
    execute(client, "n = 0", sid)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: execute(client, "import time; time.sleep(0.2); n += 1", sid), range(4)))
    assert all(a["process_status"] == "completed" for a in answers), answers
    assert execute(client, "n", sid)["stdout"] == "4\n"


def test_a_session_deleted_while_its_cell_runs_does_not_run_the_cell_again(client: TestClient, sid: str) -> None:
    execute(client, "runs = 0", sid)
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(execute, client, "runs += 1\nimport time\ntime.sleep(4)\nruns", sid)
        time.sleep(1.5)  # the cell runs
        r = client.delete(f"/sessions/{sid}")
        assert r.status_code == 200, r.text
        answer = call.result()
    # It ran once, in the session now deleted: not again in a new one made for the id (which held on, unasked).
    assert answer["process_status"] == "error" and "deleted while the cell ran" in answer["stderr"], answer
    assert answer["new_session_created"] is False, answer
    assert sid not in client.get("/sessions").json()["sessions"]


def test_health(client: TestClient) -> None:
    r = client.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "healthy", "worker": "unknown"}
