"""Every language with a runner, end to end: read stdin, print, and keep working under a memory limit; and
programs that fail to compile or to run get CE and RE."""

from __future__ import annotations

from typing import Any

import pytest
from codegym_sandbox import languages
from fastapi.testclient import TestClient

# Each program reads one line, "21", and prints twice its value.
PROGRAMS = {
    "python": "print(2 * int(input()))",
    "c": '#include <stdio.h>\nint main(){int n; scanf("%d",&n); printf("%d\\n", 2*n); return 0;}',
    "cpp": "#include <iostream>\nint main(){int n; std::cin >> n; std::cout << 2*n << std::endl;}",
    "nodejs": "const n = parseInt(require('fs').readFileSync(0, 'utf8')); console.log(2 * n);",
    "bash": "read n; echo $((2 * n))",
    "java": (
        "import java.util.Scanner;\npublic class Main { public static void main(String[] a) {"
        " System.out.println(2 * new Scanner(System.in).nextInt()); } }"
    ),
    "go": 'package main\nimport "fmt"\nfunc main() { var n int; fmt.Scan(&n); fmt.Println(2 * n) }',
    "rust": (
        "use std::io::Read;\nfn main() { let mut s = String::new(); std::io::stdin().read_to_string(&mut s)"
        '.unwrap(); let n: i64 = s.trim().parse().unwrap(); println!("{}", 2 * n); }'
    ),
    "ruby": "puts 2 * gets.to_i",
    "php": '<?php\n$n = (int) trim(fgets(STDIN));\necho 2 * $n, "\\n";\n',
    "perl": 'my $n = <STDIN>; print 2 * $n, "\\n";',
    "lua": "local n = io.read('n')\nprint(2 * n)",
    "R": "n <- as.integer(readLines(file('stdin'), n = 1))\ncat(2 * n, '\\n', sep = '')",
    # SQL reads no stdin: the answer is computed from the 21 in the program.
    "sql": "CREATE TABLE t(n INTEGER);\nINSERT INTO t VALUES (21);\nSELECT 2 * n FROM t;",
    "pytest": "def test_double():\n    assert 2 * 21 == 42\n\n\ndef test_prints():\n    print(42)\n",
    "typescript": (
        "declare const require: any;\nconst n: number = parseInt(require('fs').readFileSync(0, 'utf8'));\n"
        "console.log(2 * n);"
    ),
    # Any object name: the one with a main method runs (upstream's programs call it Problem, or Main).
    "scala": (
        "object Problem {\n  def twice(n: Int): Int = 2 * n\n  def main(args: Array[String]): Unit =\n"
        "    println(twice(scala.io.StdIn.readLine().trim.toInt))\n}\n"
    ),
    "kotlin": "fun main() {\n    val n = readLine()!!.trim().toInt()\n    println(2 * n)\n}\n",
    "kotlin_script": "val n = readLine()!!.trim().toInt()\nprintln(2 * n)\n",
    # MultiPL-E's usings; BigInteger needs System.Numerics, which the compile references.
    "csharp": (
        "using System;\nusing System.Numerics;\nusing System.Diagnostics;\nusing System.Collections.Generic;\n"
        "using System.Linq;\nclass Problem {\n  static void Main(string[] args) {\n"
        "    var n = BigInteger.Parse(Console.ReadLine().Trim());\n    Debug.Assert(n == 21);\n"
        "    Console.WriteLine(new List<BigInteger> { n, n }.Aggregate((a, b) => a + b));\n  }\n}\n"
    ),
    # Its unit tests pass, then main runs.
    "D_ut": (
        "import std.stdio, std.conv, std.string;\nint twice(int n) { return 2 * n; }\n"
        "unittest { assert(twice(2) == 4); }\nvoid main() { writeln(twice(readln().strip().to!int)); }\n"
    ),
    "verilog": (
        'module tb;\n  integer n, r;\n  initial begin\n    r = $fscanf(32\'h8000_0000, "%d", n);\n'
        '    $display("%0d", 2 * n);\n    $finish;\n  end\nendmodule\n'
    ),
    "racket": "#lang racket\n(displayln (* 2 (read)))\n",
}
# Programs that must fail, of the languages whose failures take more than an exit code to get right, with
# their verdicts and what their stdout starts with: a compile error is CE where the language has a compile
# step; a runtime error, a failing assert or unit test is RE, and what the program printed before it is kept,
# with nothing of the runtime's own before it (Mono's log went to stdout).
FAILING = {
    "scala": [
        ('object Main { def main(args: Array[String]): Unit = { val n: Int = "x" } }', "CE", ""),
        (
            'object Main { def main(args: Array[String]): Unit = { println("out"); println(Array(1)(3)) } }',
            "RE",
            "out\n",
        ),
    ],
    "kotlin": [
        ('fun main() { val n: Int = "x" }', "CE", ""),
        ('fun main() { println("out"); println(IntArray(1)[3]) }', "RE", "out\n"),
    ],
    # A script compiles when it runs: its compile errors are runtime errors.
    "kotlin_script": [
        ('val n: Int = "x"\n', "RE", ""),
        ('println("out")\nprintln(IntArray(1)[3])\n', "RE", "out\n"),
    ],
    "csharp": [
        ('class P { static void Main() { int n = "x"; } }', "CE", ""),
        ('class P { static void Main() { System.Console.WriteLine("out"); new int[1][3] = 1; } }', "RE", "out\n"),
        # As under upstream's `dotnet run`: a failing Debug.Assert ends the program (Mono's would go on).
        (
            "using System.Diagnostics;\nclass P { static void Main() {\n"
            '  System.Console.WriteLine("out"); Debug.Assert(1 + 1 == 3); System.Console.WriteLine("after"); } }',
            "RE",
            "out\n",
        ),
    ],
    "D_ut": [
        ('void main() { int x = "s"; }', "CE", ""),
        ('import std.stdio;\nvoid main() { writeln("out"); int[] a = [1]; writeln(a[3]); }', "RE", "out\n"),
        # A failing unit test ends the run before main.
        ('import std.stdio;\nunittest { assert(1 + 1 == 3); }\nvoid main() { writeln("after"); }', "RE", ""),
    ],
    "verilog": [
        ('module tb; initial begin $display("x") end endmodule', "CE", ""),
        ('module top; initial $display("no tb"); endmodule', "CE", ""),  # upstream's top module is tb
        ('module tb; initial begin $display("out"); $fatal(1, "failed"); end endmodule', "RE", "out\n"),
    ],
    "racket": [
        ("#lang racket\n(define (f x)\n", "RE", ""),
        ('#lang racket\n(displayln "out")\n(car \'())\n', "RE", "out\n"),
    ],
}


