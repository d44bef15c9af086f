"""The language table."""

from __future__ import annotations

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
