"""The native API: ``/v1/execute``, ``/v1/evaluate`` and ``/v1/languages``."""

from __future__ import annotations

import asyncio
import base64
from types import SimpleNamespace
from typing import Any

import pytest
from codegym_sandbox import languages
from codegym_sandbox.api import native
from codegym_sandbox.judging import judge
from codegym_sandbox.models import EvaluateRequest
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from sandbox_support import metric, while_ticking

SUM = "print(sum(map(int, input().split())))"


def evaluate(client: TestClient, **req: Any) -> list[dict[str, Any]]:
    r = client.post("/v1/evaluate", json={"language": "python", **req})
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    return results


def test_execute(client: TestClient) -> None:
    r = client.post("/v1/execute", json={"language": "python", "code": "print(input() * 2)", "stdin": "ab"}).json()
    assert r["verdict"] == "AC" and r["compile"] is None and r["files"] == {}
    run = r["run"]
    assert run["stdout"] == "abab\n" and run["exit_code"] == 0 and run["signal"] is None
    assert run["cpu_s"] is not None and run["max_rss_kb"] > 0 and run["error"] is None


def test_execute_verdicts(client: TestClient) -> None:
    def verdict(code: str, **limits: Any) -> str:
        r = client.post("/v1/execute", json={"language": "python", "code": code, "limits": limits})
        return str(r.json()["verdict"])

    assert verdict("raise SystemExit(2)") == "RE"
    assert verdict("print(") == "CE"
    assert verdict("import time; time.sleep(5)", timeout_s=0.5) == "TLE"
    assert verdict("x = bytearray(2 << 30)", memory_mb=256) == "MLE"
    assert verdict("import sys\nwhile True: sys.stdout.write('z' * 65536)") == "OLE"


def test_execute_files_and_cpp(client: TestClient) -> None:
    code = '#include <fstream>\nint main(){std::ifstream f("n.txt"); int n; f >> n; std::ofstream("o.txt") << n*n;}'
    r = client.post(
        "/v1/execute", json={"language": "c++", "code": code, "files": {"n.txt": "MTI="}, "fetch_files": ["o.txt"]}
    ).json()
    assert r["verdict"] == "AC" and r["compile"]["verdict"] == "AC"
    assert base64.b64decode(r["files"]["o.txt"]) == b"144"
    bad = client.post("/v1/execute", json={"language": "cpp", "code": "int main() { oops }"}).json()
    assert bad["verdict"] == "CE" and bad["run"] is None and bad["compile"]["exit_code"] != 0


def test_execute_rejects_bad_requests(client: TestClient) -> None:
    assert client.post("/v1/execute", json={"language": "python"}).status_code == 422
    assert client.post("/v1/execute", json={"language": "python", "code": "1", "extra": 1}).status_code == 422
    r = client.post("/v1/execute", json={"language": "python", "code": "1", "files": {"/etc/x": "eA=="}})
    assert r.status_code == 422
    r = client.post("/v1/execute", json={"language": "python", "code": "1", "limits": {"timeout_s": -1}})
    assert r.status_code == 422
    r = client.post("/v1/execute", json={"language": "brainfuck", "code": "+"}).json()
    assert r["verdict"] == "SE" and "brainfuck" in r["run"]["error"]


def test_more_patterns_to_fetch_than_the_agent_matches_are_refused(client: TestClient) -> None:
    # Each pattern is matched against every file the run made, in the agent's time, which no run is charged.
    fetch = [f"[a{i:02d}]*" for i in range(17)]
    r = client.post("/v1/execute", json={"language": "python", "code": "1", "fetch_files": fetch})
    assert r.status_code == 422 and "patterns" in r.text, r.text
    r = client.post("/v1/execute", json={"language": "python", "code": "1", "fetch_files": fetch[:16]})
    assert r.status_code == 200 and r.json()["verdict"] == "AC", r.text


@pytest.mark.parametrize(
    ("language", "files"),
    [("python", {"a": "eA==", "a/b": "eQ=="}), ("python", {"a/b": "eQ==", "a": "eA=="}), ("python", {"main.py/x": ""}),
     ("cpp", {"main.cpp/x": ""})],
)  # fmt: skip
def test_files_that_cannot_all_be_written_are_refused(client: TestClient, language: str, files: dict[str, str]) -> None:
    # One name the directory of another, or under the program's own file: they were SE, the sandbox's fault.
    r = client.post("/v1/execute", json={"language": language, "code": "1", "files": files})
    assert r.status_code == 422 and "cannot be a directory" in r.text, r.text
    r = client.post("/run_code", json={"language": language, "code": "1", "files": files})
    assert r.status_code == 422 and "cannot be a directory" in r.text, r.text


