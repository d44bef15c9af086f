"""The layout rule of the repository: small modules, none over MAX_LINES lines in any service's source."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400


def oversized(root: Path, limit: int = MAX_LINES) -> list[str]:
    """The Python modules under ``root/services/*/src`` longer than ``limit`` lines, with their lengths."""
    found = []
    for path in sorted(root.glob("services/*/src/**/*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


def test_no_module_in_the_services_is_over_the_limit() -> None:
    assert list(ROOT.glob("services/*/src/**/*.py")), "no service source found: the layout changed"
    assert oversized(ROOT) == [], f"modules over {MAX_LINES} lines (split them by responsibility)"


@pytest.mark.parametrize(("lines", "flagged"), [(MAX_LINES, False), (MAX_LINES + 1, True)])
def test_the_check_names_a_module_just_over_the_limit(tmp_path: Path, lines: int, flagged: bool) -> None:
    module = tmp_path / "services" / "svc" / "src" / "pkg" / "big.py"
    module.parent.mkdir(parents=True)
    module.write_text("x = 1\n" * lines)
    assert oversized(tmp_path) == ([f"services/svc/src/pkg/big.py: {lines} lines"] if flagged else [])


def test_the_services_above_the_sandbox_parse_python_in_one_place() -> None:
    # codegym_evaluator.python_syntax makes the parses of threads take turns (CPython 3.11 shares the AST
    # constructor's depth counter between them); a parse beside it would race again. The sandbox parses only in
    # its agent's single-threaded processes.
    calls = [
        str(path.relative_to(ROOT))
        for service in ("evaluator", "trainer", "data")
        for path in sorted(ROOT.glob(f"services/{service}/src/**/*.py"))
        if path.name != "python_syntax.py" and "ast.parse(" in path.read_text(encoding="utf-8")
    ]
    assert calls == [], "parse through codegym_evaluator.python_syntax.parse"
