"""Prompt formats for chat and base models."""

from __future__ import annotations

from pathlib import Path

from codegym_evaluator.prompts import (
    FUNCTION_STOPS,
    PROGRAM_STOPS,
    base_completion_prefix,
    base_prompt,
    chat_messages,
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


def test_stdin_and_starter_code_problems() -> None:
    stdio, _, call, method = load_tasks("apps", hub_root=HUB)
    assert "reads from standard input and writes to standard output" in chat_messages(stdio)[1]["content"]
    assert base_prompt(stdio).endswith("```python\n") and stop_sequences(stdio, chat=False) == PROGRAM_STOPS
    # a base model continues the starter inside the open fence; what it writes is judged after the starter
    assert base_prompt(call).endswith("```python\ndef count_vowels(s):\n\t")
    assert base_completion_prefix(call) == "def count_vowels(s):\n\t"
    user = chat_messages(method)[1]["content"]
    assert "Use this starter code:\n```python\nclass Solution:" in user and "`maxProduct`" in user
