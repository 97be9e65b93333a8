"""PostgreSQL's rules that hang on a column's type, applied in one typing pass: a translated
query's tree read once, every column reference resolved once with every kind the rules read,
and each rule's edits spliced into one rewrite.

:func:`colmz.sql.translate.translate` sees text only; the catalog (a continual task, a
maintained view's SQL over its input: :data:`SEGMENT_RULES`) knows the relations a query
reads when it runs it. :func:`column_type_rules` takes those
relations, each column with its full type -- ``kind`` (``"real"``, ``"double"``,
``"exact"``; ``"jsonb"``, ``"json"``, ``"text"``, ``"string"``; ``"bool"``; ``"interval"``;
``"array"``; ``"other"``: one kind per column, as a column has one type) and ``pg``,
PostgreSQL's name of its type (:data:`colmz.sql.setop_types.KNOWN_TYPES`, else None) --
and applies, in this order (:data:`RULES`):

* ``"setop"``: a set operation's bare string literal cast to its column's type, and one
  beside values of a known type checked as that type (:mod:`colmz.sql.setop_types`);
* ``"float"``: the float rules (:mod:`colmz.sql.floatcols`), and PostgreSQL's errors of
  output names and of a recursive CTE's float types (:class:`colmz.sql.typing_pass.Resolver`);
* ``"jsonb"``: the jsonb and text rules (:mod:`colmz.sql.jsonbcols`);
* ``"interval"``: interval arithmetic and aggregates (:mod:`colmz.sql.intervalcols`);
* ``"array"``: ``||`` of arrays (:mod:`colmz.sql.arraycols`).

Each module holds its rule (what edit for what node) over a
:class:`colmz.sql.typing_pass.TypedText`; this module reads the tree and resolves the
references (:class:`colmz.sql.typing_pass.Resolver` over a kind per view: the coarse kind
the float, jsonb and interval rules read, the PostgreSQL type the set operations' read, the
array kind the arrays' read, each view typing a FROM subquery's or CTE's column by its own
typer) and splices the edits.

The text is read again only where a rule reads another's output: after a set operation's
casts (they type the branch's column, which the float and jsonb rules read: ``'1.5'`` beside
a real is a real) and after the float rules' edits (the jsonb rules read through their
casts and checks), and where two rules' edits meet (one's node inside or beside the other's: the later rule rewrites the earlier's
output, as it must). The jsonb, interval and array rules otherwise edit disjoint nodes of
disjoint kinds, so their edits over one reading are the edits each would make after the
other. PostgreSQL's errors found while resolving (an output name) are raised where the
float rules' turn comes, after a set operation's casts, as when each rule read on its own.

Invariants: the rewrite is a pure function of the text and the relations' column types,
cached; the same as the rules applied one after another, each reading the previous one's
output; a text the tree cannot read is returned unchanged; a rule not named in ``rules`` is
not applied.
"""

from __future__ import annotations

import functools

from colmz.sql.arraycols import array_edits
from colmz.sql.build import splice
from colmz.sql.errors import SQLError
from colmz.sql.floatcols import FLOAT_WORD, float_edits
from colmz.sql.intervalcols import interval_edits
from colmz.sql.jsonbcols import jsonb_edits, jsonb_wanted
from colmz.sql.setop_types import KNOWN_TYPES, PgTyper, common_of, setop_edits, setop_wanted
from colmz.sql.tree import parse_tree
from colmz.sql.typing_pass import (
    ArrayTyper,
    Resolver,
    TypedText,
    Typer,
    common_array,
    common_kind,
    cte_list_names,
    derived_names,
)

__all__ = ["RULES", "Relations", "SEGMENT_RULES", "column_type", "column_type_rules", "rules_applied", "typed_text"]

#: The rules, in the order they apply (module docstring).
RULES = ("setop", "float", "jsonb", "interval", "array")
#: The rules a maintained view's SQL over its input's columns applies (:mod:`colmz.dataflow`:
#: its planner types a set operation's literals and plans arrays itself).
SEGMENT_RULES = ("float", "jsonb", "interval")
#: Rules whose edits change the types later rules read: the text is read again after them.
_RETYPING = frozenset({"setop", "float"})

#: Relations as the caller names them: each relation's name in the text (lower case) with its
#: columns' ``(name, kind, pg)`` (module docstring); ``(name, kind)`` where no rule reads the
#: PostgreSQL type.
Relations = tuple[tuple[str, tuple[tuple[str, str | None, str | None], ...]], ...]

_NUMBERS = frozenset({"real", "double", "exact"})


