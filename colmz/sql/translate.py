"""Translation: a Materialize/PostgreSQL query made into the query DuckDB runs.

* On DuckDB's parse tree, first: :func:`colmz.sql.transforms.apply_transforms`, the table
  of transforms (calls, casts, operators and rows as PostgreSQL means them; its module
  docstring lists them), applied once, bottom-up, to the nodes' spans.
* Then token by token: ``mz_now()`` becomes the placeholder :data:`MZ_NOW` (one word token,
  replaced by the evaluation time by :func:`substitute_now`, again token by token, so a
  string literal holding the same letters is never touched); names beginning
  with ``__colmz_`` are colmz's own and refused (in the user's text, before any rewrite);
  ``sum``'s argument goes through :data:`SUM_ARGUMENT`, so a sum of ``bigint`` is numeric as
  in PostgreSQL and divides as numeric; calls and operators DuckDB lacks or runs differently
  are refused by name (:data:`UNSUPPORTED_FUNCTIONS`, :data:`UNSUPPORTED_OPERATORS`, jsonb
  ``@>``, ``SIMILAR``) with ``UnsupportedSQL``, never left to DuckDB's own error or a
  different answer; DuckDB's own "no such function" errors become refusals naming the call
  in :func:`colmz.sql.run.run_query`. ``VALUES`` beginning a query is wrapped to name its
  columns ``column1`` ...;
  PostgreSQL's array text ``'{1,2}'::int[]`` is DuckDB's; float literals past their type's
  range raise.
* What the table's rules share lives here: :func:`cast_rewrite` (a cast to text prints
  doubles and reals as PostgreSQL 15 does, text to boolean reads its words, an integer cast
  of text checks its digits, :data:`INT_MACROS`; an interval prints as PostgreSQL's,
  :data:`INTERVAL_TEXT`) and the macros and functions (:data:`MACROS`, :data:`FUNCTIONS`,
  defined on every connection by :func:`colmz.sql.connect`) that ask DuckDB's ``typeof``
  where the type decides and the tokens do not say it; a refusal decided there is an
  ``error()`` that :func:`colmz.sql.run.run_query` raises as ``UnsupportedSQL``. A long
  ``||`` chain of text operands is regrouped as a balanced tree over its operands' spans
  (:func:`colmz.sql.grammar.concat_chains`) before the tree is read.
* :func:`bind_relations` binds the relations a query reads to the names colmz registers
  them under (:func:`colmz.sql.relation_name`), since DuckDB folds every identifier's case.
* :func:`arrow_type` (defined in :mod:`colmz.column_types`, below the SQL layer) is the
  Arrow type colmz stores for a SQL column type.
"""

from __future__ import annotations

import bisect
import re

from colmz.column_types import arrow_type
from colmz.sql.build import BYTEA_IN, RESERVED_PREFIX, identifier, relation_name
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.grammar import concat_chains
from colmz.sql.hints import blank_hints
from colmz.sql.jsonb import arrow_entry, refuse_spelled, spell_operators
from colmz.sql.names import as_qualified, resolve_item
from colmz.sql.numeric import (
    DECIMAL_TEXT,
    NUMERIC_IN,
    NUMERIC_IN_GUARD,
    WIDE_DECIMAL_REFUSAL,
    float4_text,
    float8_text,
    wide_decimal,
)
from colmz.sql.parse import item_names
from colmz.sql.pg_names import check_postgres_names, may_hold, pg_functions
from colmz.sql.pgfuncs import DATETIME_TEXT, INTERVAL_OUT
from colmz.sql.tokens import (
    check_nesting,
    closing,
    cte_definitions,
    require_text,
    share_edit,
    short_text_cache,
    tokenize,
    top_level,
)
from colmz.sql.transforms import (
    AVG_OF_INTERVAL,
    CHECKED_MATH,
    NOT_INTERVAL,
    TYPE_SPELLINGS,
    Call,
    Relations,
    all_queries,
    apply_transforms,
    first_branch,
    is_arith,
    table_refs,
    type_words,
    values_rows,
)
from colmz.sql.tree import Expression, Query, parse_tree
from colmz.sql.typing_pass import Typer, branch_items, query_expressions

__all__ = [
    "FUNCTIONS",
    "MACROS",
    "MZ_NOW",
    "SUM_ARGUMENT",
    "SUM_ARGUMENT_UNTYPED",
    "arrow_type",
    "bind_relations",
    "bind_relations_as",
    "check_clauses",
    "now_pieces",
    "numeric_source",
    "pg_float_text",
    "referenced_names",
    "relation_names",
    "relation_references",
    "substitute_now",
    "translate",
    "uses_now",
]

#: What ``mz_now()`` becomes in translated text: one word token, replaced (as a token, by
#: :func:`substitute_now`) by the evaluation time.
MZ_NOW = RESERVED_PREFIX + "mz_now__"

_UNSUPPORTED_WORDS = {
    "MZ_LOGICAL_TIMESTAMP": "mz_logical_timestamp()",
    "SUBSCRIBE": "SUBSCRIBE",
    "MUTUALLY": "WITH MUTUALLY RECURSIVE",
    "SYMMETRIC": "BETWEEN SYMMETRIC",  # (reserved words in PostgreSQL; DuckDB's parser has neither)
    "ASYMMETRIC": "BETWEEN ASYMMETRIC",
}

#: PostgreSQL/Materialize functions colmz cannot run with their meaning in DuckDB (absent
#: there, or present with another one), and why: a call is refused with ``UnsupportedSQL``.
UNSUPPORTED_FUNCTIONS = {
    "INITCAP": "DuckDB has no initcap",
    "REGEXP_MATCH": "DuckDB's regexp functions return other shapes than its text[]",
    "REGEXP_MATCHES": "DuckDB's regexp_matches is a boolean test, not PostgreSQL's rows of text[]",
    "TO_CHAR": "DuckDB's strftime patterns are not PostgreSQL's templates",
    "DATE_BIN": "DuckDB has no date_bin",
    "FORMAT": "DuckDB's format() is not PostgreSQL's %s syntax",
    **{f: "colmz stores jsonb as JSON text and has no jsonb functions" for f in (
        "JSONB_BUILD_OBJECT", "JSONB_BUILD_ARRAY", "JSONB_TYPEOF", "JSONB_ARRAY_ELEMENTS",
        "JSONB_ARRAY_ELEMENTS_TEXT", "JSONB_EACH", "JSONB_EACH_TEXT", "JSONB_OBJECT_KEYS",
        "JSONB_ARRAY_LENGTH", "JSONB_AGG", "JSONB_OBJECT_AGG", "JSONB_STRIP_NULLS", "JSONB_SET",
        "JSONB_INSERT", "JSONB_PRETTY", "JSONB_PATH_QUERY", "TO_JSONB")},
}
#: Operators DuckDB lacks (jsonb's, integer xor), and what they are.
UNSUPPORTED_OPERATORS = {
    "#>": "the jsonb path operator #>",
    "#>>": "the jsonb path operator #>>",
    "?": "the jsonb key operators ?, ?| and ?&",
    "#": "the bitwise xor operator #",
}


@short_text_cache(1024)
def translate(sql: str, relations: Relations = ()) -> str:
    """Rewrite a Materialize/PostgreSQL query or expression for DuckDB.

    ``mz_now()`` becomes :data:`MZ_NOW`, to be replaced by the evaluation time. ``relations``
    names the array columns of the tables ``sql`` reads, which it may slice
    (:func:`colmz.sql.typing_pass.array_columns`). The result is remembered per text and
    relations (a pure function of them; a refusal is raised again each time).

    >>> translate("SELECT v, btrim(w) FROM t WHERE ts + 5 > mz_now()")
    'SELECT v, trim(w) FROM t WHERE ts + 5 > __colmz_mz_now__'
    """
    # Nesting is measured first, in one pass over the tokens: every rewrite below reads a
    # nested construct once per level, so a text nested deeper is refused before any runs.
    sql = blank_hints(require_text(sql, "text"))  # OPTIONS (...) hints: no effect on answers
    toks = tokenize(sql)
    check_nesting(toks, sql)
    low = sql.lower()
    if RESERVED_PREFIX in low:  # (a name's folded text is in the text's, folded)
        for t in toks:  # colmz's own names are refused in the user's text (the rewrites add them)
            if t.kind in ("word", "qident") and t.name.startswith(RESERVED_PREFIX):
                raise SQLError(f"names beginning with {RESERVED_PREFIX} are colmz's own: {t.text!r}")
    if _LONG_FRACTION.search(sql) and any(t.kind == "string" and _LONG_FRACTION.search(t.text) for t in toks):
        raise UnsupportedSQL("a time of day with more than 6 fractional digits ('...:00.1234567') is not "
                             "supported by colmz (PostgreSQL rounds it to microseconds, DuckDB truncates)")
    # (a word whose upper case is WITH is "with" folded, in ASCII: a text without one is not
    # read token by token)
    if ("with" in low or not sql.isascii()) and any(t.kind == "word" and t.upper == "WITH" for t in toks):
        _check_cte_lists(sql)
    if ("distinct" in low and "order" in low) or "over" in low:
        check_clauses(sql, toks)
    # Long || chains are regrouped first (so that the tree of the text is shallow), then
    # every node of the table of transforms is rewritten once, on the tree (constants
    # folded, calls, casts, concatenations' operands, row comparisons), then the token pass.
    balanced = _balance_concat_chains(sql)
    if balanced is not sql:
        sql, toks = balanced, tokenize(balanced)
    if "pg_catalog" in low:
        unqualified = _strip_pg_catalog(sql, toks)
        if unqualified is not sql:
            sql, toks = unqualified, tokenize(unqualified)
    spelled = spell_operators(sql, toks)  # jsonb's #>, ?, ... as operators DuckDB parses
    was_spelled = spelled is not sql
    if was_spelled:
        sql, toks = spelled, tokenize(spelled)
    if may_hold(sql, toks):  # DuckDB's own functions and syntax: PostgreSQL's errors
        try:
            stmts = parse_tree(sql)
        except SQLError:
            stmts = ()
        check_postgres_names(sql, toks, stmts)
    out = apply_transforms(sql, toks, relations)
    if was_spelled:
        refuse_spelled(out)  # a spelled operator no rule took
    if out is not sql:
        # the token pass, else bind_relations, reads it: lex only what the tree's rules changed
        share_edit(sql, toks, out)
    if _TOKEN_PASS_MARKS.search(out.upper()) is None:
        return out  # nothing the token pass acts on
    return _translate_tokens(out)


