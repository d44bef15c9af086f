"""How coverage data becomes lines, without a sandbox: the JavaScript scanner and V8's ranges, Python's
executable lines, the union, and the splitting of a Python test file into tests."""

from __future__ import annotations

from codegym_data.tester import LineCoverage
from codegym_data.tester.cli import split_asserts
from codegym_data.tester.python_trace import executable_lines
from codegym_data.tester.v8 import code_spans, line_counts


def test_code_spans_skip_comments_and_lone_brackets() -> None:
    source = 'a = 1; // x\n/* b\n c */ d("/*", `//`);\n  });\n\ne = "\\"" // "\n'
    # line 1: "a = 1;" at 0..5; 2: only a comment; 3: the comment ends, code from "d" (offset 23); 4: only `});`
    spans = code_spans(source)
    assert sorted(spans) == [1, 3, 6]
    assert spans[1] == (0, 5)
    assert source[spans[3][0]] == "d" and source[spans[3][1]] == ";"
    assert source[spans[6][0]] == "e" and source[spans[6][1]] == '"'


def test_code_spans_count_utf16_units() -> None:
    # V8's offsets are UTF-16 code units: the emoji is two of them, so b's offset is one past its index.
    source = 'a = "\U0001f600";\nb;\n'
    assert code_spans(source)[2] == (source.index("b") + 1, source.index("b") + 2)


def test_line_counts_take_the_innermost_range_holding_the_whole_line() -> None:
    source = "if (x) {\n  y();\n} else {\n  z();\n}\n"
    outer, block = (0, len(source), 1), (7, source.index("}") + 1, 0)  # the if block from `{` to `}`, not run
    ranges = [{"startOffset": start, "endOffset": end, "count": count} for start, end, count in (outer, block)]
    scripts = [{"functions": [{"ranges": ranges}]}]
    # 1 starts before the block, 2 lies inside it, 3 ends after it, 4 is in the else (not a range: as its parent)
    assert line_counts(source, scripts) == {1: 1, 2: 0, 3: 1, 4: 1}


def test_python_executable_lines() -> None:
    code = '"""doc"""\nimport os\n\n\ndef f(x):\n    """f doc"""\n    # why\n    return [i\n            for i in x]\n'
    # 1: the module's docstring is stored (__doc__), 2, 5: the def, 8 and 9: the comprehension's two lines;
    # a function's docstring (6) is no bytecode, nor a comment (7).
    assert executable_lines(code) == {1, 2, 5, 8, 9}


def test_union_and_percent() -> None:
    a = LineCoverage(frozenset({1, 2, 3}), frozenset({1}))
    b = LineCoverage(frozenset({1, 2, 3, 4}), frozenset({2}))
    union = LineCoverage.union([a, b])
    assert union == LineCoverage(frozenset({1, 2, 3, 4}), frozenset({1, 2}))
    assert union.percent == 50.0 and union.uncovered == [3, 4]
    assert LineCoverage.union([]) is None
    assert LineCoverage(frozenset(), frozenset()).percent == 100.0


def test_split_asserts() -> None:
    source = (
        "import math\n\nassert math.sqrt(4) == 2\n\ndef near(a, b):\n    return abs(a - b) < 1e-9\n\n"
        "assert near(1, 1)\n"
    )
    assert split_asserts(source) == [
        "import math\nassert math.sqrt(4) == 2\n",
        "import math\ndef near(a, b):\n    return abs(a - b) < 1e-9\nassert near(1, 1)\n",
    ]
    check = "def check(candidate):\n    assert candidate(1) == 2\n\ncheck(inc)\n"
    assert split_asserts(check) == [check]  # no top-level assert: one test
