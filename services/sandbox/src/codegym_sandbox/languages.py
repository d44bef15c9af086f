"""The languages a server can run: how each is compiled and started, and whether its toolchain is here.

Every value of SandboxFusion's ``language`` enum is accepted on the wire; a language without a runner
here (or whose toolchain is missing on this host) answers a SandboxError naming what is missing.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from . import csharp
from .agent.protocol import MAX_HEADER

# SandboxFusion's Language enum, exactly (section 2 of its API reference).
FUSION_LANGUAGES = (
    "python",
    "cpp",
    "nodejs",
    "go",
    "go_test",
    "java",
    "php",
    "csharp",
    "bash",
    "typescript",
    "sql",
    "rust",
    "cuda",
    "lua",
    "R",
    "perl",
    "D_ut",
    "ruby",
    "scala",
    "julia",
    "pytest",
    "junit",
    "kotlin_script",
    "jest",
    "verilog",
    "python_gpu",
    "lean",
    "swift",
    "racket",
)

# Why each of SandboxFusion's languages that has no runner here has none (GET /v1/languages says so).
WITHOUT_RUNNER = {
    "julia": "Debian bookworm packages no Julia",
    "swift": "Debian bookworm packages no Swift compiler (its `swift` is OpenStack's object store)",
    "lean": "Debian bookworm packages no Lean 4, and upstream's runs need a prebuilt Mathlib project",
    "cuda": "needs a GPU and the CUDA toolkit, which Debian bookworm's main archive does not package",
    "python_gpu": "needs a GPU and upstream's GPU Python environment",
    "go_test": "not written yet (`go test` on a test file; the toolchain is golang-go)",
    "junit": "not written yet (the JUnit 5 console launcher; Debian packages junit5)",
    "jest": "not written yet (a TypeScript test file under jest; Debian packages jest)",
}
RUN_PATH = "/usr/local/bin:/usr/bin:/bin"
# How JVM programs run (Java's flags, through a launcher's -J): the heap carries the memory limit, a deep
# stack for recursion, one GC thread and the quick JIT tier (short runs).
_JVM = ("-Xmx{mem}m", "-Xss64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_JVM_RUN = tuple(f"-J{flag}" for flag in _JVM)
# scalac and kotlinc on a JVM: the quick JIT tier halves a small program's compile (scalac 4.3 s -> 2.2 s,
# kotlinc 3.7 s -> 2.2 s on one CPU), well inside the default 10 s compile limit.
_JVM_COMPILE = ("-J-Xmx512m", "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1")
# Debian's kotlinc starts its JVM with -noverify, which JDK 13 and later warn about on every start (on the
# program's stderr, for a script): VM warnings off.
_KOTLINC = ("-J-XX:-PrintWarnings",)


@dataclass(frozen=True)
class Language:
    """How to build and run one language. ``{mem}`` in an argv is the memory limit in MiB."""

    name: str
    source: str
    run: tuple[str, ...]
    compile: tuple[str, ...] | None = None
    artifacts: tuple[str, ...] = ()
    in_process_python: bool = False
    # Runtimes that reserve far more address space than they use (JVM, V8) cannot live under
    # RLIMIT_AS; their own heap flag carries the memory limit instead.
    address_space_limit: bool = True
    env: dict[str, str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    # Files the toolchain needs beside the program (name: text), written for its compile and every run.
    support: dict[str, str] = field(default_factory=dict)
    # A file of a program and its tests, judged by the assert runner (``pytest_file``), never by its exit status.
    test_file: bool = False
    # Why a run of one program that exits 0 is no pass (its tests ran in its own process): that run is SE, not judged.
    unjudged: str | None = None

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(argv[0] for argv in (self.compile, self.run) if argv and not argv[0].startswith("./"))


SYSTEM_BIN = "/usr/bin"


# What the agent and most programs import beyond a distribution's minimal interpreter package: Debian's
# python3.X-minimal gives /usr/bin/python3.X without json, ctypes or decimal (libpython3.X-stdlib has them).
WHOLE_STDLIB = "import ctypes, decimal, json, select, socket"


def system_python(bindir: str = SYSTEM_BIN) -> str | None:
    """The distribution's interpreter of this server's Python version (``/usr/bin/python3.X``), or None.

    Only for the default build of CPython (no ABI flags: not a debug or free-threaded one), whose runtime
    packages (built for 3.X) it can import, and only with its whole standard library installed.
    """
    if sys.implementation.name != "cpython" or sys.abiflags:
        return None
    path = os.path.join(bindir, f"python{sys.version_info[0]}.{sys.version_info[1]}")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None
    path = os.path.realpath(path)
    return path if _whole(path) else None


@functools.cache
def _whole(python: str) -> bool:
    """Whether ``python`` starts and has its whole standard library (asked once per interpreter)."""
    try:
        done = subprocess.run([python, "-I", "-S", "-c", WHOLE_STDLIB], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def installation_python() -> str:
    """The installation this server runs on (its virtual environment's ``python`` leads to it)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def base_python(bindir: str = SYSTEM_BIN) -> str:
    """The interpreter Python runs use by default: the distribution's ``python3.X`` where the server runs on
    Python 3.X too, else the installation the server's virtual environment was made from. Programs get its
    standard library and the runtime packages, never the server's environment.

    The distribution's build is the one the runtime image runs programs on (and the server image's venv is
    made from), so on such a host a program sees the same interpreter on every backend. It is also the quicker
    one where the server's Python is a source build: Debian's (optimised with profiles, libpython linked in)
    runs a loop of Python code in half the time of pyenv's default build (a shared libpython, no profile) and
    starts about 10% quicker (`bench/evaluator_bench.py` says which interpreter each harness used).
    """
    return system_python(bindir) or installation_python()


D_UNJUDGED = (
    "not judged: D's unit tests run in the program's own process, which may end with status 0 before they ran or "
    "after they failed (a module constructor that exits, its own Runtime.moduleUnitTester), so no exit status of a "
    "D_ut run is a pass; a failed run is still Failed (its output is above)"
)

LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language("python", "main.py", ("python3", "main.py"), in_process_python=True, aliases=("py", "python3")),
        Language("c", "main.c", ("./main",), ("gcc", "-O2", "-std=gnu11", "main.c", "-o", "main", "-lm"), ("main",)),
        Language(
            "cpp",
            "main.cpp",
            ("./main",),
            ("g++", "-O2", "-std=gnu++17", "main.cpp", "-o", "main"),
            ("main",),
            aliases=("c++",),
        ),
        Language(
            "nodejs",
            "main.js",
            ("node", "--max-old-space-size={mem}", "main.js"),
            address_space_limit=False,
            aliases=("javascript", "js", "node"),
        ),
        Language("bash", "main.sh", ("bash", "main.sh"), aliases=("sh",)),
        Language(
            "java",
            "Main.java",
            ("java", *_JVM, "-cp", ".", "Main"),
            ("javac", "-J-Xmx512m", "-encoding", "UTF-8", "Main.java"),
            ("*.class",),
            address_space_limit=False,
        ),
        Language(
            "go",
            "main.go",
            ("./main",),
            ("go", "build", "-o", "main", "main.go"),
            ("main",),
            env={"GOCACHE": "/tmp/box/.gocache", "GOPATH": "/tmp/box/.go", "CGO_ENABLED": "0"},
            address_space_limit=False,
        ),
        Language(
            "rust", "main.rs", ("./main",), ("rustc", "-O", "--edition", "2021", "main.rs", "-o", "main"), ("main",)
        ),
        Language("ruby", "main.rb", ("ruby", "main.rb"), aliases=("rb",)),
        Language("php", "main.php", ("php", "-n", "main.php")),
        Language("perl", "main.pl", ("perl", "main.pl"), aliases=("pl",)),
        Language("lua", "main.lua", ("lua", "main.lua")),
        Language("R", "main.R", ("Rscript", "--vanilla", "main.R"), aliases=("r",)),
        # SQL runs in SQLite on an in-memory database: the program's statements, their rows on stdout.
        Language("sql", "main.sql", ("sqlite3", "-batch", "-bail", ":memory:", ".read main.sql"), aliases=("sqlite",)),
        # A test module: its program and its tests, run apart by the assert runner (see pytest_file.py).
        Language("pytest", "main.py", ("python3", "main.py"), in_process_python=True, test_file=True),
        Language(
            "typescript",
            "main.ts",
            ("node", "--max-old-space-size={mem}", "main.js"),
            ("tsc", "--target", "es2020", "--module", "commonjs", "--skipLibCheck", "main.ts"),
            ("main.js",),
            address_space_limit=False,
            aliases=("ts",),
        ),
        # The JVM languages take the Java runner's flags. scalac writes a jar whose manifest names the one
        # object with a main method (the program may call it anything, as upstream's `object X` does);
        # `scala` runs it with the Scala library.
        Language(
            "scala",
            "main.scala",
            ("scala", *_JVM_RUN, "main.jar"),
            ("scalac", *_JVM_COMPILE, "-encoding", "UTF-8", "-d", "main.jar", "main.scala"),
            ("main.jar",),
            address_space_limit=False,
        ),
        # A top-level `fun main` (the class MainKt); `kotlin` puts the Kotlin library on the class path.
        Language(
            "kotlin",
            "main.kt",
            ("kotlin", *_JVM_RUN, "-cp", "main.jar", "MainKt"),
            ("kotlinc", *_KOTLINC, *_JVM_COMPILE, "main.kt", "-d", "main.jar"),
            ("main.jar",),
            address_space_limit=False,
            aliases=("kt",),
        ),
        # Upstream's name: a script, compiled and run by one kotlinc at run time (about 2 s of JVM start-up
        # and compilation that count against the run's limits).
        Language(
            "kotlin_script",
            "main.kts",
            ("kotlinc", *_KOTLINC, *_JVM_RUN, "-script", "main.kts"),
            address_space_limit=False,
            aliases=("kts",),
        ),
        # Mono (C# 7): DEBUG and TRACE are defined, as in upstream's Debug build, and a failing assert ends the
        # run (see csharp.py). Mono's log is dropped: it goes to stdout by default, where every thread Mono
        # starts would add a warning (the seccomp filter refuses a thread's scheduling by its id), and the run's
        # stderr cannot be opened again by path (the agent's pipe). A fatal error still ends the run (SIGABRT).
        Language(
            "csharp",
            "main.cs",
            ("mono", "main.exe"),
            (
                "mcs",
                "-optimize+",
                "-define:DEBUG;TRACE",
                "-r:System.Numerics",
                "-out:main.exe",
                "main.cs",
                csharp.LISTENER_SOURCE,
            ),
            ("main.exe",),
            env={"MONO_LOG_DEST": "/dev/null", "MONO_DEBUG": "no-gdb-backtrace"},
            aliases=("cs", "c#"),
            support=csharp.SUPPORT,
        ),
        # D with its unit tests (upstream's dmd -unittest, here GDC): they run first, and a failing one ends the
        # run; then main runs too (druntime's default after unit tests would be to skip it). druntime takes the
        # --DRT- argument out of the program's arguments. Its unit tests run in the program's process, which can end
        # with status 0 before them or set druntime's unit tester: a run that exits 0 is shown, never a pass.
        Language(
            "D_ut",
            "main.d",
            ("./main", "--DRT-testmode=run-main"),
            ("gdc", "-O2", "-funittest", "main.d", "-o", "main"),
            ("main",),
            aliases=("d",),
            unjudged=D_UNJUDGED,
        ),
        # Upstream's flags: SystemVerilog 2012, the top module is `tb`.
        Language(
            "verilog",
            "main.sv",
            ("vvp", "-n", "main.vvp"),
            ("iverilog", "-Wall", "-Winfloop", "-Wno-timescale", "-g2012", "-s", "tb", "-o", "main.vvp", "main.sv"),
            ("main.vvp",),
            aliases=("systemverilog", "sv"),
        ),
        Language("racket", "main.rkt", ("racket", "main.rkt"), aliases=("rkt",)),
    )
}