@functools.lru_cache(maxsize=256)
def column_type(t, string_kind: str | None = None) -> tuple[str, str | None]:
    """A column's ``(kind, pg)`` (module docstring) from its Arrow type ``t`` and, for a
    string column, its kind as the catalog knows it (``jsonb``, ``json``, ``text``,
    ``string``: :mod:`colmz.catalog.column_kinds`).

    >>> import pyarrow as pa
    >>> [column_type(t) for t in (pa.float32(), pa.int64(), pa.month_day_nano_interval())]
    [('real', 'real'), ('exact', 'bigint'), ('interval', 'interval')]
    >>> column_type(pa.list_(pa.int32())), column_type(pa.string(), "jsonb"), column_type(pa.bool_())
    (('array', None), ('jsonb', 'jsonb'), ('bool', 'boolean'))
    """
    import pyarrow as pa

    from colmz.sql.assign import pg_type_name

    if pa.types.is_float32(t) or pa.types.is_float64(t):
        kind = "real" if pa.types.is_float32(t) else "double"
    elif pa.types.is_integer(t) or pa.types.is_decimal(t):
        kind = "exact"
    elif string_kind is not None:
        kind = string_kind
    elif pa.types.is_boolean(t):
        kind = "bool"
    elif pa.types.is_interval(t):
        kind = "interval"
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        kind = "array"
    else:
        kind = "other"
    pg = string_kind if string_kind is not None else pg_type_name(t)
    return kind, pg if pg in KNOWN_TYPES else None


def column_type_rules(text: str, relations: Relations, rules: tuple[str, ...] = RULES,
                      names: frozenset[tuple[str, str]] | None = None) -> str:
    """``text`` (a translated query, its relations bound) with PostgreSQL's rules of
    ``rules`` that hang on its relations' column types applied (module docstring).
    ``names``: the ``(column, float kind)`` pairs that type a reference by its name alone
    (default: the relations' columns').

    >>> rels = (("t", (("r", "real", "real"), ("d", "interval", "interval"), ("k", "exact", "integer"))),)
    >>> column_type_rules("SELECT r > 2, d / 2 FROM t", rels)
    'SELECT CAST(r AS DOUBLE) > 2, __colmz_interval_div(d, CAST(2 AS DOUBLE)) FROM t'
    >>> column_type_rules("SELECT k FROM t UNION SELECT '5'", rels)
    "SELECT k FROM t UNION SELECT '5'::integer"
    """
    return _apply(text, relations, tuple(rules), names)[0]


def rules_applied(text: str, relations: Relations) -> tuple[str, frozenset[str]]:
    """:func:`column_type_rules` of every rule, with the names of the rules that edited it.

    >>> rules_applied("SELECT r * 2 FROM t", (("t", (("r", "real", "real"),)),))[1]
    frozenset({'float'})
    """
    return _apply(text, relations, RULES, None)


@functools.lru_cache(maxsize=1024)
def _apply(text: str, relations: Relations, rules: tuple[str, ...],
           names: frozenset[tuple[str, str]] | None) -> tuple[str, frozenset[str]]:
    kinds = {k for _, cols in relations for _, k, *_ in cols}
    if names is None:  # (a column of no float kind is "other": not typed by its name)
        names = frozenset((c, k if k in _NUMBERS else "other") for _, cols in relations for c, k, *_ in cols)
    fired: set[str] = set()
    pending = [r for r in RULES if r in rules]
    while pending:
        wanted = {r for r in pending if _wanted(r, text, relations, kinds, names)}
        if not wanted:
            break
        t = typed_text(text, relations, wanted, names)
        if t is None:  # not a query the tree reads (a refusal is translate's, or DuckDB's)
            break
        edits: list[tuple[int, int, str]] = []
        done = len(pending)
        for i, rule in enumerate(pending):
            if rule == "float" and t.error is not None:
                raise t.error  # (its checks of names: where the float rules ran, before them)
            if rule not in wanted:
                continue
            new = _EDITS[rule](t)
            if not new:
                continue
            if _meet(edits, new):  # the later rule reads the earlier one's output
                done = i
                break
            edits += new
            fired.add(rule)
            if rule in _RETYPING:
                done = i + 1
                break
        # (each rule's edits in its own order, by place: a stable sort keeps it)
        text = splice(text, sorted(edits, key=lambda x: x[:2]))
        pending = pending[done:]
    return text, frozenset(fired)


def _wanted(rule: str, text: str, relations: Relations, kinds: set, names) -> bool:
    # whether ``rule`` may edit ``text``: a cheap test of the text and the column kinds (the
    # float rule's checks of names run wherever relations are named or a float type is)
    if rule == "setop":
        return setop_wanted(text)
    if rule == "float":
        return bool(relations) or any(k in ("real", "double") for _, k in names) or FLOAT_WORD.search(text) is not None
    if rule == "jsonb":
        return jsonb_wanted(text, kinds)
    if rule == "interval":
        return "interval" in kinds
    return "||" in text and "array" in kinds


def _meet(edits, new) -> bool:
    # whether an edit of ``new`` is inside, around or beside one of ``edits``
    return any(a <= d and c <= b for a, b, _ in edits for c, d, _ in new)


_EDITS = {"setop": setop_edits, "float": float_edits, "jsonb": jsonb_edits, "interval": interval_edits,
          "array": array_edits}


