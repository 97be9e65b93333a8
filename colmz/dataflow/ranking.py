"""Ranking window functions kept natively per partition: ``row_number()``, ``rank()`` and
``dense_rank()``, found in a per-group query by DuckDB's own parse of it.

Design
------
A window query is recomputed per affected partition (``colmz.dataflow.recompute``,
Materialize's basic plan). When the query is exactly ``SELECT *, f() OVER (PARTITION BY
<the group key> ORDER BY <columns>) AS name, … FROM input_rows`` -- every item a ranking
function with no argument, filter or ``DISTINCT``, all over the same partition and order,
nothing else in the statement -- :func:`recognize` reads it off the text's
``colmz.sql.tree`` nodes (DuckDB's parse of the text DuckDB would run, the one tree every SQL
layer reads) and :func:`ranked_change` computes the
affected partitions' change itself, on the input arrangement's order-preserving words
(``colmz.order``), with no DuckDB call and no copy of the previous output:

* one kernel sort and consolidation of the affected partitions' rows and the delta's rows,
  each tagged (a last word: 0 for a row read from the arrangement, 1 for a delta row), by
  (partition, each ``ORDER BY`` item's NULL flag and words -- inverted for ``DESC`` -- the
  row's words, tag): a row's read and delta entries are adjacent, so its multiplicity before
  and after the delta are read off side by side (an own arrangement is read before the
  delta enters; a shared one after, so before is that minus the delta);
* per partition, the multiplicities' running sums give each row's places before and after:
  ``row_number`` the places themselves (a row of multiplicity ``c`` holds ``c`` consecutive
  numbers), ``rank`` one plus the places before its peers (rows equal on the ``ORDER BY``
  values), ``dense_rank`` one plus the peer groups before it that hold any row;
* the change is, per row, the numbers it held and no longer holds (retracted) and those it
  holds anew (inserted): ``[a, b) \\ [c, d) = [a, min(b, c)) ∪ [max(a, d), b)``, so a row
  whose places did not move emits nothing.

``row_number`` alone on packed rows (the usual query) leaves the per-row numpy passes to two
passes of one kernel (``colmz.kernels.ranking``) over the sorted entries: it sums equal
entries, places each row and emits the change in its final ``(row, number)`` order -- the
answer's consolidated order when the ``ORDER BY`` columns lead the payload -- with each
entry's partition and payload position; nothing per row is materialized and the change is
not sorted again. The sort is numpy's stable one: the read arrives run by run, each run's
rows already in (partition, row) order, and it merges such stretches in about linear time.

Order: PostgreSQL's (``ASC`` NULLs last, ``DESC`` NULLs first unless said otherwise -- the
session's ``default_null_order``), ties of ``row_number`` broken by colmz's total order on the
row (SQL leaves them unspecified: every answer is one DuckDB could give). Only columns whose
word order is SQL's order are ranked natively: integers, booleans, dates and times; floats
for ``row_number`` only (``-0.0`` and ``0.0`` are peers in SQL, different words here). Any
other query, or order, stays DuckDB's.

Invariant: the change emitted for a partition is exactly ``f(rows after) − f(rows before)``
for the deterministic ranking above, so the view holds ``f`` of the input after every step
(``tests/colmz/dataflow/test_ranking.py`` checks it against a model, NULL keys, ties,
duplicates and retractions to zero included).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from colmz.dataflow.gather import Found, concat_found
from colmz.dataflow.keyed import consolidate_packed, consolidate_words, expand_ranges, pack_columns
from colmz.dataflow.topk import OrderBy
from colmz.errors import NegativeMultiplicity
from colmz.kernels.pool import scratch
from colmz.kernels.ranking import positions_below, row_number_count, row_number_fill
from colmz.order import ColumnSpec, kind_of
from colmz.rows import EXPAND_LIMIT

__all__ = ["FUNCTIONS", "Ranking", "ranked_change", "recognize"]

#: DuckDB's window expression types of the ranking functions kept natively.
FUNCTIONS = {"WINDOW_ROW_NUMBER": "row_number", "WINDOW_RANK": "rank", "WINDOW_RANK_DENSE": "dense_rank"}
#: ``ORDER BY`` column kinds whose words order as SQL orders them (``colmz.order``).
_EXACT_KINDS = {"int", "uint", "bool"}
#: DuckDB's ``null_order`` values: ``None`` is the session's default (``NULLS LAST`` on
#: ``ASC``, ``NULLS FIRST`` on ``DESC``: PostgreSQL's, as ``colmz.sql.run`` sets it).
_NULL_ORDERS = {"ORDER_DEFAULT": None, "NULLS FIRST": True, "NULLS_FIRST": True, "NULLS LAST": False,
                "NULLS_LAST": False}


class Ranking(NamedTuple):
    """A query :func:`recognize` found: the output columns' ``names`` and ``functions``
    (``row_number``, ``rank``, ``dense_rank``) in the select list's order, and the ``order``."""

    names: tuple[str, ...]
    functions: tuple[str, ...]
    order: tuple[OrderBy, ...]


