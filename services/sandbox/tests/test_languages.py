"""The language table."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from codegym_sandbox import languages


def test_fusion_enum_is_complete() -> None:
    assert len(languages.FUSION_LANGUAGES) == 29
    assert {"python", "cpp", "lua", "sql", "R", "D_ut"} <= set(languages.FUSION_LANGUAGES)


def test_lookup_by_name_and_alias() -> None:
    assert languages.lookup("python") is languages.LANGUAGES["python"]
    assert languages.lookup("py") is languages.LANGUAGES["python"]
    assert languages.lookup("c++") is languages.LANGUAGES["cpp"]
    assert languages.lookup("lua") is languages.LANGUAGES["lua"]
    assert languages.lookup("ts") is languages.LANGUAGES["typescript"]
    assert languages.lookup("cs") is languages.LANGUAGES["csharp"]
    assert languages.lookup("d") is languages.LANGUAGES["D_ut"]
    assert languages.lookup("julia") is None
    assert languages.lookup("Python") is None


def test_every_fusion_language_has_a_runner_or_a_reason() -> None:
    without = [name for name in languages.FUSION_LANGUAGES if languages.lookup(name) is None]
    assert sorted(without) == sorted(languages.WITHOUT_RUNNER)
    assert {"julia", "swift"} <= set(without)


def test_support_files_never_shadow_the_program() -> None:
    for lang in languages.LANGUAGES.values():
        assert lang.source not in lang.support
    assert "main.exe.config" in languages.LANGUAGES["csharp"].support


def test_tools() -> None:
    assert languages.LANGUAGES["cpp"].tools == ("g++",)  # the run step is the built ./main
    assert languages.LANGUAGES["python"].tools == ("python3",)
    assert languages.resolve_tool("python3")
    assert languages.resolve_tool("definitely-not-a-tool-xyz") is None
    assert languages.missing_tools(languages.LANGUAGES["python"]) == []


def test_keep_paths_never_root() -> None:
    paths = languages.keep_paths()
    assert "/" not in paths and paths == sorted(paths)


def _interpreter(bindir: Path, name: str, mode: int = 0o755, script: str = "") -> Path:
    """A stand-in interpreter: a shell script that runs ``script`` whatever it is asked (exits 0 by default)."""
    path = bindir / name
    path.write_text(f"#!/bin/sh\n{script}")
    path.chmod(mode)
    return path


def test_python_runs_default_to_the_distributions_interpreter_of_the_servers_version(tmp_path: Path) -> None:
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    server_base = languages.installation_python()
    assert languages.base_python(str(tmp_path)) == server_base  # none there: the server's own installation
    _interpreter(tmp_path, f"python{sys.version_info[0]}.{sys.version_info[1] + 1}")
    _interpreter(tmp_path, "python3")  # of no stated version: it may be any
    assert languages.base_python(str(tmp_path)) == server_base
    _interpreter(tmp_path, version, mode=0o644)  # not executable
    assert languages.base_python(str(tmp_path)) == server_base
    (tmp_path / version).chmod(0o755)
    assert languages.system_python(str(tmp_path)) == str(tmp_path / version)
    assert languages.base_python(str(tmp_path)) == str(tmp_path / version)


def test_no_distribution_interpreter_for_a_server_of_another_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A free-threaded or debug server's runtime packages do not import on the default build."""
    _interpreter(tmp_path, f"python{sys.version_info[0]}.{sys.version_info[1]}")
    monkeypatch.setattr(sys, "abiflags", "t")
    assert languages.system_python(str(tmp_path)) is None


def test_the_default_interpreter_and_its_installation_are_kept_in_the_programs_view() -> None:
    python = languages.base_python()
    assert languages.resolve_tool("python3") == python
    assert {os.path.dirname(python), os.path.dirname(os.path.dirname(python))} <= set(languages.keep_paths())


def test_no_distribution_interpreter_without_its_whole_standard_library(tmp_path: Path) -> None:
    """Debian's python3.X-minimal alone has no json or ctypes: the agent could not start on it."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    asked = tmp_path / "asked"
    _interpreter(tmp_path, version, script=f'echo "$@" >{asked}\nexit 1\n')
    server_base = languages.installation_python()
    assert languages.system_python(str(tmp_path)) is None
    assert languages.base_python(str(tmp_path)) == server_base
    assert asked.read_text().split() == ["-I", "-S", "-c", *languages.WHOLE_STDLIB.split()]


@pytest.mark.parametrize(
    ("language", "collected", "why"),
    [
        ("rust", {"main": (b"\x7fELF", 0o755)}, None),
        ("c", {"main": (b"\x7fELF", 0o700)}, None),
        ("rust", {"main": (b"!<arch>\n", 0o644)}, "not executable"),  # #![crate_type = "lib"]
        ("c", {"main": (b"\x7fELF", 0o055)}, "not executable"),  # not by its owner, the program's uid
        ("go", {}, "wrote no 'main'"),
        ("cpp", {"main.o": (b"\x7fELF", 0o755)}, "wrote no 'main'"),
        # A tool runs these artifacts, and says itself what is wrong with them.
        ("java", {}, None),
        ("csharp", {"main.exe": (b"MZ", 0o644)}, None),
    ],
)
def test_unrunnable_says_why_a_compile_left_nothing_to_execute(
    language: str, collected: dict[str, tuple[bytes, int]], why: str | None
) -> None:
    found = languages.unrunnable(languages.LANGUAGES[language], collected, {"main.x": (b"", 0o644)})
    assert found is None if why is None else why in (found or ""), found


@pytest.mark.parametrize("language", ["java", "c"])
def test_a_compile_that_makes_more_files_than_a_run_can_be_given_left_nothing_to_execute(language: str) -> None:
    lang = languages.LANGUAGES[language]
    artifact = {"main": (b"\x7fELF", 0o755)}

    def classes(n: int, length: int) -> dict[str, tuple[bytes, int]]:
        return {f"Main${i:05}{'x' * length}.class": (b"\xca\xfe\xba\xbe", 0o644) for i in range(n)}

    # A program of many classes still runs; one that lists more names than a run's frame header holds does not.
    assert languages.unrunnable(lang, {**artifact, **classes(2000, 40)}, {}) is None
    too_many = classes(4200, 230)
    found = languages.unrunnable(lang, {**artifact, **too_many}, {})
    assert found is not None and "4201 files" in found
    # The request's own files count too, the run gets them beside the compiler's; but a request whose files
    # alone are too many is no program's doing.
    found = languages.unrunnable(lang, {**artifact, **classes(2000, 230)}, classes(2200, 231))
    assert found is not None and "2001 files" in found
    assert languages.unrunnable(lang, artifact, too_many) is None


def test_metric_labels_are_the_languages_known() -> None:
    """A name a client made up never becomes a label of the metrics (each would be a series for good)."""
    assert languages.metric_label("python") == "python"
    assert languages.metric_label("systemverilog") == "verilog"  # an alias counts as its language
    assert languages.metric_label("julia") == "julia"  # one of SandboxFusion's, with no runner here
    assert languages.metric_label("../../bin/sh") == languages.metric_label("x" * 1000) == "unknown"
