"""How a ``MaskRow`` is written: its plain fields, or with the text a fill-in-the-middle model is trained on.

- ``fields``: the row's fields as they are (``prefix``, ``middle``, ``suffix`` and what judges a fill).
- ``psm``: the same, plus ``prompt`` = ``<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>``,
  ``completion`` = ``middle`` and ``text`` = prompt + completion (prefix-suffix-middle order, the
  StarCoder / SantaCoder token style; other models name the three tokens differently: ``tokens``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .dataset import MaskRow

FimFormat = Literal["fields", "psm"]
FIM_FORMATS: tuple[FimFormat, ...] = ("fields", "psm")
DEFAULT_TOKENS = ("<fim_prefix>", "<fim_suffix>", "<fim_middle>")


def format_row(
    row: MaskRow, fim_format: FimFormat = "fields", tokens: Sequence[str] = DEFAULT_TOKENS
) -> dict[str, Any]:
    """The row as one line of ``masked.jsonl``; ``tokens``: the prefix, suffix and middle tokens of ``psm``."""
    data = row.to_dict()
    if fim_format == "psm":
        pre, suf, mid = tokens
        data["prompt"] = f"{pre}{row.prefix}{suf}{row.suffix}{mid}"
        data["completion"] = row.middle
        data["text"] = data["prompt"] + row.middle
    elif fim_format != "fields":
        raise ValueError(f"unknown FIM format {fim_format!r}; the formats are {', '.join(FIM_FORMATS)}")
    return data


def parse_tokens(spec: str) -> tuple[str, str, str]:
    """``"<PRE>,<SUF>,<MID>"`` as the three tokens; a ValueError unless there are three non-empty ones."""
    tokens = tuple(t.strip() for t in spec.split(","))
    if len(tokens) != 3 or not all(tokens):
        raise ValueError(f"expected three comma-separated tokens (prefix, suffix, middle), not {spec!r}")
    return tokens[0], tokens[1], tokens[2]
