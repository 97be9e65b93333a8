"""Interval keys: the plan nodes that would key on an interval column, found before rendering.

Design
------
colmz keeps an interval as its written form (``'1 mon'``, ``'30 days'`` and ``'720:00:00'``
are three values; :mod:`colmz.order_bytes`), and its operators key on the encoded bytes. That
is right wherever rows are only carried, filtered, combined or compared with themselves --
a projection, a filter (evaluated by SQL, with PostgreSQL's equality), ``UNION ALL``, the
sink's consolidation, ``min``/``max`` and ``ORDER BY`` (the bytes order as PostgreSQL's
``interval_cmp``), the semijoin of an outer join's matched rows with the rows they came from.
It is wrong wherever two *different* rows are to be found equal: PostgreSQL's equality
makes the three written forms above one value (``interval_cmp_value``: a month 30 days, a
day 24 hours), so a ``GROUP BY``, ``DISTINCT``, join key, set operation or partition over
an interval column would split what PostgreSQL groups.

:func:`interval_key` finds the first such node of a plan: a :class:`Join` on an interval key
(its whole-row semijoin partner exempt), a :class:`Reduce`, :class:`TopK` or
:class:`GroupSql` grouping by one, a :class:`Distinct` or :class:`Threshold` over rows
holding one. The planner then makes the whole view a :class:`Fallback` recomputed by DuckDB,
whose equality of intervals is PostgreSQL's (so ``WITH (INCREMENTAL = 'require')`` raises
``UnsupportedSQL`` naming the construct, before anything changes).

Invariant: a plan for which :func:`interval_key` is ``None`` never compares two interval
values for equality by their bytes except where they are copies of one row's value.
"""

from __future__ import annotations

import pyarrow as pa

from colmz.dataflow.plan_nodes import Distinct, GroupSql, Join, Node, Reduce, Threshold, TopK

__all__ = ["interval_key"]

_WHY = ("colmz keys on an interval's written form, PostgreSQL's equality makes '1 mon', "
        "'30 days' and '720:00:00' one value")


def _is_interval(t: pa.DataType) -> bool:
    return pa.types.is_interval(t)


def _intervals(node: Node, names) -> list[str]:
    types = {c.name: c.type for c in node.schema}
    return [n for n in names if n in types and _is_interval(types[n])]


def interval_key(root: Node) -> str | None:
    """What in the plan under ``root`` would key on an interval column (its construct and
    column named), or ``None``.

    >>> from colmz.order import ColumnSpec
    >>> from colmz.dataflow.plan_nodes import Get
    >>> get = Get((ColumnSpec("t.d", pa.month_day_nano_interval()),), "t", "t", (("d", "t.d"),))
    >>> interval_key(Distinct(get.schema, get))[:45]
    'DISTINCT (or UNION, IN) over interval column '
    >>> interval_key(get) is None
    True
    """
    seen: set[int] = set()
    exempt: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        found = None if id(node) in exempt else _keyed(node)
        if found is not None:
            return f"{found}: {_WHY}"
        if isinstance(node, Join) and node.nulls_equal:
            # the semijoin of an outer join's matched rows with the rows they were made from:
            # equal bytes are the same row, so its distinct partner keys right
            exempt.add(id(node.inputs[1]))
        stack.extend(node.inputs)
    return None


def _keyed(node: Node) -> str | None:
    if isinstance(node, Join) and not node.nulls_equal:
        types = {c.name: c.type for n in node.inputs for c in n.schema}
        for a, b in node.on:
            if _is_interval(types.get(a, pa.null())) or _is_interval(types.get(b, pa.null())):
                return f"a join on interval key {a} = {b}"
    elif isinstance(node, Reduce):
        cols = _intervals(node.input, node.group_by)
        if cols:
            return f"GROUP BY interval column {cols[0]}"
    elif isinstance(node, GroupSql):
        cols = _intervals(node.input, node.key)
        if cols:
            return f"a group (GROUP BY, PARTITION BY, DISTINCT ON) by interval column {cols[0]}"
    elif isinstance(node, TopK):
        cols = _intervals(node.input, node.group_by)
        if cols:
            return f"DISTINCT ON interval column {cols[0]}"
    elif isinstance(node, (Distinct, Threshold)):
        cols = _intervals(node.input, [c.name for c in node.input.schema])
        if cols:
            what = "DISTINCT (or UNION, IN)" if isinstance(node, Distinct) else "EXCEPT or INTERSECT"
            return f"{what} over interval column {cols[0]}"
    return None
