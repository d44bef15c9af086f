"""Content-addressed LRU of run outcomes."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def cache_key(*parts: Any) -> str:
    """Hash of everything that can change a result. Bytes are hashed by content, the rest as JSON."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, (bytes, bytearray)):
            h.update(b"b%d:" % len(part))
            h.update(part)
        else:
            raw = json.dumps(part, sort_keys=True, default=_hex).encode()
            h.update(b"j%d:" % len(raw))
            h.update(raw)
    return h.hexdigest()


def _hex(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return hashlib.sha256(value).hexdigest()
    raise TypeError(f"cannot hash {type(value).__name__}")


class LRUCache(Generic[T]):
    """A bounded mapping that forgets the least recently used entry first."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[str, T] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> T | None:
        value = self._data.get(key)
        if value is None:
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key: str, value: T) -> None:
        if self.max_entries <= 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
