"""colmz's own reading of common queries: DuckDB's tokens to DuckDB's tree, or nothing.

:func:`colmz.sql.tree.parse_tree` asks DuckDB for a query's parse tree
(``json_serialize_sql``), which costs several hundred microseconds a text. Most queries colmz
meets use a small part of PostgreSQL's ``SELECT`` grammar; :func:`read_query` parses that
part itself, over the tokens of DuckDB's own lexer (``duckdb.tokenize``, a few
microseconds), and builds exactly the nodes :class:`colmz.sql.tree` reads from DuckDB's
JSON: same classes and types, names, children in DuckDB's order, spans, aliases, literals.

Invariant: **equal to DuckDB's tree or give up.** For any token sequence this module does not
know with certainty it returns ``None`` and the caller asks DuckDB, as before. What it knows
is a recursive descent over the statements and clauses below and, for expressions, one
precedence-climbing (Pratt) loop driven by one table of PostgreSQL's infix and postfix
operators and their precedence (:data:`_INFIX`), each with the reader of its right side;
besides, a table of the keywords DuckDB's parser reserves
(``duckdb_keywords()``), and, for each construct, the position DuckDB gives its node (the
tree module turns positions into spans: a node spans its own position and its children's,
with the parentheses written around a child). It is checked against DuckDB on a corpus and
on generated expressions (``tests/colmz/sql/test_grammar.py``).

Known (anything else gives up):

* statements: ``[WITH [RECURSIVE] name [(cols)] AS (query), ...] select {UNION|EXCEPT|INTERSECT}
  [ALL] select [ORDER BY e [ASC|DESC] [NULLS FIRST|LAST], ...] [LIMIT e] [OFFSET e]``,
  ``VALUES (..), (..)``, ``;``-separated;
* ``SELECT [DISTINCT [ON (..)]] item [[AS] alias], ... [FROM ...] [WHERE e] [GROUP BY e, ...]
  [HAVING e]``, ``GROUP BY`` items also ``ROLLUP (..)``, ``CUBE (..)``, ``GROUPING SETS (..)``
  over column references; ``FROM`` of tables, subqueries, ``VALUES`` and table functions with aliases
  and column aliases, commas and ``[INNER|LEFT|RIGHT|FULL [OUTER]|CROSS] JOIN ... [ON e |
  USING (cols)]``;
* expressions: column references, ``*``/``t.*``, numbers (``1``, ``1.5``, ``1e5``, ``.5``,
  ``1_000``, negated), strings (``'..'``, ``E'..'``, dollar quotes), ``TRUE``/``FALSE``/
  ``NULL``, ``DATE``/``TIMESTAMP``/``INTERVAL '..'``, ``INTERVAL '..' <unit>`` (no ``TO``),
  ``OR AND NOT``, comparisons (also
  ``ANY``/``SOME``/``ALL (query)``), ``+ - * / % ||``, ``~ ~* !~ !~*``, unary ``-``/``+``,
  ``IS [NOT] NULL``, ``ISNULL``, ``NOTNULL``, ``IS [NOT] DISTINCT FROM``, ``[NOT] BETWEEN``,
  ``[NOT] IN (list | query)``, ``[NOT] [I]LIKE``, ``CASE``, ``::`` and ``CAST(.. AS ..)``,
  subscripts and slices (``a[i]``, ``a[lo:hi]``, either bound left out), ``ARRAY[..]``,
  function calls (``DISTINCT`` and ``ORDER BY`` arguments, ``FILTER``, ``count(*)``,
  ``OVER ([PARTITION BY ..] [ORDER BY ..] [frame])``,
  ``percentile_cont``/``percentile_disc``/``mode`` ``WITHIN GROUP (ORDER BY ..)``),
  ``COALESCE``, ``NULLIF``, ``GREATEST``, ``LEAST``, ``EXTRACT``,
  ``SUBSTRING(a FROM b [FOR c])``, ``SUBSTRING(a FOR c)``, row constructors,
  ``[NOT] EXISTS``, scalar subqueries.

Where DuckDB's parser departs from PostgreSQL's grammar (``a IN (b) + c`` and ``a ~ b BETWEEN
c AND d`` refused, ``- -a`` leaving the inner sign unpositioned, ``a IN ((SELECT ..))`` read
as an IN subquery, ``x -> y`` a lambda below every operator), the reader gives up rather
than guess; each such case was found by comparing with DuckDB and is kept as a test.

The nodes are built through twin classes of the tree's node classes
(:func:`colmz.sql.tree.fast_constructor`): the same slots filled by plain assignment, then
the object's class set to the node class, so each node is a genuine frozen
:class:`~colmz.sql.tree.Expression` (``Query``, ``Table``) at a quarter of the frozen
``__init__``'s cost -- building nodes is most of this module's time. A node is complete
before :func:`read_query` returns it: the few fields known only after a node is built (a
select item's alias, a query's modifiers and ``WITH`` list, ``FROM``'s span) are set on the
node just built, which nothing else holds yet (:func:`_finish`).

A text nesting deeper than :data:`MAX_DEPTH` (parentheses, operands, operator chains) is
given up: DuckDB's path then refuses it as it always has
(:data:`colmz.sql.tokens.MAX_NESTING`, the tree reader's own depth limit).

A chain of ``||`` is read as one flat list of operands and nested left-deep, as DuckDB does.
:func:`concat_chains` reads a text the same way but lists its long chains (their operands'
spans) instead of nesting them, at no depth: a chain of any length is read, so that
translation can regroup it before DuckDB (or :func:`read_query`) reads a tree of it.
"""

from __future__ import annotations

import bisect
import re

from colmz.sql.tokens import CACHED_CHARS
from colmz.sql.tree import (
    Expression,
    Literal,
    Modifier,
    Order,
    Parens,
    Query,
    Table,
    Window,
    char_offsets,
    fast_constructor,
)

__all__ = ["MAX_DEPTH", "concat_chains", "duckdb_lexed", "quoted_name", "read_query"]

#: Deepest nesting read here (operands, operator chains, casts); deeper texts go to DuckDB.
MAX_DEPTH = 48

_Expr = fast_constructor(Expression)
_Query = fast_constructor(Query)
_Table = fast_constructor(Table)


class _GiveUp(Exception):
    pass


_GIVE_UP = _GiveUp()

#: The unit keywords DuckDB's grammar names otherwise in extract's field (its tree holds
#: YEAR for YEARS, MILLISECONDS for MILLISECOND).
_EXTRACT_KEYWORDS = {**{w + "S": w for w in ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "WEEK", "DECADE",
                                            "QUARTER")},
                     "MILLISECOND": "MILLISECONDS", "MICROSECOND": "MICROSECONDS", "CENTURIES": "CENTURY",
                     "MILLENNIA": "MILLENNIUM"}

_EXTRACT_UNITS = frozenset(_EXTRACT_KEYWORDS) | frozenset(_EXTRACT_KEYWORDS.values())

#: DuckDB's keywords by category (``duckdb_keywords()``), loaded once.
_KEYWORDS: dict[str, str] = {}
_KINDS: dict = {}

#: DuckDB's comparison types.
_COMPARE = {"=": "COMPARE_EQUAL", "<>": "COMPARE_NOTEQUAL", "!=": "COMPARE_NOTEQUAL", "<": "COMPARE_LESSTHAN",
            ">": "COMPARE_GREATERTHAN", "<=": "COMPARE_LESSTHANOREQUALTO", ">=": "COMPARE_GREATERTHANOREQUALTO"}
#: ``[NOT] LIKE``/``ILIKE``: DuckDB's function names.
_LIKE = {("LIKE", False): "~~", ("LIKE", True): "!~~", ("ILIKE", False): "~~*", ("ILIKE", True): "!~~*"}
#: Words continuing a type name.
_TYPE_WORDS = {"DOUBLE": ("PRECISION",), "CHARACTER": ("VARYING",), "CHAR": ("VARYING",)}
_JOIN_KINDS = {"JOIN": "INNER", "INNER": "INNER", "LEFT": "LEFT", "RIGHT": "RIGHT", "FULL": "FULL"}
_NUMBER = re.compile(r"(\d+(?:_\d+)*)|(\d+(?:_\d+)*\.(?:\d+(?:_\d+)*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?"
                     r"|\d+(?:_\d+)*[eE][+-]?\d+)")
_E_ESCAPE = re.compile(r"\\(?:x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.S)
_E_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "\\": "\\", "'": "'"}
_PLAIN = re.compile(r"'(?:[^']|'')*'")
_ESCAPED = re.compile(r"'(?:[^'\\]|''|\\.)*'", re.S)
_QUOTED = re.compile(r'"(?:[^"]|"")+"')
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")
#: PostgreSQL's (and DuckDB's) whitespace, stripped from the end of each token's text.
_SPACE = " \t\n\r\f\v"
#: Characters of a comment colmz's tokenizer might read otherwise (see :class:`_Reader`).
_COMMENT_UNSAFE = frozenset("()'\"$")


