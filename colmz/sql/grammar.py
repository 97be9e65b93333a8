"""colmz's own reading of common queries: DuckDB's tokens to DuckDB's tree, or nothing.

:func:`colmz.sql.tree.parse_tree` asks DuckDB for a query's parse tree
(``json_serialize_sql``), which costs several hundred microseconds a text. Most queries colmz
meets use a small part of PostgreSQL's ``SELECT`` grammar; :func:`read_query` parses that
part itself, over the tokens of DuckDB's own lexer (``duckdb.tokenize``, a few
microseconds), and builds exactly the nodes :class:`colmz.sql.tree` reads from DuckDB's
JSON: same classes and types, names, children in DuckDB's order, spans, aliases, literals.

Invariant: **equal to DuckDB's tree or give up.** For any token sequence this module does not
know with certainty it returns ``None`` and the caller asks DuckDB, as before. What it knows
is a recursive descent over the grammar below, with PostgreSQL's operator precedence as a
table (:data:`_BINARY`), a table of the keywords DuckDB's parser reserves
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
  subscripts, ``ARRAY[..]``, function calls (``DISTINCT`` and ``ORDER BY`` arguments,
  ``FILTER``, ``count(*)``, ``OVER ([PARTITION BY ..] [ORDER BY ..] [frame])``,
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
``__init__``'s cost -- building nodes is most of this module's time.

A text nesting deeper than :data:`MAX_DEPTH` (parentheses, operands, operator chains) is
given up: DuckDB's path then refuses it as it always has
(:data:`colmz.sql.tokens.MAX_NESTING`, the tree reader's own depth limit).
"""

from __future__ import annotations

import bisect
import re

from colmz.sql.tree import (
    Expression,
    Literal,
    Modifier,
    Order,
    Query,
    Table,
    Window,
    char_offsets,
    fast_constructor,
)

__all__ = ["MAX_DEPTH", "duckdb_tokens", "quoted_name", "read_query"]

#: Deepest nesting read here (recursion plus chained operators); deeper texts go to DuckDB.
MAX_DEPTH = 48


_Expr = fast_constructor(Expression)
_Query = fast_constructor(Query)
_Table = fast_constructor(Table)


class _GiveUp(Exception):
    pass


_GIVE_UP = _GiveUp()

#: DuckDB's keywords by category (``duckdb_keywords()``), loaded once.
_KEYWORDS: dict[str, str] = {}
_KINDS: dict = {}

#: Binary operators: token -> (precedence, class, type, name). Higher binds tighter
#: (PostgreSQL's ``gram.y``: comparisons 5, ``Op`` 7, ``+ -`` 8, ``* / %`` 9).
_BINARY = {
    "=": (5, "COMPARISON", "COMPARE_EQUAL", ""),
    "<>": (5, "COMPARISON", "COMPARE_NOTEQUAL", ""),
    "!=": (5, "COMPARISON", "COMPARE_NOTEQUAL", ""),
    "<": (5, "COMPARISON", "COMPARE_LESSTHAN", ""),
    ">": (5, "COMPARISON", "COMPARE_GREATERTHAN", ""),
    "<=": (5, "COMPARISON", "COMPARE_LESSTHANOREQUALTO", ""),
    ">=": (5, "COMPARISON", "COMPARE_GREATERTHANOREQUALTO", ""),
    "||": (7, "FUNCTION", "FUNCTION", "||"),
    "~": (6, "REGEX", "", ""),
    "~*": (6, "REGEX", "i", ""),
    "!~": (6, "REGEX", "", "NOT"),
    "!~*": (6, "REGEX", "i", "NOT"),
    "->>": (7, "FUNCTION", "FUNCTION", "->>"),
    "+": (8, "FUNCTION", "FUNCTION", "+"),
    "-": (8, "FUNCTION", "FUNCTION", "-"),
    "*": (9, "FUNCTION", "FUNCTION", "*"),
    "/": (9, "FUNCTION", "FUNCTION", "/"),
    "%": (9, "FUNCTION", "FUNCTION", "%"),
}
#: ``[NOT] LIKE``/``ILIKE``: DuckDB's function names.
_LIKE = {("LIKE", False): "~~", ("LIKE", True): "!~~", ("ILIKE", False): "~~*", ("ILIKE", True): "!~~*"}
#: Typed literals ``DATE '...'`` (the constant unpositioned, the type at the keyword) and
#: ``INTERVAL '...'`` (the constant positioned, the type not).
_TYPED = frozenset({"DATE", "TIMESTAMP"})
#: Words continuing a type name.
_TYPE_WORDS = {"DOUBLE": ("PRECISION",), "CHARACTER": ("VARYING",), "CHAR": ("VARYING",)}
#: Words ending an expression list item or clause (never an alias without ``AS``).
_JOIN_KINDS = {"JOIN": "INNER", "INNER": "INNER", "LEFT": "LEFT", "RIGHT": "RIGHT", "FULL": "FULL"}
_NUMBER = re.compile(r"(\d+(?:_\d+)*)|(\d+(?:_\d+)*\.(?:\d+(?:_\d+)*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?"
                     r"|\d+(?:_\d+)*[eE][+-]?\d+)")
