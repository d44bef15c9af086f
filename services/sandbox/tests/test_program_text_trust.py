"""Which of the program's functions the checker reads from its text: only where nothing in the text can set an
attribute by a name that is data, or rebuild an object from a state of attributes."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from codegym_sandbox.agent import program_bytes
from codegym_sandbox.agent.program_text import Text

BODY = "def f(xs):\n    ys = xs.copy()\n    return sorted(ys)\n"


@pytest.mark.parametrize(
    "extra",
    ["import re\n\nWORD = re.compile('[a-z]+')\n", "d = {}.copy()\n", "class A(object):\n    pass\n"],
)
def test_honest_everyday_forms_leave_the_text_trusted(extra: str) -> None:
    assert Text(BODY + "\n" + extra).function("f") is not None


@pytest.mark.parametrize(
    "extra",
    [
        "import copy\n",
        "from copy import copy as c\n",
        "import dataclasses\n\nx = dataclasses.copy.copy(1)\n",
        "x = compile('1', 'x', 'eval')\n",
        "import pickle\n",
        "import types\n",
        "class S:\n    def __reduce_ex__(self, p):\n        return (int, ())\n",
        "class S:\n    def __setstate__(self, s):\n        pass\n",
        "class D:\n    def __set__(self, o, v):\n        object.__setattr__(o, 'x', v)\n",
        "import timeit\n",
        "from unittest import mock\n",
    ],
)
def test_what_can_set_attributes_by_name_or_rebuild_objects_drops_the_text(extra: str) -> None:
    assert Text(BODY + "\n" + extra).function("f") is None


def test_the_source_lines_are_what_the_interpreter_reads() -> None:
    """Round 58: the lines were the raw text's, the code the declared encoding's: ``sorted`` written in UTF-7
    ran as ``sorted``, and a test that read the source for it found none."""
    import linecache

    hidden = "+AHMAbwByAHQAZQBk-"  # "sorted" in UTF-7
    # Round 59: after a lone \r, a first line to the interpreter, the declaration is on the second line, which
    # ``decode_source`` (lines ended at \n alone) did not see.
    for head in ("", "\r"):
        text = Text(f"{head}# -*- coding: utf-7 -*-\ndef f(xs):\n    return {hidden}(xs)\n")
        assert text.function("f") is not None
        assert "return sorted(xs)" in "".join(linecache.getlines("<program>"))
        assert hidden not in "".join(linecache.getlines("<program>"))  # what the checker's ``inspect`` reads


def test_a_signature_unparse_cannot_print_is_given() -> None:
    """Round 58: a default ``ast.unparse`` could not write (an f-string of a no-break space, 3.11) raised in the
    tests' ``inspect.signature``, and a right program was RE."""
    from codegym_sandbox.agent.program_text import signature

    function = Text("def add(a, b, sep=f\"{'\u00a0'}\"):\n    return a + b\n").function("add")
    assert function is not None
    assert list(signature(function).parameters) == ["a", "b", "sep"]


def test_a_declaration_the_tokenizer_normalises_is_read() -> None:
    """Emacs's ``utf-8-unix`` is UTF-8 to the interpreter (its tokenizer normalises the name): the checker reads
    such a file's source as it reads any other."""
    import linecache

    text = Text("# -*- coding: utf-8-unix -*-\ndef f(xs):\n    return sorted(xs)  # é\n")
    assert text.function("f") is not None
    assert "return sorted(xs)  # é" in "".join(linecache.getlines("<program>"))


# Files whose declared encoding reads differently where lines are ended before decoding (bytes given to ``compile``)
# and after (the interpreter's reader of a file): under ``unicode_escape`` a backslash before a raw \r.
FILES = [
    b"# coding: unicode_escape\ndef f(xs):\n    return sor\\\rted(xs)\n",
    b"# coding: unicode_escape\ndef f(xs):\n    return sor\\\r\nted(xs)\n",
    b"# coding: unicode_escape\n# \\\rdef f(xs):\n    return xs\ndef f(xs):\n    return sorted(xs)\n",
    b"# coding: unicode_escape\ndef f(xs):\n    return \\x73orted(xs)\n",
    b"# coding: raw_unicode_escape\ndef f(xs):\n    return sorted(xs)  # \\\r\n",
    b"# coding: utf-7\r# x\rdef f(xs):\r    return +AHMAbwByAHQAZQBk-(xs)\r",
    b"# coding: latin-1\ndef f(xs):\n    return sorted(xs)  # \xe9\r\n",
    # Round 61: the lines up to the declaration's are read as they are, never through its codec.
    b"# coding: utf-7 +AAo-print('hidden')\ndef f(xs):\n    return sorted(xs)\n",
    b"# +AAo-print('hidden')\n# coding: utf-7\ndef f(xs):\n    return sorted(xs)\n",
    b"# coding: unicode_escape \\nprint('hidden')\ndef f(xs):\n    return sorted(xs)\n",
]


@pytest.mark.parametrize("data", FILES)
def test_a_program_compiles_as_the_interpreter_reads_its_file(tmp_path: Path, data: bytes) -> None:
    """Round 60: bytes given to ``compile`` end their lines before they are decoded, a file's reader after; under
    ``unicode_escape`` the program ran ``sor\\<CR>ted`` as ``sorted`` where ``python3 main.py`` fails to compile it,
    and the checker's source lines showed neither."""
    program = data + b"print(f([2, 1]))\n"
    (tmp_path / "main.py").write_bytes(program)
    ran = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, check=False)
    try:
        with warnings.catch_warnings():  # the interpreter's filters: its codec's DeprecationWarning no error
            warnings.simplefilter("ignore", DeprecationWarning)
            code = program_bytes.compile_program(program, "<program>")
    except SyntaxError:
        assert ran.returncode == 1 and "SyntaxError" in ran.stderr, ran.stderr
        return
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"__name__": "__main__"})
    assert ran.returncode == 0 and out.getvalue() == ran.stdout, ran.stderr
