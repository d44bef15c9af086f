"""How a task is shown to a model: chat messages for instruction-tuned models, a plain prompt for base ones."""

from __future__ import annotations

from collections.abc import Sequence

from .extract import fenced_blocks, truncate_at_stop
from .tasks import Task

SYSTEM = "You are an expert programmer. Answer with a single complete program in one fenced code block."

# Where a base model's continuation of a function has ended (as in the Codex paper).
FUNCTION_STOPS = ["\nclass ", "\ndef ", "\n#", "\nif __name__", "\nprint(", "\nassert "]
# A base model asked for a whole program in a fenced block stops at the closing fence.
PROGRAM_STOPS = ["\n```"]


def continues_prompt(task: Task) -> bool:
    """Whether the prompt is code a base model continues (HumanEval: the stub is the prompt)."""
    return bool(task.starter_code.strip()) and task.starter_code.strip() == task.prompt.strip()


def _instructions(task: Task) -> str:
    lang = task.language
    if task.kind == "stdio":
        return f"Write a {lang} program that reads from standard input and writes to standard output."
    starter = task.metadata.get("starter_code") or ""
    if continues_prompt(task):
        return f"Complete the {lang} function `{task.entry_point}` above. Include the imports it needs."
    hint = f"\nUse this starter code:\n```{lang}\n{starter.rstrip()}\n```" if starter.strip() else ""
    return f"Write a {lang} function `{task.entry_point}` that solves the problem.{hint}"


def chat_messages(task: Task) -> list[dict[str, str]]:
    """System and user messages for a chat model; the answer is expected in a fenced block."""
    body = task.prompt.rstrip()
    if continues_prompt(task):
        body = f"```{task.language}\n{body}\n```"
    user = f"{body}\n\n{_instructions(task)}\nPut the complete code in one ```{task.language} block."
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def repair_request(task: Task, feedback: str) -> str:
    """The user message after a wrong answer: what its program did on the tests shown, and the request to fix it."""
    return (
        f"Your program was run on the tests below.\n\n{feedback.rstrip()}\n\n"
        f"Fix the program. Put the complete corrected code in one ```{task.language} block."
    )


def repair_messages(task: Task, rounds: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The chat after rounds of (answer, feedback on it): the task's messages, then each answer as the
    assistant's turn and its feedback as the user's next message; the model answers it next."""
    messages = chat_messages(task)
    for answer, feedback in rounds:
        messages += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": repair_request(task, feedback)},
        ]
    return messages


def base_prompt(task: Task) -> str:
    """A prompt a base model continues: the starter code itself, or the problem then an open code fence."""
    if continues_prompt(task):
        return task.starter_code
    starter = task.metadata.get("starter_code") or ""
    return f"{task.prompt.rstrip()}\n\n{_instructions(task)}\n\n```{task.language}\n{starter}"


def stop_sequences(task: Task, *, chat: bool) -> list[str]:
    """Stop sequences for a completion of ``task`` (none for chat: the answer ends with the turn)."""
    if chat:
        return []
    return FUNCTION_STOPS if continues_prompt(task) else PROGRAM_STOPS


def base_completion_prefix(task: Task) -> str:
    """What a base model's completion continues, beyond the starter code: the starter in the open fence."""
    return "" if continues_prompt(task) else str(task.metadata.get("starter_code") or "")


def continued_answer(prompt: object, completion: str) -> str:
    """The text a program is extracted from, of ``completion`` given to ``prompt``: the completion as it is,
    unless the prompt is text that ends inside an open code fence (:func:`base_prompt`'s, for a base model),
    whose completion continues that block. Then it is the block as prompt and completion wrote it together: the
    prompt's opening fence and what the prompt put in it, then the completion up to the line that closes the
    fence, closed when the completion closed it (``extract.fenced_blocks`` reads where). What follows the close
    (prose, another block) is no part of the answer: read alone, the close would open a block of its own and the
    program judged would be that prose. The one reading of every route that judges a base model's answer: the
    evaluator's runner, the trainer's reward, its held-out evaluation and code repair."""
    if not isinstance(prompt, str):
        return completion
    _, still_open = fenced_blocks(prompt)
    if still_open is None:
        return completion
    tag, body = still_open
    closed, open_at_end = fenced_blocks(f"```{tag}\n{body}{completion}")
    if closed:
        return f"```{tag}\n{closed[0][1]}\n```"
    return f"```{tag}\n{open_at_end[1] if open_at_end is not None else ''}"


def base_answer(task: Task, continuation: str) -> str:
    """A base model's answer to :func:`base_prompt`: a stub's body cut at the next top-level statement (as in the
    Codex paper), or the block its open fence holds (:func:`continued_answer`)."""
    if continues_prompt(task):
        return truncate_at_stop(continuation, FUNCTION_STOPS)
    return continued_answer(base_prompt(task), continuation)
