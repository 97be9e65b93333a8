"""``BucketChain``: future updates bucketed by time, in buckets that widen into the future.

Design
------
Materialize keeps updates at future times in a *bucket chain*
(``src/timely-util/src/temporal.rs``): the times ``[lower, 2**64)`` are tiled by buckets
``[offset, offset + 2**bits)``, narrow near the lower end and wider further out, so that the
updates a reader needs soon sit in small buckets and a huge mass at far-future times sits in a
few wide ones that nobody touches until their time comes. colmz's correction buffer
(``colmz.correction``) keeps its chains in one.

The chain knows nothing of what a bucket holds. A bucket is any value, and the chain is given
one function, ``split(bucket, mid) -> (lower, upper, cost)``, which divides a bucket's content
at the time ``mid`` (``lower`` holding the times ``< mid``) and says how much work that was.
Buckets are replaced, never mutated in place, so saving the chain for a rollback copies the
offset list and the bucket map, never the contents.

Operations
~~~~~~~~~~
* :meth:`BucketChain.find` -- the bucket holding a time (``O(log buckets)``).
* :meth:`BucketChain.peel` -- remove and return the buckets that lie wholly before an upper,
  first halving the bucket that straddles it until none does.
* :meth:`BucketChain.restore` -- split buckets, front first, until the chain is *well-formed*
  or the fuel runs out.

Invariants (:meth:`BucketChain.check_invariants`)
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1. The buckets tile ``[lower, 2**domain_bits)`` without gap or overlap, in offset order
   (after a peel at the empty upper the chain is empty).
2. *Well-formed* (the 4x neighbour rule): each bucket is at most two bits wider than the one
   before it, with an imaginary bucket of ``-2`` bits in front -- so the first bucket has width
   1 and adjacent widths differ by at most 4x. Then a peel at ``lower + 1`` removes one bucket
   and splits ``O(1)`` buckets, and the chain holds ``O(domain_bits)`` buckets.
   ``well_formed`` is ``True`` only when the rule holds; a peel clears it.

Only the front of the chain changes in a peel, so :meth:`restore` remembers how far the peel
reached (``clean_from``) and stops at the first bucket past it when the chain was well-formed
before: the sink's tick costs ``O(1)`` bucket visits, not ``O(buckets)``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from colmz.frontier import Frontier

__all__ = ["BucketChain"]

B = TypeVar("B")


class BucketChain(Generic[B]):
    """Buckets ``[offset, offset + 2**bits)`` tiling the times from ``lower`` on.

    Parameters
    ----------
    bucket : the content of the first bucket, which spans the whole domain
    split : callable ``(bucket, mid) -> (lower, upper, cost)``
        Divide a bucket at time ``mid``; ``cost`` is charged against :meth:`restore`'s fuel.
    domain_bits : int, default 64
        The times are ``[0, 2**domain_bits)``.

    Examples
    --------
    Buckets holding sorted lists of times:

    >>> def split(times, mid):
    ...     lo = [t for t in times if t < mid]
    ...     return lo, times[len(lo):], len(times)
    >>> chain = BucketChain(list(range(16)), split, domain_bits=4)
    >>> chain.peel(3)
    [[0, 1], [2]]
    >>> _ = chain.restore(100)
    >>> [(off, bits) for off, bits, _ in chain.items()]
    [(3, 0), (4, 2), (8, 3)]
    >>> chain.find(9)
    [8, 9, 10, 11, 12, 13, 14, 15]
    """

    # What a failed call of the correction buffer rolls back (colmz.rollback): containers
    # copied, buckets shared. ``restore`` (below) is upstream's word for something else:
    # restoring well-formedness.
    ROLLBACK_FIELDS = ("offsets", "content", "well_formed", "clean_from")

    __slots__ = ("offsets", "content", "well_formed", "clean_from", "split", "domain_bits")

    def __init__(self, bucket: B, split: Callable[[B, int], tuple[B, B, int]], domain_bits: int = 64):
        if not isinstance(domain_bits, int) or isinstance(domain_bits, bool) or domain_bits < 1:
            raise ValueError(f"domain_bits must be a positive integer, got {domain_bits!r}")
        self.domain_bits = domain_bits
        self.split = split
        # Sorted bucket offsets, and per offset (bits, bucket).
        self.offsets: list[int] = [0]
        self.content: dict[int, tuple[int, B]] = {0: (domain_bits, bucket)}
        self.well_formed = False
        # After a peel of a well-formed chain: the buckets from this time on kept their shape.
        self.clean_from: int | None = None

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        """The number of buckets."""
        return len(self.offsets)

    @property
    def lower(self) -> Frontier:
        """The first time the chain covers (``None`` once peeled at the empty upper)."""
        return self.offsets[0] if self.offsets else None

    def items(self) -> Iterator[tuple[int, int, B]]:
        """``(offset, bits, bucket)`` in time order."""
        content = self.content
        for off in self.offsets:
            bits, bucket = content[off]
            yield off, bits, bucket

    def buckets(self) -> Iterator[B]:
        """The buckets in time order."""
        content = self.content
        for off in self.offsets:
            yield content[off][1]

    def range_of(self, t: int) -> tuple[int, int] | None:
        """``(offset, bits)`` of the bucket holding time ``t`` (``None`` when peeled off)."""
        offsets = self.offsets
        i = bisect.bisect_right(offsets, t) - 1
        if i < 0:
            return None
        off = offsets[i]
        return off, self.content[off][0]

    def find(self, t: int) -> B | None:
        """The bucket holding time ``t``, or ``None`` when ``t`` was peeled off."""
        r = self.range_of(t)
        return None if r is None else self.content[r[0]][1]

    # ------------------------------------------------------------------ changing

    def replace(self, offset: int, bucket: B) -> None:
        """Make ``bucket`` the content of the bucket at ``offset`` (its range is unchanged)."""
        self.content[offset] = (self.content[offset][0], bucket)

    def peel(self, upper: Frontier) -> list[B]:
        """Remove and return, in time order, the buckets before ``upper`` (``None``: all).

        A bucket that straddles ``upper`` is halved (whatever the fuel) until none does, so
        the returned buckets hold exactly the times ``< upper``.
        """
        offsets, content = self.offsets, self.content
        peeled: list[B] = []
        was_well_formed = self.well_formed
        touched_end = None
        while offsets and (upper is None or offsets[0] < upper):
            offset = offsets[0]
            bits, bucket = content[offset]
            end = offset + (1 << bits)
            if touched_end is None or end > touched_end:
                touched_end = end
            self.well_formed = False
            if upper is None or end <= upper:
                offsets.pop(0)
                del content[offset]
                peeled.append(bucket)
            else:
                self._split_at(0)
        if touched_end is not None:
            # Only the front changed: from touched_end on the buckets kept their shape.
            self.clean_from = touched_end if was_well_formed else None
        return peeled

    def restore(self, fuel: int) -> int:
        """Split buckets, front first, until the chain is well-formed or ``fuel`` is spent.

        Each split costs what ``split`` reports (at least 1). Returns the fuel left; call
        again with more fuel while it is not positive.
        """
        if self.well_formed:
            return fuel
        offsets, content = self.offsets, self.content
        clean_from = self.clean_from
        i = 0
        last_bits = -2
        while i < len(offsets) and fuel > 0:
            off = offsets[i]
            bits = content[off][0]
            if bits <= last_bits + 2:
                if clean_from is not None and off >= clean_from:
                    # The rest was well-formed before the peel and is unchanged.
                    i = len(offsets)
                    break
                last_bits = bits
                i += 1
                continue
            if clean_from is not None:
                # Splitting changes this bucket's neighbourhood: only what follows it is clean.
                clean_from = max(clean_from, off + (1 << bits))
            fuel -= max(self._split_at(i), 1)  # reconsider the lower half at position i
        self.well_formed = i >= len(offsets)
        self.clean_from = None
        return fuel

    def _split_at(self, i: int) -> int:
        """Halve the bucket at position ``i``; returns the split's cost."""
        off = self.offsets[i]
        bits, bucket = self.content[off]
        if bits == 0:
            raise ValueError(f"the bucket at {off} has width 1 and cannot be split")
        bits -= 1
        mid = off + (1 << bits)
        lo, hi, cost = self.split(bucket, mid)
        self.content[off] = (bits, lo)
        self.content[mid] = (bits, hi)
        self.offsets.insert(i + 1, mid)
        return cost

    # ------------------------------------------------------------------ checks

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` when an invariant of the module docstring is broken."""
        offsets, content = self.offsets, self.content
        assert sorted(content) == offsets, "offsets and buckets disagree"
        for a, b in zip(offsets, offsets[1:]):
            assert a + (1 << content[a][0]) == b, "buckets must be contiguous"
        if offsets:
            last = offsets[-1]
            assert last + (1 << content[last][0]) == 1 << self.domain_bits, "buckets must reach the end of time"
        if self.well_formed:
            last_bits = -2
            for off in offsets:
                bits = content[off][0]
                assert bits <= last_bits + 2, "bucket chain marked well-formed but is not"
                last_bits = bits
