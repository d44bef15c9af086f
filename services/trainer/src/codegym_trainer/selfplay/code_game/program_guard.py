"""What a writer's program may do while it runs, in the code-output game: the second layer under the static check.

``program_check`` reads a program's text, and each round of attacks found a door the text does not show (a
generator's frame holds the builtins; an allowed module's private helper runs text as code; a module reached
through another's attribute). Every door that reaches the machine ends in an act the interpreter itself reports
to an audit hook (PEP 578): opening a file, listing a folder, importing a module, starting a process, reading a
frame, tracing. So each run goes through :data:`GUARD`, which first imports every module a program may import
(and so everything they import), then installs a hook that judges each act by the act alone, whoever does it:

- a file is opened to read only, and only under the standard library's folder (a path with no ``..`` in it);
  a folder is listed only there too;
- a module is imported only where its top-level package is one a program may import: the rest that they need
  is loaded by then. Loaded, the rest leave ``sys.modules`` (but ``KEPT_BY_NAME``, which the allowed modules
  import by name as they run), so that a program that gets hold of ``sys``, or a helper that looks a module up
  by a name it is given, finds no ``posix``, ``os`` or ``builtins`` there, and importing one again is an
  import the hook refuses;
- no frame is handed out (``sys._getframe``, a generator's, coroutine's or traceback's frame), and nothing may
  trace, profile, add a hook, or reach ``gc``, ``os``'s processes, sockets, ``ctypes`` and the like.

The program runs as code the guard ``exec``s, a frame and a call deeper than ``python3 game.py`` would run it, so
the guard raises the recursion limit by what that costs, measured before the program starts: a recursion that
counts how deep it got prints what it prints under ``python3``.

The hook keeps no state (no flag a program could find in a frame and set) and looks at no frame, so code that
claims to be the standard library's gains nothing. Refused, an act raises ``PermissionError`` (``ValueError`` for
``sys._getframe``, which the standard library's callers, a named tuple's, fall back from) in the program: it
ends with an error (and is judged broken), or goes on without what it asked for, the same on both runs.

What no hook reports (the clock, the process id, ``posix.uname``) is left to the two runs' disagreement: the
launcher (``program_runner``) gives them different working directories, environments (nothing but the hash
seed, a home and a name of the run's own) and process ids, so a program that prints them is caught as
nondeterministic. Facts of the machine that are the same on every run and that an allowed module shows
(``hashlib.algorithms_available``) are the game's to learn by both of its roles. Reading an attribute is no act
either (a function's ``__globals__`` is no audited read; ``__code__`` and ``__defaults__`` are, and dataclasses
reads them itself), so the roads to a module by an attribute name the program computes are the check's to close;
``sys.modules`` holding only the allowed modules closes the roads by a module's name.
"""

from __future__ import annotations

from .program_check import ALLOWED_MODULES

