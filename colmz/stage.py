"""``Stage``: the correction buffer's inserted batches, not yet sorted.

Design
------
Inserting must be cheap when a sink hands over a few updates at a time, so an insert only
appends the batch's encoding (``colmz.updates.Encoded``, already negated for feedback) to
the stage. Sorting, consolidating and routing into the bucket chain wait until the stage
holds a chunk's worth of updates or a read needs it -- the role of the stage in Materialize's
``src/compute/src/sink/correction_v2.rs``.

The stage never copies what it is given: the encodings hold the arrays of immutable
``Updates``. Saving it for a rollback (``colmz.rollback``) copies the list of encodings, not
the arrays.

Invariant: ``count`` is the number of updates in ``parts``.
"""

from __future__ import annotations

from colmz.updates import Encoded, concat_encoded

__all__ = ["Stage"]


class Stage:
    """Encoded batches waiting to be sorted and routed.

    Examples
    --------
    >>> import colmz
    >>> s = Stage()
    >>> s.push(colmz.Updates({"k": [1, 2]}, time=[0, 1], diff=[1, 1]).encode())
    >>> len(s), len(s.take())
    (2, 2)
    >>> len(s), s.take() is None
    (0, True)
    """

    # What a failed call of the correction buffer rolls back (colmz.rollback).
    ROLLBACK_FIELDS = ("parts", "count")

    __slots__ = ("parts", "count")

    def __init__(self):
        self.parts: list[Encoded] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def push(self, enc: Encoded) -> None:
        """Stage a non-empty encoded batch."""
        self.parts.append(enc)
        self.count += len(enc)

    def peek(self) -> Encoded | None:
        """All staged updates as one encoded run (unsorted), without emptying the stage."""
        parts = self.parts
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else concat_encoded(parts)

    def clear(self) -> None:
        self.parts = []
        self.count = 0

    def take(self) -> Encoded | None:
        """Empty the stage, returning what it held as one run (``None`` when empty)."""
        out = self.peek()
        self.clear()
        return out

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.parts)