def _strip_pg_catalog(sql: str, toks) -> str:
    # ``pg_catalog.f(...)`` of a function PostgreSQL has is its ``f(...)`` (every built-in
    # function lives in pg_catalog, searched first); DuckDB reads ``pg_catalog`` as a column
    # and ``f`` as a method on it. A name PostgreSQL lacks keeps its qualifier (its error
    # names it). The text of the qualifier and its dot go, nothing else.
    cut = []
    for i in range(len(toks) - 3):
        t = toks[i]
        if t.kind in ("word", "qident") and t.name.lower() == "pg_catalog" and toks[i + 1].text == "." \
                and toks[i + 2].kind == "word" and toks[i + 3].text == "(" \
                and toks[i + 2].name.lower() in pg_functions() and (i == 0 or toks[i - 1].text != "."):
            cut.append((t.start, toks[i + 2].start))
    if not cut:
        return sql
    out, at = [], 0
    for a, b in cut:
        out.append(sql[at:a])
        at = b
    out.append(sql[at:])
    return "".join(out)


#: A time of day written with more than microseconds (in a date, timestamp or time text).
_LONG_FRACTION = re.compile(r"\d:\d\d:\d\d\.\d{7}")


def _check_cte_lists(sql: str) -> None:
    # ``WITH c(a, b, d) AS (SELECT 1, 2)``: PostgreSQL raises (parse_cte.c), DuckDB names the
    # columns it has and answers. A body whose columns are not listed (a star, VALUES) is
    # left to DuckDB. ``WITH RECURSIVE a AS (... FROM b), b AS (...)``: PostgreSQL orders a
    # recursive list by its references, DuckDB reads a CTE only after its definition (an
    # unknown table): refused by name. The lists and RECURSIVE are read from the tokens (the
    # tree keeps neither), each body from the query's tree (the one apply_transforms reads):
    # the innermost definition of its name whose parentheses hold the body's first position.
    # A text DuckDB does not parse before translation is left to DuckDB.
    defs = list(cte_definitions(sql))
    if not any(cols or recursive for _, cols, _, _, _, recursive in defs):
        return  # no column list, no recursive list: nothing to check (its tree is not read)
    try:
        stmts = parse_tree(sql)
    except (SQLError, ValueError):
        return
    bodies: dict[int, Query] = {}
    for d in (d for q in stmts for d in all_queries(q)):
        for name, body in d.ctes:
            at = _first_position(body)
            inner = [(end - start, i) for i, (n, _, start, end, _, _) in enumerate(defs)
                     if n.lower() == name.lower() and start <= at < end]
            if inner:
                bodies[min(inner)[1]] = body
    later: dict[int, set[str]] = {}  # each WITH RECURSIVE list's names defined after the one read
    for name, _, _, _, at, recursive in defs:
        if recursive:
            later.setdefault(at, set()).add(name)
    for i, (name, cols, _, _, at, recursive) in enumerate(defs):
        if recursive:
            later[at].discard(name)
        body = bodies.get(i)
        if body is None:
            continue
        if recursive and later[at]:
            ahead = sorted(later[at] & _relations_read(body))
            if ahead:
                raise UnsupportedSQL(
                    f'WITH RECURSIVE: "{name}" reads "{ahead[0]}", defined after it in its list, which '
                    f'colmz does not support (DuckDB reads a CTE only after its definition): define "{ahead[0]}" first')
        first = first_branch(body)
        if not cols or first.type != "SELECT_NODE" or not first.items \
                or any(n.cls in ("STAR", "COLUMNS") for e in first.items for n in e.walk()):
            continue
        if len(cols) > len(first.items):
            raise SQLError(f'WITH query "{name}" has {len(first.items)} columns available but '
                           f"{len(cols)} columns specified")


#: Window clauses colmz reads before DuckDB does (:func:`check_clauses`), by PostgreSQL's
#: words for what its parser refuses (``src/backend/parser/parse_clause.c``,
#: ``parse_agg.c``) and DuckDB answers.
_WINDOW_ERRORS = {
    "distinct": "DISTINCT is not implemented for window functions",
    "groups": "GROUPS mode requires an ORDER BY clause",
    "order": "aggregate ORDER BY is not implemented for window functions",
}
_DISTINCT_ORDER = "for SELECT DISTINCT, ORDER BY expressions must appear in select list"
_DISTINCT_ON_ORDER = "SELECT DISTINCT ON expressions must match initial ORDER BY expressions"
#: The words a window specification may begin with other than an existing window's name.
_WINDOW_CLAUSE_WORDS = frozenset({"PARTITION", "ORDER", "ROWS", "RANGE", "GROUPS"})


def check_clauses(sql: str, toks) -> None:
    """PostgreSQL's errors of ``SELECT DISTINCT``/``DISTINCT ON`` beside ``ORDER BY`` and of
    window specifications, where DuckDB answers (``toks``: ``sql``'s tokens):

    * ``SELECT DISTINCT`` ordered by an expression not in its select list (DuckDB orders by
      any row's value); ``DISTINCT ON`` expressions that are not the leading ``ORDER BY``
      items (DuckDB keeps any row of each), by ``transformDistinctOnClause``'s test;
    * an aggregate's ``DISTINCT`` or ``ORDER BY`` over a window (read from the call's
      tokens: the tree keeps neither), DuckDB's ``IGNORE NULLS``/``RESPECT NULLS`` among a
      window call's arguments; ``GROUPS`` frames without ``ORDER BY``; a
      window specification naming an existing window and its own ``PARTITION BY``.

    An expression is matched to a select item as PostgreSQL's ``findTargetlistEntrySQL92``
    does (a bare name is an output column's name first, an integer constant its position,
    else an equal expression). Expressions are compared by their trees with names folded and
    a column by its last name (equal or more: a superset of PostgreSQL's equal); a text with
    quoted names, or an expression holding a subquery, a window or an aggregate's ORDER BY,
    is not judged (DuckDB's answer stands). So an error is raised only where PostgreSQL
    raises it.

    >>> check_clauses("SELECT DISTINCT g FROM t ORDER BY v", tokenize("SELECT DISTINCT g FROM t ORDER BY v"))
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: for SELECT DISTINCT, ORDER BY expressions must appear in select list
    """
    for i in range(len(toks) - 3):  # OVER (w PARTITION BY ...), WINDOW x AS (w PARTITION BY ...)
        t = toks[i + 2]
        if toks[i].upper in ("OVER", "AS") and toks[i + 1].text == "(" and toks[i + 3].upper == "PARTITION" \
                and (t.kind == "qident" or (t.kind == "word" and t.upper not in _WINDOW_CLAUSE_WORDS)):
            raise SQLError(f'cannot override PARTITION BY clause of window "{t.name}"')
    try:
        stmts = parse_tree(sql)
    except (SQLError, ValueError):
        return
    starts = None
    for d in (d for q in stmts for d in all_queries(q)):
        for root in query_expressions(d):
            for n in root.walk():
                if n.cls != "WINDOW" or n.over is None:
                    continue
                if ("GROUPS" in n.over.start or "GROUPS" in n.over.end) and not n.over.orders:
                    raise SQLError(_WINDOW_ERRORS["groups"])
                if n.start < 0:
                    continue
                if starts is None:
                    starts = [t.start for t in toks]
                at = bisect.bisect_left(starts, n.start) + 1  # (the call's "(")
                if at >= len(toks) or toks[at].text != "(":
                    continue
                if n.type == "WINDOW_AGGREGATE" and at + 1 < len(toks) and toks[at + 1].upper == "DISTINCT":
                    raise SQLError(_WINDOW_ERRORS["distinct"])
                if n.type == "WINDOW_AGGREGATE" and _argument_word(toks, at, "ORDER") is not None:
                    raise SQLError(_WINDOW_ERRORS["order"])
                # f(x IGNORE NULLS) OVER (...): DuckDB's grammar, PostgreSQL's syntax error
                k = _argument_word(toks, at, "IGNORE", "RESPECT")
                if k is not None and k + 1 < len(toks) and toks[k + 1].upper == "NULLS":
                    raise SQLError(f'syntax error at or near "{toks[k].text}"')
        if '"' not in sql:
            _check_distinct_order(d, sql)


def _argument_word(toks, open_at: int, *words: str) -> int | None:
    # the position of the first of ``words`` among the arguments of the call whose "(" is
    # toks[open_at] (at its own depth: not in a call or subquery inside them); None when
    # there is none
    return next((i for i in top_level(toks, open_at + 1) if toks[i].upper in words), None)


def _check_distinct_order(d: Query, sql: str) -> None:
    distinct = next((m for m in d.modifiers if m.type == "DISTINCT_MODIFIER"), None)
    order = next((m for m in d.modifiers if m.type == "ORDER_MODIFIER"), None)
    if d.type != "SELECT_NODE" or distinct is None or order is None or not order.orders:
        return
    names = item_names(d, sql)
    if names is None:  # (a star)
        return
    shapes = [_shape(e, sql) for e in d.items]

    def target(e: Expression):
        # ("item", i) for the select item ``e`` resolves to, ("expr", shape) for another
        # expression, None where colmz cannot tell
        if e.cls == "COLUMN_REF" and len(e.name) == 1:
            hits = [i for i, n in enumerate(names) if n is not None and n.lower() == e.name[0].lower()]
            if len(hits) > 1 and (None in {shapes[i] for i in hits} or len({shapes[i] for i in hits}) > 1):
                return None  # (PostgreSQL's "ambiguous", or not known)
            if hits:
                return "item", hits[0]
        if e.cls == "CONSTANT":
            lit = e.literal
            if lit is not None and lit.kind == "INTEGER" and 1 <= lit.value <= len(d.items):
                return "item", lit.value - 1
            return None
        shape = _shape(e, sql)
        if shape is None:
            return None
        return next((("item", i) for i, s in enumerate(shapes) if s == shape), ("expr", shape))

    orders = []
    for o in order.orders:
        k = target(o.expression)
        if k is None:
            return
        if k not in orders:  # (PostgreSQL drops a repeated sort item, in either direction)
            orders.append(k)
    if not distinct.expressions:
        if any(k[0] == "expr" for k in orders):
            raise SQLError(_DISTINCT_ORDER)
        return
    on = [target(e) for e in distinct.expressions]
    if None in on:
        return
    skipped = False
    for k in orders:
        if k in on:
            if skipped:
                raise SQLError(_DISTINCT_ON_ORDER)
        else:
            skipped = True
    if skipped and any(k not in orders for k in on):
        raise SQLError(_DISTINCT_ON_ORDER)


