"""A persistent sequence in chunks: what the fast engine keeps a long line
of pending events or of a stage's jobs in, where the definition keeps a
tuple (copied whole at every step: a stage with n jobs costs n per event,
so a population of 40,000 took 74 s where 20,000 took 13.6 s).

``Chunks`` is a tuple of tuples (each at most ``SIZE`` items) with the
running counts of items before each chunk. It reads as the tuple of its
items does: ``len``, truth, iteration, an index, a slice (step 1), ``+``
with a tuple or another ``Chunks`` (either side), equality with a tuple of
the same items. So the definition's functions that take the tuple apart and
build it again (configuration.insert_event, remove_event, a stage's
slices, bisect on it) give the same items on it; each such operation copies
one or two chunks and the tuple of chunks, not every item. Adjacent chunks
are merged when they fit in one, so a sequence of n items has at most
2 n / SIZE + 1 chunks. ``append``, ``insert_sorted``, ``remove_sorted`` and
``pop_key`` are the updates the fast forms make directly (an event
scheduled or cancelled, a job joining or leaving a line in id order).

``appended`` and ``insert_event`` keep a sequence a tuple while it is short
(below ``LONG`` items) and ``Chunks`` from there on: a short line costs what
the definition's does. Each update of a long one copies one chunk and the
tuple of chunks: O(SIZE + n / SIZE) in C-level copies, and no Python loop
over the items.
"""

from __future__ import annotations

import bisect
from itertools import accumulate, chain

#: the most items of one chunk
SIZE = 512
#: a sequence this long or longer is kept in chunks by the fast forms
LONG = 1024


