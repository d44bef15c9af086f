"""Core behaviour of the sandbox through its real app (worker pool started by the lifespan)."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(workers=2))) as c:
        yield c


def run(client: TestClient, code: str, **fields: object) -> dict[str, object]:
    r = client.post("/run_code", json={"code": code, "language": "python", **fields})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_success_and_stdin(client: TestClient) -> None:
    body = run(client, "print(input()[::-1])", stdin="olleh")
    assert body["status"] == "Success"
    assert body["run_result"]["stdout"] == "hello\n"  # type: ignore[index]
    assert body["compile_result"] is None and body["files"] == {} and body["message"] == ""


def test_null_stdin_gets_eof(client: TestClient) -> None:
    body = run(client, "import sys; print(repr(sys.stdin.read()))", stdin=None, run_timeout=5)
    assert body["run_result"]["stdout"] == "''\n"  # type: ignore[index]


def test_timeout_keeps_partial_output(client: TestClient) -> None:
    body = run(client, "import time\nprint('a', flush=True)\ntime.sleep(30)", run_timeout=1)
    rr = body["run_result"]
    assert body["status"] == "Failed"
    assert rr["status"] == "TimeLimitExceeded" and rr["return_code"] is None  # type: ignore[index]
    assert rr["stdout"] == "a\n" and 1.0 <= rr["execution_time"] < 3  # type: ignore[index]


def test_large_output_is_not_a_timeout(client: TestClient) -> None:
    body = run(client, "print('x' * 2_000_000)")
    assert body["status"] == "Success"
    assert len(body["run_result"]["stdout"]) == 2_000_001  # type: ignore[index]


def test_runtime_error_is_failed(client: TestClient) -> None:
    body = run(client, "raise ValueError('boom')")
    assert body["status"] == "Failed"
    assert body["run_result"]["return_code"] == 1  # type: ignore[index]
    assert "ValueError: boom" in body["run_result"]["stderr"]  # type: ignore[index]
    assert "pyrun" not in body["run_result"]["stderr"]  # type: ignore[index]


def test_threads_work_under_memory_limit(client: TestClient) -> None:
    code = "import threading\nts=[threading.Thread(target=sum, args=([1],)) for _ in range(20)]\n"
    code += "[t.start() for t in ts]; [t.join() for t in ts]; print('ok')"
    assert run(client, code, memory_limit_MB=1024)["run_result"]["stdout"] == "ok\n"  # type: ignore[index]


def test_memory_limit(client: TestClient) -> None:
    body = run(client, "x = bytearray(2 << 30)", memory_limit_MB=256)
    assert body["status"] == "Failed" and body["run_result"]["memory_exceeded"] is True  # type: ignore[index]


def test_cpp_compile_once_then_run(client: TestClient) -> None:
    code = '#include <cstdio>\nint main(){int a;scanf("%d",&a);printf("%d\\n",a*2);}'
    r = client.post("/run_code", json={"code": code, "language": "cpp", "stdin": "21"}).json()
    assert r["status"] == "Success" and r["run_result"]["stdout"] == "42\n"
    bad = client.post("/run_code", json={"code": "int main(){ a = b; }", "language": "cpp"}).json()
    assert bad["status"] == "Failed" and bad["run_result"] is None
    assert bad["compile_result"]["return_code"] != 0


def test_files_in_and_out(client: TestClient) -> None:
    files = {"data/in.txt": base64.b64encode(b"41").decode()}
    code = "n = int(open('data/in.txt').read())\nopen('out.txt', 'w').write(str(n + 1))"
    body = run(client, code, files=files, fetch_files=["out.txt", "missing.txt"])
    assert body["files"] == {"out.txt": base64.b64encode(b"42").decode()}


@pytest.mark.parametrize(
    "files",
    [{"a.txt": "not base64!"}, {"/etc/passwd": base64.b64encode(b"x").decode()}, {"../x": ""}],
)
def test_bad_files_are_422(client: TestClient, files: dict[str, str]) -> None:
    r = client.post("/run_code", json={"code": "print(1)", "language": "python", "files": files})
    assert r.status_code == 422
    assert "file" in r.text


def test_bad_requests(client: TestClient) -> None:
    assert client.post("/run_code", json={"code": "1", "language": "cobol"}).status_code == 422
    assert client.post("/run_code", content=b"{", headers={"content-type": "application/json"}).status_code == 422
    r = client.post("/run_code", json={"code": "1", "language": "lua"}).json()
    assert r["status"] == "SandboxError" and "lua" in r["message"]


def test_isolation(client: TestClient) -> None:
    code = """
