"""How a program's text becomes the bytes of its file, and back: one rule for every language, route and test kind.

A program's text is UTF-8, and a lone surrogate in it (JSON carries one: ``"\\ud800"``), which no valid UTF-8
holds, is written as ``surrogatepass`` writes it: the program is judged as those bytes (a Python program as
``python3 main.py`` reads its file, :func:`compile_program`: with no encoding declared, bytes that are not UTF-8
anywhere, a comment too, are its compile error; a C++ compiler may take them), like any other program, and never
takes a verdict away from the other programs of its request. Inputs that are the task's (tests, stdin, expected
output) keep their own rule: a lone surrogate there is the request's error.
"""

from __future__ import annotations

import codecs
import io
import re
import types


def encode(text: str) -> bytes:
    """The bytes of the program's text ``text``: its file, the compiler's and the interpreter's input. Python
    compiles these bytes, never the text, so that an encoding cookie and a leading byte-order mark mean what they
    mean to ``python main.py`` (a text is compiled as it is, cookie and mark ignored)."""
    return text.encode("utf-8", "surrogatepass")


def decode(data: bytes) -> str:
    """The program's text that :func:`encode` wrote as ``data``."""
    return data.decode("utf-8", "surrogatepass")


def compile_program(program: str | bytes, filename: str) -> types.CodeType:
    """The program (its text, or the bytes of its file) compiled as ``python main.py`` compiles its file: a source
    with neither a coding cookie nor a byte-order mark must be valid UTF-8, comments too, and where it is not, the
    SyntaxError is the interpreter's (``compile`` of bytes finds it only where it decodes them: in a string, a
    name). The caller's warnings filters hold."""
    data = encode(program) if isinstance(program, str) else program
    found = None if data.startswith(_MARK) else _declared(data)
    if found is not None and _codec(found) != "utf-8":
        # Compiled as its text, read as the interpreter reads a file: bytes compiled end their lines before they
        # are decoded, a file's reader after, and under ``unicode_escape`` a backslash before a raw ``\r`` joined
        # ``sor\<CR>ted`` into ``sorted`` in the one, a syntax error in the other (round 60).
        try:
            text = decoded(data)
        except LookupError:
            raise SyntaxError(f"unknown encoding: {found.group(1).decode('ascii')}") from None
        except (UnicodeError, Warning):  # a warning of the codec's that the caller's filters make an error
            raise SyntaxError(f"encoding problem: {_codec(found)}") from None
        if "\0" in text:
            raise SyntaxError("source code cannot contain null bytes")
        return compile(text, filename, "exec", dont_inherit=True)
    if not data.isascii():
        _check_utf8(data, filename)
    return compile(data, filename, "exec", dont_inherit=True)  # not the caller's __future__ flags


# An encoding declaration on a comment-only line (the second line's only after a blank or comment-only first),
# found in the raw bytes, as the interpreter's tokenizer finds it (``tokenize.detect_encoding`` decodes first).
_COOKIE = re.compile(rb"[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
_BLANK = re.compile(rb"[ \t\f]*(?:[#\r\n]|$)", re.ASCII)
_NEWLINE = re.compile(rb"\r\n|\r|\n")
_MARK = codecs.BOM_UTF8


def read_as(text: str) -> str | None:
    """``text`` as ``python main.py`` reads the file :func:`encode` writes of it: ``text``, a leading byte-order
    mark taken off; None where the file declares an encoding other than UTF-8, whose bytes it reads as other
    characters than ``text``'s (``# coding: utf-7``), or one it does not know. What the server reads of a program's
    text (a ``pytest`` file split into its program and its tests) is this, never the text as it came: a file
    whose text did not parse, for its mark, compiled all the same, and ran with no test."""
    text = text.removeprefix("\ufeff")
    found = _declared(encode(text))
    try:
        return text if found is None or codecs.lookup(_codec(found)).name == "utf-8" else None
    except LookupError:
        return None


def decoded(data: bytes) -> str:
    """The text the interpreter reads from the file ``data``, and the text :func:`compile_program` compiles of it: in
    the encoding its first lines declare, as :func:`_declared` finds it (its lines ended as the tokenizer ends them:
    ``\\r`` too, where ``tokenize.detect_encoding`` ends them at ``\\n`` alone and missed a declaration after a lone
    ``\\r``: round 59), decoded before its lines are ended, as a file's reader does, a byte-order mark taken off;
    ``surrogatepass`` UTF-8 where it declares none. Raises ``LookupError`` or ``UnicodeDecodeError`` where the
    interpreter would not compile it."""
    data = data.removeprefix(_MARK)
    found = _declared(data)
    if found is None:
        return data.decode("utf-8", "surrogatepass")
    # As the interpreter's reader of a file: the lines up to the declaration's as they were read to find it (its
    # tokenizer keeps them; decoded, ``# coding: utf-7 +AAo-print(1)`` ran a line python3 never does: round 61), the
    # rest decoded, then its lines ended (``\r`` and ``\r\n`` read as ``\n``).
    head = _line_end(data, found.start())
    read = _NEWLINE.sub(b"\n", data[:head]).decode("utf-8")
    rest = io.TextIOWrapper(io.BytesIO(data[head:]), encoding=_codec(found), errors="strict", newline=None)
    return read + rest.read()


def _codec(declared: re.Match[bytes]) -> str:
    """The codec of an encoding declaration, its name as the tokenizer normalises it (``get_normal_name``: a name
    that begins ``utf-8-``, Emacs's ``utf-8-unix`` say, is UTF-8, one that begins ``latin-1-`` is Latin-1)."""
    name = declared.group(1).decode("ascii").lower().replace("_", "-")
    if name == "utf-8" or name.startswith("utf-8-"):
        return "utf-8"
    if name in ("latin-1", "iso-8859-1", "iso-latin-1") or name.startswith(("latin-1-", "iso-8859-1-", "iso-latin-1-")):
        return "iso-8859-1"
    return name


def _check_utf8(data: bytes, filename: str) -> None:
    """Raise the interpreter's SyntaxError where ``data``, read as a file with no encoding declared, is not UTF-8:
    each line up to a NUL byte (the tokenizer's own error, from there on), the first bad byte's line named."""
    if data.startswith(_MARK):
        return  # UTF-8 declared by its mark: bytes compile decodes where they matter, as the file's reader does
    if _declared(data):
        return  # a declared encoding: compile decodes the whole source with it, strictly, as the file's reader
    end = data.find(b"\0")
    try:
        data[: end if end >= 0 else len(data)].decode("utf-8")
    except UnicodeDecodeError as error:
        line = len(_NEWLINE.findall(data, 0, error.start)) + 1
        raise SyntaxError(
            f"Non-UTF-8 code starting with '\\x{data[error.start]:02x}' in file {filename} on line {line}, "
            "but no encoding declared; see https://peps.python.org/pep-0263/ for details"
        ) from None


def _declared(data: bytes) -> re.Match[bytes] | None:
    """The encoding declaration of the file ``data``, its name the match's group: on its first line, or on its
    second after a blank or comment-only first, as the interpreter's tokenizer finds it."""
    first = _line_end(data, 0)
    if found := _COOKIE.match(data, 0, first):
        return found
    return _COOKIE.match(data, first, _line_end(data, first)) if _BLANK.match(data, 0, first) else None


def _line_end(data: bytes, start: int) -> int:
    """Where the line of ``data`` that starts at ``start`` ends, its newline (``\\n``, ``\\r\\n`` or ``\\r``) in it."""
    found = _NEWLINE.search(data, start)
    return found.end() if found else len(data)