def _shape(e: Expression, sql: str) -> tuple | None:
    # ``e``'s tree as a value: equal for expressions PostgreSQL may find equal (names
    # folded, a column by its last name, any cast's type alike); None for one not judged here
    out = []
    for n in e.walk():
        if n.cls in ("SUBQUERY", "WINDOW", "STAR", "PARAMETER") or n.order_by:
            return None
        name = n.name[-1:] if n.cls == "COLUMN_REF" else n.name
        lit = n.literal
        value = lit.value if lit is not None and lit.kind == "INTEGER" else lit
        out.append((n.cls, n.type, tuple(x.lower() for x in name), value, n.distinct, len(n.children)))
    return tuple(out)


def _first_position(q: Query) -> int:
    # the first character of ``q``'s text the tree places (its first branch's first select
    # item or FROM item), -1 when none is placed
    first = first_branch(q)
    return min((s for s in (*(e.start for e in first.items), *(t.start for t in table_refs(first))) if s >= 0),
               default=-1)


def _relations_read(q) -> set[str]:
    # the one-part relation names ``q`` reads in a FROM (its CTEs', branches' and
    # subqueries' too), lower case
    return {t.name[0].lower() for d in all_queries(q) for t in table_refs(d)
            if t.type == "BASE_TABLE" and len(t.name) == 1}


def _alternatives(words) -> str:
    # A regular expression matching any of ``words``, factored by their first characters
    # (``JSONB_(?:AGG|...)``): Python's engine tries the alternatives of a plain list one by
    # one at each position of the text.
    if "" in words:
        rest = [w for w in words if w]
        return "(?:" + _alternatives(rest) + ")?" if rest else ""
    by_first: dict[str, list[str]] = {}
    for w in words:
        by_first.setdefault(w[0], []).append(w[1:])
    alts = [re.escape(c) + _alternatives(more) for c, more in sorted(by_first.items())]
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


#: What every token the pass below acts on holds, in upper case as the pass compares words
#: (a superset: a text without any of these passes through unchanged, not tokenized again).
_TOKEN_PASS_MARKS = re.compile(_alternatives(sorted({
    "LIKE", "VALUES", "OF", "MZ_NOW", "@>", "<@", "'{", "SIMILAR", "SUM", "#", "?",
    *_UNSUPPORTED_WORDS, *UNSUPPORTED_FUNCTIONS})))


#: The words (upper case) and the operator and quoted-name texts the token pass below acts
#: on; it also acts on string constants beginning ``'{`` (array texts).
_PASS_WORDS = frozenset({"LIKE", "ILIKE", "VALUES", "AS", "MZ_NOW", "SIMILAR", "SUM",
                         *_UNSUPPORTED_WORDS, *UNSUPPORTED_FUNCTIONS})
_PASS_TEXTS = frozenset({"@>", "<@", '"sum"', *UNSUPPORTED_OPERATORS})


def _translate_tokens(sql: str) -> str:
    # translate's token pass (of a text holding _TOKEN_PASS_MARKS): words, calls, operators,
    # sum's argument, VALUES' names.
    toks = tokenize(sql)
    pieces, last = [], 0
    # Text to put after a token further on (VALUES column names, the end of sum's argument):
    # token index -> text, emitted once the loop has passed that token; a construct
    # registered later is nested in the earlier ones, so it goes first.
    inserts: dict[int, str] = {}
    # Only the tokens a rule below may act on are visited (most of a text is none of them);
    # an insert registered at a token passed over is emitted before the next visited one,
    # as when every token was visited (a token passed over adds no piece).
    # (the last "token", past the end, emits the inserts left)
    arrays = "'{" in sql  # (else no token is an array text: none is sliced to see)
    for i in [*(i for i, t in enumerate(toks)
                if t.upper in _PASS_WORDS or t.text in _PASS_TEXTS or (arrays and t.text[:2] == "'{")), len(toks)]:
        if inserts and min(inserts) < i:
            for j in sorted(k for k in inserts if k < i):
                end = max(last, toks[j].end)
                pieces.append(sql[last:end])
                pieces.append(inserts.pop(j))
                last = end
        if i == len(toks):
            break
        t = toks[i]
        up = t.upper
        if up in ("LIKE", "ILIKE") and i + 1 < len(toks) and toks[i + 1].upper in ("ANY", "ALL", "SOME"):
            raise UnsupportedSQL(f"{t.text} {toks[i + 1].text} (...) is not supported by colmz")
        if up == "VALUES" and (i == 0 or (toks[i - 1].kind == "op" and toks[i - 1].text == "(")):
            # VALUES beginning a query: PostgreSQL names its columns column1, column2, ...
            # (DuckDB col0, col1); an alias's column list, if any, still renames them.
            rows = values_rows(toks, i)
            after = rows[-1][1] + 2 if rows else i + 1  # a row not closed: "(" after VALUES or ","
            if after < len(toks) and toks[after].text == "(" and (not rows or toks[after - 1].text == ","):
                raise SQLError(f"unclosed parenthesis after {toks[after - 1].text!r}")
            if rows:
                close = rows[-1][1]
                n = 1 + sum(toks[k].kind == "op" and toks[k].text == "," for k in top_level(toks, rows[0][0] + 1))
                pieces.append(sql[last : t.start])
                pieces.append("SELECT * FROM (")
                last = t.start
                inserts[close] = ') AS "*VALUES*"(' + _column_names(1, n) + ")" + inserts.get(close, "")
        if up in _UNSUPPORTED_WORDS and (up != "MUTUALLY" or (i > 0 and toks[i - 1].upper == "WITH")):
                raise UnsupportedSQL(f"{_UNSUPPORTED_WORDS[up]} is not supported by colmz")
        if up == "AS" and i + 2 < len(toks) and toks[i + 1].upper == "OF" and (
                toks[i + 2].kind == "number" or toks[i + 2].upper == "AT"):
            # a statement's own AS OF is taken off by colmz.sql.parse; one left here is inside
            # a view's or subquery's text (``AS of`` alone is a column named "of")
            raise UnsupportedSQL("AS OF inside a query is not supported by colmz (a statement "
                                 "ends with AS OF t, or use as_of=)")
        if up == "MZ_NOW":
            if not (i + 2 < len(toks) and toks[i + 1].text == "(" and toks[i + 2].text == ")"):
                raise SQLError("mz_now takes no arguments: write mz_now()")
            pieces.append(sql[last : t.start])
            pieces.append(MZ_NOW)
            last = toks[i + 2].end
            continue  # its ( and ) are not visited
        if t.kind == "op" and t.text in ("@>", "<@") and not _array_operands(toks, i):
            raise UnsupportedSQL(
                f"the jsonb containment operator {t.text} is not supported by colmz (only "
                "between ARRAY[...] constructors or array casts, as DuckDB's list containment)")
        if t.kind == "string" and _ARRAY_TEXT.match(t.text) and _array_cast_follows(toks, i):
            # PostgreSQL's array text '{1,2}' cast to an array: DuckDB reads lists as '[1,2]'.
            pieces.append(sql[last : t.start])
            pieces.append("'[" + t.text[2:-2] + "]'")
            last = t.end
            continue
        if up == "SIMILAR" and i + 1 < len(toks) and toks[i + 1].upper == "TO":
            raise UnsupportedSQL("SIMILAR TO is not supported by colmz (DuckDB reads its pattern as "
                                 "a regular expression: % and _ are not wildcards there)")
        if up == "SIMILAR":  # substring(s SIMILAR pattern ESCAPE e), which DuckDB cannot parse
            raise UnsupportedSQL("substring(... SIMILAR ...) is not supported by colmz (SQL regular "
                                 "expressions differ in DuckDB)")
        if t.kind == "op" and t.text in UNSUPPORTED_OPERATORS:
            raise UnsupportedSQL(f"{UNSUPPORTED_OPERATORS[t.text]} is not supported by colmz")
        if up in UNSUPPORTED_FUNCTIONS and _is_call(toks, i):
            raise UnsupportedSQL(f"{t.text}() is not supported by colmz ({UNSUPPORTED_FUNCTIONS[up]})")
        if (up == "SUM" or (t.kind == "qident" and t.text == '"sum"')) and _is_call(toks, i):
            last = _sum_argument(toks, i, pieces, sql, last, inserts)
    pieces.append(sql[last:])
    out = "".join(pieces)
    share_edit(sql, toks, out)  # bind_relations reads its tokens: lex only what changed
    return out


def _is_call(toks, i: int) -> bool:
    # A name followed by "(" and not a qualified name's part (``x.f(`` is not ours).
    return (toks[i].kind in ("word", "qident") and i + 1 < len(toks) and toks[i + 1].text == "("
            and not (i > 0 and toks[i - 1].text == "."))


def _closing(toks, open_at: int) -> int:
    at = closing(toks, open_at)
    if at < 0:
        raise SQLError(f"unclosed parenthesis after {toks[open_at - 1].text!r}")
    return at


#: PostgreSQL's text of a one-dimensional array whose elements need no quoting.
_ARRAY_TEXT = re.compile(r"^'\{[^{}\[\]\"'\\]*\}'$")


