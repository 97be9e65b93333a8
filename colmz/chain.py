"""Chunks and chains: sorted, consolidated runs of encoded updates.

Design
------
A *chunk* is a bounded block of encoded updates ``(keys, time, diff)`` (see ``colmz.order``)
sorted by ``(time, data)``; a *chain* is a list of chunks that is sorted and consolidated as a
whole: no ``(time, data)`` twice, no zero diff, each chunk's first row after the previous
chunk's last. A chain caches its update count.

Chunks hold at most ``chunk_size`` updates. When a merge produces a chain, its output array is
cut into chunk *views* -- cutting copies nothing. Splitting a chain at a time ``t``
(:meth:`Chain.split_at`) routes whole chunks by their first and last times and binary-searches
only the one chunk that straddles ``t``; the part of that chunk that stays in the buffer is
copied into its own arrays so that it does not keep the consumed part of the merge output
alive. So a split touches ``O(1)`` chunks beyond the routed ones and copies at most one
chunk's worth of updates, and a read at a small upper never looks at the chunks of the far
future.

Merging runs needs contiguous arrays. A chain whose chunks are still adjacent views of one
merge output (the common case) is handed to the kernels as one view, without copying;
otherwise its chunks are concatenated (counted as copied work).

Work counters (:class:`Work`) record updates copied and chunks touched, so complexity claims
are tested by counting, not timing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from colmz.kernels.split import lower_bound
from colmz.order import Layout, pad_keys, unify_layouts
from colmz.updates import Encoded

__all__ = ["Chain", "Chunk", "Work", "negated"]


@dataclass
class Work:
    """Counters of the work a structure did (cumulative)."""

    copied: int = 0  # updates written into newly built chunks (merges, flushes, split copies)
    chunks_touched: int = 0  # chunks inspected by splits beyond routing by cached bounds
    merges: int = 0  # merge kernel calls
    sorts: int = 0  # sort kernel calls (stage flushes, many-stale-times reads)
    consolidated: int = 0  # updates taken in by sorts and merges (before they cancel)

    def as_dict(self) -> dict:
        return {
            "copied": self.copied,
            "consolidated": self.consolidated,
            "chunks_touched": self.chunks_touched,
            "merges": self.merges,
            "sorts": self.sorts,
        }


class Chunk:
    """A block of updates sorted by ``(time, data)``: an ``Encoded`` run and its cached bounds.

    The run (keys, times, diffs and the keys' layout) is the one shape an encoded run has in
    colmz: what ``Updates.encode`` makes, what the stage holds and what a read hands out
    (``chunk.encoded``) are the same object, never re-packed. Arrays are never modified.
    """

    __slots__ = ("encoded", "n", "first_time", "last_time")

    def __init__(self, encoded: Encoded):
        self.encoded = encoded
        time = encoded.time
        # Cached: routing and splitting consult them far more often than chunks are made.
        self.n = n = len(time)
        self.first_time = int(time[0]) if n else 0
        self.last_time = int(time[n - 1]) if n else 0

    @classmethod
    def of(cls, keys: np.ndarray, time: np.ndarray, diff: np.ndarray, layout: Layout) -> Chunk:
        return cls(Encoded(keys, time, diff, layout))

    @property
    def keys(self) -> np.ndarray:
        return self.encoded.keys

    @property
    def time(self) -> np.ndarray:
        return self.encoded.time

    @property
    def diff(self) -> np.ndarray:
        return self.encoded.diff

    @property
    def layout(self) -> Layout:
        return self.encoded.layout

    def __len__(self) -> int:
        return self.n

    def slice(self, a: int, b: int) -> Chunk:
        return Chunk(self.encoded.slice(a, b))

    def copy(self) -> Chunk:
        e = self.encoded
        return Chunk(Encoded(e.keys.copy(), e.time.copy(), e.diff.copy(), e.layout))


def _adjacent(a: np.ndarray, b: np.ndarray) -> bool:
    # b starts right where a ends, inside the same allocation.
    if a.base is None or a.base is not b.base:
        return False
    return a.__array_interface__["data"][0] + a.nbytes == b.__array_interface__["data"][0]


class Chain:
    """A list of chunks that is sorted by ``(time, data)`` and consolidated as a whole."""

    __slots__ = ("chunks", "count")

    def __init__(self, chunks: list[Chunk] | None = None):
        self.chunks = [c for c in (chunks or []) if c.n]
        self.count = sum(c.n for c in self.chunks)

    @classmethod
    def _of(cls, chunks: list[Chunk], count: int) -> Chain:
        # Trusted constructor: non-empty chunks whose lengths sum to count.
        chain = cls.__new__(cls)
        chain.chunks = chunks
        chain.count = count
        return chain

    @classmethod
    def from_arrays(cls, keys, time, diff, layout: Layout, chunk_size: int) -> Chain:
        """A chain of chunk views over freshly built sorted, consolidated arrays."""
        n = len(time)
        if n <= chunk_size:
            return cls._of([Chunk.of(keys, time, diff, layout)], n) if n else cls._of([], 0)
        chunks = [
            Chunk.of(keys[i:i + chunk_size], time[i:i + chunk_size], diff[i:i + chunk_size], layout)
            for i in range(0, n, chunk_size)
        ]
        return cls._of(chunks, n)

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __repr__(self) -> str:
        if not self.chunks:
            return "Chain(empty)"
        return (
            f"Chain({self.count} updates in {len(self.chunks)} chunks, "
            f"times {self.first_time}..{self.last_time})"
        )

    @property
    def first_time(self) -> int:
        return self.chunks[0].first_time

    @property
    def last_time(self) -> int:
        return self.chunks[-1].last_time

    @property
    def layout(self) -> Layout:
        return self.chunks[0].layout

    def split_at(self, t: int | None, work: Work) -> tuple[Chain, Chain]:
        """Split into the updates with times ``< t`` and those ``>= t`` (``None``: all lower).

        Whole chunks move by their cached first/last times; only a chunk that straddles ``t``
        is searched, and its upper part is copied.
        """
        if t is None or not self.chunks:
            return self, _EMPTY
        if t == 0 or self.chunks[0].first_time >= t:
            return _EMPTY, self
        if self.chunks[-1].last_time < t:
            return self, _EMPTY
        lower: list[Chunk] = []
        upper: list[Chunk] = []
        for c in self.chunks:
            if upper:
                upper.append(c)
            elif c.last_time < t:
                lower.append(c)
            elif c.first_time >= t:
                upper.append(c)
            else:
                work.chunks_touched += 1
                i = int(lower_bound(c.time, np.uint64(t)))
                lower.append(c.slice(0, i))
                rest = c.slice(i, len(c)).copy()
                work.copied += len(rest)
                upper.append(rest)
        return Chain(lower), Chain(upper)

    def run(self, layout: Layout, work: Work) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The chain as one contiguous ``(keys, time, diff)`` run in ``layout``."""
        chunks = self.chunks
        if len(chunks) == 1:
            c = chunks[0]
            keys, time, diff = c.keys, c.time, c.diff
        elif all(
            _adjacent(a.time, b.time) and _adjacent(a.diff, b.diff) and _adjacent(a.keys, b.keys)
            for a, b in zip(chunks, chunks[1:])
        ):
            n = self.count
            first = chunks[0]
            # Re-view the common allocation from the first chunk's start: no copy.
            keys = np.lib.stride_tricks.as_strided(first.keys, (n, first.keys.shape[1]), first.keys.strides)
            time = np.lib.stride_tricks.as_strided(first.time, (n,), first.time.strides)
            diff = np.lib.stride_tricks.as_strided(first.diff, (n,), first.diff.strides)
        else:
            work.copied += self.count
            target = unify_layouts(*(c.layout for c in chunks))
            keys = np.concatenate([pad_keys(c.keys, c.layout, target) for c in chunks])
            time = np.concatenate([c.time for c in chunks])
            diff = np.concatenate([c.diff for c in chunks])
            return pad_keys(keys, target, layout), time, diff
        return pad_keys(keys, chunks[0].layout, layout), time, diff

    def bases(self):
        """The distinct allocations the chain's chunks keep alive (for memory accounting)."""
        for c in self.chunks:
            for a in (c.keys, c.time, c.diff):
                # A view counts its whole allocation; numba-made arrays own a MemInfo base.
                yield a.base if isinstance(a.base, np.ndarray) else a


def negated(chain: Chain) -> Chain:
    """The chain with every diff negated (new diff arrays; keys and times are shared).

    ``OverflowError`` when a diff is ``-2**63`` (see ``Encoded.negated``).
    """
    return Chain._of([Chunk(c.encoded.negated()) for c in chain.chunks], chain.count)


# Chains are never mutated, so one empty chain serves everywhere.
_EMPTY = Chain()
