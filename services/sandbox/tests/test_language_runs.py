"""Every language with a runner, end to end: read stdin, print, and keep working under a memory limit."""

from __future__ import annotations

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
}
# What a program prints when it ran right, where that is not "42" (pytest reports its own counts).
EXPECTED = {"pytest": "2 passed"}


def test_every_runner_has_a_program() -> None:
    assert set(PROGRAMS) == set(languages.LANGUAGES)


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_language_runs_or_says_what_is_missing(client: TestClient, language: str) -> None:
    # A memory limit must not break runtimes that reserve address space for threads (JVM, node, Go).
    limits = {"memory_mb": 512, "compile_timeout_s": 60}
    req = {"language": language, "code": PROGRAMS[language], "stdin": "21\n", "limits": limits}
    r = client.post("/v1/execute", json=req)
    assert r.status_code == 200, r.text
    body = r.json()
    # What the workers have (a container image has its own toolchains), as the server reports it.
    listed = {entry["name"]: entry for entry in client.get("/v1/languages").json()}[language]
    if not listed["available"]:
        # This worker lacks the toolchain: the answer must say so, never a 500 or a hang.
        missing = listed["detail"].removeprefix("missing: ").split(", ")[0]
        assert body["verdict"] == "SE" and missing in body["run"]["error"], body
    else:
        assert body["verdict"] == "AC", body
        if language in EXPECTED:
            assert EXPECTED[language] in body["run"]["stdout"], body
        else:
            assert body["run"]["stdout"].strip() == "42"