def lookup(name: str) -> Language | None:
    if name in LANGUAGES:
        return LANGUAGES[name]
    for lang in LANGUAGES.values():
        if name in lang.aliases:
            return lang
    return None


def written_names(name: str) -> tuple[str, ...]:
    """The names the sandbox writes beside a request's files for language ``name`` (none where it has none)."""
    lang = lookup(name)
    return () if lang is None else (lang.source, *lang.support)


def metric_label(name: str) -> str:
    """The ``language`` label of ``name`` in the metrics: a language this server knows, or ``unknown``. A
    client's own name never becomes a label: each would be a Prometheus series for as long as the server runs."""
    lang = lookup(name)
    if lang is not None:
        return lang.name
    return name if name in WITHOUT_RUNNER or name in FUSION_LANGUAGES else "unknown"


def resolve_tool(tool: str) -> str | None:
    """Absolute path of a tool as runs will find it, or None when it is not installed."""
    if tool == "python3":
        return base_python()
    path = os.pathsep.join([RUN_PATH, os.environ.get("PATH", "")])
    return shutil.which(tool, path=path)


def toolchain_env(lang: Language) -> dict[str, str]:
    """Environment a language's tools need beyond PATH (rustup's proxies want their homes)."""
    env = dict(lang.env)
    if lang.name == "rust":
        for var in ("RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"):
            if os.environ.get(var):
                env[var] = os.environ[var]
        home = os.path.expanduser("~")
        env.setdefault("RUSTUP_HOME", os.path.join(home, ".rustup"))
        env.setdefault("CARGO_HOME", os.path.join(home, ".cargo"))
    return env