def _column(e) -> str | None:
    """The column a bare one-part reference names (``None`` for anything else)."""
    if e.cls == "COLUMN_REF" and len(e.name) == 1:
        return e.name[0]
    return None


def recognize(translated: str, schema, group_by, out_schema) -> Ranking | None:
    """The ranking query ``translated`` is (module docstring), or ``None`` when it is
    anything else: ``schema`` the input's columns, ``group_by`` the partition, ``out_schema``
    the answer's columns (as ``colmz.dataflow.recompute.output_schema`` gives them). Read
    on ``colmz.sql.tree``'s nodes of the text (the parse every SQL layer reads).

    >>> import pyarrow as pa
    >>> from colmz.order import ColumnSpec
    >>> s = (ColumnSpec("g", pa.int64()), ColumnSpec("v", pa.int64()))
    >>> r = recognize("SELECT *, rank() OVER (PARTITION BY g ORDER BY v DESC) AS r FROM input_rows", s, ["g"],
    ...               (*s, ColumnSpec("r", pa.int64())))
    >>> r.functions, [(o.column, o.descending, o.nulls_first) for o in r.order]
    (('rank',), [('v', True, True)])
    """
    from colmz.dataflow.recompute import INPUT_RELATION
    from colmz.sql.tree import parse_tree

    try:
        tree = parse_tree(translated)
    except Exception:  # noqa: BLE001 - any failure to parse means: not recognized (DuckDB runs it)
        return None
    if len(tree) != 1:
        return None
    q = tree[0]
    if q.type != "SELECT_NODE" or q.aggregate_handling != "STANDARD_HANDLING":
        return None
    if q.modifiers or q.where is not None or q.group_by or q.grouping_sets or q.having is not None or q.sampled \
            or q.qualify is not None or q.ctes:
        return None
    src = q.from_
    if src is None or src.type != "BASE_TABLE" or src.name != (INPUT_RELATION,) or src.modified \
            or src.column_aliases:
        return None
    items = q.items
    if not items or items[0].cls != "STAR" or items[0].relation or items[0].star_modified:
        return None
    types = {c.name: c.type for c in schema}
    names, functions, order = [], [], None
    for w in items[1:]:
        over = w.over
        if w.cls != "WINDOW" or w.type not in FUNCTIONS or not w.alias or over is None:
            return None
        # no argument, FILTER, argument ORDER BY or frame expression: the call's children are
        # exactly its partitions and its order's items
        if len(w.children) != len(over.partitions) + len(over.orders) or w.distinct or over.ignore_nulls \
                or over.exclude != "NO_OTHER":
            return None
        part = [_column(p) for p in over.partitions]
        if None in part or sorted(part) != sorted(group_by) or len(set(part)) != len(part):
            return None
        items_order = []
        for o in over.orders:
            col = _column(o.expression)
            if col is None or col not in types or o.direction not in ("ORDER_DEFAULT", "ASCENDING", "DESCENDING") \
                    or o.nulls not in _NULL_ORDERS:
                return None
            items_order.append(OrderBy(col, o.direction == "DESCENDING", _NULL_ORDERS[o.nulls]))
        key = tuple((o.column, o.descending, o.nulls_first) for o in items_order)
        if order is not None and key != tuple((o.column, o.descending, o.nulls_first) for o in order):
            return None
        order = tuple(items_order)
        names.append(w.alias)
        functions.append(FUNCTIONS[w.type])
    if not names:
        return None
    for o in order:
        kind = kind_of(types[o.column], o.column)
        if kind not in _EXACT_KINDS and not (kind == "float" and set(functions) == {"row_number"}):
            return None
    want = [*(c.name for c in schema), *names]
    if [c.name for c in out_schema] != want or len(set(want)) != len(want):
        return None
    if any(c.type != pa.int64() for c in out_schema[len(schema):]):
        return None
    return Ranking(tuple(names), tuple(functions), order)