def _load() -> None:
    from colmz.sql.run import require_duckdb

    duckdb = require_duckdb()
    tt = duckdb.token_type
    con = duckdb.connect(":memory:", config={"enable_external_access": False})
    try:
        rows = con.execute("SELECT keyword_name, keyword_category FROM duckdb_keywords()").fetchall()
    finally:
        con.close()
    # by identity: the token kinds are enum members (singletons), hashed in Python otherwise
    _KINDS.update({id(tt.identifier): "i", id(tt.numeric_const): "n", id(tt.string_const): "s",
                   id(tt.operator): "o", id(tt.keyword): "k", id(tt.comment): "c", "tokenize": duckdb.tokenize})
    _KEYWORDS.update({name.upper(): cat for name, cat in rows})


def _e_escape(m: re.Match) -> str:
    s = m.group(0)[1:]
    if s in _E_SIMPLE:
        return _E_SIMPLE[s]
    if s[0] == "x" and len(s) > 1 and 0 < int(s[1:], 16) <= 0x7F:
        return chr(int(s[1:], 16))
    raise _GIVE_UP  # another escape: DuckDB's reading is not certain here


def _string_value(t: str) -> str:
    c = t[0]
    if c == "'":
        if _PLAIN.fullmatch(t) is None:
            raise _GIVE_UP  # unterminated
        return t[1:-1].replace("''", "'")
    if c in "eE" and t[1] == "'":
        if _ESCAPED.fullmatch(t, 1) is None:
            raise _GIVE_UP
        # '' inside E'' is a quote too, between the backslash escapes
        body, out, pos = t[2:-1], [], 0
        for m in _E_ESCAPE.finditer(body):
            out += (body[pos:m.start()].replace("''", "'"), _e_escape(m))
            pos = m.end()
        v = "".join(out) + body[pos:].replace("''", "'")
        if not v.isprintable() and any(ord(ch) < 32 and ch not in "\b\f\n\r\t" for ch in v):
            raise _GIVE_UP
        return v
    m = _DOLLAR.match(t) if c == "$" else None
    if m is None:
        raise _GIVE_UP  # X'..', B'..', U&'..', N'..'
    tag = m.group(0)
    if not t.endswith(tag) or len(t) < 2 * len(tag) or tag in t[len(tag):-len(tag)]:
        raise _GIVE_UP
    return t[len(tag):-len(tag)]


def _const(kind: str, text: str, start: int = -1, end: int = -1) -> Expression:
    return _Expr("CONSTANT", "VALUE_CONSTANT", start, end, literal=Literal(kind, text))


def _finish(node, **fields):
    # Fields known only after ``node`` was built, set on it: it was built by this reader a
    # moment ago and nothing else holds it yet (see the module docstring).
    for name, value in fields.items():
        object.__setattr__(node, name, value)
    return node


#: The texts lexed here last and their tokens (:func:`duckdb_lexed`): a few short ones or one
#: long one, each entry one tuple set whole, so a thread reads a text with its own tokens.
_LEXED: dict[str, tuple[list[str], list[int], list[str]]] = {}


def duckdb_lexed(text: str) -> tuple[list[str], list[int], list[str]]:
    """DuckDB's lexer's tokens of ``text`` (``duckdb.tokenize``, comments included): each
    one's kind (``i`` identifier, ``n`` number, ``s`` string, ``o`` operator, ``k`` keyword,
    ``c`` comment), character offset and text (up to the next token, less whitespace). The
    texts lexed last are not lexed again: :func:`read_query`'s text is the one the tree module
    then shapes (:func:`colmz.sql.shapes.shape_of`) or checks for tokens outside one
    expression (a statement's several expressions are read, then checked). Raises what
    DuckDB's lexer raises.

    >>> duckdb_lexed("SELECT (a) -- c")
    (['k', 'o', 'i', 'o', 'c'], [0, 7, 8, 9, 11], ['SELECT', '(', 'a', ')', '-- c'])
    """
    got = _LEXED.get(text)
    if got is not None:
        return got
    if not _KINDS:
        _load()
    raw = _KINDS["tokenize"](text)
    kinds = [_KINDS[id(kind)] for _, kind in raw]
    chars = char_offsets(text)
    starts = [at for at, _ in raw] if chars is None else [chars[at] for at, _ in raw]
    # each token's text runs to the next token's start, less the whitespace
    texts = [text[a:b].rstrip(_SPACE) for a, b in zip(starts, [*starts[1:], len(text)])]
    if len(_LEXED) >= 8 or len(text) > CACHED_CHARS:
        _LEXED.clear()
    got = _LEXED[text] = (kinds, starts, texts)
    return got


duckdb_lexed.cache_clear = _LEXED.clear


def quoted_name(token: str) -> str | None:
    """The name a quoted identifier token names, as this reader reads it, else ``None``.

    >>> quoted_name('"a""b"'), quoted_name('"')
    ('a"b', None)
    """
    if _QUOTED.fullmatch(token) is None:
        return None
    return token[1:-1].replace('""', '"')


def _plain_name(t: str) -> bool:
    # an unquoted identifier DuckDB names as written (not U&"..", not a parameter)
    return (t[0].isalpha() or t[0] == "_") and "&" not in t


