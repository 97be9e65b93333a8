"""Lifting: a continual task's statements as queries over many times at once.

Design
------
A continual task (:mod:`colmz.continual`) evaluates its statements at every time its input
receives inserts. DuckDB's fixed cost per query dwarfs a small time's work, so the batched
evaluation (:mod:`colmz.continual.batched`) runs each statement once over a *batch* of
times. This module writes those queries, and reads the few shapes of a ``DELETE``
predicate the batch needs to recognise; the continual-task code builds no SQL text itself.

The relations and columns of a lifted query are colmz's own (:data:`TIMES`,
:data:`INPUT_ROWS`, :data:`CANDIDATES`; :data:`TIME`, :data:`BORN`, :data:`CANDIDATE_ID`,
:data:`STATEMENT`), all under :data:`colmz.sql.build.RESERVED_PREFIX`, which user text cannot
use. Every name reaches the text through :func:`colmz.sql.build.identifier`; the only other
text is the statements' own queries, already translated and bound by
:func:`colmz.sql.translate` / :func:`colmz.sql.bind_relations_as`.

:func:`lifted_insert`, :func:`lifted_delete` and :func:`lifted_semijoin` run a statement at
every time of :data:`TIMES` (a ``LATERAL`` subquery per time binds the input's registered
name to that time's rows of :data:`INPUT_ROWS`; ``mz_now()`` is the lateral time);
:func:`first_match` and :func:`tagged_union` combine their results. :func:`in_subquery` and
:func:`row_local` read the ``DELETE`` predicates a batch evaluates by a join or per row.

Invariant: every function returns one query (a ``SELECT``); a builder given a query that is
not one ``SELECT`` produces text that :func:`colmz.sql.check_one_query` refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from colmz.sql.build import RESERVED_PREFIX, identifier, now_sql
from colmz.sql.tokens import closing, tokenize, top_level
from colmz.sql.translate import referenced_names, substitute_now

__all__ = [
    "BORN",
    "CANDIDATES",
    "CANDIDATE_ID",
    "INPUT_ROWS",
    "STATEMENT",
    "TIME",
    "TIMES",
    "first_match",
    "in_subquery",
    "lifted_delete",
    "lifted_insert",
    "lifted_semijoin",
    "row_local",
    "tagged_union",
]

#: The batch's times: one column :data:`TIME`.
TIMES = RESERVED_PREFIX + "times"
#: The batch's input rows: the input's columns and :data:`TIME`, the time of each row.
INPUT_ROWS = RESERVED_PREFIX + "in"
#: The rows a ``DELETE`` may remove: the output's columns, :data:`BORN` and :data:`CANDIDATE_ID`.
CANDIDATES = RESERVED_PREFIX + "cand"
#: The time column of :data:`TIMES`, :data:`INPUT_ROWS` and of every lifted query's result.
TIME = RESERVED_PREFIX + "time"
#: A candidate's birth time + 1 (0 for rows held before the batch): it is in ``O@(T-1)``
#: (unless deleted) when ``born <= T``.
BORN = RESERVED_PREFIX + "born"
#: A candidate's row number.
CANDIDATE_ID = RESERVED_PREFIX + "cid"
#: The index of the statement that gave a row of :func:`tagged_union`.
STATEMENT = RESERVED_PREFIX + "stmt"

# Aliases inside the lifted queries (colmz's own, so no user name can collide).
_T = RESERVED_PREFIX + "t"
_Q = RESERVED_PREFIX + "q"
_U = RESERVED_PREFIX + "u"
_D = RESERVED_PREFIX + "d"
_S = RESERVED_PREFIX + "s"
_H = RESERVED_PREFIX + "h"
_C = RESERVED_PREFIX + "c"  # the candidates in lifted_semijoin
_M = RESERVED_PREFIX + "m"  # the subquery's matches there


def _col(table: str, column: str) -> str:
    return f"{identifier(table)}.{identifier(column)}"


def _names(columns: Sequence[str]) -> str:
    return ", ".join(identifier(c) for c in columns)


#: The lateral time of a lifted query.
_TIME_REF = _col(_T, TIME)


def _input_cte(input_relation: str, input_columns: Sequence[str]) -> str:
    # The input's own columns (not the output's: the two schemas may differ).
    return (f"{identifier(input_relation)} AS (SELECT {_names(input_columns)} FROM {identifier(INPUT_ROWS)} "
            f"WHERE {_col(INPUT_ROWS, TIME)} = {_TIME_REF})")


def _over_times(body: str, now_form: str | None) -> str:
    body = substitute_now(body, now_sql(now_form, _TIME_REF))
    return (f"SELECT {_TIME_REF} AS {identifier(TIME)}, {identifier(_Q)}.* FROM {identifier(TIMES)} "
            f"{identifier(_T)}, LATERAL ({body}) {identifier(_Q)}")


def lifted_insert(query: str, input_relation: str, input_columns: Sequence[str],
                  now_form: str | None) -> str:
    """An ``INSERT``'s ``query`` (translated, bound) at every time of :data:`TIMES`.

    ``input_relation`` is the name the query reads the input under; ``now_form`` the form
    of ``mz_now()`` (:data:`colmz.sql.NOW_FORMS`).

    >>> q = lifted_insert('SELECT k FROM "__colmz_r1"', "__colmz_r1", ["k"], None)
    >>> q.startswith('SELECT "__colmz_t"."__colmz_time" AS "__colmz_time", "__colmz_q".*')
    True
    """
    body = f"WITH {_input_cte(input_relation, input_columns)} SELECT * FROM ({query}) {identifier(_U)}"
    return _over_times(body, now_form)


def lifted_delete(query: str, input_relation: str, input_columns: Sequence[str],
                  output_relation: str, columns: Sequence[str], now_form: str | None) -> str:
    """A ``DELETE``'s rows -- ``query`` is ``SELECT * FROM <output> WHERE (predicate)``,
    bound -- at every time of :data:`TIMES`, as ``(time, candidate id)`` pairs.

    The output's name reads the :data:`CANDIDATES` born before each time, so the ``*`` of
    ``query`` carries :data:`CANDIDATE_ID`.

    >>> "LATERAL" in lifted_delete('SELECT * FROM "__colmz_r0" WHERE (k > 1)', "__colmz_r1",
    ...                            ["k"], "__colmz_r0", ["k"], None)
    True
    """
    me = (f"{identifier(output_relation)} AS (SELECT {_names(columns)}, {identifier(CANDIDATE_ID)} "
          f"FROM {identifier(CANDIDATES)} WHERE {_col(CANDIDATES, BORN)} <= {_TIME_REF})")
    body = (f"WITH {_input_cte(input_relation, input_columns)}, {me} SELECT {identifier(CANDIDATE_ID)} "
            f"FROM ({query}) {identifier(_D)}")
    return _over_times(body, now_form)


def lifted_semijoin(subquery: str, lhs: Sequence[str], input_relation: str,
                    input_columns: Sequence[str], now_form: str | None) -> str:
    """A ``DELETE WHERE (lhs) IN (subquery)`` (``subquery`` translated, bound) at every
    time of :data:`TIMES`: the subquery per time joined with the :data:`CANDIDATES` born
    before it on the columns ``lhs``; ``(time, candidate id)`` pairs, as :func:`lifted_delete`.

    >>> " JOIN (" in lifted_semijoin('SELECT k FROM "__colmz_r1"', ["k"], "__colmz_r1", ["k"], None)
    True
    """
    t = _TIME_REF
    vs = [f"{RESERVED_PREFIX}v{i}" for i in range(len(lhs))]
    on = " AND ".join(f"{_col(_C, c)} = {_col(_M, v)}" for c, v in zip(lhs, vs))
    body = substitute_now(subquery, now_sql(now_form, t))
    return (
        f"SELECT {_col(_M, TIME)} AS {identifier(TIME)}, {_col(_C, CANDIDATE_ID)} FROM {identifier(CANDIDATES)} "
        f"{identifier(_C)} JOIN (SELECT DISTINCT {t} AS {identifier(TIME)}, {identifier(_S)}.* FROM "
        f"{identifier(TIMES)} {identifier(_T)}, LATERAL (WITH {_input_cte(input_relation, input_columns)} "
        f"SELECT * FROM ({body}) {identifier(_U)}({_names(vs)})) {identifier(_S)}) {identifier(_M)} "
        f"ON {on} AND {_col(_C, BORN)} <= {_col(_M, TIME)}"
    )


def first_match(query: str) -> str:
    """Each candidate's first matching time in a :func:`lifted_delete` (or
    :func:`lifted_semijoin`) ``query``: ``(candidate id, time)``.

    >>> first_match("SELECT 1 AS __colmz_time, 2 AS __colmz_cid")
    'SELECT "__colmz_cid", min("__colmz_time") AS "__colmz_time" FROM (SELECT 1 AS __colmz_time, 2 AS __colmz_cid) "__colmz_h" GROUP BY "__colmz_cid"'
    """
    cid, time = identifier(CANDIDATE_ID), identifier(TIME)
    return f"SELECT {cid}, min({time}) AS {time} FROM ({query}) {identifier(_H)} GROUP BY {cid}"


def tagged_union(queries: Sequence[str]) -> str:
    """``queries`` (with the same columns) as one ``UNION ALL``, each row first tagged with
    its query's index in :data:`STATEMENT`.

    >>> tagged_union(["SELECT 1 AS k"])
    'SELECT 0 AS "__colmz_stmt", "__colmz_u0".* FROM (SELECT 1 AS k) "__colmz_u0"'
    """
    parts = []
    for i, q in enumerate(queries):
        alias = identifier(f"{_U}{i}")
        parts.append(f"SELECT {i} AS {identifier(STATEMENT)}, {alias}.* FROM ({q}) {alias}")
    return " UNION ALL ".join(parts)


def in_subquery(predicate: str, name: str, cols: Sequence[str]) -> tuple[list[str], str] | None:
    """``(columns, subquery)`` when ``predicate`` (a ``DELETE FROM name`` predicate, as the
    user wrote it) is exactly ``cols IN (subquery)``, with ``cols`` columns of ``name`` and a
    subquery that does not read ``name``; else ``None``.

    >>> in_subquery("(k, v) IN (SELECT a, b FROM x)", "t", ["k", "v"])
    (['k', 'v'], 'SELECT a, b FROM x')
    >>> in_subquery("k IN (SELECT k FROM t)", "t", ["k"]) is None
    True
    """
    toks = tokenize(predicate)
    j = next((k for k in top_level(toks, 0) if toks[k].upper == "IN"), None)  # the first IN outside brackets
    paren = bool(toks) and toks[0].text == "("  # (cols) IN, else col IN
    if j is None or (paren and closing(toks, 0) != j - 1):
        return None
    lhs: list[str] = []
    item: list = []
    for tok in [*toks[paren : j - paren], None]:  # each item: col or name.col, items between commas
        if tok is not None and tok.text != ",":
            item.append(tok)
            continue
        if len(item) == 3 and item[0].kind in ("word", "qident") and item[0].name == name and item[1].text == ".":
            item = item[2:]
        if len(item) != 1 or item[0].kind not in ("word", "qident") or item[0].name not in cols:
            return None
        lhs.append(item[0].name)
        item = []
    # one column unless parenthesised; IN, then a parenthesis closing at the end of the
    # predicate around a query
    if (not paren and len(lhs) > 1) or not (
            j + 2 < len(toks) and toks[j + 1].text == "(" and closing(toks, j + 1) == len(toks) - 1
            and toks[j + 2].upper in ("SELECT", "WITH", "VALUES", "TABLE")):
        return None
    sub = predicate[toks[j + 2].start : toks[-1].start]
    if name in referenced_names(sub):
        return None
    return lhs, sub


def row_local(predicate: str, name: str, cols: Sequence[str]) -> bool:
    """Whether ``predicate`` reads ``name`` only through the row it tests: every mention of
    ``name`` is ``name.column`` (bare columns read the tested row too).

    >>> row_local("t.k > 1 AND v < 2", "t", ["k", "v"]), row_local("k IN (SELECT k FROM t)", "t", ["k"])
    (True, False)
    """
    toks = tokenize(predicate)
    return all(j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].kind in ("word", "qident")
               and toks[j + 2].name in cols and not (j > 0 and toks[j - 1].text == ".")
               for j, tok in enumerate(toks) if tok.kind in ("word", "qident") and tok.name == name)
