"""The text of a chat message and of a completion, whatever shape the content takes.

A message's content is a string, or a list of parts (``[{"type": "text", "text": ...}]``, what multimodal chat
stacks and TRL's structured prompts give). Every reader of a prompt or an answer takes its text here, so that
no front door judges a list of parts as its Python repr while another reads the code inside it.

Text a model wrote may hold a lone surrogate (JSON's ``"\\ud83d"``, half of a character an endpoint cut), which no
UTF-8 body or file can hold: :func:`writable` is what such text becomes wherever it is written or sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["completion_text", "message_text", "writable"]


def message_text(content: Any) -> str:
    """A message's text: its content, or its text parts one line after another; empty for anything else (an
    image part, no content)."""
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
        return "\n".join(part for part in parts if isinstance(part, str))
    return content if isinstance(content, str) else ""


def completion_text(completion: Any) -> str:
    """The answer in a completion: the string itself (a base model's), or the text of a conversation's last
    message (a chat model's)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], Mapping):
        return message_text(completion[-1].get("content"))
    raise TypeError(f"a completion must be a string or a list of messages, not {type(completion).__name__}")


def writable(text: str) -> str:
    """``text`` as a file or a request body can hold it: a lone surrogate (a model can write one; no UTF-8 file
    holds it) becomes U+FFFD. Sent as it was, it failed the request's encoding, and every sample of it with it."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