def _array_cast_follows(toks, i: int) -> bool:
    # Whether the literal at ``i`` is cast to an array type (``::int[]``, ``::double precision[]``).
    j = i + 2
    if j >= len(toks) or toks[i + 1].text != "::":
        return False
    while j < len(toks) and toks[j].kind == "word":
        j += 1
    return j + 1 < len(toks) and j > i + 2 and toks[j].text == "[" and toks[j + 1].text == "]"


def _array_operands(toks, at: int) -> bool:
    # Whether the @>/<@ at ``at`` is visibly between arrays: ARRAY[...] or an array cast.
    nxt = toks[at + 1] if at + 1 < len(toks) else None
    prev = toks[at - 1] if at > 0 else None
    if nxt is not None and nxt.upper == "ARRAY":
        return True
    return prev is not None and prev.kind == "op" and prev.text == "]"


# ----------------------------------------------------------------------------- VALUES' names

#: Types whose literal is written ``TYPE 'text'``.
_TYPED_LITERALS = {"DATE", "TIME", "TIMESTAMP", "TIMESTAMPTZ", "INTERVAL"}


def _column_names(first: int, last: int) -> str:
    return ", ".join(f"column{k}" for k in range(first, last + 1))


# ----------------------------------------------------------------------------- float8 as text

_TEXT_TYPES = type_words("text", upper=True)


def _float_digits(d: str, exponent_from: int) -> str:
    # PostgreSQL 15's text of the float expression ``d`` (in its own type, double or real):
    # DuckDB prints the same shortest digits, in fixed notation up to 1e16 and with ``.0``
    # on a whole number; PostgreSQL prints no ``.0``, switches to d.ddde+NN from
    # 1e15 (double) or 1e6 (real) on, and spells NaN and Infinity.
    text = f"CAST(abs({d}) AS \"varchar\")"
    mantissa = (f"regexp_replace(rtrim(replace({text}, '.', ''), '0'), "
                f"'^([0-9])([0-9]+)$', '\\1.\\2')")
    exponent = f"lpad(CAST(length(split_part({text}, '.', 1)) - 1 AS \"varchar\"), 2, '0')"
    text = (
        f"CASE WHEN isnan({d}) THEN 'NaN' "
        f"WHEN isinf({d}) THEN CASE WHEN {d} > 0 THEN 'Infinity' ELSE '-Infinity' END "
        f"WHEN abs({d}) >= 1e{exponent_from} AND abs({d}) < 1e16 THEN "
        f"CASE WHEN {d} < 0 THEN '-' ELSE '' END || {mantissa} || 'e+' || {exponent} "
        f"ELSE regexp_replace(CAST({d} AS \"varchar\"), '\\.0$', '') END"
    )
    return text


#: Calls whose DuckDB result is a double where PostgreSQL's is numeric for integer or
#: numeric arguments (avg, the deviations and variances, numeric math; extract, which the
#: tree reads as ``date_part``: PostgreSQL's ``date_part`` is a double, its ``extract`` a
#: numeric).
_AGGREGATE_MEANS = frozenset({"avg", "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop"})
_NUMERIC_CALLS = _AGGREGATE_MEANS | {"sqrt", "cbrt", "ln", "log", "log10", "exp", "power", "pow"}
_NUMERIC_WORDS = type_words("numeric")
_NUMERIC_TEXT_REFUSAL = (
    "error('the text of a numeric value colmz computes as a double (a division, avg, a "
    "numeric function or a cast of a double to numeric) is not supported by colmz: "
    "PostgreSQL prints its numeric digits and scale; cast it to float8 or round(x, n) first')")


def numeric_source(e: Expression, text: str, names: frozenset[str] = frozenset()) -> bool:
    """Whether a value of ``e``, a node of the tree of ``text``, may be one PostgreSQL types
    numeric while DuckDB computes it as a DOUBLE: a decimal literal, a division, a cast of a
    non-literal to numeric, a call of ``avg``, ``sqrt``, ``extract``, ... or of
    ``round(x, n)`` (numeric's only) -- but not under a cast to another type, nor under a
    node the typing pass (:class:`colmz.sql.typing_pass.Typer`) types otherwise than an
    exact number, nor under arithmetic with such an operand (PostgreSQL's float48 and
    float8 operators make a number with a float a double; an interval divided stays an
    interval); a scalar subquery's value is its select item's. ``names``: column names (lower
    case) whose values may be such numerics (FROM subqueries' and CTEs' items).

    >>> from colmz.sql.tree import parse_tree
    >>> qs = ("age / 2", "avg(age)", "(age::float8 + 1) / 2", "age + 1", "1::real / 3.0", "(a / 2)::int")
    >>> [numeric_source(parse_tree("SELECT " + q)[0].items[0], "SELECT " + q) for q in qs]
    [True, True, False, False, False, False]
    """
    typer, stack = Typer(text, {}, {}), [e]
    numeric = lambda n: n.cls == "CAST" and len(n.children) == 2 and (  # noqa: E731
        " ".join(text[n.children[1].start : n.children[1].end].lower().split()) in _NUMERIC_WORDS)
    while stack:
        n = stack.pop()
        if n.cls == "CAST" and len(n.children) == 2:
            if n.children[0].literal is None and numeric(n):
                return True  # (translate's x + NUMERIC_CAST keeps a double a double)
            continue
        if typer.kind(n, pg=True) not in (None, "exact") or is_arith(n) and any(
                typer.kind(k, pg=True) not in (None, "exact") or k.cls == "CAST" and k.children[-1].start < 0
                for k in n.children):
            continue  # (PostgreSQL's value is a float, or not a number: INTERVAL '1 day' / 2)
        name = n.name[0].lower() if n.cls in ("FUNCTION", "WINDOW") and len(n.name) == 1 else ""
        if name in _NUMERIC_CALLS and any(typer.kind(k, pg=True) in ("double", "real") for k in n.children):
            continue  # sqrt(x::float8): PostgreSQL's double precision function
        if (n.cls == "CONSTANT" and n.literal is not None and n.literal.kind == "NUMERIC") or name == "/" \
                or name == "^" and any(numeric(k) for k in n.children) \
                or name in _NUMERIC_CALLS or name in ("round", "trunc") and len(n.children) == 2 \
                or name == "date_part" and text[n.start : n.start + 7].lower() == "extract" \
                or n.cls == "COLUMN_REF" and n.name and n.name[-1].lower() in names:
            return True
        if n.cls == "SUBQUERY" and n.subquery is not None and not n.children and text.startswith("(", n.start):
            stack.extend(x for b in branch_items(n.subquery) or () for x in b)
        stack.extend(n.children)
    return False


def _mean_argument(c: Call, x: Expression) -> str | None:
    # The text of the argument of ``avg(arg)`` (or a deviation or variance) when that call
    # is ``x``: PostgreSQL's result is a double exactly when the argument is.
    if x.cls == "FUNCTION" and len(x.name) == 1 and x.name[0].lower() in _AGGREGATE_MEANS \
            and len(x.children) == 1 and not x.order_by and x.filter is None \
            and not numeric_source(x.children[0], c.text):
        return c.text_of(x.children[0])
    return None


def _double_text(x: str, known: str | None = None, numeric: bool = False,
                 mean_of: str | None = None) -> str:
    """PostgreSQL 15's text of ``x`` when it is a double or a real (see _float_digits);
    other types cast as DuckDB casts them, arrays, structs and maps refused (PostgreSQL
    prints arrays as ``{1,2}``). ``known``: "double" or "real" when the operand's own tokens
    say so (no test of DuckDB's type of the value then). ``numeric``: the operand may be a
    PostgreSQL numeric computed as a DOUBLE (see numeric_source), so a DOUBLE is refused
    -- unless ``mean_of``, the argument of the avg that is the operand, is itself a double.
    The expressions are the macros of :data:`TEXT_MACROS` (DuckDB expands them when it
    binds the query, so the translated text stays short)."""
    if known == "double":
        return f"{FLOAT8_TEXT}({x})"
    if known == "real":
        return f"{FLOAT4_TEXT}({x})"
    if mean_of is not None:
        return f"{MEAN_TEXT}({x}, typeof(min({mean_of})))"
    return f"{NUMERIC_TEXT if numeric else ANY_TEXT}({x})"


FLOAT8_TEXT = RESERVED_PREFIX + "float8_text"
FLOAT8_TEXT_PY = RESERVED_PREFIX + "float8_text_py"
FLOAT4_TEXT = RESERVED_PREFIX + "float4_text"
ANY_TEXT = RESERVED_PREFIX + "text"
NUMERIC_TEXT = RESERVED_PREFIX + "numeric_text"
MEAN_TEXT = RESERVED_PREFIX + "mean_text"


def _text_macro(name: str, double: str, extra: str = "") -> str:
    # A macro printing x as PostgreSQL does, with ``double`` for a DOUBLE x.
    return (
        f"CREATE OR REPLACE MACRO {name}(x{extra}) AS CASE "
        f"WHEN typeof(x) = 'DOUBLE' THEN {double} "
        f"WHEN typeof(x) = 'FLOAT' THEN {FLOAT4_TEXT}(TRY_CAST(x AS FLOAT)) "
        "WHEN typeof(x) LIKE '%[]' OR typeof(x) LIKE 'STRUCT%' OR typeof(x) LIKE 'MAP%' "
        "THEN error('the text of an array, struct or map is not supported by colmz "
        "(PostgreSQL prints arrays as {1,2})') "
        "WHEN typeof(x) = 'BLOB' THEN error('the text of a bytea is not supported by colmz "
        "(PostgreSQL prints it as \\x and hex digits, DuckDB escapes bytes)') "
        f"WHEN typeof(x) = 'INTERVAL' THEN {INTERVAL_TEXT}(TRY_CAST(x AS INTERVAL)) "
        f"WHEN typeof(x) IN ('DATE', 'TIMESTAMP', 'TIMESTAMP WITH TIME ZONE') THEN {DATETIME_TEXT}(x) "
        f"WHEN {wide_decimal('typeof(x)')} THEN {WIDE_DECIMAL_REFUSAL} "
        f"WHEN typeof(x) LIKE 'DECIMAL%' THEN {DECIMAL_TEXT}(x) "
        "ELSE CAST(x AS \"varchar\") END")


