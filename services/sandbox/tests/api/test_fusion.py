"""SandboxFusion-compatible ``POST /run_code``, ``GET /v1/ping`` and ``GET /`` through the real app."""

from __future__ import annotations

import base64
import json
import time

import pytest
from fastapi.testclient import TestClient
from sandbox_support import run_code, stdout

CPP_DOUBLE = '#include <cstdio>\nint main(){int a;scanf("%d",&a);printf("%d\\n",a*2);}'


def test_success_shape(client: TestClient) -> None:
    body = run_code(client, "print(input()[::-1])", stdin="olleh")
    assert body["status"] == "Success" and body["message"] == ""
    assert body["compile_result"] is None and body["files"] == {}
    rr = body["run_result"]
    assert rr["status"] == "Finished" and rr["return_code"] == 0
    assert rr["stdout"] == "hello\n" and rr["stderr"] == ""
    assert rr["execution_time"] is not None and 0 < rr["execution_time"] < 5
    assert rr["memory_exceeded"] is False and rr["output_truncated"] is False


def test_runtime_error_is_failed(client: TestClient) -> None:
    body = run_code(client, "print('before')\nraise ValueError('boom')")
    rr = body["run_result"]
    assert body["status"] == "Failed" and body["message"] == ""
    assert rr["status"] == "Finished" and rr["return_code"] == 1
    assert rr["stdout"] == "before\n"
    assert "ValueError: boom" in rr["stderr"] and "pyrun" not in rr["stderr"]


def test_exit_code_is_kept(client: TestClient) -> None:
    body = run_code(client, "import sys; sys.exit(3)")
    assert body["status"] == "Failed" and body["run_result"]["return_code"] == 3


def test_signal_is_a_negative_return_code(client: TestClient) -> None:
    body = run_code(client, "import os, signal; os.kill(os.getpid(), signal.SIGABRT)")
    assert body["status"] == "Failed" and body["run_result"]["return_code"] == -6


def test_syntax_error_is_failed(client: TestClient) -> None:
    body = run_code(client, "print(")
    rr = body["run_result"]
    assert body["status"] == "Failed" and rr["status"] == "Finished"
    assert rr["return_code"] == 1 and "SyntaxError" in rr["stderr"]


def test_timeout_keeps_partial_output(client: TestClient) -> None:
    started = time.monotonic()
    body = run_code(client, "import time\nprint('a', flush=True)\ntime.sleep(30)", run_timeout=1)
    rr = body["run_result"]
    assert body["status"] == "Failed" and body["message"] == ""
    assert rr["status"] == "TimeLimitExceeded" and rr["return_code"] is None
    assert rr["stdout"] == "a\n"
    assert 1.0 <= rr["execution_time"] < 2.5
    assert time.monotonic() - started < 5


def test_busy_loop_is_a_timeout(client: TestClient) -> None:
    rr = run_code(client, "while True: pass", run_timeout=1)["run_result"]
    assert rr["status"] == "TimeLimitExceeded" and rr["return_code"] is None


def test_cpp_compile_and_run(client: TestClient) -> None:
    body = run_code(client, CPP_DOUBLE, "cpp", stdin="21")
    assert body["status"] == "Success"
    assert body["compile_result"]["status"] == "Finished" and body["compile_result"]["return_code"] == 0
    assert stdout(body) == "42\n"


def test_cpp_compile_error(client: TestClient) -> None:
    body = run_code(client, "int main(){ a = b; }", "cpp")
    assert body["status"] == "Failed" and body["message"] == ""
    assert body["run_result"] is None
    cr = body["compile_result"]
    assert cr["status"] == "Finished" and cr["return_code"] != 0 and "error" in cr["stderr"]


def test_cpp_runtime_crash(client: TestClient) -> None:
    body = run_code(client, "int main(){ int *p = nullptr; return *p; }", "cpp")
    assert body["status"] == "Failed" and body["run_result"]["return_code"] == -11


@pytest.mark.parametrize("stdin", [None, ""])
def test_empty_stdin_is_immediate_eof(client: TestClient, stdin: str | None) -> None:
    started = time.monotonic()
    body = run_code(client, "import sys; print(repr(sys.stdin.read()))", stdin=stdin, run_timeout=5)
    assert body["status"] == "Success" and stdout(body) == "''\n"
    assert time.monotonic() - started < 3