class Chunks:
    """The items of ``chunks`` (a tuple of non-empty tuples) in order; ``size``
    all of them; ``starts`` (computed when an index or a slice first needs
    it) the number of items before each chunk."""

    __slots__ = ("chunks", "size", "_starts")

    def __init__(self, chunks: tuple, size: int | None = None):
        self.chunks = chunks
        self.size = sum(map(len, chunks)) if size is None else size
        self._starts = None

    @property
    def starts(self) -> tuple:
        if self._starts is None:
            chunks = self.chunks
            self._starts = (0,) + tuple(accumulate(map(len, chunks)))[:-1] if chunks else ()
        return self._starts

    @classmethod
    def of(cls, items) -> "Chunks":
        items = tuple(items)
        return cls(tuple(items[k:k + SIZE] for k in range(0, len(items), SIZE)))

    # -- reading, as a tuple reads -----------------------------------------------------

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __iter__(self):
        return chain.from_iterable(self.chunks)

    def __reversed__(self):
        return reversed(tuple(self))

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(self.size)
            if step != 1:
                return tuple(self)[index]
            return self._slice(start, stop)
        if index < 0:
            index += self.size
        if not 0 <= index < self.size:
            raise IndexError("Chunks index out of range")
        first = self.chunks[0]
        if index < len(first):
            return first[index]
        k = bisect.bisect_right(self.starts, index) - 1
        return self.chunks[k][index - self.starts[k]]

    def __eq__(self, other) -> bool:
        if isinstance(other, Chunks):
            other = tuple(other)
        return isinstance(other, tuple) and len(other) == self.size and tuple(self) == other

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Chunks({tuple(self)!r})"

    def index(self, item) -> int:
        return tuple(self).index(item)

    def count(self, item) -> int:
        return tuple(self).count(item)

    # -- building ------------------------------------------------------------------------

    def _slice(self, start: int, stop: int) -> "Chunks":
        if start >= stop:
            return EMPTY
        chunks = self.chunks
        if stop == self.size and start < len(chunks[0]):  # the first items dropped (an event taken off)
            head = chunks[0][start:]
            return Chunks(((head,) if head else ()) + chunks[1:], self.size - start)
        starts = self.starts
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, stop - 1) - 1
        if first == last:
            return Chunks((chunks[first][start - starts[first]:stop - starts[first]],))
        head = chunks[first][start - starts[first]:]
        tail = chunks[last][:stop - starts[last]]
        return Chunks((head,) + chunks[first + 1:last] + (tail,))

    def __add__(self, other) -> "Chunks":
        if isinstance(other, tuple):
            if not other:
                return self
            return _join(self.chunks, _split(other))
        if isinstance(other, Chunks):
            return _join(self.chunks, other.chunks)
        return NotImplemented

    def __radd__(self, other) -> "Chunks":
        if isinstance(other, tuple):
            if not other:
                return self
            return _join(_split(other), self.chunks)
        return NotImplemented

    def append(self, item) -> "Chunks":
        """The sequence with ``item`` at its end."""
        chunks = self.chunks
        if chunks and len(chunks[-1]) < SIZE:
            return Chunks(chunks[:-1] + (chunks[-1] + (item,),), self.size + 1)
        return Chunks(chunks + ((item,),), self.size + 1)

    def insert_sorted(self, item) -> "Chunks":
        """The sequence (sorted) with ``item`` after every item not greater than it (bisect.insort_right)."""
        chunks = self.chunks
        if not chunks:
            return Chunks(((item,),))
        k = bisect.bisect_right(chunks, item, key=_last)  # the first chunk whose last item is greater
        if k == len(chunks):
            k -= 1
        chunk = chunks[k]
        i = bisect.bisect_right(chunk, item)
        chunk = chunk[:i] + (item,) + chunk[i:]
        if len(chunk) > SIZE:
            half = len(chunk) // 2
            return Chunks(chunks[:k] + (chunk[:half], chunk[half:]) + chunks[k + 1:], self.size + 1)
        return Chunks(chunks[:k] + (chunk,) + chunks[k + 1:], self.size + 1)

    def remove_sorted(self, key: tuple) -> "Chunks":
        """The sequence (sorted, of tuples) without the item whose first two fields are ``key`` (which must be there)."""
        chunks = self.chunks
        k = bisect.bisect_left(chunks, key, key=_last)
        chunk = chunks[k]
        i = bisect.bisect_left(chunk, key)
        assert chunk[i][0] == key[0] and chunk[i][1] == key[1], "no such item"
        chunk = chunk[:i] + chunk[i + 1:]
        return Chunks(chunks[:k] + ((chunk,) if chunk else ()) + chunks[k + 1:], self.size - 1)

    def find_key(self, value, key) -> tuple:
        """(the index of the item whose ``key`` is ``value``, the item), the items in ascending ``key``."""
        chunks = self.chunks
        k = bisect.bisect_left(chunks, value, key=lambda chunk: key(chunk[-1]))
        chunk = chunks[k]
        i = bisect.bisect_left(chunk, value, key=key)
        item = chunk[i]
        assert key(item) == value, "no such item"
        return (i if k == 0 else self.starts[k] + i), item

    def delete(self, index: int) -> "Chunks":
        """The sequence without its item at ``index`` (0 <= index < len)."""
        chunks = self.chunks
        k = 0 if index < len(chunks[0]) else bisect.bisect_right(self.starts, index) - 1
        i = index - (self.starts[k] if k else 0)
        chunk = chunks[k][:i] + chunks[k][i + 1:]
        return Chunks(chunks[:k] + ((chunk,) if chunk else ()) + chunks[k + 1:], self.size - 1)

    def replace(self, index: int, item) -> "Chunks":
        """The sequence with ``item`` at ``index`` (0 <= index < len)."""
        chunks = self.chunks
        k = 0 if index < len(chunks[0]) else bisect.bisect_right(self.starts, index) - 1
        i = index - (self.starts[k] if k else 0)
        chunk = chunks[k][:i] + (item,) + chunks[k][i + 1:]
        return Chunks(chunks[:k] + (chunk,) + chunks[k + 1:], self.size)

    def pop_key(self, value, key) -> tuple:
        """(the item whose ``key`` is ``value``, the sequence without it), the items in ascending ``key``."""
        chunks = self.chunks
        k = bisect.bisect_left(chunks, value, key=lambda chunk: key(chunk[-1]))
        chunk = chunks[k]
        i = bisect.bisect_left(chunk, value, key=key)
        item = chunk[i]
        assert key(item) == value, "no such item"
        chunk = chunk[:i] + chunk[i + 1:]
        return item, Chunks(chunks[:k] + ((chunk,) if chunk else ()) + chunks[k + 1:], self.size - 1)


def _last(chunk: tuple):
    return chunk[-1]


def _split(items: tuple) -> tuple:
    return tuple(items[k:k + SIZE] for k in range(0, len(items), SIZE))


def _join(left: tuple, right: tuple) -> Chunks:
    """The chunks of ``left`` then ``right``, the two that meet merged when they fit in one."""
    if left and right and len(left[-1]) + len(right[0]) <= SIZE:
        return Chunks(left[:-1] + (left[-1] + right[0],) + right[1:])
    return Chunks(left + right)


EMPTY = Chunks(())


def appended(items, item):
    """``items + (item,)`` as the fast engine keeps it (in chunks from LONG items on)."""
    if type(items) is tuple:
        if len(items) + 1 < LONG:
            return items + (item,)
        return Chunks.of(items + (item,))
    return items.append(item)


def insert_event(events, key: tuple[float, int], kind: str, a: int = 0, b: int = 0):
    """configuration.insert_event on the fast engine's events (a tuple, or Chunks when long)."""
    event = (key[0], key[1], kind, a, b)
    if type(events) is tuple:
        if len(events) < LONG:
            i = bisect.bisect_right(events, key)
            return events[:i] + (event,) + events[i:]
        events = Chunks.of(events)
    return events.insert_sorted(event)
