"""The code of a row's prompt (``trl_rows.prompt_code``), whatever shape TRL's prompt has: the helpers the
tests use are taken from it, so a prompt whose code is not found leaves the tests calling the program's."""

from __future__ import annotations

from codegym_evaluator.tasks import load_tasks
from codegym_evaluator.trl_rows import code_in_prose, prompt_code, split_row

PROSE = "Complete the following Python function.\n\n{}\nAnswer with the whole function.\n"


def test_every_humaneval_stub_is_found_among_prose() -> None:
    for task in load_tasks("humaneval"):
        found = prompt_code(PROSE.format(task.prompt))
        assert f"def {task.entry_point}(" in found, task.task_id
        chat = [{"role": "user", "content": PROSE.format(task.prompt)}]
        assert prompt_code(chat) == found


def test_a_prose_prompts_helper_is_the_tests_own() -> None:
    """HumanEval/32's tests call ``poly``, the prompt's: as prose, the prompt still gives it to the judged check
    (TRL's CodeEnvironment reads a row so), and a completion's ``poly`` is never the one the tests call."""
    task = next(t for t in load_tasks("humaneval") if t.task_id == "HumanEval/32")
    row = {"prompt": PROSE.format(task.prompt), "tests": task.tests[0]["assert_code"], "entry_point": "find_zero"}
    judged, _ = split_row(row, 1)
    assert "def poly(" in judged.tests[0]["assert_code"]


def test_code_among_prose_is_cut_where_the_prose_goes_on() -> None:
    text = (
        "from the list below, pick the helper.\nimport the module you need.\n\nimport math\n\n"
        "def poly(xs, x):\n    return sum(xs)\n\ndef find_zero(xs):\n    '''Its zero.'''\n\n"
        "Your code should pass these tests:\nassert find_zero([1]) == 0\n\nclass Box:\n    pass\nThanks!"
    )
    found = code_in_prose(text)
    assert found.startswith("import math\n\ndef poly(xs, x):") and "'''Its zero.'''\n\nclass Box:\n    pass" in found
    assert "pick" not in found and "Your code" not in found and "assert" not in found and "Thanks" not in found
    assert code_in_prose("Nothing here is code.\nfrom here on, prose.") == ""