# Reported acts that are never a program's, by the event's name or its prefix (``os.`` covers ``os.system``,
# ``os.kill``, ...; ``sys.`` covers ``sys.settrace``, ``sys._current_frames``, ``sys.addaudithook``, ...).
REFUSED_PREFIXES = (
    *("os.", "subprocess.", "socket.", "ctypes.", "sys.", "shutil.", "pty.", "mmap.", "resource.", "signal."),
    *("fcntl.", "gc.", "glob.", "tempfile.", "urllib.", "http.", "sqlite3.", "syslog.", "webbrowser.", "pickle."),
    *(
        "ftplib.",
        "smtplib.",
        "poplib.",
        "imaplib.",
        "nntplib.",
        "telnetlib.",
        "winreg.",
        "_winapi.",
        "_posixsubprocess",
    ),
    *("builtins.input", "builtins.breakpoint"),
)
# What the allowed modules load as a program uses them, which holds only data: a codec (``"x".encode("cp1252")``),
# the names of Unicode's characters (a pattern's ``\\N{...}``).
LOADED_ON_DEMAND = frozenset(
    {
        *("encodings", "unicodedata", "stringprep", "_multibytecodec", "_codecs_iso2022"),
        *("_codecs_jp", "_codecs_kr", "_codecs_cn", "_codecs_tw", "_codecs_hk"),
    }
)
# The modules besides ``allowed`` that stay in ``sys.modules`` once the allowed ones are loaded: those that allowed
# modules and the interpreter import by name as they run (``functools.singledispatch`` imports ``types`` and
# ``weakref``, ``enum`` and ``re`` import ``warnings``, ``copy`` reaches ``copyreg`` from C, a codec ``codecs``).
# The rest (``posix``, ``os``, ``sys``, ``builtins``, ``importlib``, ...) leave it, so that a program that holds
# ``sys`` or a function that looks a module up by a name it is given (``sys.modules[name]``) finds none of them,
# and importing one again is an import the hook refuses.
KEPT_BY_NAME = frozenset({"__main__", "types", "weakref", "warnings", "copyreg", "codecs", "_io"})
# Attributes that hand out a frame (whose locals, globals and builtins lead everywhere).
FRAME_ATTRIBUTES = ("gi_frame", "cr_frame", "ag_frame", "tb_frame", "f_back")
# Reported by the interpreter itself as a program ends, or harmless names of the caller's module.
_ALLOWED_SYS = ("sys.excepthook", "sys.unraisablehook", "sys._getframemodulename")

GUARD = f"""\
def _guard(lost):
    import sys
    for name in {sorted(ALLOWED_MODULES - {"__future__"})!r}:
        __import__(name)  # before the hook: what they import is loaded by then
    file = sys.argv[1]
    with open(file, encoding="utf-8") as f:
        code = compile(f.read(), file, "exec")
    root = sys.modules["codecs"].__file__.rpartition("/")[0] + "/"
    allowed = frozenset({sorted(ALLOWED_MODULES | LOADED_ON_DEMAND)!r})
    kept = allowed | frozenset({sorted(KEPT_BY_NAME)!r})
    for name in [name for name in sys.modules if name.partition(".")[0] not in kept]:
        del sys.modules[name]  # loaded, and reached by name no more: an import of it is an audited act again
    refused, frames, fine = {REFUSED_PREFIXES!r}, frozenset({FRAME_ATTRIBUTES!r}), frozenset({_ALLOWED_SYS!r})
    writes = 0o3103  # Linux's O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND

    def ours(path):  # exact types only: a subclass of str answers startswith as it likes
        return type(path) is str and path.startswith(root) and ".." not in path.split("/")

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            mode, flags = mode if type(mode) is str else "w", flags if type(flags) is int else writes
            if not ours(path) or set(mode) & set("wax+") or flags & writes:
                raise PermissionError(f"the code game: a program reads and writes no file ({{path!r}})")
        elif event in ("os.listdir", "os.scandir"):
            if not ours(args[0]):
                raise PermissionError(f"the code game: a program lists no folder ({{args[0]!r}})")
        elif event == "import":
            if type(args[0]) is not str or args[0].partition(".")[0] not in allowed:
                raise PermissionError(f"the code game: a program imports no {{args[0]}}")
        elif event == "object.__getattr__":
            if type(args[1]) is not str or args[1] in frames:
                raise PermissionError(f"the code game: a program reads no {{args[1]}}")
        elif event == "sys._getframe":
            raise ValueError("the code game: a program reads no frame")
        elif event not in fine and event.startswith(refused):
            raise PermissionError(f"the code game: a program only computes ({{event}} is refused)")

    sys.setrecursionlimit(sys.getrecursionlimit() + lost)
    sys.addaudithook(hook)
    return code, {{"__name__": "__main__", "__file__": file, "__builtins__": __builtins__}}


def _depth(n=0):
    try:
        return _depth(n + 1)
    except RecursionError:
        return n


# python3 would run the program as this frame; it runs as code exec'd from it, which reaches less deep. So the
# limit grows by what that costs, measured here, and a recursion goes as deep as under python3.
_probe = {{"depth": _depth}}
exec("reached = depth()", _probe)
_code, _namespace = _guard(_depth() - _probe["reached"])
del _guard, _depth, _probe
exec(_code, _namespace)
"""
