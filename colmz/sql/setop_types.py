"""PostgreSQL's type of a set operation's column where a branch holds a bare string literal:
a rule applied to a translated query once the relations it reads (and so their columns'
types) are known.

In PostgreSQL a string literal is of type ``unknown`` until its context gives it one. A set
operation's branches are resolved pairwise, bottom-up (``transformSetOperationTree`` in
``src/backend/parser/analyze.c``): each node's column takes the common type of its two
inputs' (``select_common_type``, ``parse_coerce.c``), and a branch whose column is a bare
string literal is coerced to it -- ``SELECT age FROM people UNION SELECT '5'`` is an integer
column holding 5, ``... UNION SELECT 'x'`` raises ``invalid input syntax for type integer:
"x"`` when the query is planned. Two unknown inputs make text (so ``SELECT 1 UNION (SELECT
'5' UNION SELECT '6')`` raises ``UNION types integer and text cannot be matched``), and so
does a branch that sorts or groups the literal (``SELECT DISTINCT '5'``). DuckDB binds each
branch alone and makes such a column text.

:func:`setop_edits` types every set operation's columns as PostgreSQL does and
rewrites each bare string literal a branch's column coerces to another type than text as
that literal cast to the type -- the text translate gives the cast written out
(:func:`colmz.sql.translate.translate` of ``'5'::integer``), so the literal is read as
colmz reads every such cast, and bad text raises PostgreSQL's error in its words. Two
inputs of types PostgreSQL cannot match (``text`` and ``integer``) raise its ``UNION types
... cannot be matched``.

The same typing reads a bare string literal among other values PostgreSQL resolves to one
common type -- a comparison's, ``BETWEEN``'s and ``IN``'s operands, ``CASE``'s results, the
arguments of ``coalesce``, ``greatest``, ``least`` and ``nullif``, a ``VALUES`` column: where
that type is a number, date, timestamp or boolean, the literal is checked as translate reads
the cast written out, so text PostgreSQL cannot read as the type raises its error when the
query is planned, as PostgreSQL's does -- over no rows, in a ``CASE`` branch never taken
(``age = '30.5'``, ``coalesce(age, 'x')``, ``joined = 'inf'``: DuckDB would cast per row,
round ``'30.5'`` and read ``'inf'`` as infinity). The text is kept: every literal the check
lets through DuckDB's implicit cast reads as PostgreSQL does.

A ``RANGE`` frame's offset is typed against its ``ORDER BY`` expression as PostgreSQL finds
its ``in_range`` support function (``transformFrameOffset``, ``parse_clause.c``): an integer
key with a numeric or float offset, a date or timestamp key with a number, raise its "RANGE
with offset PRECEDING/FOLLOWING is not supported for column type ... and offset type ..."
(DuckDB answers); a bare string literal beside a date or timestamp key is an interval
(written as translate writes the cast; DuckDB finds no function for a string there).

Types are PostgreSQL's names (``format_type``'s: ``integer``, ``timestamp without time
zone``): a relation's column by the catalog's schema, a FROM subquery's or CTE's column by
its select item (:class:`colmz.sql.typing_pass.Resolver`), a literal by its kind (an integer
by its range), a cast by its type, text functions as text, numeric arithmetic by
PostgreSQL's operator resolution; anything else is not known (``None``).

Invariants: the rewrite is a pure function of the text and the relations' column types,
cached; a string literal whose column's type is not known is refused by name
(:class:`colmz.sql.errors.UnsupportedSQL`) unless another input of the column is text (then
DuckDB's text is PostgreSQL's); nothing is guessed. A recursive CTE's union (typed by its
non-recursive term) is left as it is.
"""

from __future__ import annotations

import contextlib
import re

from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.pgfuncs import LENGTH, TO_CHAR
from colmz.sql.transforms import (
    CALL_MACROS,
    SPLIT_PART,
    TYPE_SPELLINGS,
    all_queries,
    float_kind,
    is_arith,
    table_refs,
)
from colmz.sql.translate import ANY_TEXT, FLOAT8_TEXT, INT_MACROS, NUMERIC_TEXT, translate
from colmz.sql.tree import Expression, Query
from colmz.sql.typing_pass import (
    SAME_TYPE_CALLS,
    TypedText,
    Typer,
    case_results,
    numeric_cast,
    query_expressions,
    untyped_literal,
)

__all__ = ["KNOWN_TYPES", "UNKNOWN", "PgTyper", "common_of", "common_type", "setop_edits"]

#: The type of a bare string literal or NULL before its context gives it one.
UNKNOWN = "unknown"

