"""Reading a dataset from the data files of its Hugging Face hub repository.

``datasets`` 4 and later refuse repositories that load through a script of their own (APPS, LiveCodeBench,
TACO: "Dataset scripts are no longer supported"), so codegym reads the files such a script read, whatever
the repository: each dataset names, per split, its files as glob patterns relative to the repository's
root (``HubFiles``, or a layout of its own such as LiveCodeBench's versions).

Where the files come from is the *hub root*: ``hf://datasets`` (the default) downloads the matching files
with ``huggingface_hub.snapshot_download`` (cached; ``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE``
apply), and any other root is a local directory laid out as the hub is, ``<root>/<owner>/<name>/<file>``
(an offline mirror, or a test's fixtures). Both end in a directory laid out like the repository, read by
the same code. The root is ``hub_root`` where a caller passes one, else ``$CODEGYM_HUB_ROOT``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .sources import DatasetError, read_rows

HF_DATASETS = "hf://datasets"
ROOT_ENV = "CODEGYM_HUB_ROOT"


class HubLayout(Protocol):
    """Which files of a hub repository hold each split."""

    @property
    def repo(self) -> str:
        """``owner/name`` on the hub."""
        ...

    def files(self, split: str) -> tuple[str, ...]:
        """Glob patterns, relative to the repository's root, each matching at least one file of ``split``.

        An unknown split raises :class:`DatasetError` naming those there are.
        """
        ...


@dataclass(frozen=True)
class HubFiles:
    """A repository whose splits are files named after them: ``templates`` with ``{split}`` filled in."""

    repo: str
    templates: tuple[str, ...]
    splits: tuple[str, ...]

    def files(self, split: str) -> tuple[str, ...]:
        if split not in self.splits:
            raise DatasetError(f"{self.repo} has no split {split!r}; its splits: {', '.join(self.splits)}")
        return tuple(t.format(split=split) for t in self.templates)


def hub_root(root: str | Path | None = None) -> str:
    """The hub root in use: ``root``, else ``$CODEGYM_HUB_ROOT``, else the hub itself."""
    return str(root or os.environ.get(ROOT_ENV) or HF_DATASETS)


def read_repo(layout: HubLayout, split: str, root: str | Path | None = None) -> list[dict[str, Any]]:
    """Rows of ``split``: every file its patterns match, in pattern order, each pattern's files in order."""
    patterns = layout.files(split)
    base = hub_root(root)
    if base.rstrip("/") == HF_DATASETS:
        directory = _download(layout.repo, patterns)
        where = f"the hub repository {layout.repo}"
    else:
        directory = Path(base).expanduser() / layout.repo
        where = str(directory)
        if not directory.is_dir():
            raise DatasetError(
                f"{directory}: no such directory; the hub root {base} ({ROOT_ENV}) must hold the dataset's"
                f" repository as on the hub: {base}/{layout.repo}/{patterns[0]}"
            )
    rows: list[dict[str, Any]] = []
    for pattern in patterns:
        found = sorted((f for f in directory.glob(pattern) if f.is_file()), key=_natural)
        if not found:
            raise DatasetError(f"no file of {where} matches {pattern!r} (split {split!r} of {layout.repo})")
        for path in found:
            rows += read_rows(path)
    return rows


def _natural(path: Path) -> list[Any]:
    # test2.jsonl before test10.jsonl: numbers in a name compare as numbers.
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.as_posix())]


def _download(repo: str, patterns: tuple[str, ...]) -> Path:
    """The local snapshot of ``repo`` holding the files ``patterns`` match (downloaded where missing)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise DatasetError(
            f"downloading {repo} from the hub needs huggingface_hub: pip install 'codegym-evaluator[hub]'"
            f" (or set {ROOT_ENV} to a local copy laid out as the hub, or pass a file with --path)"
        ) from None
    try:
        snapshot = snapshot_download(repo, repo_type="dataset", allow_patterns=list(patterns))
    except Exception as exc:  # no network, a gated or missing repository, a rate limit: all end here
        tried = ", ".join(f"{HF_DATASETS}/{repo}/{p}" for p in patterns)
        raise DatasetError(
            f"could not download {tried} ({type(exc).__name__}: {' '.join(str(exc).split())[:300]}). Offline,"
            f" copy the repository to DIR/{repo} (hf download {repo} --repo-type dataset --local-dir"
            f" DIR/{repo}) and set {ROOT_ENV}=DIR, or pass a file with --path"
        ) from exc
    return Path(str(snapshot))