def typed_text(text: str, relations: Relations, rules=RULES,
               names: frozenset[tuple[str, str]] = frozenset()) -> TypedText | None:
    """``text``'s tree with every column reference resolved once over ``relations`` (module
    docstring), typed for ``rules``; None when the tree does not read ``text``.

    >>> t = typed_text("SELECT x FROM (SELECT d AS x FROM t) s", (("t", (("d", "interval", "interval"),)),))
    >>> sorted(t.resolved.items()), sorted(t.pg.items())
    ([((7, 8), 'interval'), ((22, 23), 'interval')], [((7, 8), 'interval'), ((22, 23), 'interval')])
    """
    try:
        queries = parse_tree(text)
    except SQLError:
        return None
    floats = "float" in rules
    # the float rules' checks of names where the relations are named or a float type is
    checked = floats and (bool(relations) or FLOAT_WORD.search(text) is not None)
    defs: dict = {}
    typed: dict[str, str] = {}
    by_name: dict[str, set[str]] = {}
    if floats:
        for q in queries:
            derived_names(q, defs)
        for name in cte_list_names(text, defs):
            defs.setdefault(name, []).append(None)
        for name, kind in names:
            by_name.setdefault(name, set()).add(kind)
        typed = {n: next(iter(k)) for n, k in by_name.items() if len(k) == 1 and "other" not in k and n not in defs}
    pg, arrays = "setop" in rules, "array" in rules
    multi = pg or arrays  # (else a column's kind is its coarse kind alone: no tuples to build)
    rels = {name: {col[0]: (col[1], col[2] if len(col) > 2 else None, "array" if col[1] == "array" else None)
                   if multi else col[1] for col in cols} for name, cols in relations}
    resolver = _Resolver(text, rels, typed if checked else {}, checked, pg, arrays)
    for q in queries:
        resolver.query(q, [], {})
    if not multi:
        return TypedText(text, queries, resolver.out, items=resolver.items, typed=typed, defs=defs, kinds=by_name,
                         checked=checked, error=resolver.error)
    views: tuple[dict, dict, dict] = ({}, {}, {})
    for span, kinds in resolver.out.items():
        for view, k in zip(views, kinds):
            if k is not None:
                view[span] = k
    items = {s: None if cols is None else {n: None if k is None else k[0] for n, k in cols.items()}
             for s, cols in resolver.items.items()}
    columns = {q: [(n, None if k is None else k[1]) for n, k in cols] for q, cols in resolver.columns.items()}
    return TypedText(text, queries, *views, items=items, columns=columns, typed=typed, defs=defs, kinds=by_name,
                     checked=checked, error=resolver.error)


class _Part:
    # one view of the resolved references' kinds, read as a typer reads its resolved map
    __slots__ = ("out", "i")

    def __init__(self, out: dict, i: int) -> None:
        self.out, self.i = out, i

    def get(self, span, default=None):
        k = self.out.get(span)
        return default if k is None or k[self.i] is None else k[self.i]


class _Kinds:
    # each view's kind of an expression node: (coarse, PostgreSQL type, array kind); a view
    # no rule reads is None
    def __init__(self, text: str, out: dict, typed: dict, pg: bool, arrays: bool) -> None:
        self.text = text
        self.coarse = Typer(text, _Part(out, 0), typed)
        self.pg = PgTyper(text, _Part(out, 1), _Part(out, 0)) if pg else None
        self.arrays = ArrayTyper(text, _Part(out, 2), {}) if arrays else None

    def kind(self, e, pg: bool = False) -> tuple:
        return (self.coarse.kind(e), self.pg.kind(e) if self.pg else None,
                self.arrays.kind(e) if self.arrays else None)


class _Resolver(Resolver):
    # the references resolved once, a column's kind being its kind in each view read (its
    # coarse kind alone where only that view is read)
    def __init__(self, text: str, rels: dict, typed: dict, checked: bool, pg: bool, arrays: bool) -> None:
        super().__init__(text, rels, typed, check_names=checked)
        self.multi = pg or arrays
        if self.multi:
            self.rules = _Kinds(text, self.out, typed, pg, arrays)
        self.defer = True  # (raised where the float rules run: after a set operation's casts)
        self.checked = checked
        self.pg = pg
        #: each query's output columns as resolved (by the query's id), for the set operations
        self.columns: dict[int, list] = {}

    def query(self, q, outer, ctes, named: bool = True):
        got = super().query(q, outer, ctes, named)
        if got is not None and self.pg:
            self.columns.setdefault(id(q), got)
        return got

    def numbers(self, kind):
        return None if not self.checked or kind is None else kind[0] if self.multi else kind

    def combined(self, kinds: set):
        if not self.multi:
            return common_kind(kinds)
        views = list(zip(*((None, None, None) if k is None else k for k in kinds))) or [(), (), ()]
        return (common_kind(set(views[0])), common_of(views[1]) if self.pg else None, common_array(set(views[2])))