class _Reader:
    __slots__ = ("text", "K", "S", "E", "T", "U", "n", "i", "parens", "span", "depth", "chains", "longer")

    def __init__(self, text: str, longer: int = 0) -> None:
        try:
            K, S, T = duckdb_lexed(text)
        except Exception:  # noqa: BLE001 - what DuckDB's lexer refuses, DuckDB's parser reports
            raise _GIVE_UP from None
        if "c" in K:
            # a comment: colmz's tokenizer must read the same parentheses around it
            for t in [t for k, t in zip(K, T) if k == "c"]:
                if not _COMMENT_UNSAFE.isdisjoint(t) or t.count("/*") > 1:
                    raise _GIVE_UP
            keep = [j for j, k in enumerate(K) if k != "c"]
            K, S, T = [K[j] for j in keep], [S[j] for j in keep], [T[j] for j in keep]
        if not K or "" in T:
            raise _GIVE_UP
        self.text, self.K, self.S, self.T = text, K, S, T
        self.E = [a + len(t) for a, t in zip(S, T)]
        self.U = [t.upper() if k == "k" or k == "i" else t for k, t in zip(K, T)]
        self.n, self.i, self.depth = len(K), 0, 0
        # ``longer``: the chains of ``||`` of more operands are listed (:func:`concat_chains`)
        # and cost no depth, instead of nesting one level per operator as DuckDB's tree does
        self.longer, self.chains = longer, []
        # only operator tokens read "(" or ")" (strings and quoted names keep their quotes)
        self.parens = Parens(S, self.E, [(j, t) for j, t in enumerate(T) if t == "(" or t == ")"])
        self.span = self.parens.span

    # -------------------------------------------------------------------- tokens

    def at(self, word: str, off: int = 0) -> bool:
        """Whether the token ``off`` ahead is ``word``: a keyword, or an operator (``(``).
        (A token reading a keyword is the keyword or an identifier, one reading ``(`` the
        operator: only identifiers are told apart.)"""
        j = self.i + off
        return j < self.n and self.U[j] == word and self.K[j] != "i"

    def take(self, word: str) -> bool:
        """:meth:`at` ``word``, consumed."""
        j = self.i
        if j < self.n and self.U[j] == word and self.K[j] != "i":
            self.i = j + 1
            return True
        return False

    def need(self, *words: str) -> int:
        """The index of the last of the next tokens, which must be ``words``; consumed."""
        j = self.i
        for word in words:
            if j >= self.n or self.U[j] != word or self.K[j] == "i":
                raise _GIVE_UP
            j += 1
        self.i = j
        return j - 1

    def word(self, off: int = 0) -> str:
        """The keyword ``off`` ahead, else ``""``."""
        j = self.i + off
        return self.U[j] if j < self.n and self.K[j] == "k" else ""

    def many(self, item, close: str | None = None) -> list:
        """``item()`` read one or more times, separated by commas, then ``close``."""
        out = [item()]
        while self.take(","):
            out.append(item())
        if close is not None:
            self.need(close)
        return out

    def name(self, kinds=("unreserved",)) -> str:
        """An identifier (or a keyword of ``kinds``) as DuckDB names it; consumed."""
        i = self.i
        k, t = self.K[i], self.T[i]
        if k == "i":
            if t[0] == '"':
                t = quoted_name(t)
                if t is None:
                    raise _GIVE_UP
            elif not _plain_name(t):
                raise _GIVE_UP
        elif k != "k" or _KEYWORDS.get(self.U[i]) not in kinds:
            raise _GIVE_UP
        self.i = i + 1
        return t

    def query_in_parens(self, heads=("SELECT", "WITH")) -> Query:
        """``(query)``, ``self.i`` at its ``(``, the query beginning with one of ``heads``."""
        self.need("(")
        if self.word() not in heads:
            raise _GIVE_UP
        q = self.select_stmt()
        self.need(")")
        return q

    # -------------------------------------------------------------------- spans

    def node(self, cls: str, typ: str, s: int, e: int, children=(), **kw) -> Expression:
        """A node at ``[s, e)`` (``-1`` for none) spanning its children as the tree module's
        reader of DuckDB's JSON does (:meth:`colmz.sql.tree.Parens.span`)."""
        start, end = self.span(s, e, children)
        return _Expr(cls, typ, start, end, tuple(children), **kw)

    def call_node(self, name: str, s: int, children, **kw) -> Expression:
        """A ``FUNCTION`` node from token ``s`` to the last token read."""
        return self.node("FUNCTION", "FUNCTION", self.S[s] if s >= 0 else -1, self.E[self.i - 1] if s >= 0 else -1,
                         children, name=(name,), **kw)

    # -------------------------------------------------------------------- statements

    def statements(self) -> tuple[Query, ...]:
        out = [self.select_stmt()]
        while self.i < self.n:
            self.need(";")
            if self.i < self.n:
                out.append(self.select_stmt())
        return tuple(out)

    def whole_expression(self) -> Expression:
        """The text as one expression (a predicate colmz translates alone)."""
        e = self.expr()
        if self.i < self.n:
            raise _GIVE_UP
        return e

    def select_stmt(self) -> Query:
        ctes: tuple = ()
        if self.take("WITH"):
            recursive = self.take("RECURSIVE")
            ctes = tuple(self.many(lambda: self.cte(recursive)))
        q = self.set_expr()
        modifiers = list(q.modifiers)
        orders = self.order_by()
        if orders:
            modifiers.append(Modifier("ORDER_MODIFIER", tuple(o.expression for o in orders), orders))
        limit = offset = None
        while (w := self.word()) == "LIMIT" and limit is None or w == "OFFSET" and offset is None:
            self.i += 1
            if w == "LIMIT":
                if self.at("ALL"):
                    raise _GIVE_UP
                limit = self.expr()
            else:
                offset = self.expr()
                if self.word() in ("ROW", "ROWS"):
                    raise _GIVE_UP
        if limit is not None or offset is not None:
            exprs = tuple(e for e in (limit, offset) if e is not None)
            modifiers.append(Modifier("LIMIT_MODIFIER", exprs, (), limit, offset))
        return _finish(q, modifiers=tuple(modifiers), ctes=ctes) if len(modifiers) != len(q.modifiers) or ctes else q

    def cte(self, recursive: bool) -> tuple[str, Query]:
        """``name [(cols)] AS (query)`` of a ``WITH`` list (the column names are not in the tree)."""
        name = self.name()
        if self.take("("):
            self.many(self.name, ")")
        self.need("AS", "(")
        q = self.select_stmt()
        self.need(")")
        if recursive:
            # DuckDB's recursive CTE: the two branches of a UNION [ALL]
            if q.type != "SET_OPERATION_NODE" or q.setop != "UNION" or len(q.children) != 2 or q.modifiers or q.ctes:
                raise _GIVE_UP
            q = _Query("RECURSIVE_CTE_NODE", children=q.children, setop_all=q.setop_all)
        return name, q

    def order_by(self) -> tuple[Order, ...]:
        """``ORDER BY item, ...`` if written next, else ``()``."""
        return tuple(self.many(self.order_item)) if self.take("ORDER") and self.need("BY") else ()

    def order_item(self) -> Order:
        e = self.expr()
        direction = "ASCENDING" if self.take("ASC") else "DESCENDING" if self.take("DESC") else "ORDER_DEFAULT"
        nulls = "ORDER_DEFAULT"
        if self.take("NULLS"):
            nulls = "NULLS " + self.word()
            if nulls not in ("NULLS FIRST", "NULLS LAST"):
                raise _GIVE_UP
            self.i += 1
        return Order(e, direction, nulls)

    def set_expr(self, tight: bool = False) -> Query:
        """Set operations: ``INTERSECT`` binds tighter than ``UNION`` and ``EXCEPT``; DuckDB
        flattens a chain of one operation (``a UNION ALL b UNION ALL c``) into one node."""
        left = self.select_core() if tight else self.set_expr(True)
        while (kind := self.word()) in (("INTERSECT",) if tight else ("UNION", "EXCEPT")):
            self.i += 1
            setop_all = self.take("ALL")  # DISTINCT, BY NAME give up in select_core
            right = self.select_core() if tight else self.set_expr(True)
            if left.type == "SET_OPERATION_NODE" and left.setop == kind and left.setop_all == setop_all:
                left = _Query("SET_OPERATION_NODE", children=(*left.children, right), setop=kind, setop_all=setop_all)
            else:
                left = _Query("SET_OPERATION_NODE", children=(left, right), setop=kind, setop_all=setop_all)
        return left

    def select_core(self) -> Query:
        if self.take("VALUES"):
            return self.values()
        self.need("SELECT")
        modifiers = []
        if self.take("DISTINCT"):
            targets = self.many(self.expr, ")") if self.take("ON") and self.need("(") else []
            modifiers.append(Modifier("DISTINCT_MODIFIER", tuple(targets)))
        elif self.at("ALL"):
            raise _GIVE_UP
        items = self.many(self.select_item)
        from_ = self.from_clause() if self.at("FROM") else None
        where = self.expr() if self.take("WHERE") else None
        group, sets = self.group_by() if self.take("GROUP") and self.need("BY") else ((), ())
        having = self.expr() if self.take("HAVING") else None
        if self.word() in ("WINDOW", "QUALIFY", "USING", "TABLESAMPLE"):
            raise _GIVE_UP
        return _Query("SELECT_NODE", tuple(items), from_, where, group, having, None, tuple(modifiers),
                      grouping_sets=sets)

    def values(self) -> Query:
        """``VALUES (..), (..)``: DuckDB's ``SELECT * FROM`` an expression list."""
        rows = tuple(self.many(lambda: tuple(self.call_args())))
        if any(not r or len(r) != len(rows[0]) for r in rows):
            raise _GIVE_UP  # DuckDB refuses rows of different lengths
        table = _Table("EXPRESSION_LIST", -1, -1, alias="valueslist", expressions=tuple(e for r in rows for e in r),
                       rows=rows)
        return _Query("SELECT_NODE", (_Expr("STAR", "STAR", -1, -1),), table)

    def select_item(self) -> Expression:
        i = self.i
        e = self.expr() if not self.take("*") else _Expr("STAR", "STAR", self.S[i], self.E[i])
        if e.cls == "STAR" and self.word() in ("EXCLUDE", "REPLACE", "RENAME"):
            raise _GIVE_UP
        if self.i == i + 1 and e.cls == "STAR":
            return e  # * takes no alias
        if self.take("AS"):
            if self.i >= self.n or self.K[self.i] not in "ik":
                raise _GIVE_UP
            return _finish(e, alias=self.name(("unreserved", "column_name", "type_function", "reserved")))
        if self.i < self.n and self.K[self.i] == "i":
            return _finish(e, alias=self.name())
        return e

    # -------------------------------------------------------------------- GROUP BY

    def group_by(self) -> tuple[tuple[Expression, ...], tuple[tuple[int, ...], ...]]:
        """``GROUP BY`` items, ``self.i`` after ``BY``: DuckDB's group expressions (equal ones
        merged, the first kept) and grouping sets (positions among them, each sorted): the
        cross product of the items' sets, an item being an expression, ``ROLLUP (..)``,
        ``CUBE (..)`` or ``GROUPING SETS (..)``."""
        if self.at("ALL"):
            raise _GIVE_UP
        written: list[Expression] = []
        group: list[Expression] = []  # merged, in the order written
        loose: dict[tuple, int] = {}

        def one() -> int:
            # DuckDB merges equal group expressions, also written otherwise (a and A, a::int
            # and CAST(a AS int)): expressions of one loose key, which equal ones share, are
            # merged only when they are the same column written the same way, else given up
            e = self.expr()
            written.append(e)
            k = loose.setdefault(self.loose_key(e), len(group))
            if k == len(group):
                group.append(e)
            elif not (e.cls == group[k].cls == "COLUMN_REF" and self.same_text(e, group[k])):
                raise _GIVE_UP
            return k

        items = self.many(lambda: self.grouping_item(one, top=True))
        if all(bare for _, bare in items):
            if len(group) < len(written):
                raise _GIVE_UP
            return tuple(group), (tuple(range(len(group))),)
        # with grouping sets, only column references: which of them DuckDB merges is then
        # certain (the same name written the same way), anything else gives up
        if any(e.cls != "COLUMN_REF" for e in written):
            raise _GIVE_UP
        sets: list[frozenset] = [frozenset()]
        for mine, _ in items:
            sets = [a | b for a in sets for b in mine]
            if len(sets) > _MAX_SETS:
                raise _GIVE_UP
        return tuple(group), tuple(tuple(sorted(g)) for g in sets)

    def same_text(self, a: Expression, b: Expression) -> bool:
        return self.text[a.start:a.end] == self.text[b.start:b.end]

    def loose_key(self, e: Expression) -> tuple:
        # The names, numbers and strings of ``e``'s tokens, sorted (names unquoted, upper
        # case; numbers by value, 1 as 1.0 and 01): expressions DuckDB holds equal have one key
        out = []
        for j in range(bisect.bisect_left(self.S, e.start), bisect.bisect_left(self.S, e.end)):
            k = self.K[j]
            if k == "i" or k == "s":
                out.append(self.U[j].strip('"') if k == "i" else self.T[j])
            elif k == "n":
                try:
                    out.append(repr(float(self.T[j].replace("_", ""))))
                except ValueError:
                    out.append("0")
        return tuple(sorted(out))

    def grouping_item(self, one, top: bool = False) -> tuple[list[frozenset], bool]:
        """One item of ``GROUP BY`` or of ``GROUPING SETS (..)``: its grouping sets (positions
        of the expressions ``one()`` reads), as DuckDB makes them (``transform_groupby.cpp``:
        ``ROLLUP``'s prefixes, ``CUBE``'s subsets depth first, ``GROUPING SETS``' items' sets
        one after another), and whether it is a bare expression."""
        w = self.word()
        if w in ("ROLLUP", "CUBE") and self.at("(", 1):
            self.i += 2
            units = self.many(lambda: self.grouping_list(one, empty=False) if self.at("(") else frozenset((one(),)),
                              ")")
            out = [frozenset()]
            if w == "ROLLUP":
                for u in units:
                    out.append(out[-1] | u)
            elif len(units) > 8:
                raise _GIVE_UP

            def cube(cur: frozenset, start: int) -> None:
                for k in range(start, len(units)):
                    out.append(cur | units[k])
                    cube(out[-1], k + 1)

            if w == "CUBE":
                cube(out[0], 0)
            return out, False
        if w == "GROUPING" and self.at("SETS", 1):
            self.i += 2
            self.need("(")
            return [s for sets, _ in self.many(lambda: self.grouping_item(one), ")") for s in sets], False
        if self.at("("):
            if top:
                raise _GIVE_UP  # (a, b) groups; () the empty set
            return [self.grouping_list(one)], False
        return [frozenset((one(),))], True

    def grouping_list(self, one, empty: bool = True) -> frozenset:
        # ``(a, b)`` or ``()`` as one grouping set, ``self.i`` at ``(``; ``(a) + 1`` gives up
        j = self.parens.match.get(self.i)
        if j is None or j + 1 >= self.n or self.T[j + 1] not in (",", ")"):
            raise _GIVE_UP
        self.i += 1
        if self.take(")"):
            if not empty:
                raise _GIVE_UP  # () in ROLLUP/CUBE
            return frozenset()
        return frozenset(self.many(one, ")"))

    # -------------------------------------------------------------------- FROM

    def from_clause(self) -> Table:
        at = self.need("FROM")
        left = self.from_item()
        if not self.at(","):
            return left
        while self.take(","):
            left = _Table("JOIN", -1, -1, children=(left, self.from_item()), join_type="INNER", ref_type="CROSS",
                          implicit=True)
        return _finish(left, start=self.S[at], end=self.E[self.i - 1])

    def from_item(self) -> Table:
        left = self.table_primary()
        while (word := self.word()) == "CROSS" or word in _JOIN_KINDS:
            i = self.i
            self.i += 1
            if word in ("LEFT", "RIGHT", "FULL"):
                self.take("OUTER")
            if word != "JOIN":
                self.need("JOIN")
            right = self.table_primary()
            kw: dict = {"join_type": _JOIN_KINDS.get(word, "INNER"), "ref_type": "REGULAR"}
            if word == "CROSS":
                kw["ref_type"] = "CROSS"
            elif self.take("ON"):
                kw["expressions"] = (self.expr(),)
            elif self.take("USING"):
                self.need("(")
                kw["using"] = tuple(self.many(self.name, ")"))
            else:
                raise _GIVE_UP
            left = _Table("JOIN", self.S[i], self.E[self.i - 1], children=(left, right), **kw)
        return left

    def table_primary(self) -> Table:
        if self.at("LATERAL") and self.at("(", 1):
            self.i += 1  # LATERAL (query): DuckDB's tree is the subquery's, from its "("
        i = self.i
        if self.at("("):
            q = self.query_in_parens(("SELECT", "VALUES", "WITH"))  # not a parenthesized join
            end = self.E[self.i - 1]
            alias, cols = self.table_alias()
            return _Table("SUBQUERY", self.S[i], end, alias=alias, subquery=q, column_aliases=cols)
        if self.word() in ("LATERAL", "VALUES"):
            raise _GIVE_UP
        parts = [self.name()]
        while self.take("."):
            parts.append(self.name())
        if len(parts) > 3:
            raise _GIVE_UP
        if not self.at("("):
            alias, cols = self.table_alias()
            return _Table("BASE_TABLE", self.S[i], self.E[self.i - 1], tuple(parts), alias, column_aliases=cols)
        # a table function: its call has no position of its own (DuckDB's tree)
        name = parts[0].lower()
        if len(parts) != 1 or self.T[i][0] == '"' or name in _SPECIAL_CALLS:
            raise _GIVE_UP
        args = self.call_args()
        if any(a.cls == "STAR" for a in args) or self.word() in ("WITH", "ORDINALITY"):
            raise _GIVE_UP
        call = self.call_node(name, -1, args)
        alias, cols = self.table_alias()
        return _Table("TABLE_FUNCTION", self.S[i], self.E[self.i - 1], alias=alias, expressions=(call,),
                      column_aliases=cols)

    def table_alias(self) -> tuple[str, tuple[str, ...]]:
        """``[AS] alias [(column, ...)]``."""
        if not (self.take("AS") or self.i < self.n and self.K[self.i] == "i"):
            return "", ()
        alias = self.name()
        return alias, tuple(self.many(self.name, ")")) if self.take("(") else ()

    # -------------------------------------------------------------------- expressions

    def expr(self, min_prec: int = 0) -> Expression:
        """An expression of operators binding at least as tight as ``min_prec`` (precedence
        climbing over :data:`_INFIX`: each infix operator's reader reads its right side)."""
        depth = self.depth
        first = self.i
        left = self.prefix(min_prec)
        U, K, n = self.U, self.K, self.n
        while self.i < n:
            i = self.i
            spec = _INFIX.get(U[i])
            if spec is None or spec[0] < min_prec or K[i] != spec[1]:
                break
            if U[i] == "||":
                left = self.concatenation(left, first)
                continue
            self.i += 1
            left = spec[2](self, left, first, i, spec[3])
            self.depth += 1  # an operator chain nests one level per operator
            if self.depth > MAX_DEPTH:
                raise _GIVE_UP
        self.depth = depth
        return left

    def binary(self, left: Expression, first: int, i: int, right_prec: int) -> Expression:
        # ``+ - * / % || ->>``: DuckDB's function of the operator, at the operator
        right = self.expr(right_prec)
        return self.node("FUNCTION", "FUNCTION", self.S[i], self.S[i], (left, right), name=(self.T[i],))

    def concatenation(self, left: Expression, first: int) -> Expression:
        # ``a || b || c ...``, the reader at the first ``||``: one flat list of operands (each
        # of ``+ - * /`` and tighter), nested left-deep as DuckDB does, one level per operator.
        # With ``longer`` set, a chain of more operands is listed as its operands' character
        # spans and whether each may be regrouped, at no depth: only the list is used then.
        spans = [(first, self.i)]
        while self.i < self.n and self.T[self.i] == "||" and self.K[self.i] == "o":
            op = self.i
            self.i += 1
            right = self.expr(8)
            spans.append((op + 1, self.i))
            left = self.node("FUNCTION", "FUNCTION", self.S[op], self.S[op], (left, right), name=("||",))
            if not self.longer:
                self.depth += 1
                if self.depth > MAX_DEPTH:
                    raise _GIVE_UP
        if self.longer and len(spans) > self.longer:
            self.chains.append(tuple((self.S[a], self.E[b - 1], self.textual(a, b)) for a, b in spans))
        return left

    def textual(self, a: int, b: int) -> bool:
        """Whether tokens ``[a, b)``, an operand of ``||``, are text once translated: nothing in
        them names an array or JSON (``ARRAY[..]``, ``array_agg``, ``::int[]``, subscripts,
        ``::jsonb``, a string holding ``{..}`` or ``[..]``), which ``||`` joins as such."""
        for j in range(a, b):
            k, u = self.K[j], self.U[j]
            if k == "o" and (u == "[" or u == "]") or (k == "k" or k == "i") and (
                    "ARRAY" in u or u == "JSON" or u == "JSONB"):
                return False
            if k == "s":
                try:
                    value = _string_value(self.T[j])
                except _GiveUp:
                    return False
                if value.lstrip()[:1] in ("{", "["):
                    return False
        return True

    def conjunction(self, left: Expression, first: int, i: int, right_prec: int) -> Expression:
        # AND, OR: DuckDB flattens a chain of one kind into one node
        right = self.expr(right_prec)
        typ = "CONJUNCTION_" + self.U[i]
        kids = [*(left.children if left.type == typ else (left,)), *(right.children if right.type == typ else (right,))]
        return self.node("CONJUNCTION", typ, self.S[first], self.E[self.i - 1], kids)

    def comparison(self, left: Expression, first: int, i: int, right_prec: int) -> Expression:
        if self.word() in ("ANY", "SOME", "ALL"):
            # a op ANY|SOME|ALL (query): DuckDB's subquery node (under an unpositioned NOT for
            # ALL); an array operand gives up
            every = self.word() == "ALL"
            self.i += 1
            q = self.query_in_parens(("SELECT", "WITH", "VALUES"))
            s, e = (-1, -1) if every else (self.S[first], self.E[self.i - 1])
            sub = self.node("SUBQUERY", "SUBQUERY", s, e, (left,), subquery=q)
            if every:
                sub = self.node("OPERATOR", "OPERATOR_NOT", self.S[first], self.E[self.i - 1], (sub,))
            return self.predicate_end(sub)
        right = self.expr(right_prec)
        if self.i < self.n and self.T[self.i] in _COMPARE and self.K[self.i] == "o":
            raise _GIVE_UP  # comparisons do not chain
        return self.node("COMPARISON", _COMPARE[self.T[i]], self.S[first], self.E[self.i - 1], (left, right))

    def regex(self, left: Expression, first: int, i: int, right_prec: int) -> Expression:
        # DuckDB's regexp_matches(a, b[, 'i']), under a NOT for !~ and !~*; the right side read
        # as LIKE's is (DuckDB refuses 'a ~ a BETWEEN b AND c')
        op = self.T[i]
        args = (left, self.expr(right_prec), *((_const("STRING", "i"),) if op.endswith("*") else ()))
        e = self.call_node("regexp_matches", i, args)
        if op[0] == "!":
            e = self.node("OPERATOR", "OPERATOR_NOT", left.start, self.E[self.i - 1], (e,))
        return self.predicate_end(e)

    def is_(self, left: Expression, first: int, i: int, right_prec: int) -> Expression:
        # ISNULL, NOTNULL, IS [NOT] NULL at the operator, IS [NOT] DISTINCT FROM at the left side
        w = self.U[i]
        neg = w == "NOTNULL" or w == "IS" and self.take("NOT")
        if w != "IS" or self.take("NULL"):
            e = self.node("OPERATOR", "OPERATOR_IS_NOT_NULL" if neg else "OPERATOR_IS_NULL", self.S[i],
                          self.E[self.i - 1], (left,))
        elif self.take("DISTINCT") and self.need("FROM"):
            right = self.expr(5)
            e = self.node("COMPARISON", "COMPARE_NOT_DISTINCT_FROM" if neg else "COMPARE_DISTINCT_FROM",
                          self.S[first], self.E[self.i - 1], (left, right))
        else:
            raise _GIVE_UP
        return self.predicate_end(e)

    def predicate(self, left: Expression, first: int, i: int, right_prec: int) -> Expression:
        # [NOT] BETWEEN, IN, LIKE, ILIKE; NOT at the left side, above the predicate
        neg = self.U[i] == "NOT"
        if neg:
            i = self.i
            self.i += 1
        w = self.U[i] if self.K[i] == "k" else ""
        if w == "BETWEEN":
            if self.word() in ("SYMMETRIC", "ASYMMETRIC"):
                raise _GIVE_UP
            # bounds of + - * / % and tighter only: DuckDB refuses some others (a BETWEEN b AND c ~ d)
            lo = self.expr(8)
            self.need("AND")
            hi = self.expr(8)
            e = self.node("BETWEEN", "COMPARE_BETWEEN", self.S[i], self.E[self.i - 1], (left, lo, hi))
        elif w == "IN":
            p = self.i
            if self.word(1) in ("SELECT", "WITH"):
                q = self.query_in_parens()
                e = self.node("SUBQUERY", "SUBQUERY", self.S[p], self.E[self.i - 1], (left,), subquery=q)
            else:
                self.need("(")
                items = [left, *self.many(self.expr, ")")]
                if len(items) == 2 and items[1].cls == "SUBQUERY":
                    raise _GIVE_UP  # a IN (EXISTS (...)), a IN ((SELECT ...)): DuckDB reads an IN subquery
                e = self.node("OPERATOR", "COMPARE_IN", self.S[p], self.E[self.i - 1], items)
        elif w in ("LIKE", "ILIKE"):
            pat = self.expr(8)
            if self.at("ESCAPE"):
                raise _GIVE_UP
            return self.predicate_end(self.call_node(_LIKE[w, neg], i, (left, pat)))
        else:
            raise _GIVE_UP
        if neg:
            e = self.node("OPERATOR", "OPERATOR_NOT", left.start, self.E[self.i - 1], (e,))
        return self.predicate_end(e)

    def predicate_end(self, e: Expression) -> Expression:
        # After IS NULL, IN (..), BETWEEN, LIKE, ~, = ANY (..): only what ends the operand
        # (AND, OR, a clause, ",", ")") is read; DuckDB refuses some operators there
        # (a IN (b) + c, a IS NULL BETWEEN b AND c), so all give up.
        i = self.i
        if i < self.n and (self.K[i] == "o" and self.T[i] not in (",", ")", ";")
                           or self.K[i] == "k" and self.U[i] in _PREDICATE_WORDS):
            raise _GIVE_UP
        return e

    def prefix(self, min_prec: int) -> Expression:
        self.depth += 1  # (restored by expr)
        if self.depth > MAX_DEPTH:
            raise _GIVE_UP
        i = self.i
        k, t = self.K[i], self.U[i]
        if k == "k" and t == "NOT":
            if min_prec > 3 or self.at("NOT", 1):
                raise _GIVE_UP
            self.i += 1
            operand = self.expr(3)
            return self.node("OPERATOR", "OPERATOR_NOT", self.S[i], self.E[self.i - 1], (operand,))
        if k != "o" or t not in ("-", "+"):
            return self.primary()
        self.i += 1
        operand = self.expr(10)  # a sign binds tighter than every infix operator, :: tighter still
        lit = operand.literal
        if t == "-" and lit is not None and lit.kind in ("INTEGER", "NUMERIC"):
            text = lit.text[1:] if lit.text.startswith("-") else "-" + lit.text
            return _const(lit.kind, text, self.S[i], self.E[self.i - 1])
        if self.K[i + 1] == "o" and self.T[i + 1] in ("-", "+"):
            raise _GIVE_UP  # "- -a": DuckDB gives the inner sign no position
        return self.call_node(t, i, (operand,))

    def cast_to(self, left: Expression, first: int, i: int, right_prec: int) -> Expression:
        # left::type, at the ::
        typ = self.type_name()
        return self.node("CAST", "OPERATOR_CAST", self.S[i], self.E[self.i - 1], (left, typ))

    def subscript(self, left: Expression, first: int, i: int, right_prec: int) -> Expression:
        # a[i], or a slice a[lo:hi] with either bound left out: DuckDB's empty list_value()
        # at no position (colmz.sql.tree's reading of it); a step (a[1:2:1]) is given up
        index = None if self.at(":") else self.expr()
        if index is not None and self.take("]"):
            return self.node("OPERATOR", "ARRAY_EXTRACT", self.S[i], self.E[self.i - 1], (left, index))
        self.need(":")
        upper = None if self.at("]") else self.expr()
        self.need("]")
        lo, hi = (self.call_node("list_value", -1, ()) if b is None else b for b in (index, upper))
        return self.node("OPERATOR", "ARRAY_SLICE", self.S[i], self.E[self.i - 1], (left, lo, hi))

    def refuse(self, *_) -> Expression:
        raise _GIVE_UP  # (x).f, COLLATE, AT TIME ZONE, a window or filter of what is not a call

    def type_name(self) -> Expression:
        i = self.i
        k, w = self.K[i], self.U[i]
        if k == "i":
            if quoted_name(self.T[i]) is None if w[0] == '"' else not (w[0].isalpha() or w[0] == "_"):
                raise _GIVE_UP
        elif k != "k" or w in ("INTERVAL", "BIT", "SETOF", "NATIONAL", "NCHAR") or _KEYWORDS.get(w) == "reserved":
            raise _GIVE_UP
        self.i += 1
        for more in _TYPE_WORDS.get(w, ()):
            self.take(more)
        if w in ("TIMESTAMP", "TIME") and (self.take("WITH") or self.take("WITHOUT")):
            self.need("TIME", "ZONE")
        if self.at("."):
            raise _GIVE_UP
        mods: list[Expression] = []
        if self.take("("):
            if w not in ("NUMERIC", "DECIMAL", "VARCHAR", "CHAR", "CHARACTER"):
                raise _GIVE_UP
            mods = self.many(self.type_modifier, ")")
        typ = self.node("TYPE", "TYPE", self.S[i], self.E[self.i - 1], mods)
        if self.at("[") and self.at("]", 1):
            self.i += 2
            if self.at("["):
                raise _GIVE_UP
            typ = self.node("TYPE", "TYPE", -1, -1, (typ,))
        if self.word() in ("ARRAY", "WITH", "WITHOUT") or self.at("["):
            raise _GIVE_UP
        return typ

    def type_modifier(self) -> Expression:
        j = self.i
        if self.K[j] != "n" or not self.T[j].isdigit():
            raise _GIVE_UP
        self.i += 1
        return _const("INTEGER", self.T[j], self.S[j], self.E[j])

    def primary(self) -> Expression:
        i = self.i
        k, t, w = self.K[i], self.T[i], self.U[i]
        typed = w in ("DATE", "TIMESTAMP", "INTERVAL") and i + 1 < self.n and self.K[i + 1] == "s"
        if k == "i" and not typed:
            return self.name_ref()
        S, E = self.S, self.E
        if k == "n":
            m = _NUMBER.fullmatch(t)
            if m is None or (i + 1 < self.n and S[i + 1] == E[i] and self.K[i + 1] in "ikn"):
                raise _GIVE_UP
            self.i += 1
            return _const("INTEGER" if m.group(1) else "NUMERIC", t, S[i], E[i])
        if k == "s":
            self.i += 1
            if self.i < self.n and self.K[self.i] == "s":
                raise _GIVE_UP  # continued strings
            return _const("STRING", _string_value(t), S[i], E[i])
        if k == "o":
            if t != "(":
                raise _GIVE_UP
            return self.parenthesized()
        if typed:
            return self.typed_literal(w)
        form = _KEYWORD_FORMS.get(w)
        if form is not None and (form[0] is None or self.at(form[0], 1)):
            return form[1](self)
        if w == "TRUE" or w == "FALSE" or w == "NULL":
            self.i += 1
            return _const("NULL_LITERAL", "", S[i], E[i]) if w == "NULL" else _const("BOOLEAN", w.lower(), S[i], E[i])
        cat = _KEYWORDS.get(w)
        if cat == "unreserved" or cat == "type_function" and self.at("(", 1):
            return self.name_ref()
        raise _GIVE_UP

    def typed_literal(self, w: str) -> Expression:
        """``DATE '...'``, ``TIMESTAMP '...'`` (the constant unpositioned, the type at the
        keyword), ``INTERVAL '...'`` (the constant positioned, the type not) and ``INTERVAL
        '...' <unit>`` (DuckDB's ``to_<unit>s`` of the value, truncated but for seconds)."""
        i = self.i
        S, E = self.S, self.E
        if w == "INTERVAL" and self.T[i + 1][0] in "eE" and "\\" in self.T[i + 1]:
            raise _GIVE_UP  # DuckDB keeps an interval's E'' escapes as written
        value = _string_value(self.T[i + 1])
        self.i += 2
        if w != "INTERVAL":
            return _Expr("CAST", "OPERATOR_CAST", S[i], E[i + 1], (_const("STRING", value), _Expr("TYPE", "TYPE", S[i], E[i])))
        const = _const("STRING", value, S[i + 1], E[i + 1])
        unit = _INTERVAL_UNITS.get(self.word())
        if unit is not None and not self.at("TO", 1):
            # INTERVAL '1' DAY: to_days(CAST(trunc(CAST('1' AS DOUBLE)) AS BIGINT)), the inner
            # nodes at the constant, the call spanning INTERVAL to the unit
            self.i += 1
            a, b = S[i + 1], E[i + 1]
            arg = _Expr("CAST", "OPERATOR_CAST", a, b, (const, _Expr("TYPE", "TYPE", -1, -1)))
            if unit[1]:
                arg = _Expr("FUNCTION", "FUNCTION", a, b, (arg,), name=("trunc",))
                arg = _Expr("CAST", "OPERATOR_CAST", a, b, (arg, _Expr("TYPE", "TYPE", -1, -1)))
            return _Expr("FUNCTION", "FUNCTION", S[i], E[self.i - 1], (arg,), name=(unit[0],))
        if self.i < self.n and (self.K[self.i] in "ik" and self.U[self.i] not in _FOLLOW or self.at("(")):
            raise _GIVE_UP  # another unit, ... TO ...
        return self.node("CAST", "OPERATOR_CAST", S[i], E[i + 1], (const, _Expr("TYPE", "TYPE", -1, -1)))

    def call_args(self) -> list[Expression]:
        self.need("(")
        return [] if self.take(")") else self.many(self.expr, ")")

    def parenthesized(self) -> Expression:
        i = self.i
        if self.word(1) in ("SELECT", "WITH"):
            q = self.query_in_parens()
            return _Expr("SUBQUERY", "SUBQUERY", self.S[i], self.E[self.i - 1], subquery=q)
        if self.at("(", 1) and self.word(2) in ("SELECT", "WITH"):
            raise _GIVE_UP  # ((SELECT ...)) reads otherwise
        items = self.call_args()
        if len(items) > 1:
            return self.call_node("row", i, items)
        if not items or items[0].cls == "STAR":
            raise _GIVE_UP
        return items[0]

    def name_ref(self) -> Expression:
        i = j = self.i
        K, T, n = self.K, self.T, self.n
        # the common case: a column of up to four plain names (a, t.a), followed by no "(",
        # "." or string; anything else is read below
        while K[j] == "i" and ((t := T[j])[0].isalpha() or t[0] == "_") and "&" not in t:
            j += 1
            if j + 1 < n and T[j] == "." and K[j] == "o" and j - i < 7:
                j += 1
            elif j >= n or not (K[j] == "o" and T[j] in ("(", ".") or K[j] == "s"):
                self.i = j
                return _Expr("COLUMN_REF", "COLUMN_REF", self.S[i], self.E[j - 1], (), tuple(T[i:j:2]))
            else:
                break
        quoted = [T[i][0] == '"']
        parts = [self.name(("unreserved", "type_function"))]
        while self.take("."):
            if self.take("*"):
                if len(parts) != 1:
                    raise _GIVE_UP
                return _Expr("STAR", "STAR", self.S[i], self.E[self.i - 1], relation=parts[0])
            quoted.append(self.T[self.i][0] == '"')
            parts.append(self.name())
        if self.at("("):
            if len(parts) > 2 or any(quoted):
                raise _GIVE_UP
            return self.call(i, tuple(p.lower() for p in parts))
        if len(parts) > 4 or (self.i < self.n and self.K[self.i] == "s"):
            raise _GIVE_UP  # typed literal name '...'
        if self.K[i] == "k" and _KEYWORDS.get(self.U[i]) == "type_function":
            raise _GIVE_UP
        return _Expr("COLUMN_REF", "COLUMN_REF", self.S[i], self.E[self.i - 1], name=tuple(parts))

    def call(self, i: int, name: tuple[str, ...]) -> Expression:
        """``name(...)`` with ``self.i`` at its ``(``: DuckDB's children are the ``FILTER``
        condition, the ``ORDER BY`` expressions, then the arguments."""
        if name[-1] in _SPECIAL_CALLS:
            raise _GIVE_UP
        self.i += 1
        distinct = within = False
        args: list[Expression] = []
        orders: tuple[Order, ...] = ()
        if self.at("*") and self.at(")", 1):
            if name != ("count",):
                raise _GIVE_UP
            self.i += 2
            name = ("count_star",)
        elif name == ("count",) and self.at(")"):
            raise _GIVE_UP
        else:
            distinct = self.take("DISTINCT")
            if self.word() in ("ALL", "VARIADIC"):
                raise _GIVE_UP
            if not self.at(")"):
                args = self.many(self.expr)
            if any(a.cls == "STAR" for a in args) or distinct and not args:
                raise _GIVE_UP
            orders = self.order_by()
            self.need(")")
            if self.take("WITHIN"):
                # ordered-set aggregates: DuckDB's name, the one sort key in order_by
                name, want = _ORDERED_SETS.get(name, (None, -1))
                if name is None or want != len(args) or distinct or orders:
                    raise _GIVE_UP
                self.need("GROUP", "(")
                orders = self.order_by()
                self.need(")")
                if len(orders) != 1:
                    raise _GIVE_UP
                within = True
        filt = None
        if self.take("FILTER"):
            self.need("(", "WHERE")
            filt = self.expr()
            self.need(")")
        if self.take("OVER"):
            if within or len(name) != 1:
                raise _GIVE_UP  # DuckDB's window of an ordered-set aggregate keeps other names
            return self.window(i, name[0], args, orders, filt)
        if self.word() in ("FILTER", "WITHIN", "IGNORE", "RESPECT"):
            raise _GIVE_UP
        kids = ([filt] if filt is not None else []) + [o.expression for o in orders] + args
        return self.node("FUNCTION", "FUNCTION", self.S[i], self.E[self.i - 1], kids, name=name, distinct=distinct,
                         filter=filt, order_by=orders)

    def window(self, i: int, name: str, args: list, orders: tuple, filt: Expression | None) -> Expression:
        """``f(...) OVER ([PARTITION BY ...] [ORDER BY ...] [frame])``, ``self.i`` after
        ``OVER``: DuckDB's children are the partitions, the window's order, the frame's
        offsets, the filter, the arguments' order, then the arguments."""
        fn = _WINDOW_NAMES.get(name, name)
        self.need("(")
        first = self.i
        parts = self.many(self.expr) if self.take("PARTITION") and self.need("BY") else []
        window_orders = self.order_by()
        bounds: list[Expression] = []
        frame = ("UNBOUNDED_PRECEDING", "CURRENT_ROW_RANGE", "NO_OTHER")
        if self.word() in ("ROWS", "RANGE", "GROUPS"):
            frame = self.frame(bounds)
        self.need(")")  # a named window gives up here
        if "OVER" in self.U[first:self.i]:
            raise _GIVE_UP  # DuckDB refuses a window function in a window definition, subqueries too
        kids = [*parts, *(o.expression for o in window_orders), *bounds, *([filt] if filt is not None else ()),
                *(o.expression for o in orders), *args]
        return self.node("WINDOW", _WINDOW_TYPES.get(fn, "WINDOW_AGGREGATE"), self.S[i], self.E[self.i - 1], kids,
                         name=(fn,), over=Window(tuple(parts), window_orders, *frame))

    def frame(self, bounds: list) -> tuple[str, str, str]:
        """``{ROWS|RANGE|GROUPS} {bound | BETWEEN bound AND bound} [EXCLUDE ..]``, ``self.i``
        at the mode: DuckDB's start and end (``CURRENT_ROW_<mode>``, ``EXPR_PRECEDING_<mode>``,
        ``EXPR_FOLLOWING_<mode>``, ``UNBOUNDED_PRECEDING``, ``UNBOUNDED_FOLLOWING``; the end
        the current row when one bound is written) and exclusion; offsets appended to
        ``bounds``. The bounds PostgreSQL's grammar refuses give up."""
        mode = self.U[self.i]
        self.i += 1
        between = self.take("BETWEEN")
        start = self.bound(mode, bounds)
        end = self.bound(mode, bounds) if between and self.need("AND") else "CURRENT_ROW_" + mode
        if (start == "UNBOUNDED_FOLLOWING" or end == "UNBOUNDED_PRECEDING"
                or start.startswith("CURRENT_ROW") and end.startswith("EXPR_PRECEDING")
                or start.startswith("EXPR_FOLLOWING") and end.startswith(("CURRENT_ROW", "EXPR_PRECEDING"))):
            raise _GIVE_UP  # "frame start cannot be UNBOUNDED FOLLOWING", ...
        if not self.take("EXCLUDE"):
            return start, end, "NO_OTHER"
        for words, exclude in ((("CURRENT", "ROW"), "CURRENT_ROW"), (("GROUP",), "GROUP"), (("TIES",), "TIES"),
                               (("NO", "OTHERS"), "NO_OTHER")):
            if all(self.at(w, k) for k, w in enumerate(words)):
                self.i += len(words)
                return start, end, exclude
        raise _GIVE_UP

    def bound(self, mode: str, bounds: list) -> str:
        if self.take("UNBOUNDED"):
            return "UNBOUNDED_" + ("PRECEDING" if self.take("PRECEDING") else self.U[self.need("FOLLOWING")])
        if self.at("CURRENT") and self.at("ROW", 1):
            self.i += 2
            return "CURRENT_ROW_" + mode
        bounds.append(self.expr())
        side = self.word()
        if side not in ("PRECEDING", "FOLLOWING"):
            raise _GIVE_UP
        self.i += 1
        return f"EXPR_{side}_{mode}"

    # ---------------------------------------------- keyword forms (:data:`_KEYWORD_FORMS`)

    def case(self) -> Expression:
        i = self.i
        self.i += 1
        operand = None if self.at("WHEN") else self.expr()
        kids: list[Expression] = []
        while self.take("WHEN"):
            w = self.expr()
            if operand is not None:
                w = self.node("COMPARISON", "COMPARE_EQUAL", -1, -1, (operand, w))
            self.need("THEN")
            kids += (w, self.expr())
        if not kids:
            raise _GIVE_UP
        kids.append(self.expr() if self.take("ELSE") else _const("NULL_LITERAL", ""))
        self.need("END")
        return self.node("CASE", "CASE_EXPR", self.S[i], self.E[self.i - 1], kids)

    def cast(self) -> Expression:
        i = self.i
        self.need("CAST", "(")
        operand = self.expr()
        self.need("AS")
        typ = self.type_name()
        self.need(")")
        return self.node("CAST", "OPERATOR_CAST", self.S[i], self.E[self.i - 1], (operand, typ))

    def exists(self) -> Expression:
        i = self.i
        self.i += 1
        q = self.query_in_parens(("SELECT",))
        return _Expr("SUBQUERY", "SUBQUERY", self.S[i], self.E[self.i - 1], subquery=q)

    def greatest(self) -> Expression:
        self.i += 1
        return self.call(self.i - 1, (self.U[self.i - 1].lower(),))

    def extract(self) -> Expression:
        i = self.i
        self.i += 2
        f = self.i
        if self.K[f] not in "ik" or self.T[f][0] == '"' or (self.K[f] == "k" and self.U[f] not in _EXTRACT_UNITS):
            raise _GIVE_UP  # (another keyword, DEC: DuckDB's tree holds it in lower case)
        self.i += 1
        word = _EXTRACT_KEYWORDS.get(self.U[f], self.U[f]) if self.K[f] == "k" else self.T[f]
        field = _const("STRING", word, self.S[f], self.E[f])
        self.need("FROM")
        operand = self.expr()
        self.need(")")
        return self.call_node("date_part", i, (field, operand))

    def substring(self) -> Expression:
        # SUBSTRING(a FROM b [FOR c]) and SUBSTRING(a FOR c) are substring(a, b, c), the start
        # 1 unpositioned when only FOR is written; with commas, a plain call
        i = self.i
        self.i += 2
        args = [self.expr()]
        if self.take("FROM"):
            args.append(self.expr())
            if self.take("FOR"):
                args.append(self.expr())
        elif self.take("FOR"):
            args += [_const("INTEGER", "1"), self.expr()]
        else:
            while self.take(","):
                args.append(self.expr())
        self.need(")")
        return self.call_node("substring", i, args)

    def array(self) -> Expression:
        i = self.i
        self.i += 2
        items = [] if self.at("]") else self.many(self.array_item)
        self.need("]")
        return self.node("OPERATOR", "ARRAY_CONSTRUCTOR", self.S[i], self.E[self.i - 1], items)

    def array_item(self) -> Expression:
        if self.at("["):
            raise _GIVE_UP  # ARRAY[[..]]: inner lists read otherwise
        return self.expr()

    def coalesce(self) -> Expression:
        i = self.i
        self.i += 1
        args = self.call_args()
        if self.U[i] == "NULLIF":
            if len(args) != 2:
                raise _GIVE_UP
            return self.call_node("nullif", i, args)
        if not args:
            raise _GIVE_UP
        return self.node("OPERATOR", "OPERATOR_COALESCE", self.S[i], self.E[self.i - 1], args)


