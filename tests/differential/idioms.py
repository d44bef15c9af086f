"""The I/O idioms honest programs are made of, per language: ways to read the integers of the input and ways to
write the answer, for the generative layer's sum task (``generative.py``: the sum of the integers on stdin).

A reader leaves the integers in ``xs`` (bash: the array ``xs``; C/C++: ``n`` values in ``long xs[]``); a
writer writes the answer ``s`` (a string; C/C++ a ``char s[]``) and a newline, or no newline where it says so.
A Node reader calls ``solve(text)`` with the whole input once it has it. Each idiom works under a plain
``python3 main.py`` / ``node main.js`` / ``./main`` / ``bash main.sh``, and must work as well in every route.
"""

from __future__ import annotations

PY_READERS = {
    "input": "xs = list(map(int, input().split()))",
    "readline": "xs = [int(t) for t in sys.stdin.readline().split()]",
    "read_all": "xs = [int(t) for t in sys.stdin.read().split()]",
    "buffer": "xs = [int(t) for t in sys.stdin.buffer.read().split()]",
    "open_0": "xs = [int(t) for t in open(0).read().split()]",
    "dev_stdin": "xs = [int(t) for t in open('/dev/stdin').read().split()]",
    "proc_fd_0": "xs = [int(t) for t in open('/proc/self/fd/0').read().split()]",
    "os_read": "data = b''\nwhile chunk := os.read(0, 1 << 16):\n    data += chunk\n"
    "xs = [int(t) for t in data.split()]",
    "for_line": "xs = [int(t) for line in sys.stdin for t in line.split()]",
    "fileinput": "import fileinput\n\nxs = [int(t) for line in fileinput.input() for t in line.split()]",
}
PY_WRITERS = {
    "print": "print(s)",
    "write": "sys.stdout.write(s + '\\n')",
    "flush": "print(s, flush=True)",
    "buffer": "sys.stdout.buffer.write((s + '\\n').encode())",
    "os_write": "sys.stdout.flush()\nos.write(1, (s + '\\n').encode())",
    "dev_stdout": "with open('/dev/stdout', 'w') as out:\n    out.write(s + '\\n')",
    "proc_fd_1": "with open('/proc/self/fd/1', 'w') as out:\n    out.write(s + '\\n')",
    "no_newline": "sys.stdout.write(s)",
    "stderr_too": "print('debug:', s, file=sys.stderr)\nprint(s)",
    "dev_stderr_too": "with open('/dev/stderr', 'w') as err:\n    err.write('debug\\n')\nprint(s)",
}

JS_READERS = {
    "fd_0": "solve(fs.readFileSync(0, 'utf8'));",
    "dev_stdin": "solve(fs.readFileSync('/dev/stdin', 'utf8'));",
    "proc_fd_0": "solve(fs.readFileSync('/proc/self/fd/0', 'utf8'));",
    "readline": "const lines = [];\nrequire('readline').createInterface({ input: process.stdin })\n"
    "  .on('line', (l) => lines.push(l)).on('close', () => solve(lines.join('\\n')));",
    "events": "let text = '';\nprocess.stdin.setEncoding('utf8');\nprocess.stdin.on('data', (c) => (text += c));\n"
    "process.stdin.on('end', () => solve(text));",
}
JS_WRITERS = {
    "console_log": "console.log(s);",
    "stdout_write": "process.stdout.write(s + '\\n');",
    "write_sync": "fs.writeSync(1, s + '\\n');",
    "dev_stdout": "fs.writeFileSync('/dev/stdout', s + '\\n');",
    "stderr_too": "console.error('debug', s);\nconsole.log(s);",
    "no_newline": "process.stdout.write(s);",
}

C_READERS = {
    "scanf": 'while (n < 4096 && scanf("%ld", &xs[n]) == 1) n++;',
    "fgets": "char line[1 << 16];\nwhile (fgets(line, sizeof line, stdin)) {\n    char *p = line, *end;\n"
    "    for (long v = strtol(p, &end, 10); p != end; v = strtol(p, &end, 10)) { xs[n++] = v; p = end; }\n}",
    "read_0": "static char buf[1 << 16];\nlong got = 0, k;\n"
    "while ((k = read(0, buf + got, sizeof buf - 1 - got)) > 0) got += k;\n"
    "buf[got] = 0;\nchar *p = buf, *end;\n"
    "for (long v = strtol(p, &end, 10); p != end; v = strtol(p, &end, 10)) { xs[n++] = v; p = end; }",
    "dev_stdin": 'FILE *in = fopen("/dev/stdin", "r");\nwhile (in && fscanf(in, "%ld", &xs[n]) == 1) n++;',
}
C_WRITERS = {
    "printf": 'printf("%s\\n", s);',
    "puts": "puts(s);",
    "write_1": 'fflush(stdout);\nwrite(1, s, strlen(s));\nwrite(1, "\\n", 1);',
    "dev_stdout": 'FILE *out = fopen("/dev/stdout", "w");\nfprintf(out, "%s\\n", s);\nfclose(out);',
    "stderr_too": 'fprintf(stderr, "debug %s\\n", s);\nprintf("%s\\n", s);',
}
CPP_READERS = {
    "cin": "for (long v; n < 4096 && std::cin >> v;) xs[n++] = v;",
    "fast_cin": "std::ios::sync_with_stdio(false);\nstd::cin.tie(nullptr);\n"
    "for (long v; n < 4096 && std::cin >> v;) xs[n++] = v;",
    "getline": "std::string line;\nwhile (std::getline(std::cin, line)) {\n    std::istringstream words(line);\n"
    "    for (long v; words >> v;) xs[n++] = v;\n}",
    "scanf": 'while (n < 4096 && scanf("%ld", &xs[n]) == 1) n++;',
    "ifstream": 'std::ifstream in("/dev/stdin");\nfor (long v; in >> v;) xs[n++] = v;',
}
CPP_WRITERS = {
    "endl": "std::cout << s << std::endl;",
    "newline": "std::cout << s << '\\n';",
    "printf": 'printf("%s\\n", s);',
    "ofstream": 'std::ofstream out("/dev/stdout");\nout << s << "\\n";',
    "cerr_too": 'std::cerr << "debug " << s << std::endl;\nstd::cout << s << "\\n";',
}