#: The types of each category PostgreSQL converts within implicitly, each converting to the
#: next (``select_common_type`` takes the latest present); a type of no chain matches only itself.
_CHAINS = (("smallint", "integer", "bigint", "numeric", "real", "double precision"),
           ("date", "timestamp without time zone", "timestamp with time zone"))
_RANK = {t: (i, r) for i, chain in enumerate(_CHAINS) for r, t in enumerate(chain)}
#: The types this module names (each a type whose mismatch PostgreSQL raises for).
KNOWN_TYPES = frozenset({*_RANK, "text", "boolean", "interval", "jsonb", "json", "time without time zone",
                         "uuid", "bytea"})
#: A cast's written type (lower case, one space between words, no modifiers) to its name.
_CAST_TYPES = {**TYPE_SPELLINGS, "date": "date", "timestamp": "timestamp without time zone",
               "timestamp without time zone": "timestamp without time zone",
               "timestamptz": "timestamp with time zone", "timestamp with time zone": "timestamp with time zone",
               "interval": "interval", "jsonb": "jsonb", "json": "json", "time": "time without time zone",
               "time without time zone": "time without time zone", "uuid": "uuid", "bytea": "bytea"}
#: How a cast to each type is written for translate.
_SPELLING = {"timestamp without time zone": "timestamp", "timestamp with time zone": "timestamptz",
             "time without time zone": "time"}
_MODIFIERS = re.compile(r"\s*\(\s*\d+\s*(,\s*\d+\s*)?\)$")
#: Calls whose result is text (PostgreSQL's names and translate's macros of them).
_TEXT_CALLS = frozenset({"upper", "lower", "initcap", "btrim", "trim", "ltrim", "rtrim", "substr", "substring",
                         "replace", "left", "right", "lpad", "rpad", "md5", "repeat", "reverse", "split_part",
                         "to_char", "string_agg", "regexp_replace", "concat", "concat_ws", "chr",
                         ANY_TEXT, FLOAT8_TEXT, NUMERIC_TEXT, CALL_MACROS["upper"], CALL_MACROS["lower"], TO_CHAR,
                         SPLIT_PART})
_BOOLEAN_OPERATORS = frozenset({"OPERATOR_NOT", "OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL", "COMPARE_IN",
                                "COMPARE_NOT_IN"})
#: Calls of one result type whatever their arguments' (translate's integer casts of text too).
_CALL_TYPES = {**dict.fromkeys(("~~", "!~~", "~~*", "!~~*", "regexp_matches", "regexp_full_match"), "boolean"),
               "count": "bigint", "count_star": "bigint", "length": "integer", "char_length": "integer",
               "character_length": "integer", "strpos": "integer", "ascii": "integer", LENGTH: "integer",
               CALL_MACROS["octet_length"]: "integer", **{macro: t for t, macro in INT_MACROS.items()}}
#: The coarse kinds of :class:`colmz.sql.typing_pass.Typer` that name one type.
_OF_KIND = {"real": "real", "double": "double precision", "bool": "boolean", "text": "text",
            "jsonb": "jsonb", "json": "json"}
#: The set operations' words, and the words and operators of :func:`_peer_groups`' constructs:
#: a text holding neither (or no string literal) has nothing for :func:`setop_edits`.
SETOP = re.compile(r"\b(union|intersect|except)\b", re.IGNORECASE)
BESIDE = re.compile(r"[=<>]|\b(?:in|between|case|coalesce|greatest|least|nullif|values)\b", re.IGNORECASE)


def common_type(a: str | None, b: str | None, op: str = "UNION") -> str | None:
    """PostgreSQL's common type of two inputs of types ``a`` and ``b`` (``select_common_type``):
    an unknown literal takes the other's type (two make text), types of one chain of implicit
    casts the later one; None when either is not known. Raises :class:`SQLError` in
    PostgreSQL's words, naming the set operation ``op``, for two known types it cannot match.

    >>> common_type("integer", UNKNOWN), common_type(UNKNOWN, UNKNOWN), common_type("integer", "real")
    ('integer', 'text', 'real')
    >>> common_type("date", "timestamp with time zone"), common_type("integer", None)
    ('timestamp with time zone', None)
    >>> common_type("text", "integer")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: UNION types text and integer cannot be matched
    """
    if a == UNKNOWN or b == UNKNOWN:
        return "text" if a == b else b if a == UNKNOWN else a
    if a is None or b is None:
        return None
    if a == b:
        return a
    ra, rb = _RANK.get(a), _RANK.get(b)
    if ra is not None and rb is not None and ra[0] == rb[0]:
        return a if ra[1] > rb[1] else b
    if a in KNOWN_TYPES and b in KNOWN_TYPES:
        raise SQLError(f"{op} types {a} and {b} cannot be matched")
    return None


