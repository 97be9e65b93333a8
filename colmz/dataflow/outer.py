"""``OuterJoin``: LEFT, RIGHT and FULL equi-joins of two inputs, kept by delta rules.

Design
------
Materialize lowers an outer join to the inner join plus the preserved side's rows that
match nothing, padded with NULLs (``src/sql/src/plan/lowering.rs``,
``src/transform/tests/test_transforms/semijoin_idempotence.spec``). Here
that union is one operator around a :class:`~colmz.dataflow.DeltaJoin` of the two inputs,
reusing its arrangements (each input arranged by its join columns).

For a preserved side ``P`` and the other side ``O``, the unmatched part is
``U = Σ_p p · z(key p)`` with ``z(k) = [O holds no row of key k]``, and a row with a NULL in a
join column is always unmatched (SQL's ``=`` is never true for NULL). Its change::

    ΔU = ΔP · z_new  +  P_old · (z_new − z_old)

-- the new rows of ``P`` where ``O`` (with its change) has no match, and the old rows of
``P`` under every key whose match flipped, added (``O`` emptied) or retracted (``O`` gained
it). ``P_old`` and ``z_old`` are read from the inner join's arrangements before its step;
``z_new`` adds the change's counts of ``O``. Cost: the deltas, plus the rows of ``P`` under
keys that flip.

Shared arrangements. With ``shared`` (as :class:`~colmz.dataflow.DeltaJoin` takes it) an input
is arranged in the catalog's shared arrangement, which holds the step's changes before the
step: ``P_old`` and ``O``'s counts before its change are then read as the arrangement minus
the change (``SharedInput.lookup_words`` / ``counts_words`` with ``minus=``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.accumulable import sort_groups
from colmz.dataflow.join import DeltaJoin
from colmz.dataflow.step import Clock, check_delta, consolidated_at
from colmz.ops import concat
from colmz.order import Layout, encode_columns, pad_keys, search_rows, unify_layouts
from colmz.rollback import undone_on_error
from colmz.updates import Updates

__all__ = ["OuterJoin"]

_KINDS = ("left", "right", "full")


class OuterJoin:
    """``left {LEFT|RIGHT|FULL} JOIN right ON`` equalities, one delta per input per step.

    Parameters
    ----------
    inputs : two schemas (column names distinct across them)
    on : sequence of ``(left column, right column)`` equalities
    kind : ``"left"``, ``"right"`` or ``"full"``

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> j = OuterJoin([{"k": pa.int64()}, {"uk": pa.int64()}], on=[("k", "uk")], kind="left")
    >>> j.step(1, colmz.Updates({"k": [1, 2]}, time=[1, 1], diff=[1, 1]),
    ...           colmz.Updates({"uk": [1]}, time=[1], diff=[1])).to_pylist()
    [(1, 1, 1, 1), (2, None, 1, 1)]
    >>> j.step(2, colmz.Updates.empty({"k": pa.int64()}), colmz.Updates({"uk": [2]}, time=[2], diff=[1])).to_pylist()
    [(2, None, 2, -1), (2, 2, 2, 1)]
    """

    ROLLBACK_FIELDS = ("_inner", "_clock")

    def __init__(self, inputs: Sequence, on: Sequence[tuple[str, str]], *, kind: str, shared: Mapping | None = None):
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
        if len(inputs) != 2:
            raise ValueError(f"an outer join takes two inputs, got {len(inputs)}")
        self._inner = DeltaJoin(inputs, on, shared=shared)
        self._shared = frozenset(shared or ())
        self.kind = kind
        self.input_schemas = self._inner.input_schemas
        self.schema = self._inner.schema
        left_names = {c.name for c in self.input_schemas[0]}
        pairs = [(a, b) if a in left_names else (b, a) for a, b in self._inner.on]
        self._keys = (tuple(a for a, _ in pairs), tuple(b for _, b in pairs))
        arrs = self._inner.arrangements
        self._arranged = []
        #: Each side's arrangement key as positions among the pairs: an arrangement is keyed
        #: by its side's join columns in that side's schema order (``DeltaJoin``), which the
        #: pairs' order (``on``'s) need not be -- nor the other side's.
        self._orders = []
        for i in (0, 1):
            (arr,) = [a for (j, _), a in arrs.items() if j == i]
            self._arranged.append(arr)
            self._orders.append([self._keys[i].index(c) for c in arr.key])
        self._clock = Clock()

    @property
    def arrangements(self):
        """The inner join's arrangements (for inspection and work counters)."""
        return self._inner.arrangements

    @property
    def preserved(self) -> tuple[int, ...]:
        """The inputs whose unmatched rows the output keeps (0: left, 1: right)."""
        return {"left": (0,), "right": (1,), "full": (0, 1)}[self.kind]

    def step(self, time, *deltas: Updates) -> Updates:
        """The outer join's change at ``time`` for the inputs' changes (left, right)."""
        time = self._clock.check(time)
        if len(deltas) != 2:
            raise ValueError(f"a step of an outer join takes 2 deltas, got {len(deltas)}")
        checked = [check_delta(d, s, time, f"deltas[{i}]") for i, (d, s) in enumerate(zip(deltas, self.input_schemas))]
        with undone_on_error(self):
            parts = [self._unmatched(p, checked, time) for p in self.preserved]
            parts.append(self._inner.step(time, *checked))
            self._clock.advance(time)
            out = [p for p in parts if len(p)]
            return consolidated_at(concat(out), time) if out else Updates.empty(self.schema)

    def _key_words(self, side: int, u: Updates, order: list[int]) -> tuple[np.ndarray, Layout]:
        """``u``'s join columns (of input ``side``) encoded in ``order`` (pair positions)."""
        return encode_columns([u.column(self._keys[side][i]) for i in order], n=len(u))

    def _both_words(self, p: int, dp: Updates, do: Updates, order: list[int]) -> tuple[np.ndarray, Layout]:
        """The keys of ``dp`` (input ``p``) then of ``do`` (the other), encoded alike in
        ``order``."""
        pw, pl = self._key_words(p, dp, order)
        ow, ol = self._key_words(1 - p, do, order)
        layout = unify_layouts(pl, ol)
        return np.concatenate([pad_keys(pw, pl, layout), pad_keys(ow, ol, layout)]), layout

    def _unmatched(self, p: int, deltas: list[Updates], time: int) -> Updates:
        o = 1 - p
        dp, do = deltas[p], deltas[o]
        null = np.zeros(len(dp), bool)
        for c in self._keys[p]:
            col = dp.column(c)
            if col.null_count:
                null |= col.is_null().to_numpy(zero_copy_only=False)
        out = []
        if null.any():  # never matched: straight through, padded
            out.append(self._padded(p, dp.take(np.flatnonzero(null)), 1))
            dp = dp.take(np.flatnonzero(~null))
        do = self._inner.joinable(do, o)
        if not len(dp) and not len(do):
            return self._concat(out)
        # the keys in O's arrangement's column order (its counts), and in P's (its lookups)
        words, layout = self._both_words(p, dp, do, self._orders[o])
        pw, ow = words[:len(dp)], words[len(dp):]
        keys, starts, order = sort_groups(words)
        keys = np.ascontiguousarray(keys[starts])
        # O's count per key, before and after its change.
        before = (self._arranged[o].counts_words(keys, layout, minus=do) if o in self._shared
                  else self._arranged[o].counts_words(keys, layout))
        change = np.zeros(len(keys), np.int64)
        np.add.at(change, search_rows(keys, ow, "left"), np.asarray(do.diff, np.int64))
        z_old, z_new = before == 0, before + change == 0
        # New rows of P where O has no match after its change.
        at = search_rows(keys, pw, "left")
        keep = np.flatnonzero(z_new[at])
        if len(keep):
            out.append(self._padded(p, dp.take(keep), 1))
        # Old rows of P under keys whose match flipped.
        flip = np.flatnonzero(z_new != z_old)
        if len(flip):
            if self._orders[p] == self._orders[o]:
                fk, fl = np.ascontiguousarray(keys[flip]), layout
            else:  # each flipped key as one of its rows encodes it in P's order
                pwords, fl = self._both_words(p, dp, do, self._orders[p])
                fk = np.ascontiguousarray(pwords[order[starts[flip]]])
            found = (self._arranged[p].lookup_words(fk, fl, minus=deltas[p]) if p in self._shared
                     else self._arranged[p].lookup_words(fk, fl))
            if len(found.rows):
                sign = np.where(z_new[flip], 1, -1)[found.query]
                out.append(self._padded(p, found.rows, sign))
        return self._concat(out)

    def _padded(self, p: int, rows: Updates, sign) -> Updates:
        n = len(rows)
        data = {}
        for i, schema in enumerate(self.input_schemas):
            for c in schema:
                data[c.name] = rows.column(c.name) if i == p else pa.nulls(n, c.type)
        diff = np.asarray(rows.diff, np.int64) * sign
        return Updates(data, np.zeros(n, np.uint64), diff, copy=False)

    def _concat(self, parts: list[Updates]) -> Updates:
        parts = [x for x in parts if len(x)]
        return concat(parts) if parts else Updates.empty(self.schema)

    def __repr__(self) -> str:
        return f"OuterJoin({self.kind}, on={list(self._inner.on)})"