#: Infix and postfix operators by token, PostgreSQL's precedence (``gram.y``; higher binds
#: tighter: OR 1, AND 2, prefix NOT 3, IS 4, comparisons 5, BETWEEN/IN/LIKE and regular
#: expression matches 6, other operators 7, ``+ -`` 8, ``* / %`` 9, prefix ``-``/``+`` 10,
#: ``::`` and subscripts 11, and the postfix forms given up on): (precedence, the token's
#: kind, its reader, the least precedence of operators in its right side).
_INFIX = {
    **dict.fromkeys(_COMPARE, (5, "o", _Reader.comparison, 6)),
    **dict.fromkeys(("~", "~*", "!~", "!~*"), (6, "o", _Reader.regex, 8)),
    **dict.fromkeys(("||", "->>"), (7, "o", _Reader.binary, 8)),
    **dict.fromkeys(("+", "-"), (8, "o", _Reader.binary, 9)),
    **dict.fromkeys(("*", "/", "%"), (9, "o", _Reader.binary, 10)),
    "OR": (1, "k", _Reader.conjunction, 2),
    "AND": (2, "k", _Reader.conjunction, 3),
    **dict.fromkeys(("IS", "ISNULL", "NOTNULL"), (4, "k", _Reader.is_, 5)),
    **dict.fromkeys(("BETWEEN", "IN", "LIKE", "ILIKE", "NOT"), (6, "k", _Reader.predicate, 8)),
    "::": (11, "o", _Reader.cast_to, 0),
    "[": (11, "o", _Reader.subscript, 0),
    ".": (11, "o", _Reader.refuse, 0),
    **dict.fromkeys(("COLLATE", "AT", "OVER", "FILTER", "WITHIN"), (11, "k", _Reader.refuse, 0)),
}
#: Expressions led by a keyword: the token that must follow it (else it is a name, if
#: anything), and the reader, at the keyword.
_KEYWORD_FORMS = {"CASE": (None, _Reader.case), "CAST": (None, _Reader.cast), "EXISTS": (None, _Reader.exists),
                  "GREATEST": ("(", _Reader.greatest), "LEAST": ("(", _Reader.greatest),
                  "EXTRACT": ("(", _Reader.extract), "SUBSTRING": ("(", _Reader.substring),
                  "ARRAY": ("[", _Reader.array), "COALESCE": (None, _Reader.coalesce),
                  "NULLIF": (None, _Reader.coalesce)}