SH_READERS = {
    "read_a": "read -r -a xs",
    "cat": "xs=($(cat))",
    "dev_stdin": "xs=($(< /dev/stdin))",
    "mapfile": "mapfile -t lines\nxs=(${lines[*]})",
    "while_read": "xs=()\nwhile read -r line; do xs+=($line); done",
}
SH_WRITERS = {
    "echo": 'echo "$s"',
    "printf": "printf '%s\\n' \"$s\"",
    "dev_stdout": 'echo "$s" > /dev/stdout',
    "fd_1": 'echo "$s" >&1',
    "stderr_too": 'echo "debug $s" >&2\necho "$s"',
}

READERS = {"python": PY_READERS, "nodejs": JS_READERS, "c": C_READERS, "cpp": CPP_READERS, "bash": SH_READERS}
WRITERS = {"python": PY_WRITERS, "nodejs": JS_WRITERS, "c": C_WRITERS, "cpp": CPP_WRITERS, "bash": SH_WRITERS}


def _indent(code: str, by: str = "    ") -> str:
    return "".join(f"{by}{line}\n" if line else "\n" for line in code.splitlines())


def stdin_program(language: str, reader: str, writer: str, off: int) -> str:
    """A program that prints the sum of the integers on its input, plus ``off`` (0: the right answer)."""
    read, write = READERS[language][reader], WRITERS[language][writer]
    if language == "python":
        return f"import os\nimport sys\n\n{read}\ns = str(sum(xs) + {off})\n{write}\n"
    if language == "nodejs":
        body = "const xs = text.split(/\\s+/).filter(Boolean).map(Number);\n"
        body += f"const s = String(xs.reduce((a, b) => a + b, 0) + {off});\n{write}"
        return f"const fs = require('fs');\n\nfunction solve(text) {{\n{_indent(body, '  ')}}}\n\n{read}\n"
    if language == "bash":
        return f'{read}\nt=0\nfor x in "${{xs[@]}}"; do t=$((t + x)); done\ns=$((t + {off}))\n{write}\n'
    head = (
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n"
        if language == "c"
        else "#include <cstdio>\n#include <fstream>\n#include <iostream>\n#include <sstream>\n#include <string>\n"
    )
    body = f"static long xs[1 << 16];\nlong n = 0;\n{read}\nlong t = {off};\nfor (long i = 0; i < n; i++) t += xs[i];\n"
    body += f'char s[32];\nsnprintf(s, sizeof s, "%ld", t);\n{write}\nreturn 0;'
    return f"{head}\nint main(void) {{\n{_indent(body)}}}\n"


# How a Python function task's answer is written (it may print, log, or hold a demo), for the call and assert
# forms: ``{entry}`` is the function's name; the answer is the sum of ``xs`` plus ``{off}``.
FUNCTION_IDIOMS = {
    "plain": "def {entry}(xs):\n    return sum(xs) + {off}\n",
    "loop": "def {entry}(xs):\n    t = {off}\n    for x in xs:\n        t += x\n    return t\n",
    "lambda": "{entry} = lambda xs: sum(xs) + {off}\n",
    "reduce": "from functools import reduce\n\n\ndef {entry}(xs):\n    return reduce(lambda a, b: a + b, xs, {off})\n",
    "recursion": "def {entry}(xs):\n    return {off} + (xs[0] + {entry}(xs[1:]) - {off} if xs else 0)\n",
    "prints": "def {entry}(xs):\n    print('summing', xs)\n    return sum(xs) + {off}\n",
    "logs": "import sys\n\n\ndef {entry}(xs):\n    print('debug', xs, file=sys.stderr)\n    return sum(xs) + {off}\n",
    "demo": "def {entry}(xs):\n    return sum(xs) + {off}\n\n\nprint({entry}([1, 2, 3]))\n",
    "main_input": "def {entry}(xs):\n    return sum(xs) + {off}\n\n\nif __name__ == '__main__':\n"
    "    print({entry}(list(map(int, input().split()))))\n",
    "numpy": "import numpy as np\n\n\ndef {entry}(xs):\n    return np.int64(sum(xs) + {off})\n",
}
