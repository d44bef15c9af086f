"""Import boundaries the layer contracts cannot express: what the agent and the sandbox may import from outside.

import-linter (the root ``pyproject.toml``) checks imports between codegym's own packages. These two rules are
about third-party packages: the agent runs inside the isolation, in any image with a Python, so it imports the
standard library only; the sandbox stays slim, so it never imports the ML stack the trainer carries.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SANDBOX = ROOT / "services" / "sandbox" / "src" / "codegym_sandbox"
AGENT = SANDBOX / "agent"
ML_STACK = frozenset({"torch", "transformers", "trl", "accelerate", "deepspeed", "vllm", "peft"})


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Every module ``path`` imports, with its relative level (0: absolute)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level


def offending(package: Path, allowed: Callable[[str, int], bool]) -> list[str]:
    """The imports of the modules under ``package`` that ``allowed(module, level)`` refuses, as ``path: module``."""
    return [
        f"{path.relative_to(package)}: {'.' * level}{module}"
        for path in sorted(package.rglob("*.py"))
        for module, level in _imports(path)
        if not allowed(module, level)
    ]


def standard_library_only(module: str, level: int) -> bool:
    """The agent's rule: the standard library, or its own modules (never the rest of the sandbox)."""
    if level:
        return level == 1
    top = module.split(".")[0]
    return (
        top in sys.stdlib_module_names
        or module == "codegym_sandbox.agent"
        or module.startswith("codegym_sandbox.agent.")
    )


def no_ml_stack(module: str, level: int) -> bool:
    """The sandbox's rule: anything but the trainer's ML stack."""
    return level > 0 or module.split(".")[0] not in ML_STACK


def test_the_agent_imports_only_the_standard_library() -> None:
    assert list(AGENT.glob("*.py")), "no agent source found: the layout changed"
    assert offending(AGENT, standard_library_only) == []


def test_the_sandbox_never_imports_the_ml_stack() -> None:
    assert list(SANDBOX.rglob("*.py")), "no sandbox source found: the layout changed"
    assert offending(SANDBOX, no_ml_stack) == []


@pytest.mark.parametrize(
    ("source", "agent_ok", "sandbox_ok"),
    [
        ("import os, json\nfrom collections import deque\n", True, True),
        ("from . import protocol\nfrom .box import serve\n", True, True),
        ("from codegym_sandbox.agent import protocol\n", True, True),
        ("import pydantic\n", False, True),
        ("from .. import verdicts\n", False, True),
        ("from codegym_sandbox import verdicts\n", False, True),
        ("import torch.nn\n", False, False),
        ("def f():\n    from transformers import AutoModel\n", False, False),
    ],
)
def test_the_checks_name_what_they_refuse(tmp_path: Path, source: str, agent_ok: bool, sandbox_ok: bool) -> None:
    (tmp_path / "mod.py").write_text(source)
    assert (offending(tmp_path, standard_library_only) == []) is agent_ok
    assert (offending(tmp_path, no_ml_stack) == []) is sandbox_ok