# A chain of ten directories under a first part of each name's own: 1,320 directories from 120 names of 30 bytes,
# each a mkdir of the agent's and an inode of the kernel's, held for the run's life and counted by no memory limit.
_TREE = {f"s{i:03d}/" + "/".join(["d"] * 10) + "/f": "eA==" for i in range(120)}


def test_files_whose_names_make_too_many_directories_are_refused(client: TestClient) -> None:
    for path in ("/v1/execute", "/run_code"):
        r = client.post(path, json={"language": "python", "code": "1", "files": _TREE})
        assert r.status_code == 422 and "more than 1024 directories" in r.text, r.text


def test_files_are_charged_what_the_kernel_holds_for_them(client: TestClient) -> None:
    # 4,096 files of a byte each: 4 KB of contents, 20 MiB of the kernel's (a page and an inode each).
    files = {f"f{i}": "eA==" for i in range(4096)}
    native_body = {"language": "python", "code": "1", "files": files, "limits": {"memory_mb": 16}}
    r = client.post("/v1/execute", json=native_body)
    assert r.status_code == 422 and "past its memory limit of 16 MiB" in r.text, r.text
    r = client.post("/run_code", json={"language": "python", "code": "1", "files": files, "memory_limit_MB": 16})
    assert r.status_code == 422 and "past its memory limit of 16 MiB" in r.text, r.text


def test_files_in_a_tree_of_a_few_directories_are_written(client: TestClient) -> None:
    files = {"pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/mod.py": base64.b64encode(b"X = 7").decode()}
    files["data/in/a.txt"] = base64.b64encode(b"seven").decode()
    code = "from pkg.sub.mod import X\nprint(X, open('data/in/a.txt').read())"
    body = {"language": "python", "code": code, "files": files, "limits": {"memory_mb": 64}, "cache": False}
    r = client.post("/v1/execute", json=body)
    assert r.status_code == 200 and r.json()["run"]["stdout"] == "7 seven\n", r.text


def test_evaluate_stdio(client: TestClient) -> None:
    tests = [{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "5 5", "expected_stdout": "10\n"}]
    res = evaluate(client, programs=[SUM, "print(0)", "print(", "import sys; sys.exit(1)"], tests=tests)
    assert [(r["verdict"], r["passed"], r["total"]) for r in res] == [
        ("AC", 2, 2),
        ("WA", 0, 2),
        ("CE", 0, 2),
        ("RE", 0, 2),
    ]
    assert all(not r["stopped_early"] for r in res)
    assert [len(r["tests"]) for r in res] == [2, 2, 2, 2]


def test_evaluate_comparisons(client: TestClient) -> None:
    program = "print('1   2 ')"
    tests = [{"stdin": "", "expected_stdout": "1 2"}]
    assert evaluate(client, programs=[program], tests=tests)[0]["verdict"] == "WA"
    assert evaluate(client, programs=[program], tests=tests, comparison="whitespace")[0]["verdict"] == "AC"
    fl = [{"expected_stdout": "0.333333"}]
    close = "print(1/3)"
    assert evaluate(client, programs=[close], tests=fl)[0]["verdict"] == "WA"
    assert evaluate(client, programs=[close], tests=fl, comparison="float")[0]["verdict"] == "AC"
    assert evaluate(client, programs=["print(0.34)"], tests=fl, comparison="float")[0]["verdict"] == "WA"
    r = client.post("/v1/evaluate", json={"language": "python", "programs": ["1"], "tests": fl, "comparison": "fuzzy"})
    assert r.status_code == 422


