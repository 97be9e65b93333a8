"""An outer ``WHERE``'s SQL conjuncts moved below the SQL segment of a ``FROM`` subquery:
:func:`sql_pushed_below_sql`; and its conjuncts on a grouped subquery's keys below the
grouping: :func:`grouped_item_conjuncts`, :func:`grouping_input`.

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
  conjunct reading a computed item stays above. It moves through a ``Distinct`` between
  them (``SELECT DISTINCT``: a filter on its output commutes with it), and through a
  grouped ``TopK`` (``DISTINCT ON``) when it reads only columns that are the group's keys
  (a whole group is kept or dropped), as ``colmz.sql.pushdown`` and PostgreSQL's
  ``check_output_expressions`` allow; there, as on the recompute path, all the conjuncts
  move or none does.
* A conjunct calling a volatile function (or ``error``, a guard placed to raise) never
  moves: the planner refuses volatile calls in SQL segments already, and the check here
  keeps that true whoever builds the filter.
* A moved conjunct joins the segment's own ``WHERE`` (one DuckDB call, run before its
  items), its placeholders renumbered to the segment's input; it moves on down while the
  segment below passes its columns too. Its text is the user's, unchanged but for the
  placeholders (a string literal that spells one is a string token and is left alone).
* The conjuncts of one ``WHERE`` may then run in either order, as in PostgreSQL's pulled-up
  plan (which orders the quals of a scan by cost).
* In a join, :func:`join_item_conjuncts` picks the ``WHERE`` conjuncts a ``FROM`` subquery
  takes by the recompute path's rules (``colmz.sql.pushdown``): an inner join's item or an
  outer join's preserved side only; each column qualified by the item's alias; the item a
  plain ``SELECT`` (``DISTINCT ON`` only on its key columns); all of an item's conjuncts
  read passed-through columns, or none of them moves; no subquery, window or volatile call.
  The planner filters the item by them before the join, and :func:`sql_pushed_below_sql`
  moves them on into its SQL segment.
* A grouped ``FROM`` item (a join's, or the one item: a subquery, or a CTE referenced once
  without a column list, as the recompute path inlines it) takes the conjuncts that read only
  its grouping columns passed through, all or none (:func:`grouped_item_conjuncts`, the
  recompute path's rules: PostgreSQL pushes them as a ``HAVING`` and moves that below the
  grouping). A filter on group keys keeps or drops whole groups, so it commutes with the
  grouping, a ``HAVING`` and the select list: the planner puts it on the grouping's input
  (:func:`grouping_input` renames its columns to the input's), native and SQL conjuncts
  alike, and a group it drops is never computed -- its aggregates raise no overflow.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from colmz.dataflow.plan_nodes import (
    BasicReduce,
    Distinct,
    MapFilter,
    Node,
    Reduce,
    SqlMapFilter,
    TopK,
    placeholder,
)
from colmz.sql.errors import SQLError
from colmz.sql.pushdown import (
    distinct_on_keys,
    filter_commutes,
    group_columns,
    passed_columns,
    preserved_items,
)
from colmz.sql.tokens import tokenize
from colmz.sql.tree import Expression, Query, Table

__all__ = ["grouped_item_conjuncts", "grouping_input", "join_item_conjuncts", "sql_pushed_below_sql"]

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
    rename = middle = None
    seg = input
    if type(seg) is MapFilter:  # a renaming (its native filter, which cannot raise, stays above)
        rename, seg = seg, seg.input
    if type(seg) is Distinct or type(seg) is TopK and seg.group_by:
        middle, seg = seg, seg.input  # DISTINCT, DISTINCT ON: a filter commutes (on its keys)
    if type(seg) is not SqlMapFilter:
        return input, where, shown
    through = _passed(input, rename, seg)
    if type(middle) is TopK:
        keys = {_input_column(seg, g) for g in middle.group_by} - {None}
        through = {i: j for i, j in through.items() if j in keys}
    moved: list[tuple[str, str]] = []
    kept: list[tuple[str, str]] = []
    for w, s in zip(where, shown):
        text = _renumbered(w, through, immovable)
        (kept if text is None else moved).append((w, s) if text is None else (text, s))
    if not moved or middle is not None and kept:
        # through DISTINCT (ON), all the conjuncts move or none, as colmz.sql.pushdown moves them
        return input, where, shown
    deeper, w2, s2 = _pushed(seg.input, tuple(w for w, _ in moved), tuple(s for _, s in moved), immovable)
    new = replace(seg, input=deeper, where=w2 + seg.where, shown=s2 + seg.shown)
    if middle is not None:
        new = replace(middle, input=new)
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


def _input_column(seg: SqlMapFilter, name: str) -> int | None:
    """The position of the column of ``seg``'s input its column ``name`` passes through
    unchanged (``None``: computed, or no such column)."""
    if seg.select is None:
        names = [c.name for c in seg.input.schema]
        return names.index(name) if names.count(name) == 1 else None
    texts = [text for text, n in seg.select if n == name]
    m = _PLACEHOLDER.fullmatch(texts[0]) if len(texts) == 1 else None
    return None if m is None else int(m.group(1))


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


def join_item_conjuncts(from_: Table, where: list[Expression], immovable: frozenset[str] = frozenset()
                        ) -> dict[int, list[Expression]]:
    """``id(item) -> conjuncts``: the conjuncts of ``where`` (a ``WHERE`` over the join
    ``from_``) each ``FROM`` subquery of the join takes before the join (module docstring),
    by the rules of the recompute path (``colmz.sql.pushdown``). ``immovable``: lower-case
    names of volatile functions."""
    out: dict[int, list[Expression]] = {}
    if from_.type != "JOIN":
        return out
    for item in preserved_items(from_):
        if item.type != "SUBQUERY" or item.subquery is None or not item.alias:
            continue
        mine = _item_conjuncts(item.subquery, item.alias, item.column_aliases, where, immovable, False)
        if mine:
            out[id(item)] = mine
    return out


def grouped_item_conjuncts(item: Query, alias: str, renames: tuple[str, ...], where: list[Expression],
                           immovable: frozenset[str] = frozenset()) -> list[Expression]:
    """The conjuncts of ``where`` (the ``WHERE`` over the one ``FROM`` item ``alias``, the
    grouped query ``item`` -- a subquery, or a CTE referenced once -- its columns renamed by
    ``renames``) that move below its grouping (module docstring): all of them when each reads
    only its grouping columns passed through, else none, by the recompute path's rules
    (``colmz.sql.pushdown``); none for a query without ``GROUP BY``. ``immovable``: lower-case
    names of volatile functions.

    >>> from colmz.sql.tree import parse_tree
    >>> def moved(text):
    ...     q = parse_tree(text)[0]
    ...     w = q.where.children if q.where.type == "CONJUNCTION_AND" else (q.where,)
    ...     return [text[c.start:c.end] for c in grouped_item_conjuncts(q.from_.subquery, "u", (), list(w))]
    >>> moved("SELECT * FROM (SELECT k, count(*) AS n FROM t GROUP BY k) u WHERE k <> 4 AND abs(u.k) < 9")
    ['k <> 4', 'abs(u.k) < 9']
    >>> moved("SELECT * FROM (SELECT k, count(*) AS n FROM t GROUP BY k) u WHERE k <> 4 AND n > 1")
    []
    """
    if group_columns(item) is None:
        return []
    return _item_conjuncts(item, alias, renames, where, immovable, True)


def _item_conjuncts(item: Query, alias: str, renames: tuple[str, ...], where: list[Expression],
                    immovable: frozenset[str], single: bool) -> list[Expression]:
    # the conjuncts of where the FROM item alias (query item) takes, all or none; single:
    # the only FROM item (an unqualified column is its)
    grouped = group_columns(item)
    if not filter_commutes(item) and grouped is None:
        return []
    outputs = _outputs(item, renames)
    if outputs is None:
        return []
    keys = distinct_on_keys(item)
    if grouped is not None:
        keys = grouped if keys is None else keys & grouped
    stop = immovable | _ALWAYS_IMMOVABLE
    mine = []
    for c in where:
        refs = [n for n in c.walk() if n.cls == "COLUMN_REF"]
        names = [_own(r, alias, single) for r in refs]
        if not refs or any(n is None for n in names):
            continue  # a constant, or a conjunct reading other columns (it stays)
        if any(n.subquery is not None or n.cls in ("SUBQUERY", "WINDOW") or n.over is not None
               or n.cls == "FUNCTION" and n.name and n.name[-1].lower() in stop for n in c.walk()):
            return []
        if any(outputs.get(n) is None or keys is not None and outputs[n] not in keys for n in names):
            return []  # a computed column (or no key): all this item's conjuncts stay
        mine.append(c)
    return mine


def grouping_input(node: Node, columns: set[str]) -> tuple[Node, dict[str, str], Callable[[Node], Node]] | None:
    """Where a filter on ``node``'s ``columns`` goes below the grouping ``node`` computes:
    ``(input, names, rebuild)`` -- the grouping's input, each of ``columns`` -> the input's
    column it is, and a function giving ``node`` rebuilt over a filtered ``input`` -- when
    ``node`` is a :class:`~colmz.dataflow.plan_nodes.Reduce` (or a
    :class:`~colmz.dataflow.plan_nodes.BasicReduce`) under renamings and SQL segments that
    pass each of ``columns`` through unchanged to one of its group keys; else None. A filter
    on group keys keeps or drops whole groups, so it commutes with the grouping, with a
    ``HAVING`` over it and with the select list above it.

    >>> import pyarrow as pa
    >>> from colmz.dataflow.plan_nodes import Aggregate, Get
    >>> from colmz.order import ColumnSpec
    >>> cols = (ColumnSpec("t.k", pa.int64()), ColumnSpec("t.f", pa.float64()))
    >>> red = Reduce((cols[0], ColumnSpec("agg1", pa.int64())), Get(cols, "t", "t", (("k", "t.k"), ("f", "t.f"))),
    ...              ("t.k",), (Aggregate("agg1", "count", None, "accumulable"),))
    >>> item = MapFilter((ColumnSpec("q.k", pa.int64()), ColumnSpec("q.n", pa.int64())), red, (),
    ...                  (("t.k", "q.k"), ("agg1", "q.n")))
    >>> below, names, rebuild = grouping_input(item, {"q.k"})
    >>> below is red.input, names, rebuild(below) == item
    (True, {'q.k': 't.k'}, True)
    >>> grouping_input(item, {"q.n"}) is None  # an aggregate: no group key
    True
    """
    path: list[Node] = []
    names = {c: c for c in columns}
    while True:
        if type(node) is MapFilter:
            if node.select is not None:
                source = {n: s for s, n in node.select}
                names = {c: source[n] for c, n in names.items()}
        elif type(node) is SqlMapFilter:
            if node.select is not None:
                items = dict((n, text) for text, n in node.select)
                inner = [c.name for c in node.input.schema]
                at = {c: _PLACEHOLDER.fullmatch(items.get(n, "")) for c, n in names.items()}
                if any(m is None for m in at.values()):
                    return None  # a computed column
                names = {c: inner[int(m.group(1))] for c, m in at.items()}
        elif type(node) in (Reduce, BasicReduce):
            keys = node.group_by if type(node) is Reduce else node.key
            if not all(n in keys for n in names.values()):
                return None
            break
        else:
            return None
        path.append(node)
        node = node.input
    path.append(node)

    def rebuild(below: Node) -> Node:
        for n in reversed(path):
            below = replace(n, input=below)
        return below

    return node.input, names, rebuild




def _own(r: Expression, alias: str, single: bool) -> str | None:
    # the output name a column reference qualified by ``alias`` (or, the only FROM item's,
    # unqualified) reads (None: another's)
    parts = [p.lower() for p in r.name]
    if len(parts) == 2 and parts[0] == alias.lower():
        return parts[1]
    return parts[0] if single and len(parts) == 1 else None






def _outputs(q: Query, renames: tuple[str, ...]) -> dict[str, str | None] | None:
    # output name -> the inner column's name (None for a computed item); None if unusable
    passed = passed_columns(q, renames)
    if passed is None:
        return None
    return {n: None if i is None else i.name[-1].lower() for n, i in passed.items()}
