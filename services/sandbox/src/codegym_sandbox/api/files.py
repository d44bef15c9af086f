"""The ``files`` and ``fetch_files`` fields: base64 contents, names confined to the run's scratch dir."""

from __future__ import annotations

import base64
import json
import posixpath
from collections.abc import Collection, Iterable

from ..agent.scratch_cost import MAX_DIRS, directories, over_memory
from ..models import MAX_FILES
from ..quoting import quoted

SCRATCH = "/tmp/box"
MAX_NAME_BYTES = 1024
# The names of a run's files (sent and fetched) travel in the header of one frame to the worker, whose size
# the agent bounds (``agent/protocol.MAX_HEADER``, 1 MiB): beyond these, a request is refused here (422)
# rather than failing on the way there (which said SE, the sandbox's fault). ``models.MAX_FILES`` files at most.
MAX_NAMES_JSON_BYTES = 512 << 10
MAX_PATTERNS = 16  # fetched names with '*': each is matched against the run's files (agent/scratch_files.py)


class BadFiles(ValueError):
    """A file name or content the sandbox refuses; answered with 422 and this message."""


def scratch_name(name: str) -> str:
    """A name relative to the scratch directory. Absolute names are accepted only inside it."""
    if name.startswith("/"):
        norm = posixpath.normpath(name)
        if not norm.startswith(SCRATCH + "/"):
            raise BadFiles(f"file {quoted(name)}: absolute paths must be inside {SCRATCH}, the run's working directory")
        name = norm[len(SCRATCH) + 1 :]
    norm = posixpath.normpath(name)
    if norm in ("", ".") or norm.startswith("../") or norm == ".." or "\0" in norm:
        raise BadFiles(f"file {quoted(name)}: the name must stay inside the run's working directory")
    if len(norm.encode()) > MAX_NAME_BYTES or any(len(part.encode()) > 255 for part in norm.split("/")):
        raise BadFiles(f"file {quoted(name)}: names are limited to {MAX_NAME_BYTES} bytes, 255 per component")
    return norm


def one_tree(names: Iterable[str], taken: Collection[str] = ()) -> None:
    """Refuse names of which one would be the directory of another (``a`` and ``a/b``), or lie under a file the
    sandbox writes itself (``taken``: the program's source, ``main.py``): they cannot all be written.

    The names are put in a tree, part by part, in time linear in their length: looked up prefix by prefix, a
    request of 4,096 names 512 directories deep held the server's event loop for seconds."""
    root: dict[str, object] = {}
    first_under: dict[int, str] = {}  # a directory's first name under it (by its node's id), for the message
    for name in [*taken, *names]:
        node, parts = root, name.split("/")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if isinstance(child, str):  # a file's name: it cannot be a directory too
                _clash(name, child, taken)
            assert isinstance(child, dict)
            first_under.setdefault(id(child), name)
            node = child
        leaf = node.setdefault(parts[-1], name)
        if isinstance(leaf, dict):  # already a directory of an earlier name
            _clash(first_under[id(leaf)], name, taken)


def _clash(name: str, directory: str, taken: Collection[str]) -> None:
    what = "the program's own file" if directory in taken else "a file of the request too"
    raise BadFiles(f"file {quoted(name)}: {quoted(directory)} is {what}, so it cannot be a directory")


def check_names(names: Collection[str], fetched: Collection[str] = (), taken: Collection[str] = ()) -> None:
    """A request's file names (``names`` written, ``fetched`` asked back) as one frame's header can hold them,
    cheap bounds first, then as one tree (:func:`one_tree`)."""
    if len(names) + len(fetched) > MAX_FILES:
        raise BadFiles(f"{len(names)} files and {len(fetched)} to fetch: at most {MAX_FILES} in all")
    size = sum(len(json.dumps(name)) for name in [*names, *fetched])  # as the frame's header holds them
    if size > MAX_NAMES_JSON_BYTES:
        raise BadFiles(f"the file names take {size} bytes: at most {MAX_NAMES_JSON_BYTES} in all")
    if directories(names, MAX_DIRS) > MAX_DIRS:  # each a mkdir of the agent's and an inode of the kernel's
        raise BadFiles(
            f"the file names make more than {MAX_DIRS} directories (every part of a name but its last is one): "
            f"at most {MAX_DIRS} in all"
        )
    one_tree(names, taken)


def request_files(
    files: dict[str, str | None], fetch_files: list[str], memory_mb: int, taken: Collection[str] = ()
) -> tuple[dict[str, bytes], list[str]]:
    """A request's files to write (decoded) and the names of those to fetch after the run, or :class:`BadFiles`.
    ``memory_mb``: the run's memory limit, which must hold them; ``taken``: the names the sandbox writes beside
    them (the program's source)."""
    if len(files) + len(fetch_files) > MAX_FILES:
        raise BadFiles(f"{len(files)} files and {len(fetch_files)} to fetch: at most {MAX_FILES} in all")
    out, fetch = decode_files(files), [scratch_name(f) for f in fetch_files]
    if len({f for f in fetch if "*" in f}) > MAX_PATTERNS:
        raise BadFiles(f"at most {MAX_PATTERNS} patterns (names with '*') to fetch")
    check_names(out, fetch, taken)
    if why := over_memory(out, memory_mb, "the run's"):
        raise BadFiles(why)
    return out, fetch


def decode_files(files: dict[str, str | None]) -> dict[str, bytes]:
    out = {}
    for name, content in files.items():
        if content is None or "IGNORE_THIS_FILE" in name:
            continue  # as SandboxFusion does
        try:
            out[scratch_name(name)] = base64.b64decode(content, validate=True)
        except ValueError as exc:  # binascii.Error, or a character beyond ASCII (never base64)
            raise BadFiles(f"file {quoted(name)}: content is not valid base64 ({exc})") from exc
    return out
