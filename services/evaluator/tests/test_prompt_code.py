"""The code of a row's prompt (``trl_rows.prompt_code``), whatever shape TRL's prompt has: the helpers the
tests use are taken from it, so a prompt whose code is not found leaves the tests calling the program's."""

from __future__ import annotations

import pytest
from codegym_evaluator.prompt_code import code_in_prose, prompt_code
from codegym_evaluator.tasks import load_tasks
from codegym_evaluator.trl_rows import split_row

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


def test_the_stub_is_found_in_every_shape_a_prompt_gives_it() -> None:
    """Each shape once left HumanEval/32's ``poly`` unfound, and the tests called the program's: an example's fence
    after the stub's (the last fence was taken), the helper and the stub in two fences, the stub indented as
    Markdown code, or in the system message."""
    stub = next(t for t in load_tasks("humaneval") if t.task_id == "HumanEval/32").prompt
    helper, _ = stub.split("def find_zero")
    indented = "".join(f"    {line}" if line.strip() else line for line in stub.splitlines(keepends=True))
    shapes = {
        "example after": f"Complete it.\n```python\n{stub}```\nExample:\n```python\nprint(find_zero([1, 2]))\n```\n",
        "two fences": f"Helper:\n```python\n{helper}```\nComplete:\n```python\ndef find_zero(xs: list):\n```\n",
        "indented": f"Complete the following Python function.\n\n{indented}\nThanks.",
        "future in two": f"```python\nfrom __future__ import annotations\n{helper}```\n```python\n{stub}```",
    }
    for name, prompt in shapes.items():
        assert "def poly(xs: list, x: float):" in prompt_code(prompt), name
    system = [{"role": "system", "content": stub}, {"role": "user", "content": "Complete the function above."}]
    assert "def poly(" in prompt_code(system)
    future = "```python\nfrom __future__ import annotations\n"
    both = prompt_code(
        [{"role": "user", "content": f"{future}X = 1\n```"}, {"role": "user", "content": f"{future}{helper}```"}]
    )
    compile(both, "<prompt>", "exec")  # one text that parses: the helpers are taken from it as a whole


def test_only_the_tasks_words_are_read_and_the_stubs_helpers_win() -> None:
    """An assistant's message is the model's (an earlier attempt in a repair chat), and a few-shot example's
    ``poly`` is not the task's: the tests took whichever came last, and a wrong answer passed (or a right one
    failed). A message's content may be a list of text parts, and a helper may be an assignment."""
    stub = next(t for t in load_tasks("humaneval") if t.task_id == "HumanEval/32").prompt
    attempt = "```python\ndef poly(xs, x):\n    return 0\n```"
    repair = [{"role": "user", "content": stub}, {"role": "assistant", "content": attempt},
              {"role": "user", "content": "Your answer failed the tests. Fix it."}]  # fmt: skip
    assert "return 0" not in prompt_code(repair, "find_zero")
    example = [{"role": "user", "content": f"Complete:\n```python\n{stub}```"},
               {"role": "user", "content": f"An example of the style we want:\n{attempt}\n"}]  # fmt: skip
    code = prompt_code(example, "find_zero")
    assert code.rindex("def poly(xs: list, x: float)") > code.rindex("return 0")  # the stub's poly comes last
    parts = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Complete the function.\n\n"}, {"type": "text", "text": stub}],
        }
    ]
    assert "def poly(xs: list, x: float)" in prompt_code(parts, "find_zero")
    assigned = "The helper:\n\npoly = lambda xs, x: sum(xs)\n\nComplete:\n\ndef find_zero(xs):\n    pass\n"
    assert "poly = lambda xs, x: sum(xs)" in prompt_code(assigned, "find_zero")


def test_a_prompt_of_many_lines_that_start_code_and_never_parse_is_searched_in_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import codegym_evaluator.prompt_code as module

    read: list[int] = []
    parse = module.python_syntax.parse
    monkeypatch.setattr(module.python_syntax, "parse", lambda code: read.append(len(code)) or parse(code))
    text = "Complete it.\n" + "@b\n" * 4000  # each line opens a decorated definition that never comes
    assert prompt_code(text) == ""
    assert sum(read) < 40 * len(text), (len(read), sum(read))  # searched again from every line: 400 times it
