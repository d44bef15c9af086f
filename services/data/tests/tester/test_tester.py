"""The Tester against a real sandbox (the session's loopback server): verdicts from the judge, and line coverage
that matches what was worked out by hand for each example (written beside it)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from codegym_data import tester as tester_module
from codegym_data.tester import LineCoverage, Tester

CLASSIFY = """\
def classify(n):
    if n < 0:
        return "negative"
    if n == 0:
        return "zero"
    return "positive"


def unused():
    return 1
"""
# Executable lines (bytecode): 1 and 9 (the module runs the two `def` statements), 2-6 (classify's body), 10.
# Lines 7-8 are blank. Every test runs 1 and 9; classify(-3) runs 2, 3; classify(5) runs 2, 4, 6; classify(0)
# runs 2, 4, 5. No test calls unused(), so 10 is never covered.
CLASSIFY_EXECUTABLE = {1, 2, 3, 4, 5, 6, 9, 10}


@pytest.fixture(scope="module")
def tester(sandbox_url: str) -> Tester:
    return Tester(sandbox_url)


def cov(executable: set[int], covered: set[int]) -> LineCoverage:
    return LineCoverage(frozenset(executable), frozenset(covered))


def test_python_assert_tests_per_test_and_total_coverage(tester: Tester) -> None:
    tests = ["assert classify(-3) == 'negative'", "assert classify(5) == 'positive'", "assert classify(0) == 'nil'"]
    report = tester.run("python", CLASSIFY, tests)
    assert [t.verdict for t in report.tests] == ["AC", "AC", "WA"]  # classify(0) is "zero", not "nil"
    assert report.verdict == "WA" and report.passed == 2 and report.verdicts == {"AC": 2, "WA": 1}
    per_test = [t.coverage for t in report.tests]
    assert per_test == [
        cov(CLASSIFY_EXECUTABLE, {1, 2, 3, 9}),
        cov(CLASSIFY_EXECUTABLE, {1, 2, 4, 6, 9}),
        cov(CLASSIFY_EXECUTABLE, {1, 2, 4, 5, 9}),  # a failing test still covers what it ran
    ]
    assert report.coverage == cov(CLASSIFY_EXECUTABLE, {1, 2, 3, 4, 5, 6, 9})
    assert report.coverage.percent == 87.5 and report.coverage.uncovered == [10]
    data = report.to_dict()
    assert data["coverage"]["covered"] == 7 and data["coverage"]["executable"] == 8
    assert data["tests"][0]["coverage"]["percent"] == 50.0


def test_python_stdin_and_call_tests(tester: Tester) -> None:
    code = "def double(x):\n    return 2 * x\n\n\nif __name__ == '__main__':\n    print(double(int(input())))\n"
    # Executable: 1 (def), 2 (body), 5 (the if), 6 (the print). The stdin test runs the program as __main__:
    # all four lines. The call test runs the program too (1, 5: __name__ is "__main__", so 6 reads stdin,
    # which is empty: EOFError) -- so it is judged by the sandbox as the call harness runs it, and measured on
    # the instrumented run's own terms.
    stdio = tester.run("python", code, [{"stdin": "4\n", "expected_stdout": "8\n"}])
    assert stdio.verdict == "AC"
    assert stdio.coverage == cov({1, 2, 5, 6}, {1, 2, 5, 6})
    library = "def double(x):\n    return 2 * x\n\n\ndef half(x):\n    return x // 2\n"
    # Executable 1, 2, 5, 6; double(3) runs 1 and 5 (the defs) and 2.
    call = tester.run("python", library, [{"call": [3], "expected": 6}], function="double")
    assert call.verdict == "AC" and call.tests[0].kind == "call"
    assert call.coverage == cov({1, 2, 5, 6}, {1, 2, 5})


C_SIGN = r"""#include <stdio.h>
int main(void) {
    int n;
    if (scanf("%d", &n) != 1)
        return 1;
    if (n < 0)
        printf("neg\n");
    else
        printf("pos\n");
    return 0;
}
"""
# gcov's executable lines: 2 (main's entry), 4, 5, 6, 7, 9, 10. Line 3 declares (no code), 8 is a bare `else`, 11
# has no code of its own at -O0 (gcov counts the return on 10). "5" runs 2, 4, 6, 9, 10; "-1" runs 2, 4, 6, 7, 10.
# No test gives input that is not a number, so the early return on 5 never runs.
C_EXECUTABLE = {2, 4, 5, 6, 7, 9, 10}


def test_c_coverage_from_gcov(tester: Tester) -> None:
    tests = [{"stdin": "5\n", "expected_stdout": "pos\n"}, {"stdin": "-1\n", "expected_stdout": "neg\n"}]
    report = tester.run("c", C_SIGN, tests)
    assert [t.verdict for t in report.tests] == ["AC", "AC"]
    assert [t.coverage for t in report.tests] == [
        cov(C_EXECUTABLE, {2, 4, 6, 9, 10}),
        cov(C_EXECUTABLE, {2, 4, 6, 7, 10}),
    ]
    assert report.coverage == cov(C_EXECUTABLE, {2, 4, 6, 7, 9, 10})
    assert round(report.coverage.percent, 2) == 85.71 and report.coverage.uncovered == [5]
    assert report.coverage_note is not None and "gcov" in report.coverage_note


CPP_SIGN = """#include <iostream>
int sign(int n) {
    if (n < 0)
        return -1;
    return 1;
}
int main() {
    int n;
    std::cin >> n;
    std::cout << sign(n) << "\\n";
    return 0;
}
"""
# gcov's executable lines of main.cpp (iostream's own lines are in other files and not counted): 2, 3, 4, 5
# (sign), 7, 9, 10, 11 (main); 8 only declares. Both tests give 3: sign never returns -1 (line 4). The second
# test expects "-1": a wrong answer that covers the same lines.
CPP_EXECUTABLE = {2, 3, 4, 5, 7, 9, 10, 11}


def test_cpp_coverage_and_a_failing_test(tester: Tester) -> None:
    tests = [{"stdin": "3", "expected_stdout": "1\n"}, {"stdin": "3", "expected_stdout": "-1\n"}]
    report = tester.run("cpp", CPP_SIGN, tests)
    assert [t.verdict for t in report.tests] == ["AC", "WA"] and report.verdict == "WA"
    expected = cov(CPP_EXECUTABLE, CPP_EXECUTABLE - {4})
    assert [t.coverage for t in report.tests] == [expected, expected]
    assert report.coverage == expected and report.coverage.percent == 87.5


JS_SIGN = """// sign of a number
const n = Number(require("fs").readFileSync(0, "utf8"));
if (n < 0) {
  console.log("neg");  /* a comment */
} else {
  console.log("pos");
}
function unused() {
  return "//";
}
"""
# Lines of code: 2, 3, 4, 5 (it holds `else`), 6, 8, 9; 1 is a comment, 7 and 10 only close braces. V8 gives
# the script a range of count 1, the `if` block (from its `{` to its `}`) a range of count 0 when not taken,
# the else block likewise, and unused() a range of count 0 (from `function` to its `}`). A line counts as the
# innermost range holding all of its code: line 5 starts inside the if block but ends outside it, so it counts
# as the script (1) in both tests. "5": 2, 3, 5, 6. "-2": 2, 3, 4, 5. unused() never runs: 8 and 9.
JS_EXECUTABLE = {2, 3, 4, 5, 6, 8, 9}


def test_javascript_coverage_from_v8(tester: Tester) -> None:
    tests = [{"stdin": "5\n", "expected_stdout": "pos\n"}, {"stdin": "-2\n", "expected_stdout": "neg\n"}]
    report = tester.run("javascript", JS_SIGN, tests)
    assert report.language == "nodejs" and report.verdict == "AC"
    assert [t.coverage for t in report.tests] == [cov(JS_EXECUTABLE, {2, 3, 5, 6}), cov(JS_EXECUTABLE, {2, 3, 4, 5})]
    assert report.coverage == cov(JS_EXECUTABLE, {2, 3, 4, 5, 6})
    assert report.coverage.uncovered == [8, 9]


def test_a_language_without_coverage_gets_verdicts_only(tester: Tester) -> None:
    tests = [{"stdin": "5\n", "expected_stdout": "10\n"}, {"stdin": "5\n", "expected_stdout": "11\n"}]
    report = tester.run("ruby", "puts gets.to_i * 2\n", tests)
    assert [t.verdict for t in report.tests] == ["AC", "WA"]
    assert report.coverage is None and all(t.coverage is None for t in report.tests)
    assert report.coverage_note is not None and "no line-coverage tool for ruby" in report.coverage_note
    assert "coverage: not measured" in report.table()


def test_a_program_that_does_not_compile(tester: Tester) -> None:
    report = tester.run("c", "int main(void) { return x; }\n", [{"stdin": "", "expected_stdout": ""}] * 2)
    assert [t.verdict for t in report.tests] == ["CE", "CE"] and report.coverage is None
    assert report.compile_error is not None and "x" in report.compile_error


def test_a_crash_leaves_that_test_without_coverage(tester: Tester) -> None:
    code = "import os\n\n\ndef f(x):\n    if x:\n        os._exit(3)\n    return 1\n"
    # os._exit ends the run before the driver writes its data: that test has none, the other one counts. The
    # judge calls an exit status of the program's own a runtime error.
    report = tester.run("python", code, ["assert f(0) == 1", "assert f(1) == 1"])
    assert [t.verdict for t in report.tests] == ["AC", "RE"]
    assert report.tests[1].coverage is None and "no coverage data" in (report.tests[1].coverage_error or "")
    assert report.coverage == cov({1, 4, 5, 6, 7}, {1, 4, 5, 7})
    assert report.coverage_note is not None and report.coverage_note.endswith("1 tests without coverage data")


def test_tests_a_language_cannot_run_are_refused(tester: Tester) -> None:
    with pytest.raises(ValueError, match="stdin tests only"):
        tester.run("c", C_SIGN, ["assert True"])
    with pytest.raises(ValueError, match="unknown language"):
        tester.run("cobol", "", ["assert True"])


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda r: httpx.Response(401, json={"detail": "missing bearer token"}), "answered 401 to /v1/evaluate"),
        (lambda r: httpx.Response(503, headers={"Retry-After": "0"}), "cannot be reached: .*HTTP 503"),
        (lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused", request=r)), "cannot be reached: .*refused"),
    ],
)
def test_a_sandbox_that_fails_is_a_tester_error(
    answer: Callable[[httpx.Request], httpx.Response], message: str
) -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return answer(request)

    tester = Tester(transport=httpx.MockTransport(handler))
    with pytest.raises(tester_module.TesterError, match=message):
        tester.run("python", "print(1)", [{"stdin": "", "expected_stdout": "1\n"}])
    assert len(calls) == (1 if "401" in message else 4)  # the client's retry policy, nothing more