def unrunnable(
    lang: Language, collected: dict[str, tuple[bytes, int]], given: dict[str, tuple[bytes, int]]
) -> str | None:
    """Why a compile's ``collected`` files (name: contents, mode) give its runs nothing to execute, or None.

    Runs get ``given`` (the program's source and the request's files, which its compile got) and the
    collected files, every name listed in the one frame header that starts a run: a compile whose files
    take the list past what the header holds (Java's thousands of classes with long names) made nothing a
    run can start. The file itself is checked only for a language whose runs execute it (``./main``);
    elsewhere a tool runs the artifacts (``java``, ``mono``) and says itself what is wrong with them.
    """
    if _listed({**given, **collected}) > RUN_FILES_LISTED >= _listed(given):
        return f"the compiler made {len(collected)} files, more than a run can be given"
    if not lang.run[0].startswith("./"):
        return None
    name = lang.run[0][2:]
    if name not in collected:
        return f"the compiler wrote no {name!r} to run"
    if not collected[name][1] & 0o100:  # the run's files are the program's uid's: its owner's bit
        return f"the compiler made {name!r} a file that is not executable (a library, not a program)"
    return None


# Of a run's frame header, what may list its files (the rest: argv, environment, limits, a batch's inputs).
RUN_FILES_LISTED = MAX_HEADER - (64 << 10)


def _listed(files: dict[str, tuple[bytes, int]]) -> int:
    """Bytes of the names of ``files`` in a run's frame header, about (``["name",mode,index],`` each)."""
    return sum(len(json.dumps(name)) + 16 for name in files)


def missing_tools(lang: Language) -> list[str]:
    return [tool for tool in lang.tools if resolve_tool(tool) is None]


def keep_paths() -> list[str]:
    """The toolchains' directories (each install root, and where its tools are): the local backend's agents
    bind them into the root that programs see, beside /usr and the interpreter (see agent/runtime.py)."""
    paths = {os.path.dirname(base_python())}  # and, as python3's toolchain below, its install root
    for lang in LANGUAGES.values():
        for tool in lang.tools:
            found = resolve_tool(tool)
            if found:
                real = os.path.realpath(found)
                # a toolchain is its install root: bin/'s parent holds its libraries
                paths.add(os.path.dirname(os.path.dirname(real)))
                paths.add(os.path.dirname(found))
        paths.update(v for k, v in toolchain_env(lang).items() if k.endswith("_HOME"))
    return sorted(p for p in paths if p and p != "/")
