"""An outer query's WHERE conjuncts moved into the FROM subquery (or inlined CTE) whose
passed-through columns they read, as PostgreSQL pulls such a subquery up.

colmz's translation guards some select items with a check that raises (a float overflow,
:data:`colmz.sql.transforms.FLOAT_CHECK`, and the other reserved-prefix macros). PostgreSQL 15
pulls a simple FROM subquery (or a CTE referenced once, which it inlines) into its parent
(``src/backend/optimizer/prep/prepjointree.c``): the parent's WHERE filters the rows before
the subquery's select items are computed, so ``SELECT q, y FROM (SELECT k AS q, r * r AS y
FROM reals) u WHERE abs(q - 4) > 0`` answers when only the row with ``k = 4`` overflows.
DuckDB keeps a filter it counts as possibly throwing (``abs``, ``%``, a cast) above the
projection, so the check raised for a row the filter drops. :func:`push_filters` rewrites
the translated text: the WHERE conjuncts reading only one FROM item's columns, when every
one of them reads only passed-through columns (select items that are plain column
references), move into that subquery's WHERE (after its own conjuncts), each column
replaced by the item it names; each moved conjunct leaves ``true``.

Invariants:

* A FROM item takes conjuncts only where a filter on its columns may run before the joins:
  the one FROM item, an inner join's item, an outer join's preserved side. In a join a
  conjunct is the item's only when each column is qualified by the item's alias.
* The item is a subquery, or a CTE of the same WITH referenced once in the text (not
  MATERIALIZED, no column list, no RECURSIVE), and a plain SELECT (DISTINCT, or DISTINCT ON
  when the conjuncts read only its key columns, as PostgreSQL's ``check_output_expressions``
  allows; GROUP BY of one grouping set, HAVING too, when they read only grouping columns,
  which PostgreSQL pushes as a HAVING and moves to the WHERE): no grouping sets, QUALIFY,
  window, LIMIT/OFFSET, sample, WITH, star item or duplicate output name -- where moving a
  filter below could change which rows come out (PostgreSQL does not move those either).
* An item's conjuncts move all or none: one reading a computed column keeps them where
  DuckDB puts them today (PostgreSQL orders such quals by cost, which colmz does not model);
  a conjunct of the item holding a subquery or a volatile call (``random()``) keeps them too.
  Conjuncts reading several items' columns, or none, stay.
* It applies only where the subquery's text calls a reserved-prefix macro (a check that
  may raise, in its select list or a subquery's below); any other text is returned
  unchanged. The moved conjuncts read the same rows' same values, so an answer that did
  not raise is unchanged.
* The tree is read once and its queries visited once, each after the query around it: a
  query's conjuncts are its WHERE's and those moved into it, so a conjunct moves down a nest
  of subqueries as far as the rules allow in that one pass.
* A pure function of the text, cached; a text the tree cannot read is returned unchanged.
"""

from __future__ import annotations

import dataclasses
import functools

from colmz.sql.build import RESERVED_PREFIX, splice
from colmz.sql.errors import SQLError
from colmz.sql.tokens import closing, tokenize, top_level
from colmz.sql.transforms import VOLATILE, all_queries, item_name
from colmz.sql.tree import Expression, Query, Table, parse_tree

__all__ = ["distinct_on_keys", "filter_commutes", "group_columns", "passed_columns", "preserved_items", "push_filters"]

#: Words ending a plain SELECT's FROM/WHERE (a new WHERE goes before the first).
_AFTER_WHERE = frozenset({"ORDER", "WINDOW", "LIMIT", "OFFSET", "GROUP", "HAVING", "QUALIFY",
                          "UNION", "EXCEPT", "INTERSECT"})


