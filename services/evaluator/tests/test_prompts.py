"""Prompt formats for chat and base models."""

from __future__ import annotations

from pathlib import Path

from codegym_evaluator.prompts import (
    FUNCTION_STOPS,
    PROGRAM_STOPS,
    base_answer,
    base_completion_prefix,
    base_prompt,
    chat_messages,
    continued_answer,
    stop_sequences,
)
from codegym_evaluator.tasks import load_tasks

HUB = Path(__file__).parent / "fixtures" / "hub"


def test_humaneval_base_models_continue_the_stub_and_chat_models_see_it_fenced() -> None:
    (task,) = load_tasks("humaneval", limit=1)
    assert base_prompt(task) == task.prompt
    assert stop_sequences(task, chat=False) == FUNCTION_STOPS and stop_sequences(task, chat=True) == []
    assert base_completion_prefix(task) == ""
    system, user = chat_messages(task)
    assert system["role"] == "system" and user["role"] == "user"
    assert user["content"].startswith(f"```python\n{task.prompt.rstrip()}\n```")
    assert "Complete the python function `has_close_elements`" in user["content"]


def test_a_base_models_answer_is_the_block_its_prompt_opened() -> None:
    _, _, call, _ = load_tasks("apps", hub_root=HUB)
    prompt = base_prompt(call)  # ends in an open fence holding the starter
    body = "    return sum(c in 'aeiou' for c in s)"
    # the close ends the answer: the prose after it (read alone, a block of its own) is never the program
    closed = continued_answer(prompt, f"{body}\n```\n\nThis counts the vowels.\n```python\nprint(1)\n```")
    assert closed == f"```python\ndef count_vowels(s):\n\t{body}\n```"
    assert base_answer(call, f"{body}\n```\nprose") == closed  # the evaluator's runner reads it so too
    # never closed (cut at the stop sequence, or at the token limit): the open block, not a fenced answer
    assert continued_answer(prompt, body) == f"```python\ndef count_vowels(s):\n\t{body}"
    # a model that opens its own block inside the prompt's empty one: that block
    assert continued_answer("Echo.\n\n```python\n", "```python\nprint(input())\n```\nok") == (
        "```python\nprint(input())\n```"
    )
    # a chat's answer, or a prompt that opens no block, is the completion as it is
    assert continued_answer([{"role": "user", "content": prompt}], "x\n```\ny") == "x\n```\ny"
    assert continued_answer("Solve it.", "x\n```\ny") == "x\n```\ny"
    (stub,) = load_tasks("humaneval", limit=1)
    assert base_answer(stub, "    return 1\ndef unrelated():") == "    return 1"  # a stub's body, as before


def test_stdin_and_starter_code_problems() -> None:
    stdio, _, call, method = load_tasks("apps", hub_root=HUB)
    assert "reads from standard input and writes to standard output" in chat_messages(stdio)[1]["content"]
    assert base_prompt(stdio).endswith("```python\n") and stop_sequences(stdio, chat=False) == PROGRAM_STOPS
    # a base model continues the starter inside the open fence; what it writes is judged after the starter
    assert base_prompt(call).endswith("```python\ndef count_vowels(s):\n\t")
    assert base_completion_prefix(call) == "def count_vowels(s):\n\t"
    user = chat_messages(method)[1]["content"]
    assert "Use this starter code:\n```python\nclass Solution:" in user and "`maxProduct`" in user
