"""A least-recently-used cache of a pure function of strings, bounded in bytes, not entries.

The sites' search pages split every product name or post into words on each search; the words
of the catalogue repeat across requests and instances, so they are cached. A cache bounded by
its number of entries is unbounded in memory when an entry's size is chosen by the user (a
15 KB search query, a 5,000-character post): 16,384 entries of 15 KB queries came to about
6 GB. This one counts the bytes of what it holds (keys and values, as ``sys.getsizeof`` sees
them) and evicts the least recently used entries past its budget; a value larger than a
sixteenth of the budget is computed and returned but never kept.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["SEARCH_CACHE_BYTES", "TextCache", "size_of", "text_cache"]

SEARCH_CACHE_BYTES = 16 * 2**20
"""Budget of each site's search-word cache: ten times what the pristine catalogue's (0.5 MiB) or
forum's (1.4 MiB) words take, so searches over an unchanged site compute no word twice."""

R = TypeVar("R")

_ENTRY_OVERHEAD = 120
"""Bytes of bookkeeping per entry beyond its key and value (the ordered dict's node, the
argument tuple)."""


def size_of(value: Any) -> int:
    """Bytes of ``value`` with the strings, tuples and sets it holds (two levels deep, as
    the search functions' word tuples and word sets nest)."""
    total = sys.getsizeof(value)
    if isinstance(value, tuple | frozenset | set | list):
        for v in value:
            total += sys.getsizeof(v)
            if isinstance(v, tuple | frozenset | set | list):
                total += sum(sys.getsizeof(w) for w in v)
    return total


class TextCache(Generic[R]):
    """``fn`` with its results kept, least recently used first out, within ``max_bytes``.

    Thread-safe (the sites' handlers run in worker threads); ``fn`` runs outside the lock, so
    two threads may compute the same entry once each, never wait on each other.

    Args:
        fn: a pure function of hashable arguments (strings).
        max_bytes: the most bytes of keys and values kept.
    """

    def __init__(self, fn: Callable[..., R], max_bytes: int) -> None:
        self.fn = fn
        self.max_bytes = max_bytes
        self.max_entry = max_bytes // 16
        self.nbytes = 0
        self._entries: OrderedDict[tuple[Any, ...], tuple[R, int]] = OrderedDict()
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any) -> R:
        """``fn(*args)``, from the cache when it holds it."""
        with self._lock:
            hit = self._entries.get(args)
            if hit is not None:
                self._entries.move_to_end(args)
                return hit[0]
        value = self.fn(*args)
        cost = _ENTRY_OVERHEAD + size_of(args) + size_of(value)
        if cost > self.max_entry:
            return value
        with self._lock:
            if args not in self._entries:
                self._entries[args] = (value, cost)
                self.nbytes += cost
                while self.nbytes > self.max_bytes:
                    _, (_, old) = self._entries.popitem(last=False)
                    self.nbytes -= old
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def cache_clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self.nbytes = 0


def text_cache(max_bytes: int) -> Callable[[Callable[..., R]], TextCache[R]]:
    """Decorator: ``TextCache(fn, max_bytes)``."""

    def wrap(fn: Callable[..., R]) -> TextCache[R]:
        return TextCache(fn, max_bytes)

    return wrap
