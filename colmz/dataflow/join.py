"""``DeltaJoin``: an inner equi-join of two or more inputs, kept by the delta rule.

Design
------
``Δ(A ⋈ B) = ΔA ⋈ B_old + A_new ⋈ ΔB`` -- bilinear, as DBSP states it. For ``n`` inputs
Materialize's delta join (``src/compute/src/render/join/delta_join.rs``) renders one
*path* per input: input ``i``'s change is joined against every other input through a lookup
in that input's arrangement, and no intermediate result is arranged. When several inputs
change at one time, each combination must be counted once: a path from input ``i`` reads
input ``j``'s arrangement *with* ``j``'s change when ``j < i`` (the ``<=`` comparison) and
*without* it when ``j > i`` (``<``). Within one step that is an order: path ``i`` runs, then
``Δi`` enters input ``i``'s arrangements, then path ``i + 1`` runs. The sum over paths is
``Π(X + ΔX) − ΠX`` exactly (telescoping).

Keys. ``on`` equates columns of different inputs; the equated columns form equivalence
classes. A path starts from its input and adds, in input order, the first input sharing a
class with what it has joined so far; that input is looked up by all of its columns whose
class is bound already (an arrangement per ``(input, key)``, shared by the paths that need
it). Equated columns must have the same type up to lossless widening (their words are then
equal exactly when SQL's ``=`` holds). SQL's ``=`` is never true for NULL: rows with a NULL in
a join column join nothing, so they are dropped on entry and never arranged. Inputs not
connected by ``on`` are a cross join: a path reaching no input through a key looks up the
next one under the empty key (every row of it), so a change costs its rows times that
input's (Materialize's cross join has the same cost). Two columns of one input in one class
(a filter) are refused: absent today.

Shared arrangements. ``shared`` (``colmz.dataflow.shared``) gives, for some inputs, a
function of a key returning a :class:`~colmz.dataflow.shared.SharedInput`: that input's
arrangement by that key is the catalog's shared one, which holds the step's changes *before*
the step (the engine feeds it first) and which the join never inserts into. The ``<``/``<=``
rule then reads: a path from input ``i`` looking up a shared input ``j > i`` subtracts the
matches of ``Δj`` (the arrangement without ``j``'s change), one looking up ``j < i`` reads it
as it is. A shared arrangement holds every row of its relation, NULLs included: rows found
there with a NULL in one of the input's join columns are dropped (an own arrangement never
holds them), so a lookup answers exactly what an own arrangement would.

Column names must be distinct across the inputs (rename with ``MapFilter``); the output is
every input's columns, in input order. Cost per step: the deltas times the lookups
(``log`` of each run of the arrangements looked up) plus the rows they match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.keyed import KeyedArrangement, Matches
from colmz.dataflow.step import Clock, as_schema, check_delta, consolidated_at, multiply_diffs
from colmz.ops import concat
from colmz.order import ColumnSpec, encode_columns
from colmz.rollback import undone_on_error
from colmz.updates import Updates, widen

__all__ = ["DeltaJoin"]


class DeltaJoin:
    """Inner equi-join of ``inputs`` on the equalities ``on``, one delta path per input.

    Parameters
    ----------
    inputs : sequence of schemas (mappings of name to Arrow type, or ``ColumnSpec`` s)
        Two or more; column names distinct across all of them.
    on : sequence of ``(column, column)``
        Equalities between columns of different inputs (connecting every input).
    shared : mapping of input index to a function of a key (tuple of that input's column
        names) returning its shared arrangement (``SharedInput``), optional
        Inputs arranged in the catalog's shared arrangements (module docstring).
    nulls_equal : bool, default False
        A NULL key matches a NULL key (Materialize's MIR join equality; SQL's ``=`` when
        False): a semijoin on whole rows, which may hold NULLs.

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> j = DeltaJoin([{"tk": pa.int64(), "v": pa.int64()}, {"uk": pa.int64(), "w": pa.string()}],
    ...               on=[("tk", "uk")])
    >>> j.step(1, colmz.Updates({"tk": [1, 2, None], "v": [10, 20, 30]}, time=[1] * 3, diff=[1] * 3),
    ...           colmz.Updates({"uk": [1, None], "w": ["a", "n"]}, time=[1, 1], diff=[1, 1])).to_pylist()
    [(1, 10, 1, 'a', 1, 1)]
    >>> j.step(2, colmz.Updates({"tk": [], "v": []}, time=[], diff=[], schema={"tk": pa.int64(), "v": pa.int64()}),
    ...           colmz.Updates({"uk": [2], "w": ["b"]}, time=[2], diff=[1])).to_pylist()
    [(2, 20, 2, 'b', 2, 1)]
    """

    #: The arrangements (saved in place: each declares its own fields) and the clock.
    ROLLBACK_FIELDS = ("_arrangements", "_clock")

    def __init__(self, inputs: Sequence, on: Sequence[tuple[str, str]], shared: Mapping | None = None,
                 nulls_equal: bool = False):
        schemas = tuple(as_schema(s, f"inputs[{i}]") for i, s in enumerate(inputs))
        if len(schemas) < 2:
            raise ValueError(f"a join needs at least two inputs, got {len(schemas)}")
        owner: dict[str, int] = {}
        types: dict[str, pa.DataType] = {}
        for i, s in enumerate(schemas):
            for c in s:
                if c.name in owner:
                    raise ValueError(f"column {c.name!r} is in inputs[{owner[c.name]}] and inputs[{i}]: "
                                     "column names must be distinct across a join's inputs (rename with MapFilter)")
                owner[c.name] = i
                types[c.name] = c.type
        self.input_schemas = schemas
        self.schema: tuple[ColumnSpec, ...] = tuple(c for s in schemas for c in s)
        self.on = tuple(self._check_pair(p, owner, types) for p in on)
        classes = _classes(self.on)
        for cls in classes:
            ins = [owner[c] for c in cls]
            if len(set(ins)) != len(ins):
                raise ValueError(f"the join equates columns of one input ({sorted(cls)}): a filter, "
                                 "absent from joins today (filter with MapFilter first)")
        class_of = {c: k for k, cls in enumerate(classes) for c in cls}
        # the columns whose NULL joins nothing (dropped on entry): none when NULLs are equal
        self._key_columns = [() if nulls_equal else tuple(c.name for c in s if c.name in class_of)
                             for s in schemas]
        self._arrangements: dict[tuple[int, tuple[str, ...]], KeyedArrangement] = {}
        self._shared = dict(shared or {})
        for j in self._shared:
            if not isinstance(j, int) or not 0 <= j < len(schemas):
                raise ValueError(f"shared names input {j!r}; the join has inputs 0..{len(schemas) - 1}")
        self._paths = [self._plan_path(i, schemas, owner, class_of) for i in range(len(schemas))]
        self._clock = Clock()

    @staticmethod
    def _check_pair(pair, owner, types) -> tuple[str, str]:
        if isinstance(pair, str) or len(pair) != 2:
            raise ValueError(f"on must hold pairs of column names, got {pair!r}")
        a, b = pair
        for c in (a, b):
            if c not in owner:
                raise ValueError(f"on names column {c!r}, which no input has")
        if owner[a] == owner[b]:
            raise ValueError(f"on equates {a!r} and {b!r} of one input (inputs[{owner[a]}]): a filter, "
                             "absent from joins today")
        ta, tb = types[a], types[b]
        if ta != tb and (widen(ta, tb) is None or pa.types.is_temporal(ta) != pa.types.is_temporal(tb)):
            raise TypeError(f"on equates {a!r} ({ta}) with {b!r} ({tb}): join columns must have one type "
                            "(up to lossless widening); casts need SQL")
        return a, b

    def _plan_path(self, start: int, schemas, owner, class_of):
        """The lookups of input ``start``'s path: ``[(input, arrangement, source columns)]``."""
        joined = {start}
        bound: dict[int, str] = {class_of[c.name]: c.name for c in schemas[start] if c.name in class_of}
        steps = []
        while len(joined) < len(schemas):
            for j in range(len(schemas)):
                if j in joined:
                    continue
                key = tuple(c.name for c in schemas[j] if class_of.get(c.name) in bound)
                if key:
                    break
            else:
                # a cross join: the first input not joined yet, every row of it
                j, key = min(set(range(len(schemas))) - joined), ()
            arr = self._arrangements.get((j, key))
            if arr is None:
                arr = self._shared[j](key) if j in self._shared else KeyedArrangement(schemas[j], key)
                if j in self._shared and [c.name for c in arr.schema] != [c.name for c in schemas[j]]:
                    raise ValueError(f"the shared arrangement of inputs[{j}] has columns "
                                     f"{[c.name for c in arr.schema]}, the input {[c.name for c in schemas[j]]}")
                self._arrangements[(j, key)] = arr
            steps.append((j, arr, tuple(bound[class_of[c]] for c in key)))
            joined.add(j)
            for c in schemas[j]:
                if c.name in class_of:
                    bound.setdefault(class_of[c.name], c.name)
        return steps

    @property
    def arrangements(self) -> dict[tuple[int, tuple[str, ...]], KeyedArrangement]:
        """The arrangements, by ``(input, key columns)`` (for inspection and work counters)."""
        return dict(self._arrangements)

    def step(self, time, *deltas: Updates) -> Updates:
        """The join's change at ``time`` for the inputs' changes (one delta per input)."""
        time = self._clock.check(time)
        if len(deltas) != len(self.input_schemas):
            raise ValueError(f"a step of this join takes {len(self.input_schemas)} deltas, got {len(deltas)}")
        checked = [self.joinable(check_delta(d, s, time, f"deltas[{i}]"), i)
                   for i, (d, s) in enumerate(zip(deltas, self.input_schemas))]
        with undone_on_error(self):
            out = []
            for i, delta in enumerate(checked):
                if len(delta):
                    out.append(self._path(i, delta, checked))
                    for (j, _), arr in self._arrangements.items():
                        if j == i and j not in self._shared:  # a shared one holds it already
                            arr.insert_checked(time, delta)
            self._clock.advance(time)
            if not out:
                return Updates.empty(self.schema)
            return consolidated_at(concat(out), time)

    def joinable(self, delta: Updates, i: int) -> Updates:
        """Input ``i``'s ``delta`` without its rows holding a NULL in a join column (they join
        nothing)."""
        if not len(delta):
            return delta
        null = np.zeros(len(delta), bool)
        for c in self._key_columns[i]:
            col = delta.column(c)
            if col.null_count:
                null |= col.is_null().to_numpy(zero_copy_only=False)
        return delta.take(np.flatnonzero(~null)) if null.any() else delta

    def _path(self, i: int, delta: Updates, deltas: Sequence[Updates]) -> Updates:
        cols = {c.name: delta.column(c.name) for c in self.input_schemas[i]}
        diff = np.asarray(delta.diff, np.int64)
        for j, arr, sources in self._paths[i]:
            if not len(diff):
                break
            q, ql = encode_columns([cols[s] for s in sources], n=len(diff))
            if j in self._shared:
                # `<` for a later input: its arrangement without its change at this step
                found = self._joinable_found(arr.lookup_words(q, ql, minus=deltas[j] if j > i else None), j)
            else:
                found = arr.lookup_words(q, ql)
            q = found.query
            if len(q) != len(diff) or not np.array_equal(q, np.arange(len(q))):
                # rows matched other than once each, in order (else the columns stay as they are)
                take = pa.array(q)
                cols = {n: c.take(take) for n, c in cols.items()}
            for c in self.input_schemas[j]:
                cols[c.name] = found.rows.column(c.name)
            diff = multiply_diffs(diff[found.query], found.rows.diff)
        if not len(diff):
            return Updates.empty(self.schema)
        return Updates({c.name: cols[c.name] for c in self.schema}, np.zeros(len(diff), np.uint64), diff,
                       copy=False)

    def _joinable_found(self, found: Matches, j: int) -> Matches:
        """The rows of a lookup into input ``j``'s shared arrangement with no NULL in a join
        column (those an own arrangement, fed :meth:`joinable` rows, would hold)."""
        rows = found.rows
        if not len(rows):
            return found
        null = np.zeros(len(rows), bool)
        for c in self._key_columns[j]:
            col = rows.column(c)
            if col.null_count:
                null |= col.is_null().to_numpy(zero_copy_only=False)
        if not null.any():
            return found
        keep = np.flatnonzero(~null)
        return Matches(found.query[keep], rows.take(keep))

    def __repr__(self) -> str:
        return f"DeltaJoin({len(self.input_schemas)} inputs, on={list(self.on)})"


def _classes(pairs) -> list[set[str]]:
    """Equivalence classes of the columns the pairs equate (union-find, small)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    out: dict[str, set[str]] = {}
    for x in list(parent):
        out.setdefault(find(x), set()).add(x)
    return list(out.values())