#: Ordered-set aggregates ``f(args) WITHIN GROUP (ORDER BY key)``: DuckDB's function name and
#: the number of direct arguments it takes (any other function is refused by DuckDB).
_ORDERED_SETS = {("percentile_cont",): (("quantile_cont",), 1), ("percentile_disc",): (("quantile_disc",), 1),
                 ("mode",): (("mode",), 0)}
#: The most grouping sets read here (more go to DuckDB).
_MAX_SETS = 256
#: DuckDB's window expression types by function (any other function: ``WINDOW_AGGREGATE``).
_WINDOW_TYPES = {"row_number": "WINDOW_ROW_NUMBER", "rank": "WINDOW_RANK", "dense_rank": "WINDOW_RANK_DENSE",
                 "percent_rank": "WINDOW_PERCENT_RANK", "cume_dist": "WINDOW_CUME_DIST", "ntile": "WINDOW_NTILE",
                 "lag": "WINDOW_LAG", "lead": "WINDOW_LEAD", "first_value": "WINDOW_FIRST_VALUE",
                 "last_value": "WINDOW_LAST_VALUE", "nth_value": "WINDOW_NTH_VALUE", "fill": "WINDOW_FILL"}
#: Functions DuckDB renames in a window.
_WINDOW_NAMES = {"count_star": "count", "first": "first_value", "last": "last_value"}
#: ``INTERVAL '...' <unit>``: DuckDB's function of each unit keyword, and whether the value
#: is truncated to an integer first (all but seconds and milliseconds).
_INTERVAL_UNITS = {
    **{u: (f"to_{p}", True) for p, us in (
        ("years", ("YEAR", "YEARS")), ("months", ("MONTH", "MONTHS")), ("days", ("DAY", "DAYS")),
        ("hours", ("HOUR", "HOURS")), ("minutes", ("MINUTE", "MINUTES")),
        ("microseconds", ("MICROSECOND", "MICROSECONDS")), ("weeks", ("WEEK", "WEEKS")),
        ("decades", ("DECADE", "DECADES")), ("centuries", ("CENTURY", "CENTURIES")),
        ("millennia", ("MILLENNIUM", "MILLENNIA")), ("quarters", ("QUARTER", "QUARTERS"))) for u in us},
    "SECOND": ("to_seconds", False), "SECONDS": ("to_seconds", False),
    "MILLISECOND": ("to_milliseconds", False), "MILLISECONDS": ("to_milliseconds", False),
}
#: Words after ``INTERVAL '...'`` that end it (anything else but a unit gives up).
_FOLLOW = frozenset({"AS", "FROM", "WHERE", "AND", "OR", "THEN", "ELSE", "END", "WHEN", "GROUP", "ORDER",
                     "HAVING", "LIMIT", "OFFSET", "UNION", "EXCEPT", "INTERSECT", "IS", "NOT", "IN",
                     "BETWEEN", "LIKE", "ILIKE", "ON", "JOIN", "ASC", "DESC"})