#: Python functions every colmz connection registers (:func:`colmz.sql.connect`):
#: ``(name, function over an Arrow array, DuckDB argument types, DuckDB result type)``.
#: ``FLOAT8_TEXT_PY`` is :func:`colmz.sql.numeric.float8_text`, PostgreSQL's text of a
#: double: its shortest digits differ from DuckDB's (and Python's) where those lie exactly
#: halfway to the next double, which no short SQL expression finds. That happens only for
#: whole doubles from 2^53 to about 1.5e23 (a short decimal equal to a halfway point has
#: an odd part below 2^54), so ``FLOAT8_TEXT`` calls it there and prints every other
#: double in SQL (_float_digits; a Python call per value is a hundred times slower).
#: ``FLOAT4_TEXT`` is :func:`colmz.sql.numeric.float4_text` for every real: DuckDB's text of
#: a FLOAT is not always the shortest (308148.125 where PostgreSQL prints 308148.12).
FUNCTIONS = (arrow_entry(FLOAT8_TEXT_PY, float8_text, ("DOUBLE",)), arrow_entry(FLOAT4_TEXT, float4_text, ("FLOAT",)))

#: PostgreSQL's array dimensions. A DuckDB list of lists is a multidimensional array (whose
#: sub-arrays PostgreSQL makes one length: the first one's length is the dimension's), its
#: number of dimensions the nesting of its list type (``INTEGER[][]``: ``typeof``, folded
#: when DuckDB binds the query). ``array_length(a, d)`` (``array_upper``) of a dimension
#: that is not there, or of an empty array, is NULL (DuckDB raises for d other than 1, and
#: its length of an empty list is 0); ``cardinality`` counts every element (DuckDB's counts
#: the outer list's). Each is an integer, as PostgreSQL's (DuckDB's lengths are bigints).
ARRAY_DIMS = RESERVED_PREFIX + "array_dims"
ARRAY_DIMENSION_MACROS = (
    f"CREATE OR REPLACE MACRO {ARRAY_DIMS}(a) AS (length(typeof(a)) - length(rtrim(typeof(a), '[]'))) // 2",
    f"CREATE OR REPLACE MACRO {RESERVED_PREFIX}array_length(a, d) AS CASE WHEN d = 1 THEN CAST(nullif(len(a), 0) AS "
    f"INTEGER) WHEN d > 1 AND d <= {ARRAY_DIMS}(a) THEN nullif(CAST(json_array_length(to_json(a), '$' || "
    "repeat('[0]', d - 1)) AS INTEGER), 0) END",
    f"CREATE OR REPLACE MACRO {RESERVED_PREFIX}array_lower(a, d) AS CASE WHEN "
    f"{RESERVED_PREFIX}array_length(a, d) > 0 THEN 1 END",
    f"CREATE OR REPLACE MACRO {RESERVED_PREFIX}cardinality(a) AS CASE WHEN {ARRAY_DIMS}(a) <= 1 THEN CAST(len(a) AS "
    f"INTEGER) ELSE CAST(list_product([json_array_length(to_json(a), "
    f"'$' || repeat('[0]', i)) FOR i IN range({ARRAY_DIMS}(a))]) AS INTEGER) END",
)

#: The macros of PostgreSQL's text of a value (defined on every colmz connection with
#: :data:`MACROS`): of a value of any type
#: (``ANY_TEXT``), of one that may be a numeric computed as a double (``NUMERIC_TEXT``: a
#: DOUBLE is refused) and of an average whose argument's type is the second argument
#: (``MEAN_TEXT``); of a double (``FLOAT8_TEXT``, with :data:`FUNCTIONS`; a real's is
#: the function ``FLOAT4_TEXT``).
#: PostgreSQL's text of an interval (:func:`colmz.sql.pgfuncs.interval_text`: ``mon(s)``, ``-1 days``,
#: ``-1 days +02:00:00``).
INTERVAL_TEXT = RESERVED_PREFIX + "interval_text"
TEXT_MACROS = (
    f"CREATE OR REPLACE MACRO {INTERVAL_TEXT}(i) AS {INTERVAL_OUT}(i)",
    f"CREATE OR REPLACE MACRO {FLOAT8_TEXT}(d) AS CASE WHEN abs(d) >= 9007199254740992 "
    f"AND abs(d) < 1e38 THEN {FLOAT8_TEXT_PY}(d) ELSE {_float_digits('d', 15)} END",
    _text_macro(ANY_TEXT, f"{FLOAT8_TEXT}(TRY_CAST(x AS DOUBLE))"),
    _text_macro(NUMERIC_TEXT, _NUMERIC_TEXT_REFUSAL),
    _text_macro(MEAN_TEXT, f"CASE WHEN t IN ('DOUBLE', 'FLOAT') THEN {FLOAT8_TEXT}(TRY_CAST(x AS DOUBLE)) "
                           f"ELSE {_NUMERIC_TEXT_REFUSAL} END", ", t"),
)


def pg_float_text(x: str, kind: str) -> str:
    """SQL printing ``x``, a ``"double"`` or ``"real"``, as PostgreSQL 15 prints it as text
    (the shortest digits that read back: ``2``, ``0.1``, ``1e+20``), for DuckDB.

    >>> from colmz.sql import connect
    >>> connect().sql("SELECT " + pg_float_text("2::DOUBLE", "double") + " AS t").fetchall()
    [('2',)]
    """
    if kind not in ("double", "real"):
        raise ValueError(f"kind must be 'double' or 'real', got {kind!r}")
    return _double_text(x, known=kind)


_BOOL_TYPES = type_words("boolean", upper=True)
_PG_TRUE = ("t", "tr", "tru", "true", "y", "ye", "yes", "on", "1")
_PG_FALSE = ("f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0")


def _pg_boolean(x: str) -> str:
    """PostgreSQL's reading of ``x`` as a boolean when it is text: true/yes/on/1 and
    false/no/off/0, any case, blanks trimmed, unique prefixes ('of', not 'o'); other types
    cast as DuckDB casts them (and text PostgreSQL rejects is rejected by DuckDB's cast)."""
    low = f"lower(trim(CAST({x} AS \"varchar\")))"
    words = lambda ws: ", ".join(f"'{w}'" for w in ws)  # noqa: E731
    return (f"CASE WHEN typeof({x}) <> 'VARCHAR' THEN CAST({x} AS \"boolean\") "
            f"WHEN {low} IN ({words(_PG_TRUE)}) THEN true "
            f"WHEN {low} IN ({words(_PG_FALSE)}) THEN false "
            f"ELSE CAST({x} AS \"boolean\") END")


_KEPT_TEXT_TYPES = type_words("integer", "bigint", "smallint", "text", "boolean", upper=True) | {
    "INTERVAL", "UUID", "BYTEA", "JSON", "JSONB"}  # (a date's or timestamp's text BC is not DuckDB's)


def cast_rewrite(c: Call, x: Expression, target: str) -> str | None:
    """The DuckDB text of node ``x`` (under ``c``'s, as its rules write it) cast to ``target``
    (``TEXT``, ``BOOLEAN``, ``INT8``, ...) with PostgreSQL's meaning, or None where DuckDB's
    own cast already gives PostgreSQL's answer (decided from the operand's tokens: a
    literal, or a final cast to a type whose text DuckDB prints as PostgreSQL does). A
    value that may be a numeric computed as a double (:func:`numeric_source`, a subquery's
    column of :attr:`colmz.sql.transforms.Call.numeric_names` too) is refused as text when
    it runs as a double."""
    operand = c.text_of(x)
    toks = tokenize(operand)
    if _plain_number(toks) or (len(toks) == 1 and toks[0].upper == "NULL"):
        return None  # DuckDB reads 1.5 as DECIMAL (1e5 as DOUBLE: not plain), NULL as NULL
    cast_to = toks[-1].upper if len(toks) >= 3 and toks[-2].text == "::" else None  # the operand's own cast
    int_call = toks[0].text in INT_MACROS.values() and _closing(toks, 1) == len(toks) - 1
    if target in _INT_TYPES or target in _BOOL_TYPES:
        if len(toks) == 1 and toks[0].kind == "string" and toks[0].text.startswith("'"):
            return _pg_text_literal(toks[0].text, target)  # (checked here, as PostgreSQL reads it)
        if (len(toks) == 1 and toks[0].kind == "number") or (cast_to is not None and cast_to not in _TEXT_TYPES) \
                or (int_call and target in _BOOL_TYPES):
            return None  # a number, or a cast to a non-text type
        if target in _INT_TYPES and numeric_source(x, c.text, c.numeric_names()):
            # a numeric computed as a double: rounded half away from zero, as PostgreSQL's
            # numeric is (a double's cast rounds half to even) -- but a mean of doubles is one;
            # one seen only through a subquery's column (which a view's plan does not see) is
            # refused at a tie
            mean, seen = _mean_argument(c, x), numeric_source(x, c.text)
            operand = f"{NUMERIC_ROUND}({operand}, {f'typeof(min({mean}))' if mean else 'NULL'}, {seen})"
        # text is read when it runs: an integer by its digits only (DuckDB rounds '2.5' to 3)
        return f"{INT_MACROS[_INT_TYPES.get(target, 'boolean')]}({operand})"
    if len(toks) == 1 and (toks[0].kind == "string" or (
            toks[0].kind == "number" and "e" not in toks[0].text.lower())):
        return None  # a literal's text (DuckDB reads 1.5 as DECIMAL, 1e5 as DOUBLE)
    if len(toks) == 2 and toks[0].upper in _TYPED_LITERALS and toks[1].kind == "string":
        return f"{INTERVAL_TEXT}({operand})" if toks[0].upper == "INTERVAL" else None
    if cast_to == "INTERVAL":
        return f"{INTERVAL_TEXT}({operand})"
    if int_call or cast_to in _KEPT_TEXT_TYPES:
        return None  # an integer's text is DuckDB's, and so is that of a type kept
    kind = TYPE_SPELLINGS.get(cast_to.lower()) if cast_to is not None else None
    if kind in ("double precision", "real"):
        return _double_text(operand, known="real" if kind == "real" else "double")
    if any(t.text.lower() == NUMERIC_IN for t in toks):
        # a numeric read from text: colmz's scale for it may be wider than PostgreSQL's
        operand = f"{NUMERIC_IN_GUARD}({operand})"
    return _double_text(operand, numeric=numeric_source(x, c.text, c.numeric_names()),
                        mean_of=_mean_argument(c, x))