def common_of(types) -> str | None:
    """A FROM subquery's set operation column's type, from its branches' ``types`` in any
    order (the mismatches are raised where the set operation itself is typed).

    >>> common_of(["integer", UNKNOWN, "real"]), common_of([UNKNOWN]), common_of(["text", "integer"])
    ('real', 'text', None)
    """
    known = {t for t in types if t != UNKNOWN}
    if not known:
        return "text"
    out = known.pop()
    for t in known:
        try:
            out = common_type(out, t)
        except SQLError:
            return None
    return out


def setop_wanted(text: str) -> bool:
    """Whether :func:`setop_edits` may have anything to do over ``text``: a set operation, a
    string literal in a construct that types it, or a ``RANGE`` frame's offset (a superset;
    the tree decides)."""
    return SETOP.search(text) is not None or "'" in text and BESIDE.search(text) is not None \
        or RANGE_OFFSET.search(text) is not None


def setop_edits(t: TypedText) -> list[tuple[int, int, str]]:
    """The edits of the rule (module docstring) over ``t``: each literal a set operation
    coerces, cast to its column's type (each literal beside values of a known type checked
    as that type, raising PostgreSQL's error)."""
    queries = [d for q in t.queries for d in all_queries(q)]
    setops = [d for d in queries if d.type == "SET_OPERATION_NODE"]
    peers = [group for d in queries for group in _peer_groups(d)
             if any(untyped_literal(e) and e.literal.kind == "STRING" for e in group)]
    ranged = [e for d in queries for e in _range_offsets(d, t.text)] if RANGE_OFFSET.search(t.text) else []
    if not setops and not peers and not ranged:
        return []
    typer = PgTyper(t.text, t.pg, t.resolved)
    for group in peers:
        _check_beside(group, typer)
    edits: dict[tuple[int, int], str] = {}
    for key, offset in ranged:
        _range_offset(key, offset, typer, edits)
    for q in setops:
        _columns(q, typer, t.columns, edits)
    return sorted((a, b, new) for (a, b), new in edits.items())


#: A RANGE frame's offset bound (the words of one; the tree decides).
RANGE_OFFSET = re.compile(r"\brange\b[^;]*?\b(?:preceding|following)\b", re.IGNORECASE | re.DOTALL)
_INTEGERS = frozenset({"smallint", "integer", "bigint"})
_DATETIMES = frozenset({"date", "timestamp without time zone", "timestamp with time zone"})


def _range_offsets(q: Query, text: str):
    # (ORDER BY expression, offset) of each RANGE frame's offset bound among q's own windows:
    # the window's children after its OVER other than its PARTITION BY and ORDER BY
    for root in query_expressions(q):
        for e in root.walk():
            w = e.over
            if e.cls != "WINDOW" or w is None or len(w.orders) != 1 or e.start < 0 or not any(
                    b.startswith("EXPR_") and b.endswith("_RANGE") for b in (w.start, w.end)):
                continue
            over = [m.start() for m in _OVER_WORD.finditer(text, e.start, e.end)]
            if not over:
                continue
            own = {id(x) for x in (*w.partitions, *(o.expression for o in w.orders))}
            for k in e.children:
                if k.start > over[-1] and id(k) not in own:
                    yield w.orders[0].expression, k


_OVER_WORD = re.compile(r"\bOVER\b", re.IGNORECASE)


def _range_offset(key: Expression, offset: Expression, typer: PgTyper, edits: dict) -> None:
    # PostgreSQL's in_range support of the ORDER BY type and the offset's: an integer key
    # takes integer offsets, a date or timestamp an interval (an unknown literal there is
    # read as one: DuckDB finds no function for a string), else its error (DuckDB answers)
    k, o = typer.kind(key), typer.kind(offset)
    if k in _DATETIMES and o == UNKNOWN and offset.literal is not None and offset.literal.kind == "STRING":
        edits[(offset.start, offset.end)] = _cast(typer.text[offset.start : offset.end], "interval")
    elif (k in _INTEGERS and o in ("numeric", "real", "double precision")) or (
            k in _DATETIMES and (o in _INTEGERS or o == "numeric")):
        raise SQLError(f"RANGE with offset PRECEDING/FOLLOWING is not supported for column type {k} and "
                       f"offset type {o}")