#: Words starting a predicate or postfix operator (not read after another predicate).
_PREDICATE_WORDS = frozenset({"IS", "ISNULL", "NOTNULL", "BETWEEN", "IN", "LIKE", "ILIKE", "NOT", "SIMILAR",
                              "ESCAPE", "GLOB", "COLLATE", "AT"})
#: Function names DuckDB's transformer rewrites into other nodes.
_SPECIAL_CALLS = frozenset({"row", "grouping", "columns", "struct_pack", "iif", "try", "coalesce", "nullif",
                            "ifnull", "exists", "cast", "try_cast", "extract", "array", "lambda", "count_star",
                            "position", "substring", "trim", "overlay", "current_date", "current_time",
                            "current_timestamp", "localtime", "localtimestamp", "grouping_id", "unpack"})


def read_query(text: str) -> tuple[Query, ...] | None:
    """DuckDB's tree of ``text`` (as :func:`colmz.sql.tree.read_tree` gives it) read by
    colmz alone, or ``None`` when the text holds anything this module does not know.

    >>> from colmz.sql.tree import read_tree
    >>> read_query("SELECT a + 1 AS b FROM t WHERE a IS NOT NULL") == read_tree("SELECT a + 1 AS b FROM t WHERE a IS NOT NULL")
    True
    >>> read_query("SELECT a FROM t QUALIFY a > 1") is None
    True
    """
    try:
        return _Reader(text).statements()
    except (_GiveUp, IndexError, RecursionError):
        return None