# Programs that open their standard streams again by path, as a plain run lets them (the JavaScript
# competitive-programming idiom reads '/dev/stdin'): each reads "21" and prints 42 through what it opened.
BY_PATH = {
    "python": "print(2 * int(open('/dev/stdin').read()), file=open('/proc/self/fd/1', 'w'))",
    "nodejs": "const fs = require('fs');\n"
    "fs.writeFileSync('/dev/stdout', 2 * parseInt(fs.readFileSync('/dev/stdin', 'utf8')) + '\\n');",
    "c": '#include <stdio.h>\nint main(void) { FILE *in = fopen("/dev/stdin", "r"), *out = fopen("/dev/stdout", "w");'
    ' int n; if (!in || !out || fscanf(in, "%d", &n) != 1) return 1; fprintf(out, "%d\\n", 2 * n); return 0; }',
    "cpp": '#include <fstream>\nint main() { std::ifstream in("/dev/stdin"); std::ofstream out("/dev/fd/1");'
    " int n; if (!(in >> n)) return 1; out << 2 * n << std::endl; }",
    "bash": "read n < /dev/stdin\necho $((2 * n)) > /dev/stdout\ncat /proc/self/fd/0 >&2",
    "java": "import java.io.*;\npublic class Main { public static void main(String[] a) throws Exception {"
    ' BufferedReader r = new BufferedReader(new FileReader("/dev/stdin"));'
    ' PrintStream o = new PrintStream(new FileOutputStream("/dev/stdout"));'
    " o.println(2 * Integer.parseInt(r.readLine().trim())); o.flush(); } }",
    "ruby": "File.write('/dev/stdout', \"#{2 * File.read('/dev/stdin').to_i}\\n\")",
    "perl": "open(my $in, '<', '/dev/stdin') or die; open(my $out, '>', '/dev/stdout') or die;"
    ' my $n = <$in>; print $out 2 * $n, "\\n";',
}


