"""An outer ``WHERE``'s SQL conjuncts moved below the SQL segment of a ``FROM`` subquery:
:func:`sql_pushed_below_sql`.

Design
------
PostgreSQL pulls a ``FROM`` subquery up into the query around it: the outer ``WHERE``'s
conjuncts join the subquery's own at the scan, and the subquery's select list is computed
only for the rows they keep. So ``SELECT k, y FROM (SELECT k, r * r AS y FROM reals) u WHERE
k::text <> '4'`` never computes ``r * r`` of the row with ``k = 4`` -- and raises no overflow
for it. A view's plan computes the subquery's items in a SQL segment
(:class:`~colmz.dataflow.plan_nodes.SqlMapFilter` with a select list) and the outer
conjunct in a filter-only SQL segment above it; unmoved, the items would be computed for
every row first. A native conjunct is moved by ``plan_nodes.pushed_below_sql``; a SQL one
by :func:`sql_pushed_below_sql`, here because it rewrites SQL text (``colmz.sql.tokens``),
which the plan's nodes, below the SQL layer, do not read.

Invariants
----------
* Only a conjunct whose every column reference (placeholder) is a column the segment passes
  through unchanged moves (an item that *is* one of its input's placeholders, read through
  a renaming ``MapFilter`` between the two, whose native filter stays where it is); a
  conjunct reading a computed item stays above.
* A conjunct calling a volatile function (or ``error``, a guard placed to raise) never
  moves: the planner refuses volatile calls in SQL segments already, and the check here
  keeps that true whoever builds the filter.
* A moved conjunct joins the segment's own ``WHERE`` (one DuckDB call, run before its
  items), its placeholders renumbered to the segment's input; it moves on down while the
  segment below passes its columns too. Its text is the user's, unchanged but for the
  placeholders (a string literal that spells one is a string token and is left alone).
* The conjuncts of one ``WHERE`` may then run in either order, as in PostgreSQL's pulled-up
  plan (which orders the quals of a scan by cost).
"""

from __future__ import annotations

import re
from dataclasses import replace

from colmz.dataflow.plan_nodes import MapFilter, Node, SqlMapFilter, placeholder
from colmz.sql.errors import SQLError
from colmz.sql.tokens import tokenize

__all__ = ["sql_pushed_below_sql"]

_PLACEHOLDER = re.compile(r'"colmz_c(\d+)"')
#: Calls whose evaluation has an effect beyond its value: never moved.
_ALWAYS_IMMOVABLE = frozenset({"error"})


def sql_pushed_below_sql(segment: Node, immovable: frozenset[str] = frozenset()) -> Node:
    """``segment`` -- a filter-only SQL segment, an outer ``WHERE``'s -- with each conjunct
    that reads only columns the SQL segment below passes through moved into that segment's
    ``WHERE`` (module docstring); ``segment`` itself when none moves, its input (rebuilt)
    when all do. ``immovable``: lower-case names of functions whose calls never move (the
    planner's volatile ones). Any other node is returned as is.

    >>> import pyarrow as pa
    >>> from colmz.dataflow.plan_nodes import Get
    >>> from colmz.order import ColumnSpec
    >>> cols = (ColumnSpec("k", pa.int64()), ColumnSpec("r", pa.float64()))
    >>> items = SqlMapFilter(cols[:1] + (ColumnSpec("y", pa.float64()),), Get(cols, "reals", "reals"), (),
    ...                      (('"colmz_c0"', "k"), ('"colmz_c1" * "colmz_c1"', "y")), ("r * r",))
    >>> outer = SqlMapFilter(items.schema, items, ("\\"colmz_c0\\"::text <> '4'", "\\"colmz_c1\\" > 1"), None,
    ...                      ("k::text <> '4'", "y > 1"))
    >>> moved = sql_pushed_below_sql(outer)
    >>> moved.where, moved.input.where
    (('"colmz_c1" > 1',), ('"colmz_c0"::text <> \\'4\\'',))
    """
    if type(segment) is not SqlMapFilter or segment.select is not None or not segment.where:
        return segment
    if len(segment.shown) != len(segment.where):  # each conjunct's text must go with it
        return segment
    below, where, shown = _pushed(segment.input, segment.where, segment.shown, immovable | _ALWAYS_IMMOVABLE)
    if below is segment.input:
        return segment
    if not where:
        if below.schema == segment.schema:
            return below
        return segment  # pragma: no cover - a filter's columns are its input's
    return replace(segment, input=below, where=where, shown=shown)


def _pushed(input: Node, where: tuple[str, ...], shown: tuple[str, ...], immovable: frozenset[str]
            ) -> tuple[Node, tuple[str, ...], tuple[str, ...]]:
    """``(input', where', shown')``: the conjuncts ``where`` (over ``input``'s columns by
    position) that ``input``'s SQL segment passes the columns of moved into it, the others
    returned."""
    rename = None
    seg = input
    if type(seg) is MapFilter:  # a renaming (its native filter, which cannot raise, stays above)
        rename, seg = seg, seg.input
    if type(seg) is not SqlMapFilter:
        return input, where, shown
    through = _passed(input, rename, seg)
    moved: list[tuple[str, str]] = []
    kept: list[tuple[str, str]] = []
    for w, s in zip(where, shown):
        text = _renumbered(w, through, immovable)
        (kept if text is None else moved).append((w, s) if text is None else (text, s))
    if not moved:
        return input, where, shown
    deeper, w2, s2 = _pushed(seg.input, tuple(w for w, _ in moved), tuple(s for _, s in moved), immovable)
    new = replace(seg, input=deeper, where=w2 + seg.where, shown=s2 + seg.shown)
    if rename is not None:
        new = replace(rename, input=new)
    return new, tuple(w for w, _ in kept), tuple(s for _, s in kept)


def _passed(input: Node, rename: MapFilter | None, seg: SqlMapFilter) -> dict[int, int]:
    """Position of a column of ``input`` -> position of the column of ``seg``'s input it is,
    for each column ``seg`` passes through unchanged (read through ``rename``)."""
    seg_names = [c.name for c in seg.schema]
    if rename is not None and rename.select is not None:
        source = dict((n, s) for s, n in rename.select)
        names = [source[c.name] for c in input.schema]
    else:
        names = [c.name for c in input.schema]
    if seg.select is None:  # a filter: every column passes
        items = {c.name: placeholder(i) for i, c in enumerate(seg.input.schema)}
    else:
        items = dict((n, text) for text, n in seg.select)
    out = {}
    for i, name in enumerate(names):
        if name not in seg_names or seg_names.count(name) != 1:
            continue
        m = _PLACEHOLDER.fullmatch(items.get(name, ""))
        if m is not None:
            out[i] = int(m.group(1))
    return out


def _renumbered(text: str, through: dict[int, int], immovable: frozenset[str]) -> str | None:
    """``text`` with each placeholder ``i`` replaced by ``through[i]``; ``None`` when it
    reads a column not in ``through`` or calls an ``immovable`` function (or does not
    tokenize)."""
    try:
        toks = tokenize(text)
    except SQLError:
        return None
    out, at = [], 0
    for j, t in enumerate(toks):
        if t.kind == "word" and t.text.lower() in immovable and j + 1 < len(toks) and toks[j + 1].text == "(":
            return None
        if t.kind != "qident":
            continue
        m = _PLACEHOLDER.fullmatch(t.text)
        if m is None:
            return None  # a quoted name that is no placeholder: not a column the segment passes
        i = int(m.group(1))
        if i not in through:
            return None
        out += [text[at:t.start], placeholder(through[i])]
        at = t.end
    out.append(text[at:])
    return "".join(out)