def _peer_groups(q: Query):
    # the values of ``q``'s own expressions PostgreSQL resolves to one common type: a
    # comparison's, BETWEEN's and IN's operands, CASE's results, the arguments of coalesce,
    # greatest, least and nullif, and each column of a VALUES list
    for root in query_expressions(q):
        for e in root.walk():
            if e.cls in ("COMPARISON", "BETWEEN") or e.cls == "OPERATOR" and e.type in (
                    "COMPARE_IN", "COMPARE_NOT_IN", "OPERATOR_COALESCE"):
                yield e.children
            elif e.cls == "CASE":
                yield case_results(e)
            elif e.cls == "FUNCTION" and len(e.name) == 1 and e.name[0].lower() in ("greatest", "least", "nullif"):
                yield e.children
    for t in table_refs(q):
        yield from zip(*t.rows)


def _check_beside(group, typer: PgTyper) -> None:
    # PostgreSQL reads a bare string literal among values of a known type as that type when
    # it plans the query: bad text raises there, even over no rows (DuckDB casts it per row
    # and may never reach it). The literal is checked as translate reads the cast written out
    # (its PostgreSQL errors); the text is kept, as DuckDB's cast reads every text the check
    # lets through alike. A check colmz refuses leaves the literal to DuckDB.
    t = typer.values(group)
    if t not in _RANK and t != "boolean":
        return
    for e in group:
        if untyped_literal(e) and e.literal.kind == "STRING":
            with contextlib.suppress(UnsupportedSQL):
                translate(f"SELECT {typer.text[e.start:e.end]}::{_SPELLING.get(t, t)}")


#: A set operation input's columns: each column's type, the bare string literals of leaves
#: it would coerce, and whether it is text only as unknown literals resolve (``SELECT 'a'
#: UNION SELECT 'b'``, ``SELECT DISTINCT NULL``: DuckDB gives such text the type of any
#: value it meets, PostgreSQL matches it with text only); None: the columns are not known.
_Columns = list[tuple[str | None, tuple[Expression, ...], bool]] | None


def _columns(q: Query, typer: PgTyper, columns: dict, edits: dict) -> _Columns:
    # the columns of ``q`` as PostgreSQL types them, the literals its set operations coerce
    # written into ``edits`` (``columns``: each query's output columns' types, by its id)
    if q.type != "SET_OPERATION_NODE":
        return _leaf(q, typer, columns)
    op = q.setop or "UNION"
    out = _columns(q.children[0], typer, columns, edits)
    for child in q.children[1:]:
        right = _columns(child, typer, columns, edits)
        if out is None or right is None or len(out) != len(right):
            # (a column count differing is PostgreSQL's error and DuckDB's)
            for cols in (out, right):
                if cols is not None and any(lits or soft for _, lits, soft in cols):
                    _refuse(op)
            out = None
            continue
        merged = []
        for (a, lits_a, soft_a), (b, lits_b, soft_b) in zip(out, right):
            t = common_type(a, b, op)
            lits = lits_a + lits_b
            if t is None:
                # an unknown literal, or text only as literals resolve, beside a type not known
                if lits or soft_a or soft_b:
                    _refuse(op)
                merged.append((None, (), False))
            elif t == "text":
                # two unknown inputs resolve as text, their literals kept as written
                both_unknown = a == b == UNKNOWN
                soft = both_unknown or (soft_a or a == UNKNOWN) and (soft_b or b == UNKNOWN)
                merged.append(("text", lits if both_unknown else (), soft))
            else:
                for lit in lits:
                    edits[(lit.start, lit.end)] = _cast(typer.text[lit.start:lit.end], t)
                merged.append((t, (), False))
        out = merged
    return out


def _leaf(q: Query, typer: PgTyper, columns: dict) -> _Columns:
    # a leaf branch's columns: a bare string literal (or NULL) is unknown, and coerced by the
    # set operation -- unless the leaf sorts, groups or deduplicates it, which makes it text;
    # a star's columns as the resolver expanded them (None: not known)
    if q.type != "SELECT_NODE":
        return None
    if any(n.cls in ("STAR", "COLUMNS") for e in q.items for n in e.walk()):
        got = columns.get(id(q))
        return None if got is None else [("text" if t == UNKNOWN else t, (), False) for _, t in got]
    shaped = bool(q.group_by) or any(m.type in ("DISTINCT_MODIFIER", "ORDER_MODIFIER") for m in q.modifiers)
    out = []
    for e in q.items:
        if not untyped_literal(e):
            out.append((typer.kind(e), (), False))
        elif shaped:
            out.append(("text", (), True))
        else:
            out.append((UNKNOWN, (e,) if e.literal.kind == "STRING" else (), False))
    return out