def _row_numbers(ranking: Ranking, packed, both: Found, n_read: int, read_is_after: bool):
    """:func:`ranked_change` of ``row_number`` alone on packed rows: one sort of the packed
    words (with the entries' positions in the low bits when they fit), then two passes of
    ``colmz.kernels.ranking`` that consolidate the sorted entries, place each row and emit
    the change in its final order, (row, number) -- no array per consolidated row, no sort
    of the change. ``None`` when the diffs could sum beyond ``int64`` (the caller's exact
    path then raises or sums them)."""
    words, bits, lows = packed
    diff = both.diff
    n = len(diff)
    if n and max(int(diff.max()), -int(diff.min())) * n >= 2**63:
        return None
    total = sum(bits)
    index_bits = max(int(n - 1).bit_length(), 1)
    # the read comes run by run, each run's rows in (partition, payload) order -- the packed
    # order here, the tag being 0 -- so a sort that finds sorted stretches (numpy's stable
    # sort, a timsort) merges them instead of sorting all the rows afresh
    if total + index_bits <= 64:
        # in a scratch array the process reuses (colmz.kernels.pool): its pages are touched
        # already, where a fresh array's first touch costs more than the writes
        order = scratch("ranking.order", n, np.uint64)
        positions_below(words, index_bits, order)
        order.sort(kind="stable")
        perm = np.zeros(0, np.int64)
    else:
        perm = np.argsort(words, kind="stable")
        order, index_bits = words[perm], 0
    args = (order, index_bits, perm, diff, n_read, bits[-1], total - bits[0] if bits[0] else 64)
    m, least, total_old, total_new = row_number_count(*args, read_is_after)
    if least < 0:
        raise NegativeMultiplicity(f"the input of a window retracts rows it does not hold (a multiplicity of {least})")
    if max(total_old, total_new) > EXPAND_LIMIT:
        raise ValueError(f"the affected partitions hold more than EXPAND_LIMIT = {EXPAND_LIMIT} rows "
                         "(colmz.rows.EXPAND_LIMIT): row_number numbers each copy")
    part, src, number, sign = (np.empty(m, np.int64) for _ in range(4))
    row_number_fill(*args, lows[0], read_is_after, part, src, number, sign)
    return (Found(part, np.take(both.vals, src, axis=0), both.val_layout, sign), [number for _ in ranking.names],
            None, int(total_new))


