"""Content-addressed LRU of run outcomes, bounded by entries and by bytes."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# A key (64 hex digits), the mapping's node and the entry's tuple, about (tracemalloc shows ~300 B for an
# entry holding a one-byte bytes value).
ENTRY_BYTES = 320
LARGEST_SHARE = 16  # a value costing more than this share of the byte bound is not cached


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


def stdin_digests(stdins: list[bytes | None]) -> list[str]:
    """What stands for each stdin in a run's key (``Executor.run_tests``): made once for all of a request's programs
    (a 16 MiB stdin hashed for each of 60 programs held the event loop a second), and only for the cache."""
    return [hashlib.sha256(stdin or b"").hexdigest() for stdin in stdins]


def _hex(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return hashlib.sha256(value).hexdigest()
    raise TypeError(f"cannot hash {type(value).__name__}")


class LRUCache(Generic[T]):
    """A mapping bounded by entries and by bytes that forgets the least recently used entries first.

    ``size`` says how many bytes a value keeps alive (its outputs, mostly); every entry costs
    :data:`ENTRY_BYTES` more for its key and bookkeeping. A value costing more than a ``1/LARGEST_SHARE``
    share of ``max_bytes`` is not kept at all: a few such values would empty the cache of everything else
    (small outputs, the common case, and the likelier to repeat), and a result computed again is only slower.
    """

    def __init__(self, max_entries: int, max_bytes: int, size: Callable[[T], int]) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.size = size
        self._data: OrderedDict[str, tuple[T, int]] = OrderedDict()
        self.nbytes = 0  # what the entries held now cost, by ``size`` and ENTRY_BYTES
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> T | None:
        entry = self._data.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return entry[0]

    def put(self, key: str, value: T) -> None:
        old = self._data.pop(key, None)
        if old is not None:
            self.nbytes -= old[1]
        cost = ENTRY_BYTES + self.size(value)
        if self.max_entries <= 0 or cost > self.max_bytes // LARGEST_SHARE:
            return
        self._data[key] = (value, cost)
        self.nbytes += cost
        while len(self._data) > self.max_entries or self.nbytes > self.max_bytes:
            _, (_, freed) = self._data.popitem(last=False)
            self.nbytes -= freed

    def __len__(self) -> int:
        return len(self._data)