import os, socket
print(os.getuid() != 0)
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1); print("net")
except OSError:
    print("no net")
print(os.path.exists("/root/.bashrc") or bool(os.listdir("/home")))
for path in ("/etc/codegym-test", "/var/tmp/codegym-test"):
    try:
        open(path, "w"); print("wrote", path)
    except OSError:
        print("read-only")
open("left-behind", "w").write("x")
if os.fork() == 0:
    os.setsid()
    import time; time.sleep(60)
print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:2])
"""
    out = run(client, code)["run_result"]["stdout"]  # type: ignore[index]
    assert out.splitlines()[:5] == ["True", "no net", "False", "read-only", "read-only"]
    # The next run sees neither the file nor the daemon: only itself and the box's init.
    for _ in range(3):
        code = "import os; print(os.listdir('.'), sorted(p for p in os.listdir('/proc') if p.isdigit())"
        code += " == ['1', str(os.getpid())])"
        nxt = run(client, code)
        assert nxt["run_result"]["stdout"] == "['main.py'] True\n"  # type: ignore[index]


def test_native_evaluate(client: TestClient) -> None:
    req = {
        "language": "python",
        "programs": ["print(sum(map(int, input().split())))", "print(0)", "print("],
        "tests": [{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "5 5", "expected_stdout": "10"}],
    }
    res = client.post("/v1/evaluate", json=req).json()["results"]
    assert [(r["verdict"], r["passed"]) for r in res] == [("AC", 2), ("WA", 0), ("CE", 0)]


def test_assert_tests_need_the_harness_to_finish(client: TestClient) -> None:
    req = {
        "language": "python",
        "programs": ["def f(x):\n    return x + 1", "import sys\nsys.exit(0)\ndef f(x):\n    return 0"],
        "tests": [{"assert_code": "assert f(1) == 2"}],
    }
    res = client.post("/v1/evaluate", json=req).json()["results"]
    assert [r["verdict"] for r in res] == ["AC", "WA"]


def test_call_tests_reject_always_equal(client: TestClient) -> None:
    cheat = "class E:\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return E()"
    req = {
        "language": "python",
        "function": "f",
        "programs": ["def f(x):\n    return [x, x * 2.0]", cheat],
        "tests": [{"call": [3], "expected": [3, 6.0]}],
    }
    res = client.post("/v1/evaluate", json=req).json()["results"]
    assert res[0]["verdict"] == "AC"
    assert res[1]["verdict"] in ("WA", "RE")  # not plain data: it cannot even be reported


def test_early_stop_is_in_test_order(client: TestClient) -> None:
    req = {
        "language": "python",
        "programs": ["print(input())"],
        "early_stop": True,
        "tests": [{"stdin": "a", "expected_stdout": "a"}, {"stdin": "b", "expected_stdout": "x"},
                  {"stdin": "c", "expected_stdout": "c"}],
    }  # fmt: skip
    r = client.post("/v1/evaluate", json=req).json()["results"][0]
    assert r["stopped_early"] is True and [t["verdict"] for t in r["tests"]] == ["AC", "WA"]


def test_cache_and_metrics(client: TestClient) -> None:
    req = {"language": "python", "code": "print('cached?')"}
    client.post("/v1/execute", json=req)
    again = client.post("/v1/execute", json=req).json()
    assert again["run"]["cached"] is True and again["verdict"] == "AC"
    text = client.get("/metrics").text
    assert 'codegym_sandbox_cache_total{result="hit"}' in text
    assert "codegym_sandbox_run_seconds_bucket" in text and "codegym_sandbox_queue_depth" in text
    assert client.get("/readyz").json()["alive"] == 2
    assert client.get("/v1/ping").json() == "pong"


def test_worker_killed_from_outside_heals(client: TestClient) -> None:
    import os
    import signal
    import threading
    import time

    backend = client.app.state.executor.backend  # type: ignore[attr-defined]
    pids = [w.proc.pid for w in backend._workers]

    def killer() -> None:
        time.sleep(0.5)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

    threading.Thread(target=killer).start()
    body = run(client, "import time; time.sleep(3)", run_timeout=5)
    assert body["status"] == "SandboxError"
    for _ in range(50):
        if client.get("/readyz").json()["alive"] == 2:
            break
        time.sleep(0.1)
    assert run(client, "print('back')")["run_result"]["stdout"] == "back\n"  # type: ignore[index]
