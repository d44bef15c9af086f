"""What a writer's program may do while it runs, in the code-output game: the second layer under the static check.

``program_check`` reads a program's text, and three rounds of attacks each found a door the text does not show
(a generator's frame holds the builtins; an allowed module's private helper runs text as code). Every such door
ends in an act the interpreter itself reports through an audit hook (PEP 578): opening a file, compiling or
running text, importing a module, starting a process, reading a frame or a function's code. So each run goes
through :data:`GUARD`, which installs a hook before the program's first line and refuses those acts to the
program's own code. The standard library's own code keeps them where it needs them (a ``dataclass`` compiles
its ``__init__``; an import reads the module's files under the standard library's folder), judged by the
innermost frame when the act is reported: a program cannot make a frame whose code claims a standard library
file without compiling, which is refused to it.

Refused, the act raises ``PermissionError`` in the program: it ends with an error (and is judged broken), or it
goes on without what it asked for, the same on both runs. What no hook reports (the clock, the process id, the
environment, the working directory) is left to the two runs' disagreement: the launcher (``program_runner``)
gives them different working directories, environments and process ids, so a program that prints them is
caught as nondeterministic.

The guard is a ``python -c`` script (standard library only, no site: ``-S -s``) that takes the program's file
as its argument, and keeps nothing the program can reach: the hook is a closure that no name of the program's
namespace leads to, and the program runs in a namespace of its own. It imports nothing (``os`` is not loaded
with ``-S``), so that a program's ``import os`` is an import the hook sees and refuses.
"""

from __future__ import annotations

from .program_check import ALLOWED_MODULES

# Reported acts the program's own code may never do, by the event's name or its prefix (``os.`` covers
# ``os.system``, ``os.listdir``, ``os.kill``, ...; ``sys.`` covers ``sys._getframe``, ``sys.settrace``, ...).
REFUSED_PREFIXES = (
    *("os.", "subprocess.", "socket.", "ctypes.", "sys.", "shutil.", "pty.", "mmap.", "resource.", "signal."),
    *("fcntl.", "gc.", "glob.", "tempfile.", "urllib.", "http.", "sqlite3.", "syslog.", "webbrowser.", "marshal."),
    *("pickle.", "ftplib.", "smtplib.", "poplib.", "imaplib.", "nntplib.", "telnetlib.", "winreg.", "_winapi."),
    *("code.__new__", "function.__new__", "builtins.input", "builtins.breakpoint"),
)
# Acts that the standard library's code does for itself (an import reads its files and runs its code; a
# dataclass or named tuple compiles its methods, takes object ids and reads a function's code): refused to
# the program's code, allowed to the standard library's own, files and folders under its root only.
STDLIB_ONLY = (
    *("open", "exec", "compile", "import", "object.__getattr__", "builtins.id", "sys._getframe"),
    *("os.listdir", "os.scandir", "marshal.loads", "sys._getframemodulename"),
)
# Reported by the interpreter itself as a program ends, not acts of the program.
_ENDING = ("sys.excepthook", "sys.unraisablehook", "cpython._PySys_ClearAuditHooks")

GUARD = f"""\
def _guard():
    import sys
    file = sys.argv[1]
    with open(file, encoding="utf-8") as f:
        code = compile(f.read(), file, "exec")
    root = sys.modules["codecs"].__file__.rpartition("/")[0] + "/"
    allowed = frozenset({sorted(ALLOWED_MODULES)!r})
    refused, stdlib_only, ending = {REFUSED_PREFIXES!r}, frozenset({STDLIB_ONLY!r}), frozenset({_ENDING!r})
    writes = 0o3103  # Linux's O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND
    busy = []

    def ours(name):
        return name.startswith(root) or name.startswith("<frozen ")

    def judge(event, args):
        if event == "exec" and args[0] is code:
            return  # the program itself, run once below
        if event in ending or (event not in stdlib_only and not event.startswith(refused)):
            return
        caller = sys._getframe(2).f_code.co_filename  # the frame the act is reported from
        if event in stdlib_only and ours(caller):
            if event in ("open", "os.listdir", "os.scandir") and not ours(str(args[0] if args else "")):
                raise PermissionError(f"the code game: a program reads no file ({{event}} {{args[0]!r}})")
            if event == "open" and (set(args[1] or "") & set("wax+") or (args[2] or 0) & writes):
                raise PermissionError("the code game: a program writes no file")
            return
        if event == "import" and str(args[0]).partition(".")[0] in allowed:
            return
        raise PermissionError(f"the code game: a program only computes ({{event}} is refused)")

    def hook(event, args):
        if busy:
            return  # an act of the hook's own (its look at the caller's frame)
        busy.append(event)
        try:
            judge(event, args)
        finally:
            busy.pop()

    sys.addaudithook(hook)
    sys.argv[:] = [file]
    exec(code, {{"__name__": "__main__", "__file__": file, "__builtins__": __builtins__}})


_guard()
del _guard
"""
