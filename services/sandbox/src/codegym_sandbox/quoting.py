"""How an answer names what a client sent: a few dozen characters of it at most.

A message that quoted a client's string whole, as ``repr`` writes it, made a 64 MB body a 320 MB answer (a DEL is one
byte of JSON and four characters of a ``repr``), built on the event loop and held until the client read it: four of
them from three addresses, unread, took a server past 4 GB (round 63).
"""

from __future__ import annotations

import reprlib

QUOTED = 64  # the characters of a client's string an answer quotes at most


def quoted(value: object, most: int = QUOTED) -> str:
    """``value`` as ``repr`` writes it, of a string its first ``most`` characters (``...`` after, where it was
    longer); any other value as ``reprlib`` shortens it."""
    if not isinstance(value, str):
        return reprlib.repr(value)[: 4 * most]
    return repr(value[:most]) + ("..." if len(value) > most else "")


def cut(text: str, most: int = QUOTED) -> str:
    """``text``'s first ``most`` characters as they are (``...`` after, where it was longer): a client's key in an
    error's place, or a message that may quote a client's string."""
    return text if len(text) <= most else f"{text[:most]}..."