def test_a_test_no_program_can_pass_within_the_output_cap_is_refused(client: TestClient) -> None:
    # The output cap is 8 MiB: a right program printing 9.4 MB was OLE, and every program's reward a 0.
    big = {"stdin": "", "expected_stdout": "7\n" * 4_700_000}
    for comparison in ("exact", "whitespace", "float"):
        body = {"language": "python", "programs": ["print(7)"], "tests": [big], "comparison": comparison}
        r = client.post("/v1/evaluate", json=body)
        assert r.status_code == 422 and "no program can pass it" in r.text, r.text
        assert r.json()["detail"][0]["loc"] == ["body", "tests", 0, "expected_stdout"]
        small = {**body, "tests": [{"stdin": "", "expected_stdout": "7"}]}
        r = client.post("/v1/evaluate/batch", json={"requests": [small, body]})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][:3] == ["body", "requests", 1], r.text
    # What the comparison accepts is what counts: three bytes pass a whitespace test of 9 MB of spaces.
    spaced = [{"stdin": "", "expected_stdout": "1" + " " * 9_000_000 + "2"}]
    assert evaluate(client, programs=["print(1, 2)"], tests=spaced, comparison="whitespace")[0]["verdict"] == "AC"
    assert (
        client.post("/v1/evaluate", json={"language": "python", "programs": ["1"], "tests": spaced}).status_code == 422
    )


def test_evaluate_call_tests(client: TestClient) -> None:
    cheat = "class E:\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return E()"
    noisy = "def f(x):\n    print('debug')\n    return [x, x * 2.0]"
    res = evaluate(
        client,
        function="f",
        programs=["def f(x):\n    return [x, x * 2.0]", cheat, noisy, "def f(x):\n    return [x, 0]", "def g(x): pass"],
        tests=[{"call": [3], "expected": [3, 6.0]}, {"call": [], "kwargs": {"x": 1}, "expected": [1, 2]}],
    )
    assert res[0]["verdict"] == "AC" and res[0]["passed"] == 2
    assert res[1]["verdict"] != "AC" and res[1]["passed"] == 0  # an always-equal object is not a value
    assert res[2]["verdict"] == "AC"  # what the function prints is not its result
    assert res[3]["verdict"] == "WA"
    assert res[4]["verdict"] == "RE"  # no such function


# What models write beside a function: a demo under a main guard (printing, reading stdin, exiting), or at
# the top of the module. A call test judges the function; the module runs, but not as __main__.
DEMOS = {
    "guard-print": "if __name__ == '__main__':\n    print(f(5))\n",
    "guard-input": "if __name__ == '__main__':\n    print(f(int(input())))\n",
    "guard-sys-exit": "if __name__ == '__main__':\n    import sys\n    sys.exit(f(5))\n",
    "guard-os-exit": "if __name__ == '__main__':\n    import os\n    os._exit(0)\n",
    "top-level-print": "print('f(5) =', f(5))\n",
    "top-level-fd-1": "import os\nos.write(1, b'{not json\\n')\n",
}


@pytest.mark.parametrize("demo", sorted(DEMOS))
def test_call_tests_judge_the_function_not_the_module(client: TestClient, demo: str) -> None:
    right, wrong = "def f(x):\n    return x * x\n", "def f(x):\n    return x\n"
    tests = [{"call": [3], "expected": 9}, {"call": [], "kwargs": {"x": 4}, "expected": 16}]
    res = evaluate(client, function="f", programs=[right + DEMOS[demo], wrong + DEMOS[demo]], tests=tests)
    assert [(r["verdict"], r["passed"]) for r in res] == [("AC", 2), ("WA", 0)], res
    shown = res[0]["tests"][0]["stdout"]
    assert shown.endswith("9\n") and ("25" in shown) == (demo == "top-level-print"), shown


def test_call_verdicts_follow_the_expected_value_and_the_tolerance(client: TestClient) -> None:
    # The checker compares (the verdict is the run's, and cached with it): every expected value and
    # tolerance is a run of its own.
    third = {"function": "f", "programs": ["def f():\n    return 1 / 3"]}
    cases = [(0.3333, 1e-6, "WA"), (0.3333, 1e-3, "AC"), (1 / 3, 1e-6, "AC"), (0.5, 0.1, "WA")]
    for expected, rel_tol, verdict in cases:
        for _ in range(2):  # the second time from the cache
            res = evaluate(client, **third, tests=[{"call": [], "expected": expected}], rel_tol=rel_tol)
            assert res[0]["verdict"] == verdict, (expected, rel_tol, res)


def test_call_tests_need_function(client: TestClient) -> None:
    r = client.post("/v1/evaluate", json={"language": "python", "programs": ["1"], "tests": [{"call": [1]}]})
    assert r.status_code == 422 and "function" in r.text


def test_test_needs_exactly_one_kind(client: TestClient) -> None:
    both = {"expected_stdout": "1", "assert_code": "pass"}
    for test in (both, {"stdin": "x"}):
        r = client.post("/v1/evaluate", json={"language": "python", "programs": ["1"], "tests": [test]})
        assert r.status_code == 422