def concat_chains(text: str, longer: int) -> list[tuple[tuple[int, int, bool], ...]] | None:
    """The chains of ``||`` in ``text`` (queries, or one expression) of more than ``longer``
    operands, in the order their reading ends (a chain inside an operand of another before
    it): each one tuple of its operands' ``(start, end, textual)``, character spans in
    ``text`` and whether the operand is text once translated (nothing in it names an array
    or JSON). ``None`` when this module does not know the text (as :func:`read_query`). A
    chain is its operators at one precedence, so the text around it binds more loosely: its
    span may be parenthesized.

    >>> concat_chains("SELECT a || b || f(c || d || e), x FROM t", 2)
    [((19, 20, True), (24, 25, True), (29, 30, True)), ((7, 8, True), (12, 13, True), (17, 31, True))]
    >>> concat_chains("SELECT a + 1 || ARRAY[2] || 'c' AS x", 2)
    [((7, 12, True), (16, 24, False), (28, 31, True))]
    >>> concat_chains("a || b || c = d", 2)
    [((0, 1, True), (5, 6, True), (10, 11, True))]
    """
    if longer < 1:
        raise ValueError(f"longer must be at least 1, not {longer!r}")
    for whole in (_Reader.statements, _Reader.whole_expression):  # a query, else an expression
        try:
            reader = _Reader(text, longer)
            whole(reader)
        except (_GiveUp, IndexError, RecursionError):
            continue
        return reader.chains
    return None