@functools.lru_cache(maxsize=512)
def push_filters(text: str) -> str:
    """``text`` with each outer WHERE over a guarded subquery's passed-through columns moved
    into the subquery, as PostgreSQL evaluates it.

    >>> push_filters("SELECT q FROM (SELECT k AS q, __colmz_f(r) AS y FROM t) u WHERE q % 3 <> 1")
    'SELECT q FROM (SELECT k AS q, __colmz_f(r) AS y FROM t WHERE (k % 3 <> 1)) u WHERE true'
    >>> push_filters("SELECT q FROM (SELECT k AS q, __colmz_f(r) AS y FROM t) u WHERE y > 1")
    'SELECT q FROM (SELECT k AS q, __colmz_f(r) AS y FROM t) u WHERE y > 1'
    """
    if RESERVED_PREFIX not in text:
        return text
    try:
        stmts = parse_tree(text)
    except SQLError:
        return text
    # One pass over the queries, each after the query around it (all_queries' order): a
    # query's conjuncts are its WHERE's and those moved into it, so a conjunct moved into a
    # subquery moves on into the subquery below it as the query of that subquery is read.
    # id(query) -> (the query, where a WHERE goes in it or -1, the conjuncts moved into it)
    moved_in: dict[int, tuple[Query, int, list[_Conjunct]]] = {}
    own: list[_Conjunct] = []
    for q in (q for s in stmts for q in all_queries(s)):
        came = moved_in[id(q)][2] if id(q) in moved_in else []
        if q.type != "SELECT_NODE" or q.from_ is None or q.where is None and not came \
                or q.where is not None and q.where.start < 0:
            continue
        mine = [_Conjunct(c, [(r, r) for r in c.walk() if r.cls == "COLUMN_REF"]) for c in (
            () if q.where is None else q.where.children if q.where.type == "CONJUNCTION_AND" else (q.where,))]
        own.extend(mine)
        for t in preserved_items(q.from_):
            pushed = _push_into(text, q, t, [*mine, *came], q.from_.type != "JOIN")
            if pushed is not None:
                moved_in[id(pushed[0])] = pushed
    if not moved_in:
        return text
    edits = [(c.node.start, c.node.end, "true") for c in own if c.moved]
    for inner, at, moves in moved_in.values():
        moved = " AND ".join(f"({m.text(text)})" for m in moves)
        if inner.where is not None:  # its WHERE and the moved conjuncts
            edits += [(inner.where.start, inner.where.start, "("), (inner.where.end, inner.where.end, f") AND {moved}")]
        else:  # before its ORDER BY, else before its closing parenthesis
            close = text.startswith(")", at)
            edits.append((at, at, ("" if text[at - 1].isspace() else " ") + f"WHERE {moved}" + ("" if close else " ")))
    edits.sort(key=lambda e: e[:2])
    if any(a[1] > b[0] for a, b in zip(edits, edits[1:])):
        return text
    return splice(text, edits)


@dataclasses.dataclass
class _Conjunct:
    # A WHERE conjunct as the query it stands in now reads it: its node in the text, each
    # column reference under it with the node whose text stands there now (the passed-through
    # item of each query it moved into); ``moved``: it moved on (its text there is ``true``).
    node: Expression
    refs: list[tuple[Expression, Expression]]
    moved: bool = False

    def text(self, text: str) -> str:
        if self.moved:
            return "true"
        return splice(text, sorted((r.start, r.end, text[now.start:now.end]) for r, now in self.refs),
                      self.node.start, self.node.end)


def preserved_items(t: Table):
    """The FROM items of ``t`` whose rows a WHERE conjunct on their columns alone may filter
    before the joins: inner joins' items, an outer join's preserved side."""
    if t.type != "JOIN":
        yield t
        return
    if len(t.children) != 2:
        return
    left, right = t.children
    inner = t.join_type == "INNER" and t.ref_type in ("REGULAR", "CROSS", "NATURAL")
    if inner or t.join_type == "LEFT" and t.ref_type in ("REGULAR", "NATURAL"):
        yield from preserved_items(left)
    if inner or t.join_type == "RIGHT" and t.ref_type in ("REGULAR", "NATURAL"):
        yield from preserved_items(right)


def _push_into(text: str, q: Query, t: Table, conjuncts: list[_Conjunct], single: bool):
    # (the subquery or CTE of FROM item t, where a WHERE goes in it or -1, the conjuncts
    # moved into it) when q's conjuncts on t's columns move there (all of them), else None
    found = _source(text, q, t)
    if found is None:
        return None
    inner, open_, close, alias, renames = found
    grouped = group_columns(inner)
    if not (filter_commutes(inner) or grouped is not None) or RESERVED_PREFIX not in text[open_:close]:
        return None
    passed = passed_columns(inner, renames)
    if passed is None:
        return None
    keys = distinct_on_keys(inner)
    if grouped is not None:
        keys = grouped if keys is None else keys & grouped
    moves = []
    for c in conjuncts:
        names = [_own(now, alias, single) for _, now in c.refs]
        if c.moved or not names or None in names:
            continue  # a constant, or a conjunct reading other columns (it stays)
        if c.node.start < 0 or any(r.start < 0 for r, _ in c.refs):
            return None
        for n in c.node.walk():
            if n.subquery is not None or n.cls in ("SUBQUERY", "WINDOW") or n.over is not None:
                return None
            if n.cls == "FUNCTION" and n.name and n.name[-1].lower() in VOLATILE:
                return None
        if any(passed.get(n) is None or passed[n].start < 0 or keys is not None and passed[n].name[-1].lower()
               not in keys for n in names):
            return None  # a computed column: all this item's conjuncts stay
        moves.append((c, names))
    if not moves:
        return None
    at = -1
    if inner.where is not None:
        if inner.where.start < 0:
            return None
    elif (at := _where_point(text, open_, close)) is None:
        return None
    for c, _ in moves:
        c.moved = True
    return inner, at, [_Conjunct(c.node, [(r, passed[n]) for (r, _), n in zip(c.refs, names)]) for c, names in moves]


def _own(r: Expression, alias: str, single: bool) -> str | None:
    # the output name a column reference reads of the FROM item ``alias`` (None: another's)
    parts = [p.lower() for p in r.name]
    if len(parts) == 2 and alias and parts[0] == alias.lower():
        return parts[1]
    return parts[0] if single and len(parts) == 1 else None