def test_evaluate_assert_tests(client: TestClient) -> None:
    good = "def f(x):\n    return x + 1"
    res = evaluate(
        client,
        programs=[
            good,
            "import sys\nsys.exit(0)\ndef f(x):\n    return 0",
            "def f(x):\n    return x",
            "import os\nos._exit(0)",
            "import sys\nsys.exit = lambda *a: None\ndef f(x):\n    return 0",
        ],
        tests=[{"assert_code": "assert f(1) == 2"}, {"assert_code": "assert f(2) == 3"}],
    )
    assert res[0]["verdict"] == "AC" and res[0]["passed"] == 2
    assert res[1]["verdict"] != "AC" and res[1]["passed"] == 0
    assert res[2]["verdict"] == "WA" and res[2]["passed"] == 0  # a failed assertion is a wrong answer
    assert res[3]["verdict"] != "AC" and res[3]["passed"] == 0
    assert res[4]["verdict"] != "AC" and res[4]["passed"] == 0
    assert all(t["stdout"] == "" for t in res[0]["tests"])


def test_assert_tests_need_python(client: TestClient) -> None:
    res = evaluate(client, programs=["int main(){}"], tests=[{"assert_code": "pass"}], language="cpp")
    assert res[0]["verdict"] == "SE" and "Python" in res[0]["tests"][0]["stderr"]


def test_early_stop_is_in_test_order(client: TestClient) -> None:
    tests = [
        {"stdin": "a", "expected_stdout": "a"},
        {"stdin": "b", "expected_stdout": "x"},
        {"stdin": "c", "expected_stdout": "y"},
        {"stdin": "d", "expected_stdout": "d"},
    ]
    for _ in range(3):
        r = evaluate(client, programs=["print(input())"], tests=tests, early_stop=True)[0]
        assert r["stopped_early"] is True and r["verdict"] == "WA" and r["passed"] == 1
        assert [t["verdict"] for t in r["tests"]] == ["AC", "WA"]
    full = evaluate(client, programs=["print(input())"], tests=tests)[0]
    assert full["stopped_early"] is False and [t["verdict"] for t in full["tests"]] == ["AC", "WA", "WA", "AC"]


def test_compile_error_is_ce_for_every_program(client: TestClient) -> None:
    ok = "#include <iostream>\nint main(){int a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}"
    res = evaluate(
        client,
        language="cpp",
        programs=[ok, "int main() { return x; }", "this is not c++"],
        tests=[{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "2 2", "expected_stdout": "4"}],
    )
    assert res[0]["verdict"] == "AC" and res[0]["passed"] == 2
    for r in res[1:]:
        assert r["verdict"] == "CE" and r["passed"] == 0 and r["total"] == 2
        assert r["compile"]["verdict"] == "CE" and [t["verdict"] for t in r["tests"]] == ["CE"]


@pytest.mark.parametrize(
    "tests",
    [
        {"tests": [{"stdin": "", "expected_stdout": "1"}, {"stdin": "2", "expected_stdout": "2"}]},
        {"tests": [{"assert_code": "assert f() == 1"}, {"assert_code": "assert f() == 2"}]},
        {"tests": [{"call": [], "expected": 1}, {"call": [], "expected": 2}], "function": "f"},
    ],
    ids=["stdio", "assert", "call"],
)
def test_a_python_syntax_error_reads_as_pythons_own(client: TestClient, tests: dict[str, Any]) -> None:
    # What a model reads back (execution feedback): the program's file and line, the caret and the error, as
    # `python3 main.py` prints them; never a frame of the sandbox's own files.
    (bad,) = evaluate(client, programs=["def f(:\n    return 1\n"], **tests)
    assert bad["verdict"] == "CE"
    stderr = bad["tests"][0]["stderr"]
    name = "/tmp/box/main.py" if "stdin" in tests["tests"][0] else "<program>"
    assert stderr == f'  File "{name}", line 1\n    def f(:\n          ^\nSyntaxError: invalid syntax\n'
    # a runtime error's traceback starts at the program's own frame too
    (crash,) = evaluate(client, programs=["def f():\n    return 1\n1 / 0\n"], **tests)
    lines = crash["tests"][0]["stderr"].splitlines()
    assert crash["verdict"] == "RE" and lines[0] == "Traceback (most recent call last):"
    assert lines[1] == f'  File "{name}", line 3, in <module>' and lines[-1] == "ZeroDivisionError: division by zero"