def _plain_number(toks) -> bool:
    # A number literal without an exponent, maybe signed and parenthesised: (-7), 2.5.
    inner = [t for t in toks if not (t.kind == "op" and t.text in "()")]
    if inner and inner[0].kind == "op" and inner[0].text in "+-":
        inner = inner[1:]
    return len(inner) == 1 and inner[0].kind == "number" and "e" not in inner[0].text.lower()


#: Integer types and PostgreSQL's names of them (its messages name the type).
_INT_TYPES = {w.upper(): t for w, t in TYPE_SPELLINGS.items() if t in ("integer", "bigint", "smallint")}
_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")


#: The macro casting to each integer type as PostgreSQL reads text: digits only, blanks
#: around them allowed (DuckDB rounds '2.5' to 3); other types cast as DuckDB casts them.
#: DuckDB's spellings INT32 ... are not ones the cast rewrites read again. And boolean's,
#: as PostgreSQL reads text (:func:`_pg_boolean`): one call of the cast, which later passes read.
INT_MACROS = {name: f"{RESERVED_PREFIX}{duck.lower()}" for name, duck in (
    ("integer", "INT32"), ("bigint", "INT64"), ("smallint", "INT16"), ("boolean", "BOOL"))}
#: A value that may be a numeric computed as a double, before its cast to an integer:
#: rounded half away from zero when it runs as a double that is not a mean of doubles (a
#: tie refused where the numeric is seen only through a subquery's column).
NUMERIC_ROUND = RESERVED_PREFIX + "numeric_round"
_INT_TEXT_MACROS = tuple(
    f"CREATE OR REPLACE MACRO {macro}(x) AS CASE WHEN typeof(x) = 'VARCHAR' AND NOT "
    f"regexp_full_match(CAST(x AS VARCHAR), '\\s*[+-]?[0-9]+\\s*') THEN error('invalid input "
    f"syntax for type {name}: \"' || CAST(x AS VARCHAR) || '\"') ELSE CAST(x AS {macro[len(RESERVED_PREFIX):].upper()}) END"
    for name, macro in INT_MACROS.items() if name != "boolean") + (
    f"CREATE OR REPLACE MACRO {INT_MACROS['boolean']}(x) AS {_pg_boolean('x')}",
    f"CREATE OR REPLACE MACRO {NUMERIC_ROUND}(x, mean, seen) AS CASE WHEN typeof(x) <> 'DOUBLE' "
    "OR NOT coalesce(mean NOT IN ('DOUBLE', 'FLOAT'), true) THEN x WHEN seen THEN round(x) "
    "WHEN abs(x - trunc(x)) = 0.5 THEN error('an integer cast of a tie (x.5) of a subquery''s numeric column "
    "colmz computes as a double is not supported by colmz (PostgreSQL rounds a numeric away from zero, a "
    "double to even): round() it in the subquery') ELSE x END",)


def _pg_text_literal(literal: str, target: str) -> str | None:
    # The string ``literal`` cast to the integer or boolean ``target`` as PostgreSQL reads
    # it: digits only, blanks around them allowed (then DuckDB's cast, None); true/yes/on/1
    # and false/no/off/0 (see _pg_boolean); else PostgreSQL's error
    raw = literal[1:-1].replace("''", "'")
    if target in _INT_TYPES:
        if not _INT_TEXT.fullmatch(raw):
            raise SQLError(f'invalid input syntax for type {_INT_TYPES[target]}: "{raw}"')
        return None
    word = raw.strip().lower()
    if word in _PG_TRUE or word in _PG_FALSE:
        return "true" if word in _PG_TRUE else "false"
    raise SQLError(f'invalid input syntax for type boolean: "{raw}"')


@short_text_cache(1024)
def now_pieces(translated: str) -> tuple[str, ...]:
    """The text around each :data:`MZ_NOW` token of ``translated`` (remembered per text).

    >>> now_pieces(translate("SELECT mz_now() + 1, 'mz_now()'"))
    ('SELECT ', " + 1, 'mz_now()'")
    """
    # The text around each placeholder *token*: a string literal or quoted identifier
    # holding the placeholder's letters is a different token and stays as written.
    pieces, last = [], 0
    for t in tokenize(translated):
        if t.kind == "word" and t.text == MZ_NOW:
            pieces.append(translated[last : t.start])
            last = t.end
    pieces.append(translated[last:])
    return tuple(pieces)


def uses_now(translated: str) -> bool:
    """Whether translated SQL calls ``mz_now()`` (holds the :data:`MZ_NOW` token).

    >>> uses_now(translate("SELECT mz_now()")), uses_now("SELECT '__colmz_mz_now__'")
    (True, False)
    """
    return MZ_NOW in translated and len(now_pieces(translated)) > 1


def substitute_now(translated: str, value: str) -> str:
    """``translated`` with every :data:`MZ_NOW` token replaced by the SQL ``value``.

    Only the placeholder token is replaced -- never text inside a string literal or a
    quoted identifier (the split is remembered per text).

    >>> substitute_now(translate("SELECT mz_now(), 'mz_now()'"), "5")
    "SELECT 5, 'mz_now()'"
    """
    if MZ_NOW not in translated:
        return translated
    return value.join(now_pieces(translated))


_QUERY_WORDS = {"SELECT", "WITH", "VALUES", "TABLE", "FROM"}
_SET_OPERATIONS = frozenset({"UNION", "INTERSECT", "EXCEPT"})
_FROM_ENDS = {"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "WINDOW", "QUALIFY",
              "UNION", "EXCEPT", "INTERSECT", "SELECT", "RETURNING", "FETCH"}
_NOT_ALIAS = {"ON", "USING", "JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "NATURAL",
              "ASOF", "SEMI", "ANTI", "POSITIONAL", "LATERAL", "TABLESAMPLE", "AND", "OR", "NOT",
              "IS", "IN", "LIKE", "ILIKE", "BETWEEN", "AS", "WITH"} | _FROM_ENDS



@short_text_cache(1024)
def relation_references(translated: str) -> tuple:
    """Where ``translated`` names relations: ``(relations, alias_at, aliases, own)`` --
    ``relations`` maps the index of a relation name's first token to its last (names of 1
    to 3 parts in ``FROM``/``JOIN`` lists and after ``TABLE``), ``alias_at`` the tokens that
    are aliases, ``aliases`` their names and ``own`` the names a ``WITH`` defines.

    >>> relation_references("WITH w AS (SELECT 1) SELECT * FROM x.t AS a JOIN w ON true")
    ({10: 12, 16: 16}, {14}, {'a'}, {'w'})
    """
    toks = tokenize(translated)
    n = len(toks)
    # Names the query defines itself: WITH names (followed by AS ( or (cols) AS () and aliases.
    # Only the first token and those after WITH, RECURSIVE or a comma can be one: those are
    # visited (one comprehension finds them; a test per token in a loop costs more).
    own: set[str] = set()
    for j in [0, *[i + 1 for i, p in enumerate(toks) if p.upper in _BEFORE_OWN or p.text == ","]]:
        if j + 1 >= n:
            continue
        t = toks[j]
        if t.kind != "word" and t.kind != "qident":
            continue
        k = j + 1
        if toks[k].text == "(" and toks[k].kind == "op":
            k = closing(toks, k)
            if k < 0:
                continue
            k += 1
        if k + 1 < n and toks[k].upper == "AS" and (
                toks[k + 1].text == "(" or toks[k + 1].upper in ("MATERIALIZED", "NOT")):
            own.add(t.name)
    # Relation positions: a stack of paren levels, each knowing whether it is a query and
    # whether a FROM list is expecting a relation (_EXPECT) or has one (_AFTER). A relation
    # is a name of 1 to 3 parts (``t``, ``x.t``, ``db.x.t``): its first token's index maps
    # to the index of its last. The innermost level is kept in locals (``query``, ``state``),
    # the levels around it on ``outer``.
    relation_at: dict[int, int] = {}
    relation_end: set[int] = set()
    alias_at: set[int] = set()
    aliases: set[str] = set()
    outer: list[tuple[bool, int]] = []
    query, state = True, _NO_FROM
    skip_to = -1
    for j, t in enumerate(toks):
        if j <= skip_to:
            continue
        kind = t.kind
        if kind == "op":
            x = t.text
            if x == "(" or x == "[":
                subquery = j + 1 < n and toks[j + 1].upper in _QUERY_WORDS
                if query and state == _EXPECT and x == "(" and not subquery:
                    # FROM (a JOIN b ON ...): a parenthesised FROM list
                    outer.append((True, _AFTER))
                    state = _EXPECT
                    continue
                outer.append((query, _AFTER if state == _EXPECT else state))
                query, state = subquery, _NO_FROM
            elif x == ")" or x == "]":
                if outer:
                    query, state = outer.pop()
            elif x == "," and query and state == _AFTER:
                state = _EXPECT
            continue  # (no other operator starts, ends or names a relation)
        if kind != "word" and kind != "qident":
            continue  # (a string or a number neither)
        up = t.upper
        if not query:
            # a level opened by a parenthesised query is one from its set operation on:
            # ((SELECT 1) UNION SELECT x FROM t)
            query = up in _SET_OPERATIONS
            continue
        if (up == "FROM" and not (j > 0 and toks[j - 1].upper == "DISTINCT")) or (  # not IS DISTINCT FROM
                up == "JOIN" and state != _NO_FROM) or up == "TABLE":  # in a query only ever TABLE name
            state = _EXPECT
        elif up in _FROM_ENDS:
            state = _NO_FROM
        elif state == _EXPECT:
            if up == "LATERAL":
                continue
            state = _AFTER
            last = _name_chain_end(toks, j)
            nxt = toks[last + 1] if last + 1 < n else None
            if nxt is not None and nxt.kind == "op" and nxt.text == "(":
                skip_to = last
                continue  # a table function
            relation_at[j] = last
            relation_end.add(last)
            skip_to = last
        elif state == _AFTER and up not in _NOT_ALIAS:
            prev = toks[j - 1]
            if prev.upper == "AS" or (j - 1 in relation_end) or prev.text == ")":
                alias_at.add(j)
                aliases.add(t.name)
    return relation_at, alias_at, aliases, own