def test_input_without_stdin_is_eof_error(client: TestClient) -> None:
    body = run_code(client, "input()", stdin=None, run_timeout=5)
    assert body["status"] == "Failed" and "EOFError" in body["run_result"]["stderr"]


def test_large_stdin(client: TestClient) -> None:
    data = "x" * 3_000_000
    body = run_code(client, "import sys; print(len(sys.stdin.read()))", stdin=data)
    assert stdout(body) == "3000000\n"


def test_large_output_is_not_a_timeout(client: TestClient) -> None:
    started = time.monotonic()
    body = run_code(client, "print('x' * 2_000_000)", run_timeout=5)
    assert time.monotonic() - started < 4
    rr = body["run_result"]
    assert body["status"] == "Success" and rr["status"] == "Finished"
    assert rr["stdout"] == "x" * 2_000_000 + "\n" and rr["output_truncated"] is False


def test_output_that_never_ends_is_stopped_soon_after_the_cap(client: TestClient) -> None:
    started = time.monotonic()
    body = run_code(client, "import sys\nwhile True: sys.stdout.write('y' * 65536)", run_timeout=20)
    assert time.monotonic() - started < 10  # stopped a little past the cap, not at the deadline
    rr = body["run_result"]
    assert body["status"] == "Failed" and rr["return_code"] == -9
    assert rr["output_truncated"] is True and rr["status"] == "Finished"
    assert len(rr["stdout"]) == 8 << 20 and set(rr["stdout"]) == {"y"}


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_program_that_ends_by_itself_past_the_cap_finishes_with_its_output_truncated(
    client: TestClient, stream: str
) -> None:
    """Upstream returns all of it; here the first 8 MiB (as documented), the exit status the program chose,
    the flag, and a failed run. What it does after the cap still happens (the marker file), as it would upstream."""
    code = (
        f"import sys\nfor _ in range(200): sys.{stream}.write('z' * 65536)\n"  # 12.5 MiB
        "sys.stdout.flush(); sys.stderr.flush()\nopen('after', 'w').write('done')\nsys.exit(3)"
    )
    body = run_code(client, code, run_timeout=20, fetch_files=["after"])
    rr = body["run_result"]
    assert rr["status"] == "Finished" and rr["return_code"] == 3 and rr["output_truncated"] is True
    assert body["status"] == "Failed"  # by its exit status, as upstream
    assert len(rr[stream]) == 8 << 20 and set(rr[stream]) == {"z"}
    assert base64.b64decode(body["files"]["after"]) == b"done"
    # Ended by itself with 0, its output cut: a failed run all the same, which says why (its callers compare the
    # stdout they are given: the part kept may pass where the whole would not).
    cut = run_code(client, "import sys\nsys.stdout.write('w' * (9 << 20))", run_timeout=20)
    assert cut["status"] == "Failed" and "passed the cap" in cut["message"]
    assert cut["run_result"]["status"] == "Finished" and cut["run_result"]["output_truncated"] is True
    assert cut["run_result"]["return_code"] == 0 and len(cut["run_result"]["stdout"]) == 8 << 20


def test_memory_limit(client: TestClient) -> None:
    body = run_code(client, "x = bytearray(2 << 30)\nprint('allocated')", memory_limit_MB=256)
    rr = body["run_result"]
    assert body["status"] == "Failed" and rr["memory_exceeded"] is True
    assert "allocated" not in rr["stdout"]


def test_memory_within_the_limit(client: TestClient) -> None:
    body = run_code(client, "x = bytearray(100 << 20)\nprint(len(x))", memory_limit_MB=512)
    assert body["status"] == "Success" and stdout(body) == str(100 << 20) + "\n"


def test_threads_work_under_memory_limit(client: TestClient) -> None:
    code = "import threading\nts = [threading.Thread(target=sum, args=([1],)) for _ in range(20)]\n"
    code += "[t.start() for t in ts]\n[t.join() for t in ts]\nprint('ok')"
    body = run_code(client, code, memory_limit_MB=1024)
    assert body["status"] == "Success" and stdout(body) == "ok\n"


