"""Names and contents of the ``files`` / ``fetch_files`` fields."""

from __future__ import annotations

import base64

import pytest
from codegym_sandbox.api.files import BadFiles, decode_files, scratch_name


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