def _refuse(op: str) -> None:
    raise UnsupportedSQL(f"an untyped literal (a string or NULL) in a {op} branch beside a column of a type colmz "
                         "does not know is not supported by colmz (PostgreSQL gives the literal that column's type): "
                         "cast the literal")


def _cast(literal: str, type_name: str) -> str:
    # the literal cast to the type, as translate writes the cast (its checks and errors); an
    # infinite date or timestamp is refused (DuckDB also reads 'inf', PostgreSQL does not, and
    # colmz's dates hold no infinity)
    if type_name in _RANK and _RANK[type_name][0] == 1 and "inf" in literal.lower():
        raise UnsupportedSQL(f"the {type_name} text {literal} is not supported by colmz (an infinite date or "
                             "timestamp)")
    return translate(f"SELECT {literal}::{_SPELLING.get(type_name, type_name)}")[len("SELECT "):]


class PgTyper(Typer):
    """PostgreSQL's type of an expression node (module docstring), None when not known:
    ``resolved`` holds the resolved references' types, ``coarse`` their kinds of
    :class:`colmz.sql.typing_pass.Typer` (by span), which types the nodes typed only there."""

    def __init__(self, text: str, resolved, coarse) -> None:
        super().__init__(text, resolved, {})
        self.coarse = Typer(text, coarse, {})

    def kind(self, e: Expression, pg: bool = False) -> str | None:
        if untyped_literal(e):
            return UNKNOWN
        if e.cls == "COLUMN_REF":  # (a subquery's literal column is text there)
            t = self.resolved.get((e.start, e.end))
            return "text" if t == UNKNOWN else t
        if e.cls == "CONSTANT" and e.literal is not None:
            if e.literal.kind == "INTEGER":
                v = abs(int(e.literal.text))
                return "integer" if v < 2 ** 31 else "bigint" if v < 2 ** 63 else "numeric"
            return {"NUMERIC": "numeric", "BOOLEAN": "boolean"}.get(e.literal.kind)
        if e.cls == "CAST" and len(e.children) == 2 and (e.children[1].start >= 0 or e.start >= 0):
            # (a typed literal, INTERVAL '1 day', has its type's word first, not always as a node)
            written = self.text[e.children[1].start : e.children[1].end] if e.children[1].start >= 0 \
                else self.text[e.start:e.end].split("'", 1)[0]
            if written == "JSON":  # (translate's jsonb)
                return "jsonb"
            t = " ".join(written.lower().replace('"', " ").split())
            kind = float_kind(t)
            return _OF_KIND[kind] if kind is not None else _CAST_TYPES.get(_MODIFIERS.sub("", t))
        if e.cls in ("COMPARISON", "CONJUNCTION", "BETWEEN") or e.cls == "OPERATOR" and e.type in _BOOLEAN_OPERATORS:
            return "boolean"
        if e.cls == "CASE":
            return self.values(case_results(e))
        if e.cls == "OPERATOR" and e.type == "OPERATOR_COALESCE":
            return self.values(e.children)
        if e.cls == "FUNCTION" and len(e.name) == 1:
            name = e.name[0].lower()
            if name in ("greatest", "least") or name == "nullif" and e.children:
                return self.values(e.children[:1] if name == "nullif" else e.children)
            if name in _TEXT_CALLS:
                return "text"
            if name in _CALL_TYPES:
                return _CALL_TYPES[name]
            if numeric_cast(e, self.text):
                return "numeric"
            if name == "||" and all(self.kind(c) in ("text", UNKNOWN) for c in e.children):
                return "text"
            if is_arith(e) and name in "+-*/%" and 1 <= len(e.children) <= 2:
                types = [self.kind(c) for c in e.children]
                if all(_RANK.get(t, (1,))[0] == 0 for t in types):
                    if "real" in types and any(t not in ("real", "double precision") for t in types):
                        return "double precision"  # (a real with an exact number: float48's)
                    return max(types, key=lambda t: _RANK[t][1])
                return None
            if name in SAME_TYPE_CALLS and len(e.children) == 1 and e.filter is None:
                return self.kind(e.children[0])
        return _OF_KIND.get(self.coarse.kind(e, pg))

    def values(self, nodes) -> str | None:
        # the common type of CASE's, coalesce's ... values (unknown ones take the others')
        out: str | None = UNKNOWN
        for n in nodes:
            try:
                out = common_type(out, self.kind(n))
            except SQLError:
                return None
        return "text" if out == UNKNOWN else out