@pytest.mark.parametrize("language", sorted(BY_PATH))
def test_standard_streams_open_by_path(client: TestClient, language: str) -> None:
    body = execute(client, language, BY_PATH[language])
    missing = missing_toolchain(client, language)
    if missing is not None:
        assert body["verdict"] == "SE" and missing in body["run"]["error"], body
    else:
        assert body["verdict"] == "AC" and body["run"]["stdout"].strip() == "42", body


def test_every_runner_has_a_program() -> None:
    assert set(PROGRAMS) == set(languages.LANGUAGES)


def execute(client: TestClient, language: str, code: str) -> dict[str, Any]:
    """``POST /v1/execute`` of ``code`` on stdin "21"; the body. Runs fail with SE naming the missing toolchain
    where the workers lack it (a container image has its own toolchains, as the server reports them)."""
    # A memory limit must not break runtimes that reserve address space for threads (JVM, node, Go).
    limits = {"memory_mb": 512, "compile_timeout_s": 60}
    req = {"language": language, "code": code, "stdin": "21\n", "limits": limits, "cache": False}
    r = client.post("/v1/execute", json=req)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def missing_toolchain(client: TestClient, language: str) -> str | None:
    """What the workers lack to run ``language`` (the first tool /v1/languages names), or None."""
    listed = {entry["name"]: entry for entry in client.get("/v1/languages").json()}[language]
    if listed["available"]:
        return None
    missing: str = listed["detail"].removeprefix("missing: ").split(", ")[0]
    return missing


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_language_runs_or_says_what_is_missing(client: TestClient, language: str) -> None:
    body = execute(client, language, PROGRAMS[language])
    missing = missing_toolchain(client, language)
    if missing is not None:
        # This worker lacks the toolchain: the answer must say so, never a 500 or a hang.
        assert body["verdict"] == "SE" and missing in body["run"]["error"], body
    elif languages.LANGUAGES[language].unjudged:  # its unit tests ran in its process: shown, never a pass
        assert body["verdict"] == "SE" and "not judged" in body["run"]["error"], body
        assert body["run"]["stdout"].strip() == "42", body
    else:
        assert body["verdict"] == "AC", body
        assert body["run"]["stdout"].strip() == "42", body


@pytest.mark.parametrize(
    ("language", "code", "verdict", "stdout"),
    [(language, *case) for language, cases in FAILING.items() for case in cases],
)
def test_failing_program_gets_its_verdict(
    client: TestClient, language: str, code: str, verdict: str, stdout: str
) -> None:
    body = execute(client, language, code)
    missing = missing_toolchain(client, language)
    if missing is not None:
        assert body["verdict"] == "SE" and missing in body["run"]["error"], body
        return
    assert body["verdict"] == verdict, body
    compiled = languages.LANGUAGES[language].compile is not None
    if verdict == "CE":
        assert compiled and body["run"] is None and body["compile"]["exit_code"] != 0, body
        return
    assert (body["compile"] is not None) == compiled and (not compiled or body["compile"]["verdict"] == "AC")
    run = body["run"]
    assert run["exit_code"] != 0 or run["signal"] is not None, body
    assert run["stdout"].startswith(stdout) and "after" not in run["stdout"], body