#: :func:`relation_references`' states of a FROM list: none open, expecting a relation, after one.
_NO_FROM, _EXPECT, _AFTER = 0, 1, 2
#: The words a WITH name may follow (after a comma too).
_BEFORE_OWN = frozenset({"WITH", "RECURSIVE"})


def relation_names(translated: str) -> tuple[tuple[str, ...], ...]:
    """The parts of every relation name ``translated`` reads, in order (a ``WITH`` name
    excluded).

    >>> relation_names('WITH w AS (SELECT 1) SELECT * FROM x."T" JOIN w ON true, db.s.t')
    (('x', 'T'), ('db', 's', 't'))
    """
    toks = tokenize(translated)
    relation_at, _, _, own = relation_references(translated)
    out = []
    for j, last in sorted(relation_at.items()):
        parts = tuple(toks[k].name for k in range(j, last + 1, 2))
        if not (len(parts) == 1 and parts[0] in own):
            out.append(parts)
    return tuple(out)


@short_text_cache(1024)
def bind_relations(translated: str, names: frozenset) -> tuple[str, tuple[str, ...]]:
    """``translated`` with every reference to a relation in ``names`` bound to its own
    DuckDB name, and those relations in the order of their DuckDB names.

    DuckDB folds every identifier, quoted or not, to one case, so tables ``"T"`` and ``t``
    registered under their own names would be one table. colmz registers the ``i``-th
    relation a query reads as :func:`relation_name` ``(i)`` instead and rewrites the query's
    tokens that name it -- a relation in a ``FROM``/``JOIN`` list or after ``TABLE``, and a
    qualifier ``name.column`` -- matching names as PostgreSQL does: a quoted name exactly,
    a bare one folded to lower case. A name a ``WITH`` defines (its own scope) or that the
    query gives as an alias is left to DuckDB. The query's result names are unchanged.

    Names are Materialize's (:mod:`colmz.sql.names`): ``names`` holds ``str`` items of the
    default schema and :class:`colmz.sql.names.QualifiedName` s; a relation written
    ``t``, ``x.t`` or ``db.x.t`` is resolved to its full name and bound when that is one of
    ``names`` (and a qualifier ``t.col``, ``x.t.col`` with it). The relations are returned as
    given in ``names``.

    >>> bind_relations('SELECT t.k, "T".k FROM t JOIN "T" USING (k)', frozenset({"t", "T"}))
    ('SELECT "__colmz_r0".k, "__colmz_r1".k FROM "__colmz_r0" JOIN "__colmz_r1" USING (k)', ('t', 'T'))
    >>> from colmz.sql.names import resolve_item
    >>> bind_relations('SELECT ct.k, x.ct.v FROM x.ct JOIN t USING (k)', frozenset({"t", resolve_item(["x", "ct"])}))[0]
    'SELECT "__colmz_r0".k, "__colmz_r0".v FROM "__colmz_r0" JOIN "__colmz_r1" USING (k)'
    """
    toks = tokenize(translated)
    n = len(toks)
    relation_at, alias_at, aliases, own = relation_references(translated)
    bound_at: dict[int, object] = {}
    for j, last in relation_at.items():
        parts = (toks[j].name,) if j == last else tuple(toks[k].name for k in range(j, last + 1, 2))
        if len(parts) == 1 and parts[0] in own:
            continue
        if len(parts) > 3:
            raise SQLError(f"qualified name did not have between 1 and 3 components: {'.'.join(parts)}")
        x = _given(names, parts)
        if x is not None:
            bound_at[j] = x
    order: dict[object, int] = {}
    for j in sorted(bound_at):
        order.setdefault(bound_at[j], len(order))
    if not order:
        return translated, ()
    # A qualifier of one part names a relation by its item (``ct.k`` of ``FROM x.ct``) unless
    # the query gives that name as an alias; a longer one by its full name (``x.ct.k``).
    by_item: dict[str, object] = {}
    for x in order:
        by_item.setdefault(as_qualified(x).item, x)
    out, last_end = [], 0

    def put(a: int, b: int, x) -> None:
        nonlocal last_end
        out.append(translated[last_end : toks[a].start])
        out.append(identifier(relation_name(order[x])))
        last_end = toks[b].end

    # Only a bound relation's first token and a token followed by "." can start a rewrite:
    # those are visited in order (every other token would be passed over one by one).
    # (a comprehension, and none where the text holds no ".": a generator costs more per token)
    dots = [k - 1 for k, t in enumerate(toks) if k and t.text == "."] if "." in translated else []
    starts = sorted({*bound_at, *dots})
    j = 0
    for c in starts:
        if c < j:
            continue  # inside a name already read
        j = c
        t = toks[j]
        if j in bound_at:
            put(j, relation_at[j], bound_at[j])
            j = relation_at[j] + 1
            continue
        if t.kind not in ("word", "qident") or j + 1 >= n or toks[j + 1].text != "." \
                or j in alias_at or j in relation_at or (j > 0 and toks[j - 1].text == "."):
            j += 1  # not the start of a qualified column reference
            continue
        end = _name_chain_end(toks, j, star=True)
        if end == j:
            j += 1
            continue
        qual = tuple(toks[k].name for k in range(j, end - 1, 2))  # all parts but the column
        x = None
        if len(qual) == 1:
            if qual[0] not in aliases:
                x = by_item.get(qual[0])
        elif len(qual) <= 3:
            x = _given(names, qual)
            if x not in order:
                x = None
        if x is not None:
            put(j, end - 2, x)
        j = end + 1
    out.append(translated[last_end:])
    return "".join(out), tuple(order)


def _given(names: frozenset, parts: tuple[str, ...]):
    """The element of ``names`` the name ``parts`` resolves to (a ``str`` in ``names`` is an
    item of the default schema), or None. One or two set lookups, whatever ``names`` holds."""
    if len(parts) == 1 and parts[0] in names:
        return parts[0]
    full = resolve_item(parts)
    if full in names:
        return full
    if full.is_default_schema and full.item in names:
        return full.item
    return None


def _name_chain_end(toks, j: int, star: bool = False) -> int:
    """Index of the last token of the dotted name starting at ``toks[j]`` (``a.b.c``; with
    ``star``, ``a.*`` too)."""
    n = len(toks)
    while (j + 2 < n and toks[j + 1].kind == "op" and toks[j + 1].text == "."
           and (toks[j + 2].kind in ("word", "qident") or (star and toks[j + 2].text == "*"))):
        j += 2
        if toks[j].text == "*":
            break
    return j


@short_text_cache(1024)
def bind_relations_as(translated: str, registered: tuple[tuple[str, str], ...]) -> str:
    """``translated`` with each relation named in ``registered`` -- ``(name, registered
    name)`` pairs -- bound to its registered name, as :func:`bind_relations` binds.

    For one set of tables registered once and read by several queries (a continual task's
    input, references and output), each under one name whatever the query.

    >>> bind_relations_as('SELECT t.k FROM t, "T"', (("T", "__colmz_r0"), ("t", "__colmz_r1")))
    'SELECT "__colmz_r1".k FROM "__colmz_r1", "__colmz_r0"'
    """
    mapping = dict(registered)
    text, bound = bind_relations(translated, frozenset(mapping))
    if not bound:
        return text
    rename = {relation_name(i): mapping[n] for i, n in enumerate(bound)}
    out, last = [], 0
    for t in tokenize(text):
        if t.kind == "qident" and t.name in rename:
            out.append(text[last : t.start])
            out.append(identifier(rename[t.name]))
            last = t.end
    out.append(text[last:])
    return "".join(out)


def referenced_names(sql: str) -> set[str]:
    """The identifiers a query mentions (a superset of the relations it reads).

    >>> sorted(referenced_names('SELECT a.k FROM "Big" a JOIN small USING (k)'))
    ['Big', 'a', 'from', 'join', 'k', 'select', 'small', 'using']
    """
    names = set()
    for t in tokenize(sql):
        if t.kind == "word":
            names.add(t.text.lower())
        elif t.kind == "qident":
            names.add(t.name)
    return names


# ----------------------------------------------------------------------------- bytea

#: PostgreSQL's input of a bytea from text (src/backend/utils/adt/varlena.c ``byteain``):
#: ``\x`` and pairs of hex digits; the escape format (other text holding a backslash) is
#: refused; text without a backslash is its bytes. DuckDB's own cast of text to BLOB reads
#: ``\xNN`` as one escaped byte each, so ``'\x0aff'`` would be three bytes, not two.
BYTEA_INPUT_MACRO = (
    f"CREATE OR REPLACE MACRO {BYTEA_IN}(s) AS CASE WHEN s IS NULL THEN NULL "
    "WHEN starts_with(s, '\\x') THEN CASE WHEN regexp_full_match(substr(s, 3), '([0-9a-fA-F]{2})*') "
    "THEN unhex(substr(s, 3)) ELSE error('invalid input syntax for type bytea: ' || s) END "
    "WHEN strpos(s, '\\') > 0 THEN error('bytea''s escape input format (a backslash not "
    "starting \\x) is not supported by colmz') ELSE CAST(s AS BLOB) END")


# ----------------------------------------------------------------------------- numeric

