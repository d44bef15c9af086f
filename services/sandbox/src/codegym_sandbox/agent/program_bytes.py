"""How a program's text becomes the bytes of its file, and back: one rule for every language, route and test kind.

A program's text is UTF-8, and a lone surrogate in it (JSON carries one: ``"\\ud800"``), which no valid UTF-8
holds, is written as ``surrogatepass`` writes it: the program is judged as those bytes (Python's compile rejects
them where it decodes them, as a compile error; a C++ compiler may take them), like any other program, and never
takes a verdict away from the other programs of its request. Inputs that are the task's (tests, stdin, expected
output) keep their own rule: a lone surrogate there is the request's error.
"""

from __future__ import annotations


def encode(text: str) -> bytes:
    """The bytes of the program's text ``text``: its file, the compiler's and the interpreter's input. Python
    compiles these bytes, never the text, so that an encoding cookie and a leading byte-order mark mean what they
    mean to ``python main.py`` (a text is compiled as it is, cookie and mark ignored)."""
    return text.encode("utf-8", "surrogatepass")


def decode(data: bytes) -> str:
    """The program's text that :func:`encode` wrote as ``data``."""
    return data.decode("utf-8", "surrogatepass")