def ranked_change(ranking: Ranking, val_specs: tuple[ColumnSpec, ...], read: Found, delta: Found,
                  read_is_after: bool) -> tuple[Found, list[np.ndarray], np.ndarray, int]:
    """The affected partitions' change: ``read`` the rows read from the input arrangement
    (``query``: the partition's position among the affected keys), ``delta`` the step's rows,
    both with payload words of ``val_specs`` (the non-key input columns); ``read_is_after``
    when the arrangement holds the delta already. Returns the changed rows (``query``,
    payload words, ``diff``), per ranking column its values (``int64``), and per changed row
    the position of its row in the ranking's order (partition, ``ORDER BY`` words, payload
    words): the changed rows come in that order piece by piece (numbers retracted, then
    inserted), each piece sorted by it -- or ``None`` for that when the changed rows come in
    their final order already, by row then number (``row_number`` alone on packed rows);
    and the affected partitions' rows after the change (with their multiplicities: what a
    recompute would read)."""
    both = concat_found([read, delta])
    vl, vals = both.val_layout, both.vals
    index = {c.name: j for j, c in enumerate(val_specs)}
    starts = np.cumsum((0, *vl[:-1]))
    null_word = vals[:, starts[-1]] if vl[-1] else None
    query = both.query
    # positions are >= 0: an int64 array's words are its uint64 view (no copy)
    parts = [(query.view(np.uint64) if query.dtype == np.int64 else query.astype(np.uint64))[:, None]]
    ordered = [index[o.column] for o in ranking.order if o.column in index]  # partition columns: constant
    if null_word is None and ordered == list(range(len(ordered))) \
            and not any(o.descending for o in ranking.order if o.column in index):
        # the ORDER BY items are the leading payload columns, ascending, no NULL laid out:
        # the payload's own words order the rows, the first of them are the peers' words
        peer_width = 1 + int(sum(vl[:len(ordered)]))
    else:
        for o in ranking.order:
            j = index.get(o.column)
            if j is None:
                continue
            if null_word is not None:
                null = (null_word >> np.uint64(j)) & np.uint64(1)
                parts.append((null ^ np.uint64(1) if o.nulls_first else null)[:, None])
            w = vals[:, starts[j]:starts[j] + vl[j]]
            parts.append(~w if o.descending else w)
        peer_width = sum(p.shape[1] for p in parts)
    vals_start = sum(p.shape[1] for p in parts)  # the payload's words follow the sort's own
    n_read = len(read.diff)
    # The rows' sort words as columns (partition, ORDER BY words, payload words, tag): packed
    # into one uint64 each when their spans fit (keyed.pack_columns: the usual case, small
    # partitions' positions and values), the sort is one integer sort and every later pass
    # reads fields of the packed words -- no matrix of words is built, sorted or gathered.
    cols = [c for p in parts for c in p.T] + list(vals.T)
    tag = np.zeros(len(both.diff), np.uint64)
    tag[n_read:] = 1
    cols.append(tag)
    packed = pack_columns(cols)
    if packed is not None and set(ranking.functions) == {"row_number"}:
        got = _row_numbers(ranking, packed, both, n_read, read_is_after)
        if got is not None:
            return got
    # presorted: the read's runs are sorted stretches (as in _row_numbers)
    got = None if packed is None else consolidate_packed(packed[0], sum(packed[1]), both.diff, presorted=True)
    if got is not None:
        ps, perm, diff = got
        bits, lows = packed[1], packed[2]
        total = sum(bits)
        is_delta = perm >= n_read
        rowkey = ps >> np.uint64(bits[-1]) if bits[-1] else ps  # the row without its tag
        peer_bits = sum(bits[:peer_width])

        def partition(sel):
            if not bits[0]:
                return np.full(len(sel), lows[0], np.int64)
            return (ps[sel] >> np.uint64(total - bits[0])).astype(np.int64) + lows[0]

        def peers(sel):
            return ps[sel] >> np.uint64(total - peer_bits) if peer_bits else np.zeros(len(sel), np.uint64)

        def payload_of(sel):
            return np.ascontiguousarray(vals[perm[sel]])

        def same_as_before(i):
            return rowkey[i] == rowkey[i - 1]
    else:
        words, diff = consolidate_words(np.hstack([*parts, vals, tag[:, None]]), both.diff)
        is_delta = words[:, -1] == 1

        def partition(sel):
            return words[sel, 0].astype(np.int64)

        def peers(sel):
            return words[sel, :peer_width]

        def payload_of(sel):
            return np.ascontiguousarray(words[sel, vals_start:-1])

        def same_as_before(i):
            return (words[i, :-1] == words[i - 1, :-1]).all(axis=1)
    fns = set(ranking.functions)
    if not len(diff):
        empty = Found(np.zeros(0, np.int64), np.zeros((0, vals.shape[1]), np.uint64), vl, np.zeros(0, np.int64))
        return empty, [np.zeros(0, np.int64) for _ in ranking.names], None, 0
    # Each distinct row: its read entry (tag 0), its delta entry (tag 1), or both, adjacent --
    # a pair is a delta entry right after a read entry of the same words (checked on the
    # delta's entries only).
    n = len(diff)
    second = np.flatnonzero(is_delta[1:] & ~is_delta[:-1]) + 1
    if len(second):
        second = second[same_as_before(second)]
    first = np.ones(n, bool)
    first[second] = False
    at = np.flatnonzero(first)
    d_at, delta_at = diff[at], is_delta[at]
    c0 = np.where(delta_at, 0, d_at)
    c1 = np.where(delta_at, d_at, 0)
    c1[np.cumsum(first)[second] - 1] += diff[second]
    old, new = (c0 - c1, c0) if read_is_after else (c0, c0 + c1)
    bad = min(int(old.min()), int(new.min()))
    if bad < 0:
        raise NegativeMultiplicity(f"the input of a window retracts rows it does not hold (a multiplicity of {bad})")
    if "row_number" in fns and max(int(old.sum()), int(new.sum())) > EXPAND_LIMIT:
        raise ValueError(f"the affected partitions hold more than EXPAND_LIMIT = {EXPAND_LIMIT} rows "
                         "(colmz.rows.EXPAND_LIMIT): row_number numbers each copy")
    q = partition(at)
    part_first = np.r_[True, q[1:] != q[:-1]]
    if fns - {"row_number"}:
        peer_words = peers(at)
        step = peer_words[1:] != peer_words[:-1]
        peer_first = np.r_[True, step.any(axis=1) if step.ndim == 2 else step]
        peer_id = np.cumsum(peer_first) - 1
        peer_at = np.flatnonzero(peer_first)

    def places(m: np.ndarray) -> dict:
        ends = np.cumsum(m)
        before = ends - m  # places before the row, over all partitions
        base = np.maximum.accumulate(np.where(part_first, before, 0))
        out = {"start": before - base}
        if "rank" in fns:
            out["rank"] = np.maximum.accumulate(np.where(peer_first, before, 0)) - base + 1
        if "dense_rank" in fns:
            present = np.add.reduceat(m, peer_at) > 0  # per peer group
            seen = (np.cumsum(present) - present)[peer_id]  # present peer groups before, over all partitions
            out["dense_rank"] = seen - np.maximum.accumulate(np.where(part_first, seen, 0)) + 1
        return out

    po, pn = places(old), places(new)
    others = [f for f in dict.fromkeys(ranking.functions) if f != "row_number"]
    same = np.ones(len(at), bool)
    for f in others:
        same &= po[f] == pn[f]
    pieces = []  # (distinct row, row_number value or None, diff, values from before?)
    if "row_number" in fns:
        # only rows whose numbers or other ranks move emit anything
        moved = np.flatnonzero((old != new) | (po["start"] != pn["start"]) | ~same)
        many = (old[moved] > 1) | (new[moved] > 1)
        # the usual case, a row held once before and after (or not at all): a moved row
        # leaves its old number, takes its new one; rows held several times below
        once = moved[~many] if many.any() else moved
        was, now = once[old[once] == 1], once[new[once] == 1]
        pieces.append((was, po["start"][was] + 1, np.full(len(was), -1, np.int64), True))
        pieces.append((now, pn["start"][now] + 1, np.ones(len(now), np.int64), False))
        moved = moved[many]
        if len(moved):
            a = po["start"][moved]
            b = a + old[moved]
            c = pn["start"][moved]
            d = c + new[moved]
            kept = same[moved]
            # a row whose other ranks moved: all its old numbers out, all its new ones in
            cut_c, cut_d = np.where(kept, c, b), np.where(kept, d, b)
            cut_a, cut_b = np.where(kept, a, d), np.where(kept, b, d)
            for lo, hi, sign, from_old in ((a, np.minimum(b, cut_c), -1, True), (np.maximum(a, cut_d), b, -1, True),
                                           (c, np.minimum(d, cut_a), 1, False), (np.maximum(c, cut_b), d, 1, False)):
                width = hi - lo
                if not len(width) or width.max() <= 1:  # the usual case: each row once
                    i = np.flatnonzero(width > 0)
                    number = lo[i]
                else:
                    i, number = expand_ranges(lo, np.maximum(hi, lo))
                pieces.append((moved[i], number + 1, np.full(len(i), sign, np.int64), from_old))
    else:
        keep = same & (new != old)
        i = np.flatnonzero(keep)
        pieces.append((i, None, (new - old)[i], False))
        i = np.flatnonzero(~same & (old > 0))
        pieces.append((i, None, -old[i], True))
        i = np.flatnonzero(~same & (new > 0))
        pieces.append((i, None, new[i], False))
    idx = np.concatenate([p[0] for p in pieces]).astype(np.int64)
    out_diff = np.concatenate([p[2] for p in pieces])
    values = []
    for f in ranking.functions:
        if f == "row_number":
            values.append(np.concatenate([p[1] for p in pieces]).astype(np.int64))
        else:
            values.append(np.concatenate([(po if p[3] else pn)[f][p[0]] for p in pieces]).astype(np.int64))
    payload = payload_of(at[idx])
    return Found(q[idx], payload, vl, out_diff), values, idx, int(new.sum())
