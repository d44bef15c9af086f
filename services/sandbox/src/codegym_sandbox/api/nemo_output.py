"""What NeMo-Skills' sandbox answers for a cell, shaped from codegym's cell result: the IPython look of a cell's
stdout (what it printed, then its value, then its traceback at one of IPython's verbosities), the clean-up
their server applies at ``Plain`` and ``Minimal``, and the cut of each stream.

Written from their wire contract (observed answers of their server), never from their code. Their client reads
only ``process_status`` and ``new_session_created``; models read stdout and stderr, and were trained on these
exact strings, so the strings follow what their server answers: a Plain traceback keeps each frame's source
line and drops the frame's header when the frame is a cell's (``File <ipython-...>`` there, ``<cell N>`` here).
"""

from __future__ import annotations

import re

from ..sessions.wire import CellErrorModel

VERBOSITIES = ("Plain", "Context", "Verbose", "Minimal")
CUT = "<output cut>"
# IPython's answer to a cell that raised SystemExit, at every verbosity.
_SYSTEM_EXIT = "An exception has occurred, use %tb to see the full traceback.\n"
# The value of a cell's last expression, as IPython prints it before any clean-up (their shell's count stays 0).
_OUT_PROMPT = "Out[0]: "

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Each over the whole text at once, in time linear in it (a cell's output may be 8 MiB of lines, and this runs on
# the server's event loop): a line is what lies before a newline, and ``[^\S\n]`` is a space within one (``\s``
# is what ``str.strip`` takes). A prompt at a line's start; a line whose first text is an IPython cell's header,
# with its newline.
_PROMPTS = re.compile(r"^Out\[\d+\]:[^\S\n]*", re.MULTILINE)
_HEADERS = re.compile(r"^[^\S\n]*File <ipython-[^\n]*\n", re.MULTILINE)
_CELL_FRAME = re.compile(r'^  File "<cell \d+>", line \d+, in .*$')
_SYNTAX_AT = re.compile(r'^  File "<cell \d+>", line \d+$')  # where a syntax error is: no function
_FILE_FRAME = re.compile(r'^  File "(.+)", line (\d+), in (.*)$')
_MARKERS = re.compile(r"^\s*[~^]+\s*$")  # Python's underlines of the failing expression, which IPython lacks


def cut(text: str, limit: int, whole: bool = True) -> str:
    """Their server's cut of one stream: past ``limit`` characters, the first ``limit`` and the marker. A stream
    that is not ``whole`` (cut already, at the sandbox's output cap) has the marker too: its callers compare what
    they are given, and the part kept may pass where the whole would not."""
    return text[:limit] + CUT if len(text) > limit or not whole else text


def tidy(text: str) -> str:
    """Their clean-up of a stream at Plain and Minimal: no colours, no cell headers, no ``Out[N]:`` prompts, no
    leading empty lines, no trailing whitespace, and one newline at the end of whatever is left."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "Out[" in text:
        text = _PROMPTS.sub("", text)
    if "File <ipython-" in text:
        # Every line given its newline, the last too, so that a header is taken with its own (rstrip takes it off).
        text = _HEADERS.sub("", text + "\n")
    # From the start of the first line with text: the lines before it are blank (spaces and newlines only).
    first = len(text) - len(text.lstrip())
    left = text[text.rfind("\n", 0, first) + 1 :].rstrip()
    return left + "\n" if left else ""


def traceback_text(error: CellErrorModel, verbosity: str) -> str:
    """A cell's error as IPython writes it to stdout at ``verbosity``."""
    lines = "".join(error.traceback).rstrip("\n").split("\n")
    last = lines[-1] if lines and lines[-1] else error.type
    if error.type == "SystemExit":
        return _SYSTEM_EXIT + last + "\n"
    if verbosity == "Minimal":
        return last + "\n"
    if verbosity != "Plain":
        return "".join(error.traceback)  # Context, Verbose: the whole traceback, untouched
    return "\n".join(_plain(lines)) + "\n"


def _plain(lines: list[str]) -> list[str]:
    at = [i for i, line in enumerate(lines) if _SYNTAX_AT.match(line)]
    if at:
        # A syntax error: the cell never ran, so no frame is its; what is left is the line and the marker.
        rest = lines[at[-1] + 1 :]
        if len(rest) == 2:  # Python marks no column (an unexpected indent): IPython marks the line's first
            rest.insert(1, "    ^")
        return rest
    out: list[str] = []
    for line in lines:
        if _CELL_FRAME.match(line) or _MARKERS.match(line):
            continue
        frame = _FILE_FRAME.match(line)
        out.append(f"  File {frame[1]}:{frame[2]} in {frame[3]}" if frame else line)
    return out


def cell_stdout(printed: str, display: str | None, error: CellErrorModel | None, verbosity: str) -> str:
    """The stdout their server answers for a cell that ran: its prints, its value, its traceback."""
    text = printed
    if display is not None:
        text += _OUT_PROMPT + display + "\n"
    if error is not None:
        text += traceback_text(error, verbosity)
    return tidy(text) if verbosity in ("Plain", "Minimal") else text


def stream(text: str, verbosity: str) -> str:
    """Another stream of a cell (its stderr) as their server answers it."""
    return tidy(text) if verbosity in ("Plain", "Minimal") else text