def test_evaluate_unknown_language(client: TestClient) -> None:
    res = evaluate(client, language="julia", programs=["println(1)"], tests=[{"expected_stdout": "1"}])
    assert res[0]["verdict"] == "SE" and "julia" in res[0]["tests"][0]["stderr"]


def test_languages(client: TestClient) -> None:
    langs = {lang["name"]: lang for lang in client.get("/v1/languages").json()}
    assert langs["python"]["available"] is True and langs["python"]["compiled"] is False
    assert "py" in langs["python"]["aliases"]
    assert langs["cpp"]["compiled"] is True and langs["cpp"]["available"] is True
    for lang in langs.values():
        assert lang["detail"] == "ready" if lang["available"] else lang["detail"].startswith("missing: ")


def test_a_batch_answers_as_one_request_per_group(client: TestClient) -> None:
    add = {
        "tests": [{"assert_code": "assert add(1, 2) == 3"}, {"assert_code": "assert add(2, 2) == 4"}],
        "programs": ["def add(a, b): return a + b", "def add(a, b): return 3", "def add(a, b): 1/0"],
    }
    upper = {
        "tests": [{"assert_code": "assert up('a') == 'A'"}],
        "programs": ["def up(s):\n    return s.upper()", "up = str.lower", "import sys\nsys.exit(0)"],
    }
    stdio = {
        "tests": [{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "2 5", "expected_stdout": "7"}],
        "programs": [SUM, "print(3)"],
    }
    call = {"tests": [{"call": [3], "expected": 9}], "function": "sq", "programs": ["def sq(x):\n    return x * x"]}
    early = {**add, "early_stop": True}
    groups = [{"language": "python", **g} for g in (add, stdio, upper, call, early)]
    r = client.post("/v1/evaluate/batch", json={"requests": groups})
    assert r.status_code == 200, r.text
    batched = [
        [(p["verdict"], p["passed"], len(p["tests"])) for p in resp["results"]] for resp in r.json()["responses"]
    ]
    alone = [[(p["verdict"], p["passed"], len(p["tests"])) for p in evaluate(client, **g)] for g in groups]
    assert batched == alone
    assert batched[0] == [("AC", 2, 2), ("WA", 1, 2), ("RE", 0, 2)]  # a failed assertion, an exception
    assert batched[2] == [("AC", 1, 1), ("WA", 0, 1), ("WA", 0, 1)]  # exiting early is no pass
    assert batched[4] == [("AC", 2, 2), ("WA", 1, 2), ("RE", 0, 1)]  # early stop, per group


def test_a_batch_is_checked_whole(client: TestClient) -> None:
    ok = {"language": "python", "programs": ["pass"], "tests": [{"assert_code": "pass"}]}
    bad = {"language": "python", "programs": ["pass"], "tests": [{"stdin": "no expected output"}]}
    for body in ({"requests": []}, {"requests": [ok, bad]}, {"requests": [ok], "extra": 1}):
        r = client.post("/v1/evaluate/batch", json=body)
        assert r.status_code == 422, r.text


def test_assert_results_come_from_the_cache_the_second_time(client: TestClient) -> None:
    def hits() -> float:
        return metric(client, 'codegym_sandbox_cache_total{result="hit"}')

    noisy = "def f(x):\n    print('a')\n    return x + 1"
    req = {
        "programs": ["def f(x):\n    return x + 1", "def f(x):\n    return x", noisy],
        "tests": [{"assert_code": "assert f(1) == 2"}, {"assert_code": "assert f(3) == 4"}],
    }
    first = evaluate(client, **req)
    before = hits()
    second = evaluate(client, **req)
    assert hits() - before == 6  # 3 programs x 2 tests, none run again
    assert [(p["verdict"], p["passed"]) for p in second] == [(p["verdict"], p["passed"]) for p in first]
    assert [(p["verdict"], p["passed"]) for p in first] == [("AC", 2), ("WA", 0), ("AC", 2)]
    assert second[2]["tests"][0]["stdout"] == first[2]["tests"][0]["stdout"] == "a\n"  # what the program printed


