"""Names and contents of the ``files`` / ``fetch_files`` fields."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from codegym_sandbox.agent import scratch_files
from codegym_sandbox.agent.scratch_cost import MAX_DIRS, directories, files_cost, over_memory, tmpfs_options
from codegym_sandbox.api import files as files_module
from codegym_sandbox.api.files import BadFiles, check_names, decode_files, one_tree, scratch_name
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a.txt", "a.txt"),
        ("data/in.txt", "data/in.txt"),
        ("./a/../b.txt", "b.txt"),
        ("/tmp/box/out.txt", "out.txt"),
        ("/tmp/box/sub/x", "sub/x"),
    ],
)
def test_scratch_names(name: str, expected: str) -> None:
    assert scratch_name(name) == expected


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "/tmp/boxer/x", "/tmp/box", "/tmp/box/../etc", "../x", "..", "a/../../x", "", "."]
)
def test_names_outside_the_scratch_dir_are_refused(name: str) -> None:
    with pytest.raises(BadFiles):
        scratch_name(name)


def test_decode_files() -> None:
    files = {
        "a.bin": base64.b64encode(b"\x00\xff").decode(),
        "skip.txt": None,
        "x/IGNORE_THIS_FILE": base64.b64encode(b"no").decode(),
        "/tmp/box/b.txt": base64.b64encode(b"b").decode(),
    }
    assert decode_files(files) == {"a.bin": b"\x00\xff", "b.txt": b"b"}


def test_bad_base64_names_the_file() -> None:
    with pytest.raises(BadFiles, match=r"'a.txt'.*base64"):
        decode_files({"a.txt": "not base64!"})


class _Box:
    """What ``collect`` reads of a box: its scratch directory's descriptor."""

    def __init__(self, scratch: int) -> None:
        self.scratch, self.config = scratch, {}


def test_fetched_patterns_are_matched_for_a_bounded_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Patterns of many '*' and '?' over long names cost the agent 14 s after a 0.7 s run, charged to no run.
    for i in range(300):
        (tmp_path / f"{'a' * 200}{i:05d}").write_bytes(b"x")
    clock = iter(range(10**6))
    monkeypatch.setattr(scratch_files.time, "monotonic", lambda: float(next(clock)))  # a second a look
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        found, _ = scratch_files.collect(_Box(fd), ["*a*"], 1 << 20)  # type: ignore[arg-type]
        assert 0 < len(found) < 300  # stopped at its deadline, not at the end of the directory
        monkeypatch.setattr(scratch_files, "MATCH_S", 1e9)
        found, _ = scratch_files.collect(_Box(fd), ["*a*", "b"], 1 << 20)  # type: ignore[arg-type]
        assert len(found) == 300
    finally:
        os.close(fd)


def _one_tree_by_prefixes(names: list[str], taken: list[str]) -> bool:
    """The rule as it reads: no name's directory (a prefix of its parts) is another name or a taken one, nor is a
    name a taken one's directory."""
    files = {*names, *taken}
    prefixes = {(n, "/".join(n.split("/")[:i])) for n in files for i in range(1, n.count("/") + 1)}
    return not any(p in files and not (n in taken and p in taken) for n, p in prefixes)


_NAMES = st.lists(st.lists(st.sampled_from(["a", "b", "main.py"]), min_size=1, max_size=4).map("/".join), max_size=8)


@settings(max_examples=1000, deadline=None)
@given(_NAMES, st.sampled_from([[], ["main.py"], ["a/b"]]))
def test_one_tree_refuses_exactly_what_cannot_all_be_written(names: list[str], taken: list[str]) -> None:
    names = list(dict.fromkeys(names))  # a request's names are a mapping's keys
    try:
        one_tree(names, taken)
        accepted = True
    except BadFiles as exc:
        accepted = False
        assert "cannot be a directory" in str(exc)
    assert accepted == _one_tree_by_prefixes(names, taken)


def test_names_past_their_bound_are_refused_before_they_are_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Looked up prefix by prefix, 4,096 names 512 directories deep held the server's event loop for seconds, and
    the bound on the names' bytes (which refuses them) was checked only after."""
    deep = ["/".join(["a"] * 511 + [str(i)]) for i in range(4096)]
    walked: list[int] = []
    monkeypatch.setattr(files_module, "one_tree", lambda names, taken=(): walked.append(len(names)))
    with pytest.raises(BadFiles, match="the file names take"):
        check_names(deep)
    assert walked == []
    monkeypatch.undo()
    check_names(deep[:400])  # within the bound: a tree, walked once part by part
    with pytest.raises(BadFiles, match="cannot be a directory"):
        check_names([*deep[:400], "a/a/a"])


def test_directories_are_the_names_distinct_proper_prefixes() -> None:
    assert directories(["a", "b/c", "b/d", "b/e/f", "e/f"]) == 3  # b, b/e, e
    assert directories(["a/a/a/x", "a/a/y", "a/b/a/z"]) == 5  # a, a/a, a/a/a, a/b, a/b/a
    chain = "/".join(["d"] * 500)
    assert directories([f"{i}/{chain}/f" for i in range(10)], most=1000) == 1001  # counting stops past ``most``


def test_files_cost_their_pages_and_an_inode_each() -> None:
    assert files_cost({"a": b""}) == 1024  # an empty file: its inode alone
    assert files_cost({"a": b"x", "b/c": b"y" * 4097}) == 3 * 4096 + 3 * 1024  # and b, a directory
    # The names alone of a tree of directories: no page, an inode each.
    assert files_cost({"/".join(["d"] * 100) + "/f": b""}) == 101 * 1024
    assert over_memory({"a": b"x" * (16 << 20)}, 16, "the run's") is not None  # its inode past 16 MiB
    assert over_memory({"a": b"x" * ((16 << 20) - 4096)}, 16, "the run's") is None


def test_names_that_make_too_many_directories_are_refused() -> None:
    # 500 names of a KB, each a chain of ~500 directories of its own, once made 249,000 directories.
    chains = [f"s{i:03d}/" + "/".join(["d"] * 495) + "/f" for i in range(500)]
    with pytest.raises(BadFiles, match=f"more than {MAX_DIRS} directories"):
        check_names(chains)
    check_names([f"s{i:03d}/{'/'.join(['d'] * 3)}/f" for i in range(MAX_DIRS // 4)])  # exactly the bound
    with pytest.raises(BadFiles, match=f"more than {MAX_DIRS} directories"):
        check_names([f"s{i:04d}/f" for i in range(MAX_DIRS + 1)])


def test_a_tmpfs_of_the_box_holds_an_inode_per_page_of_its_size() -> None:
    assert tmpfs_options(256 << 20) == f"size={256 << 20},nr_inodes={(256 << 20) // 4096}"
    assert tmpfs_options(4 << 20).endswith("nr_inodes=16384")  # at least what a request's files may make