#: The macro a ``sum``'s argument goes through (:data:`MACROS`).
SUM_ARGUMENT = RESERVED_PREFIX + "sum_arg"
_SMALL_INTS = ("TINYINT", "SMALLINT", "INTEGER", "UTINYINT", "USMALLINT", "UINTEGER")
_WIDE_INTS = ("BIGINT", "UBIGINT", "HUGEINT", "UHUGEINT")
_LOG_DOMAIN = ("WHEN {x} = 0 THEN error('cannot take logarithm of zero') "
               "WHEN {x} < 0 THEN error('cannot take logarithm of a negative number') ")
_FLOAT_RANGE = ("CASE WHEN typeof({x}) LIKE 'DECIMAL%' THEN error('{f}() of a numeric whose result is "
                "past the range of a double is not supported by colmz') "
                "ELSE error('value out of range: {how}') END")
_POWER = ("(x, y) AS CASE WHEN x = 0 AND y < 0 THEN error('zero raised to a negative power is undefined') "
          "WHEN x < 0 AND y <> floor(y) THEN error('a negative number raised to a non-integer power "
          "yields a complex result') WHEN isinf(power(x, y)) AND NOT isinf(CAST(x AS DOUBLE)) "
          "AND NOT isinf(CAST(y AS DOUBLE)) THEN " + _FLOAT_RANGE.format(x="x + y", f="power", how="overflow")
          + " ELSE power(x, y) END")
_INT4_OR_LESS = "('INTEGER', 'SMALLINT', 'TINYINT')"
#: PostgreSQL's domain errors, with its messages (``src/backend/utils/adt/float.c`` and
#: ``numeric.c``): a logarithm of zero or a negative, a square root of a negative, a power
#: that is complex or undefined, an ``exp`` or ``power`` past the range of a double
#: (refused for a numeric argument, whose PostgreSQL result is a numeric beyond it; its
#: underflow answers 0). NaN passes through as in PostgreSQL. An argument appears more than
#: once in a macro: a volatile one (``random()``) is evaluated more than once.
MATH_MACROS = (
    f"CREATE OR REPLACE MACRO {NOT_INTERVAL}(x) AS CASE WHEN typeof(x) = 'INTERVAL' THEN "
    f"error('{AVG_OF_INTERVAL}') ELSE x END",
    *(f"CREATE OR REPLACE MACRO {CHECKED_MATH[f]}(x) AS CASE " + _LOG_DOMAIN.format(x="x") + f"ELSE {f}(x) END"
      for f in ("ln", "log10")),
    f"CREATE OR REPLACE MACRO {CHECKED_MATH['log']}(x) AS CASE " + _LOG_DOMAIN.format(x="x")
    + "ELSE log10(x) END, (b, x) AS CASE " + _LOG_DOMAIN.format(x="b") + _LOG_DOMAIN.format(x="x")
    + "WHEN b = 1 THEN error('division by zero') ELSE ln(x) / ln(b) END",
    f"CREATE OR REPLACE MACRO {CHECKED_MATH['sqrt']}(x) AS CASE WHEN x < 0 THEN "
    "error('cannot take square root of a negative number') ELSE sqrt(x) END",
    f"CREATE OR REPLACE MACRO {CHECKED_MATH['exp']}(x) AS CASE WHEN isinf(exp(x)) AND NOT "
    "isinf(CAST(x AS DOUBLE)) THEN " + _FLOAT_RANGE.format(x="x", f="exp", how="overflow")
    + " WHEN exp(x) = 0 AND NOT isinf(CAST(x AS DOUBLE)) AND typeof(x) NOT LIKE 'DECIMAL%' "
    "THEN error('value out of range: underflow') ELSE exp(x) END",
    *(f"CREATE OR REPLACE MACRO {CHECKED_MATH[f]}" + _POWER for f in ("power", "pow")),
    # gcd and lcm of integers (not bigints) are integers, checked as PostgreSQL's int4gcd/int4lcm
    # (of two smallints PostgreSQL finds no one best function)
    *(f"CREATE OR REPLACE MACRO {RESERVED_PREFIX}{f}(a, b) AS CASE WHEN typeof(a) = 'SMALLINT' AND typeof(b) = "
      f"'SMALLINT' THEN error('function {f}(smallint, smallint) is not unique') WHEN typeof(a) IN {_INT4_OR_LESS} AND typeof(b) "
      f"IN {_INT4_OR_LESS} AND {f}(a, b) NOT BETWEEN -2147483648 AND 2147483647 THEN error('integer out of range') "
      f"ELSE {f}(a, b) END" for f in ("gcd", "lcm")),
    *ARRAY_DIMENSION_MACROS,
    # PostgreSQL's array_remove drops the elements not distinct from the value (NULLs too)
    f"CREATE OR REPLACE MACRO {RESERVED_PREFIX}array_remove(a, x) AS [e FOR e IN a IF e IS DISTINCT FROM x]",
)

#: Macros every colmz connection defines (:func:`colmz.sql.connect`), overloaded by the
#: argument's type, which DuckDB resolves when it binds the query (a macro's argument
#: holding an aggregate cannot be resolved so: these take row values only).
#: :data:`SUM_ARGUMENT` makes ``sum`` of a ``bigint`` a ``DECIMAL(38,0)`` (PostgreSQL's
#: sum of int8 is numeric, so dividing it is numeric division, not the integer division
#: DuckDB's ``HUGEINT`` sum gets); smaller integers stay integers (their sum is bigint in
#: PostgreSQL); other types are summed as they are.
MACROS = TEXT_MACROS + MATH_MACROS + _INT_TEXT_MACROS + (BYTEA_INPUT_MACRO,
    f"CREATE OR REPLACE MACRO {SUM_ARGUMENT}"
    + ", ".join(f"(x {t}) AS x" for t in _SMALL_INTS) + ", "
    + ", ".join(f"(x {t}) AS CAST(x AS DECIMAL(38,0))" for t in _WIDE_INTS)
    + ", (x) AS x",
)
#: :data:`SUM_ARGUMENT` where DuckDB has no typed macro parameters (before 1.4): a sum of
#: a bigint is refused when it runs (its integer division would be a different answer).
SUM_ARGUMENT_UNTYPED = (
    f"CREATE OR REPLACE MACRO {SUM_ARGUMENT}(x) AS CASE WHEN typeof(x) IN "
    f"({', '.join(repr(t) for t in _WIDE_INTS)}) THEN error('sum() of a bigint is not supported "
    "by colmz with this DuckDB (PostgreSQL sums int8 as numeric; DuckDB 1.4 or later gives it "
    "that type)') ELSE x END")


def _sum_argument(toks, at: int, pieces: list, sql: str, last: int, inserts: dict) -> int:
    # sum(x) as PostgreSQL types it: the argument goes through SUM_ARGUMENT, put around it
    # in the token pass (DISTINCT/ALL before and an ORDER BY inside the call stay outside):
    # the opening is appended to ``pieces`` now, the closing parenthesis is an insert after
    # the argument's last token. The argument is translated by the token pass as usual.
    # Returns where the text copied so far ends.
    close = _closing(toks, at + 1)
    first = at + 2
    if first < close and toks[first].upper in ("DISTINCT", "ALL"):
        first += 1
    end = next((j for j in top_level(toks, first, close) if toks[j].upper == "ORDER"
                or (toks[j].kind == "op" and toks[j].text == ",")), close)
    if end <= first or (toks[first].kind == "op" and toks[first].text == "*"):
        return last
    pieces.append(sql[last : toks[first].start])
    pieces.append(SUM_ARGUMENT + "(")
    inserts[end - 1] = ")" + inserts.get(end - 1, "")
    return toks[first].start


# ----------------------------------------------------------------------------- concatenation
# The operands of || and concat() are printed as PostgreSQL prints them by the table of
# transforms (colmz.sql.transforms); here only long chains are regrouped, over the operands'
# spans the grammar reads, before the tree of the translation is read (DuckDB nests a chain
# one level per operator: colmz reads no tree of a chain some hundred operators deep).

#: A chain of ``||`` longer than this many operands is regrouped as a balanced tree
#: (:func:`_balance_concat_chains`); a shorter one stays as written.
BALANCED_CHAIN = 16


def _balance_concat_chains(sql: str) -> str:
    # DuckDB binds and runs a chain of n operands ``a || b || c ...`` -- a left-deep tree n
    # deep, each operand a call of the text macro -- in time growing with n times its
    # depth (900 operands: over a minute), and colmz reads no tree a few hundred deep. Text
    # concatenation is associative (NULL in, NULL out, either way), so a long chain whose
    # operands are all text once translated (the table of transforms prints each operand
    # that is not as its type's text; arrays and jsonb, which || joins as such, are left
    # alone) is regrouped as a balanced tree, log2(n) deep: the same value, bound in time
    # linear in n. A chain is its operators at one precedence (colmz.sql.grammar), so the
    # text around it binds more loosely and parentheses around it change nothing.
    # ``sql`` itself when nothing is regrouped (or the grammar does not know the text).
    if sql.count("||") < BALANCED_CHAIN:
        return sql
    chains = sorted((c for c in concat_chains(sql, BALANCED_CHAIN) or () if all(ok for _, _, ok in c)),
                    key=lambda c: (c[0][0], -c[-1][1]))
    if not chains:
        return sql
    k = 0

    def regrouped(lo: int, hi: int) -> str:
        # sql[lo:hi] with the chains beginning in it regrouped (an operand's own too)
        nonlocal k
        out, pos = [], lo
        while k < len(chains) and chains[k][0][0] < hi:
            chain = chains[k]
            k += 1
            out += [sql[pos : chain[0][0]], _balanced([regrouped(a, b) for a, b, _ in chain])]
            pos = chain[-1][1]
        out.append(sql[pos:hi])
        return "".join(out)

    return regrouped(0, len(sql))


def _balanced(texts: list[str]) -> str:
    # ``(t0 || t1 ...)`` grouped as a balanced tree (iteratively: no recursion on length).
    level = list(texts)
    while len(level) > 1:
        level = [f"({level[i]} || {level[i + 1]})" if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0] if level[0].startswith("(") else f"({level[0]})"