def test_languages_lists_every_fusion_language_with_what_is_missing(client: TestClient) -> None:
    listed = {entry["name"]: entry for entry in client.get("/v1/languages").json()}
    assert set(languages.FUSION_LANGUAGES) <= set(listed)
    assert set(languages.LANGUAGES) <= set(listed)
    for name, entry in listed.items():
        assert entry["available"] or entry["detail"].startswith("missing: "), entry
        if languages.lookup(name) is None:
            assert not entry["available"] and "a runner in this server" in entry["detail"]
    assert "no Julia" in listed["julia"]["detail"] and "no Swift" in listed["swift"]["detail"]
    body = client.post("/v1/execute", json={"language": "julia", "code": "println(1)"}).json()
    assert body["verdict"] == "SE" and "julia" in body["run"]["error"] and "no Julia" in body["run"]["error"]


def test_an_answer_of_many_tests_shows_less_of_each(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an answer shows of its tests' output is bounded as a whole: a KiB of each stream per test held
    gigabytes for a request of 2**18 runs."""
    monkeypatch.setattr(judge, "ANSWER_SHOWN_BYTES", 8192)
    loud = "import sys\nprint('o' * 2000)\nsys.stderr.write('e' * 2000)"
    eight = [{"stdin": str(i), "expected_stdout": "x"} for i in range(8)]
    (many,) = evaluate(client, programs=[loud], tests=eight, cache=False)
    assert [(len(t["stdout"]), len(t["stderr"])) for t in many["tests"]] == [(512, 512)] * 8
    (few,) = evaluate(client, programs=[loud], tests=eight[:2], cache=False)
    assert [(len(t["stdout"]), len(t["stderr"])) for t in few["tests"]] == [(judge.SHOWN_BYTES,) * 2] * 2


def test_tests_written_into_every_programs_input_are_bounded(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each call and assert test is written, with the program, into each program's stdin: a 1 MiB test and 120
    programs once made 120 MiB of the server's from one small body."""
    monkeypatch.setattr(native, "EXPANDED_BYTES", 4096)
    test = {"assert_code": "assert f() == 1  # " + "x" * 400}
    many = client.post(
        "/v1/evaluate",
        json={"language": "python", "programs": ["def f(): return 1"] * 10, "tests": [test], "function": "f"},
    )
    assert many.status_code == 422 and "fewer programs" in many.text, many.text
    (few,) = evaluate(client, programs=["def f(): return 1"], tests=[test], function="f")
    assert few["verdict"] == "AC"


def test_tests_written_into_every_programs_input_are_counted_in_bytes(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is built is UTF-8: a character past U+FFFF is four bytes of every program's stdin, one of a str's
    length (2 MB of them in one test passed a 64 MiB bound and took the server 614 MiB)."""
    monkeypatch.setattr(native, "EXPANDED_BYTES", 4096)
    wide = {"assert_code": "assert f() == 1  # " + "\U0001f600" * 400}  # 419 characters, 1,619 bytes
    many = client.post(
        "/v1/evaluate",
        json={"language": "python", "programs": ["def f(): return 1"] * 4, "tests": [wide], "function": "f"},
    )
    assert many.status_code == 422 and "fewer programs" in many.text, many.text
    program = "def f(): return 1  # " + "\U0001f600" * 400  # the programs are counted the same way
    many = client.post(
        "/v1/evaluate",
        json={"language": "python", "programs": [program] * 4, "tests": [{"assert_code": "assert f() == 1"}]},
    )
    assert many.status_code == 422 and "fewer programs" in many.text, many.text
    (few,) = evaluate(client, programs=["def f(): return 1"], tests=[wide], function="f")
    assert few["verdict"] == "AC"


def test_a_tests_least_output_is_measured_off_the_event_loop() -> None:
    """Whether a large expected output can be printed at all looks at each of its tokens: 10 MB of numbers took
    the loop 0.6 s for each test of a request, every other client waiting."""
    executor: Any = SimpleNamespace(settings=SimpleNamespace(limits=SimpleNamespace(output_bytes=1 << 20)))
    tests = [{"stdin": "", "expected_stdout": "1.00\n" * 2_000_000}]
    req = EvaluateRequest.model_validate(
        {"language": "python", "programs": ["1"], "tests": tests, "comparison": "float"}
    )

    async def refusal() -> str:
        try:
            await native._check_outputs(executor, [req], "192.0.2.1")
        except RequestValidationError as exc:
            return str(exc)
        return ""

    refused, gap = asyncio.run(while_ticking(refusal()))
    assert "no program can pass it" in refused
    assert gap < 0.3, f"the loop was held {gap:.2f} s"