def _source(text: str, q: Query, t: Table):
    # (inner query, index of its '(', index of its ')', alias, column list) of the FROM item t
    if t.type == "SUBQUERY" and t.subquery is not None and t.start >= 0 and text[t.start] == "(":
        return t.subquery, t.start, t.end - 1, t.alias, t.column_aliases
    if t.type != "BASE_TABLE" or len(t.name) != 1:
        return None
    name = t.name[0].lower()
    body = dict((n.lower(), c) for n, c in q.ctes).get(name)
    if body is None:
        return None
    toks = tokenize(text)
    if any(k.upper == "RECURSIVE" for k in toks):
        return None
    named = [i for i, k in enumerate(toks) if k.kind in ("word", "qident") and k.text.strip('"').lower() == name]
    if len(named) != 2:
        return None  # referenced more than once (or the name is used elsewhere): not inlined
    i = named[0]
    if i + 2 >= len(toks) or toks[i + 1].upper != "AS" or toks[i + 2].text != "(":
        return None  # a column list, MATERIALIZED or NOT MATERIALIZED
    close = closing(toks, i + 2)
    return None if close < 0 else (body, toks[i + 2].start, toks[close].start, t.alias or t.name[0], ())


def filter_commutes(q: Query) -> bool:
    """Whether a filter on ``q``'s passed-through output columns commutes with ``q``: a plain
    SELECT (no grouping, window, LIMIT, ``*`` or subquery item)."""
    if (q.type != "SELECT_NODE" or q.from_ is None or q.group_by or q.having is not None
            or q.qualify is not None or q.ctes or q.sampled or q.grouping_sets
            or q.aggregate_handling != "STANDARD_HANDLING"):
        return False
    # a filter on output columns commutes with DISTINCT (on DISTINCT ON's keys: distinct_on_keys)
    if any(m.type not in ("ORDER_MODIFIER", "DISTINCT_MODIFIER") for m in q.modifiers):
        return False
    for i in q.items:
        for n in i.walk():
            if n.over is not None or n.cls in ("WINDOW", "STAR") or n.subquery is not None:
                return False
    return True


def group_columns(q: Query) -> frozenset[str] | None:
    """The grouping columns (lower case) of a plain ``GROUP BY`` query (one grouping set, no
    window, LIMIT, ``*`` or subquery item): PostgreSQL moves a filter reading only them below
    the grouping (a qual pushed into a grouped subquery is a HAVING, and a HAVING without
    aggregates moves to WHERE); None for any other query."""
    if (q.type != "SELECT_NODE" or q.from_ is None or not q.group_by or len(q.grouping_sets) != 1
            or q.qualify is not None or q.ctes or q.sampled or q.aggregate_handling != "STANDARD_HANDLING"
            or any(m.type not in ("ORDER_MODIFIER", "DISTINCT_MODIFIER") for m in q.modifiers)):
        return None
    if any(n.over is not None or n.cls in ("WINDOW", "STAR") or n.subquery is not None
           for i in q.items for n in i.walk()):
        return None
    return frozenset(g.name[-1].lower() for g in q.group_by if g.cls == "COLUMN_REF")


def distinct_on_keys(q: Query) -> frozenset[str] | None:
    """The column names ``q``'s DISTINCT ON keys on (a filter reading another column would
    change which row of a key is kept); None without DISTINCT ON."""
    for m in q.modifiers:
        if m.type == "DISTINCT_MODIFIER" and m.expressions:
            return frozenset(e.name[-1].lower() for e in m.expressions if e.cls == "COLUMN_REF")
    return None


def passed_columns(q: Query, renames: tuple[str, ...]) -> dict[str, Expression | None] | None:
    """Output name (lower case, ``renames`` first) -> the column reference ``q`` passes
    through under it, or None for a computed item (or a name another item also defines,
    which DuckDB may read as that item's alias); None if an item has no name or two share one."""
    names = [item_name(i, pos, renames).lower() for pos, i in enumerate(q.items)]
    if "" in names or len(set(names)) != len(names):
        return None
    out: dict[str, Expression | None] = {}
    for name, i in zip(names, q.items):
        source = i.name[-1].lower() if i.cls == "COLUMN_REF" else None
        clash = source is not None and any(n == source and j is not i for n, j in zip(names, q.items))
        out[name] = None if source is None or clash else i
    return out


def _where_point(text: str, open_: int, close: int) -> int | None:
    # where a WHERE goes in the plain SELECT text[open_ + 1:close]: before its first GROUP
    # BY or ORDER BY (or WINDOW ...) at its own level, else before the closing parenthesis
    toks = tokenize(text[open_ + 1:close])
    for j in top_level(toks, 0):
        if toks[j].kind == "word" and toks[j].upper in _AFTER_WHERE:
            return open_ + 1 + toks[j].start if toks[j].upper in ("ORDER", "GROUP") else None
    return close