_E_ESCAPE = re.compile(r"\\(?:x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.S)
_E_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_PLAIN = re.compile(r"'(?:[^']|'')*'")
_ESCAPED = re.compile(r"'(?:[^'\\]|''|\\.)*'", re.S)
_QUOTED = re.compile(r'"(?:[^"]|"")+"')
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")
#: PostgreSQL's (and DuckDB's) whitespace, stripped from the end of each token's text.
_SPACE = " \t\n\r\f\v"


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


def _e_unescape(body: str) -> str:
    def one(m):
        s = m.group(0)[1:]
        c = s[0]
        if c in _E_SIMPLE:
            return _E_SIMPLE[c]
        if c == "x" and len(s) > 1:
            v = int(s[1:], 16)
            if v == 0 or v > 0x7F:
                raise _GIVE_UP
            return chr(v)
        if c in "\\'":
            return c
        raise _GIVE_UP  # another escape: DuckDB's reading is not certain here

    if "\\" not in body:
        return body.replace("''", "'")
    # '' inside E'' is a quote too; split on backslash escapes first
    out = []
    pos = 0
    for m in _E_ESCAPE.finditer(body):
        out.append(body[pos:m.start()].replace("''", "'"))
        out.append(one(m))
        pos = m.end()
    out.append(body[pos:].replace("''", "'"))
    return "".join(out)


def _string_value(t: str) -> str:
    c = t[0]
    if c == "'":
        if _PLAIN.fullmatch(t) is None:
            raise _GIVE_UP  # unterminated
        return t[1:-1].replace("''", "'")
    if c in "eE" and t[1] == "'":
        if _ESCAPED.fullmatch(t, 1) is None:
            raise _GIVE_UP
        v = _e_unescape(t[2:-1])
        if not v.isprintable() and any(ord(ch) < 32 and ch not in "\b\f\n\r\t" for ch in v):
            raise _GIVE_UP
        return v
    if c == "$":
        m = _DOLLAR.match(t)
        tag = m.group(0) if m is not None else ""
        if not tag or not t.endswith(tag) or len(t) < 2 * len(tag) or tag in t[len(tag):-len(tag)]:
            raise _GIVE_UP
        return t[len(m.group(0)):-len(m.group(0))]
    raise _GIVE_UP  # X'..', B'..', U&'..', N'..'


#: The last text lexed here and DuckDB's tokens of it (:func:`duckdb_tokens`): one tuple,
#: replaced whole, so a thread reads a text with its own tokens.
_LAST_LEXED: tuple = (None, None)


def duckdb_tokens(text: str) -> list:
    """``duckdb.tokenize(text)``: ``(byte offset, token type)`` pairs; the last text
    :func:`read_query` lexed is not lexed again (the tree module's check of one
    expression reads the tokens of the text just parsed).

    >>> [at for at, _ in duckdb_tokens("SELECT (a)")]
    [0, 7, 8, 9]
    """
    last = _LAST_LEXED
    if last[0] == text:
        return last[1]
    from colmz.sql.run import require_duckdb

    return require_duckdb().tokenize(text)


def quoted_name(token: str) -> str | None:
    """The name a quoted identifier token names, as this reader reads it, else ``None``.

    >>> quoted_name('"a""b"'), quoted_name('"')
    ('a"b', None)
    """
    if _QUOTED.fullmatch(token) is None:
        return None
    return token[1:-1].replace('""', '"')


class _Reader:
    __slots__ = ("text", "K", "S", "E", "T", "U", "n", "i", "match", "after_open", "depth")

    def __init__(self, text: str) -> None:
        if not _KINDS:
            _load()
        try:
            raw = _KINDS["tokenize"](text)
        except Exception:  # noqa: BLE001 - what DuckDB's lexer refuses, DuckDB's parser reports
            raise _GIVE_UP from None
        global _LAST_LEXED
        _LAST_LEXED = (text, raw)
        if not raw:
            raise _GIVE_UP
        kinds = _KINDS
        try:
            K = [kinds[id(kind)] for _, kind in raw]
        except KeyError:
            raise _GIVE_UP from None
        chars = char_offsets(text)
        S = [at for at, _ in raw] if chars is None else [chars[at] for at, _ in raw]
        # each token's text runs to the next token's start, less the whitespace
        T = [text[a:b].rstrip(_SPACE) for a, b in zip(S, [*S[1:], len(text)])]
        if "c" in K:
            keep = []
            for j, k in enumerate(K):
                if k != "c":
                    keep.append(j)
                    continue
                # a comment: colmz's tokenizer must read the same parentheses around it
                tok = T[j]
                if "(" in tok or ")" in tok or "'" in tok or '"' in tok or "$" in tok or tok.count("/*") > 1:
                    raise _GIVE_UP
            K = [K[j] for j in keep]
            S = [S[j] for j in keep]
            T = [T[j] for j in keep]
        if "" in T:
            raise _GIVE_UP
        E = [a + len(t) for a, t in zip(S, T)]
        U = [t.upper() if k == "k" or k == "i" else t for k, t in zip(K, T)]
        n = len(K)
        match: dict[int, int] = {}  # each "(" token's ")": the tree module widens spans by them
        after_open: dict[int, int] = {}  # a token's start -> the "(" token just before it
        stack: list[int] = []
        # only operator tokens read "(" or ")" (strings and quoted names keep their quotes)
        for j in [j for j, t in enumerate(T) if t == "(" or t == ")"]:
            if T[j] == "(":
                stack.append(j)
                if j + 1 < n:
                    after_open[S[j + 1]] = j
            elif stack:
                match[stack.pop()] = j
        self.text = text
        self.K, self.S, self.E, self.T, self.U = K, S, E, T, U
        self.n = n
        self.i = 0
        self.depth = 0
        self.match = match
        self.after_open = after_open

    # -------------------------------------------------------------------- tokens

    def kw(self, word: str) -> bool:
        """The next token is the keyword ``word``: consume it."""
        i = self.i
        if i < self.n and self.U[i] == word and self.K[i] == "k":
            self.i = i + 1
            return True
        return False

    def is_kw(self, word: str, off: int = 0) -> bool:
        j = self.i + off
        return j < self.n and self.U[j] == word and self.K[j] == "k"

    def op(self, sym: str) -> bool:
        i = self.i
        if i < self.n and self.T[i] == sym and self.K[i] == "o":
            self.i = i + 1
            return True
        return False

    def is_op(self, sym: str, off: int = 0) -> bool:
        j = self.i + off
        return j < self.n and self.T[j] == sym and self.K[j] == "o"

    def expect_op(self, sym: str) -> int:
        i = self.i
        if i < self.n and self.T[i] == sym and self.K[i] == "o":
            self.i = i + 1
            return i
        raise _GIVE_UP

    def expect_kw(self, word: str) -> int:
        i = self.i
        if i < self.n and self.U[i] == word and self.K[i] == "k":
            self.i = i + 1
            return i
        raise _GIVE_UP

    def name_token(self, kinds=("unreserved",)) -> str:
        """An identifier (or a keyword of ``kinds``) as DuckDB names it; consumed."""
        i = self.i
        if i >= self.n:
            raise _GIVE_UP
        k, t = self.K[i], self.T[i]
        if k == "i":
            if t[0] == '"':
                if _QUOTED.fullmatch(t) is None:
                    raise _GIVE_UP
                t = t[1:-1].replace('""', '"')
            elif not (t[0].isalpha() or t[0] == "_") or "&" in t:
                raise _GIVE_UP
        elif k != "k" or _KEYWORDS.get(self.U[i]) not in kinds:
            raise _GIVE_UP
        self.i = i + 1
        return t

    # -------------------------------------------------------------------- spans

    def around(self, start: int, end: int) -> tuple[int, int]:
        # colmz.sql.tree's reader: a child's span widened by the parentheses around it (the
        # token before ``start`` a "(" whose ")" is the first token at or after ``end``)
        S, match, after_open = self.S, self.match, self.after_open
        while True:
            p = after_open.get(start)
            if p is None:
                return start, end
            j = match.get(p)
            if j is None or S[j] < end or (j > 0 and S[j - 1] >= end):
                return start, end
            start, end = S[p], self.E[j]

    def node(self, cls: str, typ: str, s: int, e: int, children=(), **kw) -> Expression:
        start, end = s, e
        for c in children:
            if c.start >= 0:
                if s < 0 or not (c.start <= s and e <= c.end):
                    cs, ce = self.around(c.start, c.end)
                else:
                    cs, ce = c.start, c.end
                if start < 0 or cs < start:
                    start = cs
                if ce > end:
                    end = ce
        return _Expr(cls, typ, start, end, tuple(children), **kw)

    # -------------------------------------------------------------------- statements

    def statements(self) -> tuple[Query, ...]:
        out = []
        while self.i < self.n:
            out.append(self.select_stmt())
            if self.i < self.n:
                self.expect_op(";")
        if not out:
            raise _GIVE_UP
        return tuple(out)

    def select_stmt(self) -> Query:
        ctes: tuple = ()
        if self.kw("WITH"):
            recursive = self.kw("RECURSIVE")
            items = []
            while True:
                name = self.name_token()
                if self.op("("):  # column names: not part of the tree
                    while True:
                        self.name_token()
                        if not self.op(","):
                            break
                    self.expect_op(")")
                self.expect_kw("AS")
                self.expect_op("(")
                q = self.select_stmt()
                self.expect_op(")")
                if recursive:
                    # DuckDB's recursive CTE: the two branches of a UNION [ALL]
                    if q.type != "SET_OPERATION_NODE" or q.setop != "UNION" or len(q.children) != 2 or q.modifiers \
                            or q.ctes:
                        raise _GIVE_UP
                    q = _Query("RECURSIVE_CTE_NODE", children=q.children)
                items.append((name, q))
                if not self.op(","):
                    break
            ctes = tuple(items)
        q = self.set_expr()
        modifiers = list(q.modifiers)
        if self.is_kw("ORDER"):
            self.i += 1
            self.expect_kw("BY")
            modifiers.append(self.order_by())
        limit = offset = None
        for _ in range(2):
            if limit is None and self.kw("LIMIT"):
                if self.is_kw("ALL"):
                    raise _GIVE_UP
                limit = self.expr()
            elif offset is None and self.kw("OFFSET"):
                offset = self.expr()
                if self.is_kw("ROW") or self.is_kw("ROWS"):
                    raise _GIVE_UP
        if limit is not None or offset is not None:
            exprs = tuple(e for e in (limit, offset) if e is not None)
            modifiers.append(Modifier("LIMIT_MODIFIER", exprs, (), limit, offset))
        if len(modifiers) != len(q.modifiers) or ctes:
            q = _Query(q.type, q.items, q.from_, q.where, q.group_by, q.having, q.qualify, tuple(modifiers), ctes,
                      q.children, q.setop, q.setop_all, q.sampled, q.aggregate_handling, q.grouping_sets)
        return q

    def order_by(self) -> Modifier:
        orders = []
        while True:
            e = self.expr()
            direction = "ORDER_DEFAULT"
            if self.kw("ASC"):
                direction = "ASCENDING"
            elif self.kw("DESC"):
                direction = "DESCENDING"
            nulls = "ORDER_DEFAULT"
            if self.kw("NULLS"):
                if self.kw("FIRST"):
                    nulls = "NULLS FIRST"
                elif self.kw("LAST"):
                    nulls = "NULLS LAST"
                else:
                    raise _GIVE_UP
            orders.append(Order(e, direction, nulls))
            if not self.op(","):
                break
        return Modifier("ORDER_MODIFIER", tuple(o.expression for o in orders), tuple(orders))

    def set_expr(self) -> Query:
        left = self.intersect_expr()
        while self.is_kw("UNION") or self.is_kw("EXCEPT"):
            kind = self.U[self.i]
            self.i += 1
            setop_all = self.kw("ALL")
            if self.is_kw("DISTINCT") or self.is_kw("BY"):
                raise _GIVE_UP
            right = self.intersect_expr()
            left = _setop(left, right, kind, setop_all)
        return left

    def intersect_expr(self) -> Query:
        left = self.select_core()
        while self.kw("INTERSECT"):
            setop_all = self.kw("ALL")
            if self.is_kw("DISTINCT"):
                raise _GIVE_UP
            right = self.select_core()
            left = _setop(left, right, "INTERSECT", setop_all)
        return left

    def select_core(self) -> Query:
        if self.kw("VALUES"):
            return self.values()
        self.expect_kw("SELECT")
        modifiers = []
        if self.kw("DISTINCT"):
            targets: list[Expression] = []
            if self.kw("ON"):
                self.expect_op("(")
                while True:
                    targets.append(self.expr())
                    if not self.op(","):
                        break
                self.expect_op(")")
            modifiers.append(Modifier("DISTINCT_MODIFIER", tuple(targets)))
        elif self.is_kw("ALL"):
            raise _GIVE_UP
        items = []
        while True:
            items.append(self.select_item())
            if not self.op(","):
                break
        from_ = self.from_clause() if self.is_kw("FROM") else None
        where = self.expr() if self.kw("WHERE") else None
        group: tuple = ()
        sets: tuple = ()
        if self.is_kw("GROUP"):
            self.i += 1
            self.expect_kw("BY")
            if self.is_kw("ALL"):
                raise _GIVE_UP
            group, sets = self.group_by()
        having = self.expr() if self.kw("HAVING") else None
        if self.i < self.n and self.K[self.i] == "k" and self.U[self.i] in ("WINDOW", "QUALIFY", "USING", "TABLESAMPLE"):
            raise _GIVE_UP
        return _Query("SELECT_NODE", tuple(items), from_, where, group, having, None, tuple(modifiers),
                     grouping_sets=sets)

    def group_by(self) -> tuple[tuple[Expression, ...], tuple[tuple[int, ...], ...]]:
        """``GROUP BY`` items, ``self.i`` after ``BY``: DuckDB's group expressions (equal ones
        merged, the first kept) and grouping sets (positions among them, each sorted): the
        cross product of the items' sets, an item being an expression, ``ROLLUP (..)``,
        ``CUBE (..)`` or ``GROUPING SETS (..)``."""
        exprs: list[Expression] = []  # as written, before merging
        items = []
        while True:
            if self.is_op("("):  # (a, b) groups; () the empty set
                raise _GIVE_UP
            items.append(self.grouping_item(exprs, top=True))
            if not self.op(","):
                break
        # DuckDB merges equal group expressions, also written otherwise (a and A, a::int and
        # CAST(a AS int)): expressions of one loose key, which equal ones share, are merged
        # below only when they are the same column written the same way, else given up
        loose: dict[tuple, Expression] = {}
        for e in exprs:
            key = self.loose_key(e)
            other = loose.setdefault(key, e)
            if other is not e and not (e.cls == "COLUMN_REF" and other.cls == "COLUMN_REF"
                                       and self.text[e.start:e.end] == self.text[other.start:other.end]):
                raise _GIVE_UP
        if all(kind == "expr" for kind, _ in items):
            if len(loose) < len(exprs):
                raise _GIVE_UP
            return tuple(exprs), (tuple(range(len(exprs))),)
        # with grouping sets, only column references: which of them DuckDB merges is then
        # certain (the same name written the same way), anything else gives up
        index: list[int] = []
        group: list[Expression] = []
        known: dict[tuple, tuple[str, int]] = {}
        for e in exprs:
            if e.cls != "COLUMN_REF":
                raise _GIVE_UP
            key = tuple(p.lower() for p in e.name)
            text = self.text[e.start:e.end]
            got = known.get(key)
            if got is None:
                known[key] = (text, len(group))
                index.append(len(group))
                group.append(e)
            elif got[0] != text:
                raise _GIVE_UP  # "A" beside a, t.a spaced otherwise: not certain
            else:
                index.append(got[1])
        sets: list[frozenset] = [frozenset()]
        for item in items:
            mine = self.grouping_sets(item, index)
            sets = [a | b for a in sets for b in mine]
            if len(sets) > _MAX_SETS:
                raise _GIVE_UP
        return tuple(group), tuple(tuple(sorted(g)) for g in sets)

    def loose_key(self, e: Expression) -> tuple:
        # The names, numbers and strings of ``e``'s tokens, sorted (names unquoted, upper
        # case; numbers by value, 1 as 1.0 and 01): expressions DuckDB holds equal have one key
        lo = bisect.bisect_left(self.S, e.start)
        hi = bisect.bisect_left(self.S, e.end)
        out = []
        for j in range(lo, hi):
            k = self.K[j]
            if k == "i":
                out.append(self.U[j].strip('"'))
            elif k == "n":
                try:
                    out.append(repr(float(self.T[j].replace("_", ""))))
                except ValueError:
                    out.append("0")
            elif k == "s":
                out.append(self.T[j])
        return tuple(sorted(out))

    def grouping_item(self, exprs: list, top: bool = False) -> tuple:
        # One item of GROUP BY or of GROUPING SETS (...): ("expr", position), ("set", [positions])
        # for (a, b) and (), ("rollup"|"cube", [[positions], ...]), ("sets", [items]).
        w = self.U[self.i] if self.i < self.n and self.K[self.i] == "k" else ""
        if (w == "ROLLUP" or w == "CUBE") and self.is_op("(", 1):
            self.i += 2
            units = []
            while True:
                if self.is_op("("):
                    unit = self.grouping_list(exprs)
                    if not unit:
                        raise _GIVE_UP  # () in ROLLUP/CUBE
                else:
                    exprs.append(self.expr())
                    unit = [len(exprs) - 1]
                units.append(unit)
                if not self.op(","):
                    break
            self.expect_op(")")
            if w == "CUBE" and len(units) > 8:
                raise _GIVE_UP
            return w.lower(), units
        if w == "GROUPING" and self.is_kw("SETS", 1):
            self.i += 2
            self.expect_op("(")
            inner = []
            while True:
                inner.append(self.grouping_item(exprs))
                if not self.op(","):
                    break
            self.expect_op(")")
            return "sets", inner
        if not top and self.is_op("("):
            return "set", self.grouping_list(exprs)
        exprs.append(self.expr())
        return "expr", len(exprs) - 1

    def grouping_list(self, exprs: list) -> list[int]:
        # ``(a, b)`` or ``()`` as one grouping set, ``self.i`` at ``(``; ``(a) + 1`` gives up
        j = self.match.get(self.i)
        if j is None or j + 1 >= self.n or self.T[j + 1] not in (",", ")"):
            raise _GIVE_UP
        self.i += 1
        out = []
        if not self.op(")"):
            while True:
                exprs.append(self.expr())
                out.append(len(exprs) - 1)
                if not self.op(","):
                    break
            self.expect_op(")")
        return out

    def grouping_sets(self, item: tuple, index: list[int]) -> list[frozenset]:
        # DuckDB's sets of one item (transform_groupby.cpp): ROLLUP's prefixes, CUBE's subsets
        # depth first, GROUPING SETS' items' sets one after another
        kind, body = item
        if kind == "expr":
            return [frozenset((index[body],))]
        if kind == "set":
            return [frozenset(index[k] for k in body)]
        if kind == "sets":
            out = []
            for sub in body:
                out += self.grouping_sets(sub, index)
            return out
        units = [frozenset(index[k] for k in u) for u in body]
        if kind == "rollup":
            out = [frozenset()]
            for u in units:
                out.append(out[-1] | u)
            return out
        out = []

        def cube(cur: frozenset, start: int) -> None:
            out.append(cur)
            for k in range(start, len(units)):
                cube(cur | units[k], k + 1)

        cube(frozenset(), 0)
        return out

    def values(self) -> Query:
        """``VALUES (..), (..)``: DuckDB's ``SELECT * FROM`` an expression list."""
        rows = []
        while True:
            rows.append(tuple(self.call_args()))
            if not rows[-1] or len(rows[-1]) != len(rows[0]):
                raise _GIVE_UP  # DuckDB refuses rows of different lengths
            if not self.op(","):
                break
        rows = tuple(rows)
        table = _Table("EXPRESSION_LIST", -1, -1, alias="valueslist", expressions=tuple(e for r in rows for e in r),
                      rows=rows)
        return _Query("SELECT_NODE", (_Expr("STAR", "STAR", -1, -1),), table)

    def select_item(self) -> Expression:
        i = self.i
        if self.is_op("*"):
            self.i += 1
            if self.i < self.n and self.K[self.i] == "k" and self.U[self.i] in ("EXCLUDE", "REPLACE", "RENAME"):
                raise _GIVE_UP
            return _Expr("STAR", "STAR", self.S[i], self.E[i])
        e = self.expr()
        if e.cls == "STAR" and (self.is_kw("EXCLUDE") or self.is_kw("REPLACE") or self.is_kw("RENAME")):
            raise _GIVE_UP
        alias = None
        if self.kw("AS"):
            j = self.i
            if j >= self.n or self.K[j] not in "ik":
                raise _GIVE_UP
            alias = self.name_token(("unreserved", "column_name", "type_function", "reserved"))
        elif self.i < self.n and self.K[self.i] == "i":
            alias = self.name_token()
        if alias is not None:
            e = _Expr(e.cls, e.type, e.start, e.end, e.children, e.name, alias, e.subquery, e.literal,
                           e.distinct, e.filter, e.order_by, e.relation, e.star_modified, e.over)
        return e

    # -------------------------------------------------------------------- FROM

    def from_clause(self) -> Table:
        at = self.expect_kw("FROM")
        left = self.from_item()
        if not self.is_op(","):
            return left
        while self.op(","):
            right = self.from_item()
            left = _Table("JOIN", -1, -1, children=(left, right), join_type="INNER", ref_type="CROSS",
                         implicit=True)
        t = left
        return _Table(t.type, self.S[at], self.E[self.i - 1], t.name, t.alias, t.children, t.expressions, t.subquery,
                     t.join_type, t.ref_type, t.implicit, t.using, t.column_aliases, t.rows, t.modified)

    def from_item(self) -> Table:
        left = self.table_primary()
        while True:
            i = self.i
            if i >= self.n or self.K[i] != "k":
                return left
            word = self.U[i]
            if word == "CROSS":
                self.i += 1
                self.expect_kw("JOIN")
                right = self.table_primary()
                left = _Table("JOIN", self.S[i], self.E[self.i - 1], children=(left, right), join_type="INNER",
                             ref_type="CROSS")
                continue
            kind = _JOIN_KINDS.get(word)
            if kind is None:
                return left
            self.i += 1
            if word in ("LEFT", "RIGHT", "FULL"):
                self.kw("OUTER")
            if word != "JOIN":
                self.expect_kw("JOIN")
            right = self.table_primary()
            if self.kw("ON"):
                cond = self.expr()
                left = _Table("JOIN", self.S[i], self.E[self.i - 1], children=(left, right), expressions=(cond,),
                             join_type=kind, ref_type="REGULAR")
            elif self.kw("USING"):
                self.expect_op("(")
                cols = []
                while True:
                    cols.append(self.name_token())
                    if not self.op(","):
                        break
                self.expect_op(")")
                left = _Table("JOIN", self.S[i], self.E[self.i - 1], children=(left, right), join_type=kind,
                             ref_type="REGULAR", using=tuple(cols))
            else:
                raise _GIVE_UP

    def table_primary(self) -> Table:
        if self.is_kw("LATERAL") and self.is_op("(", 1):
            self.i += 1  # LATERAL (query): DuckDB's tree is the subquery's, from its "("
        i = self.i
        if self.op("("):
            if not (self.is_kw("SELECT") or self.is_kw("VALUES") or self.is_kw("WITH")):
                raise _GIVE_UP  # a parenthesized join
            q = self.select_stmt()
            self.expect_op(")")
            end = self.E[self.i - 1]
            alias, cols = self.table_alias()
            return _Table("SUBQUERY", self.S[i], end, alias=alias, subquery=q, column_aliases=cols)
        if self.is_kw("LATERAL") or self.is_kw("VALUES"):
            raise _GIVE_UP
        parts = [self.name_token()]
        while self.op("."):
            parts.append(self.name_token())
        if len(parts) > 3:
            raise _GIVE_UP
        if self.is_op("("):
            # a table function: its call has no position of its own (DuckDB's tree)
            if len(parts) != 1 or self.T[i][0] == '"':
                raise _GIVE_UP
            name = parts[0].lower()
            if name in _SPECIAL_CALLS:
                raise _GIVE_UP
            args = self.call_args()
            if any(a.cls == "STAR" for a in args):
                raise _GIVE_UP
            if self.i < self.n and self.K[self.i] == "k" and self.U[self.i] in ("WITH", "ORDINALITY"):
                raise _GIVE_UP
            call = self.node("FUNCTION", "FUNCTION", -1, -1, args, name=(name,))
            alias, cols = self.table_alias()
            return _Table("TABLE_FUNCTION", self.S[i], self.E[self.i - 1], alias=alias, expressions=(call,),
                         column_aliases=cols)
        alias, cols = self.table_alias()
        return _Table("BASE_TABLE", self.S[i], self.E[self.i - 1], tuple(parts), alias, column_aliases=cols)

    def table_alias(self) -> tuple[str, tuple[str, ...]]:
        """``[AS] alias [(column, ...)]``."""
        if self.kw("AS") or self.i < self.n and self.K[self.i] == "i":
            alias = self.name_token()
        else:
            return "", ()
        cols: list[str] = []
        if self.op("("):
            while True:
                cols.append(self.name_token())
                if not self.op(","):
                    break
            self.expect_op(")")
        return alias, tuple(cols)

    # -------------------------------------------------------------------- expressions

    def expr(self) -> Expression:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _GIVE_UP
        e = self.binary(0)
        self.depth -= 1
        return e

    def binary(self, min_prec: int) -> Expression:
        """Precedence climbing over PostgreSQL's levels: OR 1, AND 2, NOT 3, IS 4,
        comparison 5, BETWEEN/IN/LIKE 6, other operators 7, ``+ -`` 8, ``* / %`` 9."""
        first = self.i
        left = self.unary(min_prec)
        steps = 0
        while self.i < self.n:
            i = self.i
            k, t = self.K[i], self.U[i]
            if k == "o":
                spec = _BINARY.get(t)
                if spec is None:
                    return self._done(left, steps)
                prec, cls, typ, name = spec
                if prec < min_prec:
                    return self._done(left, steps)
                self.i += 1
                if cls == "COMPARISON" and self.i < self.n and self.K[self.i] == "k" and self.U[self.i] in (
                        "ANY", "SOME", "ALL"):
                    left = self.quantified(left, first)
                    self.no_tighter_operator(5)
                    steps += 1
                    continue
                # a regular expression match is read as LIKE is (DuckDB refuses 'a ~ a BETWEEN b AND c')
                right = self.binary(prec + 1 if cls != "REGEX" else 8)
                if cls == "REGEX":
                    # DuckDB's regexp_matches(a, b[, 'i']), under a NOT for !~ and !~*
                    args = (left, right) if not typ else (
                        left, right, _Expr("CONSTANT", "VALUE_CONSTANT", -1, -1, literal=Literal("STRING", "i")))
                    start = left.start
                    left = self.node("FUNCTION", "FUNCTION", self.S[i], self.E[self.i - 1], args,
                                     name=("regexp_matches",))
                    if name:
                        left = self.node("OPERATOR", "OPERATOR_NOT", start, self.E[self.i - 1], (left,))
                    self.no_tighter_operator(6)
                elif cls == "COMPARISON":
                    if self.i < self.n and self.K[self.i] == "o" and _BINARY.get(self.T[self.i], (0,))[0] == 5:
                        raise _GIVE_UP
                    left = self.node(cls, typ, self.S[first], self.E[self.i - 1], (left, right))
                else:
                    left = self.node(cls, typ, self.S[i], self.S[i], (left, right), name=(name,))
            elif k == "k":
                if t == "AND" or t == "OR":
                    prec = 2 if t == "AND" else 1
                    if prec < min_prec:
                        return self._done(left, steps)
                    self.i += 1
                    right = self.binary(prec + 1)
                    typ = "CONJUNCTION_AND" if t == "AND" else "CONJUNCTION_OR"
                    kids = list(left.children) if left.type == typ else [left]
                    kids += right.children if right.type == typ else (right,)
                    left = self.node("CONJUNCTION", typ, self.S[first], self.E[self.i - 1], kids)
                elif t in ("IS", "ISNULL", "NOTNULL"):
                    if min_prec > 4:
                        return self._done(left, steps)
                    left = self.is_tail(left, first)
                    if self.i < self.n and self.K[self.i] == "k" and self.U[self.i] in ("IS", "ISNULL", "NOTNULL"):
                        raise _GIVE_UP  # IS does not chain
                    self.no_tighter_operator(4)
                elif t in ("BETWEEN", "IN", "LIKE", "ILIKE", "NOT"):
                    if min_prec > 6:
                        return self._done(left, steps)
                    left = self.predicate_tail(left, first)
                    self.no_tighter_operator(6)
                else:
                    return self._done(left, steps)
            else:
                return self._done(left, steps)
            steps += 1
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _GIVE_UP
        return self._done(left, steps)

    def no_tighter_operator(self, prec: int) -> None:
        # After ``IS NULL``, ``IN (..)``, ``BETWEEN``, ``LIKE``: only what ends the operand
        # (``AND``, ``OR``, a clause, ``,``, ``)``) is read; DuckDB refuses some operators
        # there (``a IN (b) + c``, ``a IS NULL BETWEEN b AND c``), so all give up.
        i = self.i
        if i < self.n and (self.K[i] == "o" and self.T[i] not in (",", ")", ";")
                           or self.K[i] == "k" and self.U[i] in _PREDICATE_WORDS):
            raise _GIVE_UP

    def _done(self, e: Expression, steps: int) -> Expression:
        self.depth -= steps
        return e

    def quantified(self, left: Expression, first: int) -> Expression:
        """``a op ANY|SOME|ALL (query)``, ``self.i`` at the quantifier: DuckDB's subquery
        node (under an unpositioned NOT for ``ALL``); an array operand gives up."""
        every = self.U[self.i] == "ALL"
        self.i += 1
        self.expect_op("(")
        if not (self.is_kw("SELECT") or self.is_kw("WITH") or self.is_kw("VALUES")):
            raise _GIVE_UP
        q = self.select_stmt()
        self.expect_op(")")
        end = self.E[self.i - 1]
        if every:
            sub = self.node("SUBQUERY", "SUBQUERY", -1, -1, (left,), subquery=q)
            return self.node("OPERATOR", "OPERATOR_NOT", self.S[first], end, (sub,))
        return self.node("SUBQUERY", "SUBQUERY", self.S[first], end, (left,), subquery=q)

    def is_tail(self, left: Expression, first: int) -> Expression:
        i = self.i
        w = self.U[i]
        self.i += 1
        if w == "ISNULL":
            return self.node("OPERATOR", "OPERATOR_IS_NULL", self.S[i], self.E[i], (left,))
        if w == "NOTNULL":
            return self.node("OPERATOR", "OPERATOR_IS_NOT_NULL", self.S[i], self.E[i], (left,))
        neg = self.kw("NOT")
        if self.kw("NULL"):
            return self.node("OPERATOR", "OPERATOR_IS_NOT_NULL" if neg else "OPERATOR_IS_NULL", self.S[i],
                             self.E[self.i - 1], (left,))
        if self.kw("DISTINCT"):
            self.expect_kw("FROM")
            right = self.binary(5)
            if self.i < self.n and self.K[self.i] == "o" and _BINARY.get(self.T[self.i], (0,))[0] == 5:
                raise _GIVE_UP
            return self.node("COMPARISON", "COMPARE_NOT_DISTINCT_FROM" if neg else "COMPARE_DISTINCT_FROM",
                             self.S[first], self.E[self.i - 1], (left, right))
        raise _GIVE_UP

    def predicate_tail(self, left: Expression, first: int) -> Expression:
        neg = self.kw("NOT")
        i = self.i
        if i >= self.n or self.K[i] != "k":
            raise _GIVE_UP
        w = self.U[i]
        self.i += 1
        if w == "BETWEEN":
            if self.is_kw("SYMMETRIC") or self.is_kw("ASYMMETRIC"):
                raise _GIVE_UP
            # bounds of + - * / % and tighter only: DuckDB refuses some others (a BETWEEN b AND c ~ d)
            lo = self.binary(8)
            self.expect_kw("AND")
            hi = self.binary(8)
            if self.i < self.n and self.K[self.i] == "o" and _BINARY.get(self.T[self.i], (0,))[0] == 5:
                raise _GIVE_UP
            e = self.node("BETWEEN", "COMPARE_BETWEEN", self.S[i], self.E[self.i - 1], (left, lo, hi))
        elif w == "IN":
            p = self.expect_op("(")
            if self.is_kw("SELECT") or self.is_kw("WITH"):
                q = self.select_stmt()
                self.expect_op(")")
                e = self.node("SUBQUERY", "SUBQUERY", self.S[p], self.E[self.i - 1], (left,), subquery=q)
            else:
                items = [left]
                while True:
                    items.append(self.expr())
                    if not self.op(","):
                        break
                self.expect_op(")")
                if len(items) == 2 and items[1].cls == "SUBQUERY":
                    raise _GIVE_UP  # a IN (EXISTS (...)), a IN ((SELECT ...)): DuckDB reads an IN subquery
                e = self.node("OPERATOR", "COMPARE_IN", self.S[p], self.E[self.i - 1], items)
        elif w in ("LIKE", "ILIKE"):
            pat = self.binary(8)
            if self.is_kw("ESCAPE"):
                raise _GIVE_UP
            return self.node("FUNCTION", "FUNCTION", self.S[i], self.E[self.i - 1], (left, pat),
                             name=(_LIKE[w, neg],))
        else:
            raise _GIVE_UP
        if neg:
            e = self.node("OPERATOR", "OPERATOR_NOT", left.start, self.E[self.i - 1], (e,))
        return e

    def unary(self, min_prec: int) -> Expression:
        i = self.i
        if i >= self.n:
            raise _GIVE_UP
        k, t = self.K[i], self.U[i]
        if k == "k" and t == "NOT":
            if min_prec > 3 or self.is_kw("NOT", 1):
                raise _GIVE_UP
            self.i += 1
            operand = self.binary(3)
            return self.node("OPERATOR", "OPERATOR_NOT", self.S[i], self.E[self.i - 1], (operand,))
        if k == "o" and (t == "-" or t == "+"):
            self.i += 1
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _GIVE_UP
            operand = self.unary(10)
            operand = self.postfix(operand)
            self.depth -= 1
            if t == "-" and operand.cls == "CONSTANT" and operand.literal.kind in ("INTEGER", "NUMERIC"):
                text = operand.literal.text
                text = text[1:] if text.startswith("-") else "-" + text
                return _Expr("CONSTANT", "VALUE_CONSTANT", self.S[i], self.E[self.i - 1],
                                  literal=Literal(operand.literal.kind, text))
            if self.K[i + 1] == "o" and self.T[i + 1] in ("-", "+"):
                raise _GIVE_UP  # "- -a": DuckDB gives the inner sign no position
            return self.node("FUNCTION", "FUNCTION", self.S[i], self.E[self.i - 1], (operand,), name=(t,))
        return self.postfix(self.primary())

    def postfix(self, e: Expression) -> Expression:
        casts = 0
        while self.i < self.n:
            i = self.i
            k, t = self.K[i], self.T[i]
            if k == "o" and t == "::":
                self.i += 1
                typ = self.type_name()
                e = self.node("CAST", "OPERATOR_CAST", self.S[i], self.E[self.i - 1], (e, typ))
                casts += 1
                if self.depth + casts > MAX_DEPTH:
                    raise _GIVE_UP
            elif k == "o" and t == "[":
                self.i += 1
                index = self.expr()
                self.expect_op("]")
                e = self.node("OPERATOR", "ARRAY_EXTRACT", self.S[i], self.E[self.i - 1], (e, index))
                casts += 1
                if self.depth + casts > MAX_DEPTH:
                    raise _GIVE_UP
            elif k == "o" and t == "." or k == "k" and self.U[i] in ("COLLATE", "AT", "OVER", "FILTER", "WITHIN"):
                raise _GIVE_UP
            else:
                return e
        return e

    def type_name(self) -> Expression:
        i = self.i
        if i >= self.n:
            raise _GIVE_UP
        k, w = self.K[i], self.U[i]
        if k == "i":
            if self.T[i][0] == '"':
                if _QUOTED.fullmatch(self.T[i]) is None:
                    raise _GIVE_UP
            elif not (self.T[i][0].isalpha() or self.T[i][0] == "_"):
                raise _GIVE_UP
        elif k != "k" or w in ("INTERVAL", "BIT", "SETOF", "NATIONAL", "NCHAR") or _KEYWORDS.get(w) == "reserved":
            raise _GIVE_UP
        self.i += 1
        if w in _TYPE_WORDS:
            for more in _TYPE_WORDS[w]:
                if self.is_kw(more):
                    self.i += 1
        if w in ("TIMESTAMP", "TIME") and (self.is_kw("WITH") or self.is_kw("WITHOUT")):
            self.i += 1
            self.expect_kw("TIME")
            self.expect_kw("ZONE")
        if self.is_op("."):
            raise _GIVE_UP
        mods: list[Expression] = []
        if self.is_op("("):
            if w not in ("NUMERIC", "DECIMAL", "VARCHAR", "CHAR", "CHARACTER"):
                raise _GIVE_UP
            self.i += 1
            while True:
                j = self.i
                if j >= self.n or self.K[j] != "n" or not self.T[j].isdigit():
                    raise _GIVE_UP
                self.i += 1
                mods.append(_Expr("CONSTANT", "VALUE_CONSTANT", self.S[j], self.E[j],
                                       literal=Literal("INTEGER", self.T[j])))
                if not self.op(","):
                    break
            self.expect_op(")")
        typ = self.node("TYPE", "TYPE", self.S[i], self.E[self.i - 1], mods)
        if self.is_op("["):
            if not self.is_op("]", 1):
                raise _GIVE_UP
            self.i += 2
            if self.is_op("[") or self.is_kw("ARRAY"):
                raise _GIVE_UP
            typ = self.node("TYPE", "TYPE", -1, -1, (typ,))
        elif self.is_kw("ARRAY") or self.is_kw("WITH") or self.is_kw("WITHOUT"):
            raise _GIVE_UP
        return typ

    def primary(self) -> Expression:
        i = self.i
        k, t = self.K[i], self.T[i]
        S, E = self.S, self.E
        if k == "n":
            m = _NUMBER.fullmatch(t)
            if m is None or (i + 1 < self.n and S[i + 1] == E[i] and self.K[i + 1] in "ikn"):
                raise _GIVE_UP
            self.i += 1
            return _Expr("CONSTANT", "VALUE_CONSTANT", S[i], E[i],
                              literal=Literal("INTEGER" if m.group(1) else "NUMERIC", t))
        if k == "s":
            value = _string_value(t)
            self.i += 1
            if self.i < self.n and self.K[self.i] == "s":
                raise _GIVE_UP  # continued strings
            return _Expr("CONSTANT", "VALUE_CONSTANT", S[i], E[i], literal=Literal("STRING", value))
        if k == "o":
            if t == "(":
                return self.parenthesized()
            if t == "*":
                raise _GIVE_UP
            raise _GIVE_UP
        w = self.U[i]
        if w in _TYPED and i + 1 < self.n and self.K[i + 1] == "s" and self.T[i][0] != '"':
            value = _string_value(self.T[i + 1])
            self.i += 2
            const = _Expr("CONSTANT", "VALUE_CONSTANT", -1, -1, literal=Literal("STRING", value))
            typ = _Expr("TYPE", "TYPE", S[i], E[i])
            return _Expr("CAST", "OPERATOR_CAST", S[i], E[i + 1], (const, typ))
        if k == "k":
            if w == "TRUE" or w == "FALSE":
                self.i += 1
                return _Expr("CONSTANT", "VALUE_CONSTANT", S[i], E[i], literal=Literal("BOOLEAN", w.lower()))
            if w == "NULL":
                self.i += 1
                return _Expr("CONSTANT", "VALUE_CONSTANT", S[i], E[i], literal=Literal("NULL_LITERAL", ""))
            if w == "CASE":
                return self.case()
            if w == "CAST":
                self.i += 1
                self.expect_op("(")
                operand = self.expr()
                self.expect_kw("AS")
                typ = self.type_name()
                self.expect_op(")")
                return self.node("CAST", "OPERATOR_CAST", S[i], E[self.i - 1], (operand, typ))
            if w == "EXISTS":
                self.i += 1
                self.expect_op("(")
                if not self.is_kw("SELECT"):
                    raise _GIVE_UP
                q = self.select_stmt()
                self.expect_op(")")
                return _Expr("SUBQUERY", "SUBQUERY", S[i], E[self.i - 1], subquery=q)
            if w == "INTERVAL" and self.i + 1 < self.n and self.K[i + 1] == "s":
                if self.T[i + 1][0] in "eE" and "\\" in self.T[i + 1]:
                    raise _GIVE_UP  # DuckDB keeps an interval's E'' escapes as written
                value = _string_value(self.T[i + 1])
                self.i += 2
                const = _Expr("CONSTANT", "VALUE_CONSTANT", S[i + 1], E[i + 1], literal=Literal("STRING", value))
                unit = _INTERVAL_UNITS.get(self.U[self.i]) if self.i < self.n and self.K[self.i] == "k" else None
                if unit is not None and not self.is_kw("TO", 1):
                    # INTERVAL '1' DAY: to_days(CAST(trunc(CAST('1' AS DOUBLE)) AS BIGINT)), the
                    # inner nodes at the constant, the call spanning INTERVAL to the unit
                    self.i += 1
                    a, b = S[i + 1], E[i + 1]
                    arg = _Expr("CAST", "OPERATOR_CAST", a, b, (const, _Expr("TYPE", "TYPE", -1, -1)))
                    if unit[1]:
                        arg = _Expr("FUNCTION", "FUNCTION", a, b, (arg,), name=("trunc",))
                        arg = _Expr("CAST", "OPERATOR_CAST", a, b, (arg, _Expr("TYPE", "TYPE", -1, -1)))
                    return _Expr("FUNCTION", "FUNCTION", S[i], E[self.i - 1], (arg,), name=(unit[0],))
                if self.i < self.n and (self.K[self.i] in "ik" and self.U[self.i] not in _FOLLOW or self.is_op("(")):
                    raise _GIVE_UP  # another unit, ... TO ...
                return self.node("CAST", "OPERATOR_CAST", S[i], E[i + 1], (const, _Expr("TYPE", "TYPE", -1, -1)))
            if (w == "GREATEST" or w == "LEAST") and self.is_op("(", 1):
                self.i += 1
                return self.call(i, [w.lower()], [False])
            if w == "EXTRACT" and self.is_op("(", 1):
                self.i += 2
                f = self.i
                if f >= self.n or self.K[f] not in "ik" or self.T[f][0] == '"':
                    raise _GIVE_UP
                self.i += 1
                field = _Expr("CONSTANT", "VALUE_CONSTANT", S[f], E[f], literal=Literal("STRING", self.U[f] if self.K[f] == "k" else self.T[f]))
                self.expect_kw("FROM")
                operand = self.expr()
                self.expect_op(")")
                return self.node("FUNCTION", "FUNCTION", S[i], E[self.i - 1], (field, operand), name=("date_part",))
            if w == "SUBSTRING" and self.is_op("(", 1):
                # SUBSTRING(a FROM b [FOR c]) and SUBSTRING(a FOR c) are substring(a, b, c), the
                # start 1 unpositioned when only FOR is written; with commas, a plain call
                self.i += 2
                args = [self.expr()]
                if self.kw("FROM"):
                    args.append(self.expr())
                    if self.kw("FOR"):
                        args.append(self.expr())
                elif self.kw("FOR"):
                    args += [_Expr("CONSTANT", "VALUE_CONSTANT", -1, -1, literal=Literal("INTEGER", "1")), self.expr()]
                else:
                    while self.op(","):
                        args.append(self.expr())
                self.expect_op(")")
                return self.node("FUNCTION", "FUNCTION", S[i], E[self.i - 1], args, name=("substring",))
            if w == "ARRAY" and self.is_op("[", 1):
                self.i += 2
                items = []
                if not self.is_op("]"):
                    while True:
                        if self.is_op("["):
                            raise _GIVE_UP  # ARRAY[[..]]: inner lists read otherwise
                        items.append(self.expr())
                        if not self.op(","):
                            break
                self.expect_op("]")
                return self.node("OPERATOR", "ARRAY_CONSTRUCTOR", S[i], E[self.i - 1], items)
            if w == "COALESCE" or w == "NULLIF":
                self.i += 1
                args = self.call_args()
                if w == "COALESCE":
                    if not args:
                        raise _GIVE_UP
                    return self.node("OPERATOR", "OPERATOR_COALESCE", S[i], E[self.i - 1], args)
                if len(args) != 2:
                    raise _GIVE_UP
                return self.node("FUNCTION", "FUNCTION", S[i], E[self.i - 1], args, name=("nullif",))
            cat = _KEYWORDS.get(w)
            if cat == "unreserved":
                return self.name_ref()
            if cat == "type_function" and self.is_op("(", 1):
                return self.name_ref()
            raise _GIVE_UP
        if k == "i":
            return self.name_ref()
        raise _GIVE_UP

    def call_args(self) -> list[Expression]:
        self.expect_op("(")
        args = []
        if self.op(")"):
            return args
        while True:
            args.append(self.expr())
            if not self.op(","):
                break
        self.expect_op(")")
        return args

    def parenthesized(self) -> Expression:
        i = self.i
        self.i += 1
        if self.is_kw("SELECT") or self.is_kw("WITH"):
            q = self.select_stmt()
            self.expect_op(")")
            return _Expr("SUBQUERY", "SUBQUERY", self.S[i], self.E[self.i - 1], subquery=q)
        if self.is_op("("):
            # ((SELECT ...)) and ((a, b)) read otherwise
            j = self.i + 1
            if j < self.n and self.K[j] == "k" and self.U[j] in ("SELECT", "WITH"):
                raise _GIVE_UP
        e = self.expr()
        if self.op(","):
            items = [e]
            while True:
                items.append(self.expr())
                if not self.op(","):
                    break
            self.expect_op(")")
            return self.node("FUNCTION", "FUNCTION", self.S[i], self.E[self.i - 1], items, name=("row",))
        self.expect_op(")")
        if e.cls == "STAR":
            raise _GIVE_UP
        return e

    def name_ref(self) -> Expression:
        i = self.i
        K, T = self.K, self.T
        j = i + 1
        if K[i] == "i" and (j >= self.n or not (K[j] == "o" and T[j] in ("(", ".") or K[j] == "s")):
            t = T[i]  # the common case: a bare column name
            if (t[0].isalpha() or t[0] == "_") and "&" not in t:
                self.i = j
                return _Expr("COLUMN_REF", "COLUMN_REF", self.S[i], self.E[i], (), (t,))
        quoted = [T[i][0] == '"']
        parts = [self.name_token(("unreserved", "type_function"))]
        while self.is_op("."):
            if self.is_op("*", 1):
                self.i += 2
                if len(parts) != 1:
                    raise _GIVE_UP
                return _Expr("STAR", "STAR", self.S[i], self.E[self.i - 1], relation=parts[0])
            self.i += 1
            quoted.append(self.i < self.n and self.T[self.i][0] == '"')
            parts.append(self.name_token())
        if self.is_op("("):
            return self.call(i, parts, quoted)
        if len(parts) > 4 or (self.i < self.n and self.K[self.i] == "s"):
            raise _GIVE_UP  # typed literal name '...'
        if self.K[i] == "k" and _KEYWORDS.get(self.U[i]) == "type_function":
            raise _GIVE_UP
        return _Expr("COLUMN_REF", "COLUMN_REF", self.S[i], self.E[self.i - 1], name=tuple(parts))

    def call(self, i: int, parts: list[str], quoted: list[bool]) -> Expression:
        """``name(...)`` with ``self.i`` at its ``(``: DuckDB's children are the ``FILTER``
        condition, the ``ORDER BY`` expressions, then the arguments."""
        if len(parts) > 2 or any(quoted):
            raise _GIVE_UP
        name = tuple(p.lower() for p in parts)
        if name[-1] in _SPECIAL_CALLS:
            raise _GIVE_UP
        self.i += 1
        E = self.E
        distinct = False
        args: list[Expression] = []
        orders: tuple[Order, ...] = ()
        within = False
        if name == ("count",) and self.is_op(")"):
            raise _GIVE_UP
        if self.is_op("*") and self.is_op(")", 1):
            if name != ("count",):
                raise _GIVE_UP
            self.i += 2
            name = ("count_star",)
        else:
            distinct = self.kw("DISTINCT")
            if self.is_kw("ALL") or self.is_kw("VARIADIC"):
                raise _GIVE_UP
            if not self.is_op(")"):
                while True:
                    a = self.expr()
                    if a.cls == "STAR":
                        raise _GIVE_UP
                    args.append(a)
                    if not self.op(","):
                        break
            if distinct and not args:
                raise _GIVE_UP
            if self.kw("ORDER"):
                self.expect_kw("BY")
                orders = self.order_by().orders
            self.expect_op(")")
            if self.kw("WITHIN"):
                # ordered-set aggregates: DuckDB's name, the one sort key in order_by
                name, want = _ORDERED_SETS.get(name, (None, -1))
                if name is None or want != len(args) or distinct or orders:
                    raise _GIVE_UP
                self.expect_kw("GROUP")
                self.expect_op("(")
                self.expect_kw("ORDER")
                self.expect_kw("BY")
                orders = self.order_by().orders
                self.expect_op(")")
                if len(orders) != 1:
                    raise _GIVE_UP
                within = True
        filt = None
        if self.kw("FILTER"):
            self.expect_op("(")
            self.expect_kw("WHERE")
            filt = self.expr()
            self.expect_op(")")
        if self.kw("OVER"):
            if within:
                raise _GIVE_UP  # DuckDB's window of an ordered-set aggregate keeps other names
            return self.window(i, name, args, orders, filt)
        if self.i < self.n and self.K[self.i] == "k" and self.U[self.i] in ("FILTER", "WITHIN", "IGNORE", "RESPECT"):
            raise _GIVE_UP
        kids = ([filt] if filt is not None else []) + [o.expression for o in orders] + args
        return self.node("FUNCTION", "FUNCTION", self.S[i], E[self.i - 1], kids, name=name, distinct=distinct,
                         filter=filt, order_by=orders)

    def window(self, i: int, name: tuple, args: list, orders: tuple, filt: Expression | None) -> Expression:
        """``f(...) OVER ([PARTITION BY ...] [ORDER BY ...])``, ``self.i`` after ``OVER``:
        DuckDB's children are the partitions, the window's order, the filter, the
        arguments' order, then the arguments."""
        if len(name) != 1:
            raise _GIVE_UP
        fn = _WINDOW_NAMES.get(name[0], name[0])
        self.expect_op("(")
        first = self.i
        parts: list[Expression] = []
        if self.kw("PARTITION"):
            self.expect_kw("BY")
            while True:
                parts.append(self.expr())
                if not self.op(","):
                    break
        window_orders: tuple[Order, ...] = ()
        if self.kw("ORDER"):
            self.expect_kw("BY")
            window_orders = self.order_by().orders
        bounds: list[Expression] = []
        frame = ("UNBOUNDED_PRECEDING", "CURRENT_ROW_RANGE", "NO_OTHER")
        if self.i < self.n and self.K[self.i] == "k" and self.U[self.i] in ("ROWS", "RANGE", "GROUPS"):
            frame = self.frame(bounds)
        self.expect_op(")")  # a named window gives up here
        if "OVER" in self.U[first:self.i]:
            raise _GIVE_UP  # DuckDB refuses a window function in a window definition, subqueries too
        kids = parts + [o.expression for o in window_orders] + bounds + ([filt] if filt is not None else [])
        kids += [o.expression for o in orders] + args
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
        between = self.kw("BETWEEN")
        start = self.bound(mode, bounds)
        if between:
            self.expect_kw("AND")
            end = self.bound(mode, bounds)
        else:
            end = "CURRENT_ROW_" + mode
        if (start == "UNBOUNDED_FOLLOWING" or end == "UNBOUNDED_PRECEDING"
                or start.startswith("CURRENT_ROW") and end.startswith("EXPR_PRECEDING")
                or start.startswith("EXPR_FOLLOWING") and (end.startswith(("CURRENT_ROW", "EXPR_PRECEDING")))):
            raise _GIVE_UP  # "frame start cannot be UNBOUNDED FOLLOWING", ...
        exclude = "NO_OTHER"
        if self.kw("EXCLUDE"):
            if self.kw("CURRENT"):
                self.expect_kw("ROW")
                exclude = "CURRENT_ROW"
            elif self.kw("GROUP"):
                exclude = "GROUP"
            elif self.kw("TIES"):
                exclude = "TIES"
            else:
                self.expect_kw("NO")
                self.expect_kw("OTHERS")
        return start, end, exclude

    def bound(self, mode: str, bounds: list) -> str:
        if self.kw("UNBOUNDED"):
            if self.kw("PRECEDING"):
                return "UNBOUNDED_PRECEDING"
            self.expect_kw("FOLLOWING")
            return "UNBOUNDED_FOLLOWING"
        if self.is_kw("CURRENT") and self.is_kw("ROW", 1):
            self.i += 2
            return "CURRENT_ROW_" + mode
        bounds.append(self.expr())
        if self.kw("PRECEDING"):
            return "EXPR_PRECEDING_" + mode
        self.expect_kw("FOLLOWING")
        return "EXPR_FOLLOWING_" + mode

    def case(self) -> Expression:
        i = self.i
        self.i += 1
        operand = None if self.is_kw("WHEN") else self.expr()
        kids: list[Expression] = []
        while self.kw("WHEN"):
            w = self.expr()
            if operand is not None:
                w = self.node("COMPARISON", "COMPARE_EQUAL", -1, -1, (operand, w))
            self.expect_kw("THEN")
            kids += (w, self.expr())
        if not kids:
            raise _GIVE_UP
        if self.kw("ELSE"):
            kids.append(self.expr())
        else:
            kids.append(_Expr("CONSTANT", "VALUE_CONSTANT", -1, -1, literal=Literal("NULL_LITERAL", "")))
        self.expect_kw("END")
        return self.node("CASE", "CASE_EXPR", self.S[i], self.E[self.i - 1], kids)


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


def _setop(left: Query, right: Query, kind: str, setop_all: bool) -> Query:
    # DuckDB flattens a chain of one set operation (``a UNION ALL b UNION ALL c``) into one node
    if left.type == "SET_OPERATION_NODE" and left.setop == kind and left.setop_all == setop_all:
        return _Query("SET_OPERATION_NODE", children=(*left.children, right), setop=kind, setop_all=setop_all)
    return _Query("SET_OPERATION_NODE", children=(left, right), setop=kind, setop_all=setop_all)


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