def test_files_in_and_out(client: TestClient) -> None:
    files = {"data/in.txt": base64.b64encode(b"41").decode(), "/tmp/box/abs.txt": base64.b64encode(b"7").decode()}
    code = "n = int(open('data/in.txt').read()) + int(open('abs.txt').read())\nopen('out.txt', 'w').write(str(n))"
    body = run_code(client, code, files=files, fetch_files=["out.txt", "missing.txt", "data/in.txt"])
    assert body["status"] == "Success"
    assert body["files"] == {
        "out.txt": base64.b64encode(b"48").decode(),
        "data/in.txt": base64.b64encode(b"41").decode(),
    }


def test_binary_file_round_trip(client: TestClient) -> None:
    blob = bytes(range(256)) * 4
    body = run_code(
        client,
        "open('copy.bin','wb').write(open('blob.bin','rb').read())",
        files={"blob.bin": base64.b64encode(blob).decode()},
        fetch_files=["copy.bin"],
    )
    assert base64.b64decode(body["files"]["copy.bin"]) == blob


def test_bad_base64_is_422(client: TestClient) -> None:
    r = client.post("/run_code", json={"code": "print(1)", "language": "python", "files": {"a.txt": "not base64!"}})
    assert r.status_code == 422
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body", "files"] and "a.txt" in detail["msg"] and "base64" in detail["msg"]


@pytest.mark.parametrize("name", ["/etc/passwd", "/tmp/other.txt", "../x"])
def test_paths_outside_the_box_are_422(client: TestClient, name: str) -> None:
    r = client.post("/run_code", json={"code": "print(1)", "language": "python", "files": {name: "eA=="}})
    assert r.status_code == 422 and name in r.json()["detail"][0]["msg"]
    r = client.post("/run_code", json={"code": "print(1)", "language": "python", "fetch_files": [name]})
    assert r.status_code == 422


def test_unknown_language_is_422(client: TestClient) -> None:
    r = client.post("/run_code", json={"code": "1", "language": "cobol"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "language"]


@pytest.mark.parametrize("language", ["julia", "go_test"])
def test_language_without_runner_is_sandbox_error(client: TestClient, language: str) -> None:
    body = run_code(client, "1", language)
    assert body["status"] == "SandboxError" and repr(language) in body["message"]
    assert body["run_result"]["status"] == "Error"


def test_malformed_requests_are_422(client: TestClient) -> None:
    r = client.post("/run_code", content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert client.post("/run_code", json={"language": "python"}).status_code == 422
    assert client.post("/run_code", json={"code": "1"}).status_code == 422
    assert client.post("/run_code", json={"code": "1", "language": "python", "run_timeout": "x"}).status_code == 422


def test_client_style_body_with_nulls_and_extras(client: TestClient) -> None:
    body = run_code(
        client,
        "print(1)",
        compile_timeout=10,
        run_timeout=10,
        stdin=None,
        files={},
        fetch_files=[],
        expected_stdout="1",
    )
    assert body["status"] == "Success" and stdout(body) == "1\n"


def test_ping_and_root(client: TestClient) -> None:
    r = client.get("/v1/ping")
    assert r.status_code == 200 and r.json() == "pong"
    assert client.get("/").status_code == 200


# Lone surrogates, as a program can write them (UTF-8 of a surrogate, which no valid UTF-8 holds).
SURROGATE_OUTPUT = {
    "stdout": "import sys\nsys.stdout.buffer.write('a\\ud800b'.encode('utf-8', 'surrogatepass'))\n",
    "stderr": "import sys\nsys.stderr.buffer.write('a\\udfffb'.encode('utf-8', 'surrogatepass'))\n",
    "print": "print('a\\ud800b')\n",
    "traceback": "raise ValueError('a\\ud800b')\n",
}


@pytest.mark.parametrize("where", sorted(SURROGATE_OUTPUT))
def test_a_lone_surrogate_in_the_output_comes_back_representable(client: TestClient, where: str) -> None:
    r = client.post("/run_code", json={"code": SURROGATE_OUTPUT[where], "language": "python"})
    assert r.status_code == 200, r.text
    body = r.json()
    json.dumps(body, ensure_ascii=False).encode("utf-8")  # strict: no lone surrogate in any string
    run = body["run_result"]
    assert "a" in run["stdout"] + run["stderr"] and "b" in run["stdout"] + run["stderr"], body
