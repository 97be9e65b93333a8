"""SQL for colmz: Materialize's statements parsed, and their queries translated for DuckDB.

Design
------
colmz runs queries in DuckDB, in process, over Arrow tables. Two things stand between a
Materialize user's SQL and DuckDB:

* **Statements DuckDB does not have.** ``CREATE CONTINUAL TASK`` (with its column list,
  ``WITH (SNAPSHOT = ...)``, ``ON INPUT ... AS (...)`` body and the ``FROM TRANSFORM ... USING``
  and ``FROM RETAIN ... WHILE`` sugar), ``CREATE MATERIALIZED VIEW`` and the writes of a
  catalog at logical times. :func:`parse` splits a script into statements and reads their
  structure; the queries and predicates inside stay text, each a slice of the original.
  The grammar follows ``src/sql-parser/src/parser.rs`` upstream (continual tasks accept
  ``WITH`` before or after ``ON INPUT``, and the ``RETAIN`` sugar becomes an ``INSERT`` of the
  rows satisfying the predicate plus a ``DELETE`` of the output rows that no longer do).
* **Expressions that mean something else in DuckDB.** :func:`translate` rewrites, token by
  token: ``mz_now()`` becomes the logical time of the evaluation -- a ``UBIGINT``, or, in a
  query that compares it with dates or timestamps, a ``timestamptz`` reading the time as
  milliseconds since the Unix epoch, as Materialize's ``mz_timestamp`` does
  (:func:`run_query`); the type
  names ``JSONB`` and ``mz_timestamp`` become ``JSON`` and ``UBIGINT``. The rest DuckDB reads
  as PostgreSQL does: ``::`` casts and ``INT8``/``INT4``/``TEXT``/``STRING`` names, ``->>``
  on JSON text, ``||`` with a non-text operand. Integer ``/`` truncates in PostgreSQL and
  divides exactly in DuckDB; every colmz DuckDB connection sets ``integer_division`` so the
  results agree. Constructs colmz cannot honour raise :class:`UnsupportedSQL` naming them.

The tokenizer knows strings (``'...'`` with ``''``, ``E'...'``, dollar quotes), quoted
identifiers, numbers, comments and operators, so a ``;`` or a keyword inside a string is
never taken for structure. Bare identifiers fold to lower case, as in PostgreSQL.

A division by zero raises, as in PostgreSQL, with DuckDB versions that have the
``error_on_division_by_zero`` setting (2.0 does); older ones return NULL.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import pyarrow as pa

__all__ = [
    "MZ_NOW",
    "ContinualTaskStatement",
    "CreateMaterializedView",
    "CreateTable",
    "DeleteStatement",
    "Drop",
    "InsertStatement",
    "Query",
    "SQLError",
    "Token",
    "UnsupportedSQL",
    "UpdateStatement",
    "NOW_FORMS",
    "RESERVED_PREFIX",
    "arrow_type",
    "bind_relations",
    "check_expression",
    "check_one_query",
    "connect",
    "now_value",
    "run_query",
    "output_names",
    "rename_like_postgres",
    "substitute_now",
    "uses_now",
    "parse",
    "referenced_names",
    "relation_name",
    "require_duckdb",
    "tokenize",
    "translate",
]

#: Names colmz gives its own tables and placeholders; user text may not use them.
RESERVED_PREFIX = "__colmz_"
#: What ``mz_now()`` becomes in translated text: one word token, replaced (as a token, by
#: :func:`substitute_now`) by the evaluation time.
MZ_NOW = "__colmz_mz_now__"


class SQLError(ValueError):
    """A statement colmz cannot parse or run; the message names the construct."""


class UnsupportedSQL(SQLError):
    """A valid Materialize construct that colmz does not implement."""


def require_duckdb():
    """Import DuckDB, or raise an ``ImportError`` naming the extra that installs it.

    >>> require_duckdb().__name__
    'duckdb'
    """
    try:
        import duckdb
    except ImportError as e:
        raise ImportError(
            "colmz's SQL (Catalog, SQL statements of ContinualTask) needs DuckDB: "
            "pip install 'colmz[sql]'"
        ) from e
    return duckdb


def connect(external_access: bool = True):
    """A fresh in-memory DuckDB connection set up to read PostgreSQL arithmetic.

    Every colmz connection turns DuckDB's Python *replacement scans* off (a query must see
    only the tables colmz registers, never a Python variable that happens to share a
    table's name) and then locks its configuration, so no text it later runs can change a
    setting. ``external_access=False`` also turns DuckDB's external access off: no
    ``read_csv``, ``glob``, ``COPY``, ``ATTACH`` or extension load reaches the file system
    or the network -- with it on (the default, as DuckDB's) a query can read any local file
    the process can.

    >>> connect().sql("SELECT 7 / 2 AS q").fetchall()
    [(3,)]
    """
    duckdb = require_duckdb()
    if not isinstance(external_access, bool):
        raise TypeError(f"external_access must be a bool, got {external_access!r}")
    con = duckdb.connect(":memory:")
    con.execute("SET python_enable_replacements = false")
    con.execute("SET integer_division = true")
    con.execute("SET TimeZone = 'UTC'")  # as Materialize's sessions; mz_now() casts in UTC
    try:
        # PostgreSQL raises on a division by zero; DuckDB before this setting returned NULL.
        con.execute("SET error_on_division_by_zero = true")
    except Exception as e:  # pragma: no cover - older DuckDB without the setting
        if not type(e).__module__.startswith(("duckdb", "_duckdb")):
            raise
    if not external_access:
        con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


#: ``mz_now()`` forms: the logical time as an integer, or -- when the query compares it with
#: dates/timestamps -- as a ``timestamptz`` reading the time as milliseconds since the Unix
#: epoch (Materialize's ``mz_timestamp`` casts that way).
NOW_FORMS = ("uint64", "timestamptz")

_NO_TABLE = re.compile(r"Table with name (.+?) does not exist")
_NOW_TYPE_ERROR = re.compile(r"(TIMESTAMP|DATE|INTERVAL|TIME\b).*UBIGINT|UBIGINT.*(TIMESTAMP|DATE|INTERVAL|TIME\b)")


def now_value(t: int, form: str) -> str:
    """The SQL that replaces ``mz_now()`` at time ``t``.

    >>> now_value(5, "uint64"), now_value(5, "timestamptz")
    ('CAST(5 AS UBIGINT)', 'CAST(epoch_ms(CAST(5 AS BIGINT)) AS TIMESTAMPTZ)')
    """
    if form == "uint64":
        return f"CAST({t} AS UBIGINT)"
    if form == "timestamptz":
        if t > 2**63 - 1:
            raise OverflowError(f"mz_now() = {t} does not fit a timestamp (milliseconds since the epoch)")
        return f"CAST(epoch_ms(CAST({t} AS BIGINT)) AS TIMESTAMPTZ)"
    raise ValueError(f"form must be one of {NOW_FORMS}, got {form!r}")


def run_query(con, translated: str, t: int, form: str | None = None):
    """Run translated SQL with ``mz_now()`` at ``t``; returns ``(arrow_table, form)``.

    With ``form=None`` the integer form is tried first and the timestamp form only when
    DuckDB refuses to compare ``UBIGINT`` with a date/time type. DuckDB's errors become
    :class:`SQLError`.

    >>> table, form = run_query(connect(), translate("SELECT TIMESTAMPTZ '1970-01-01 00:00:01+00' < mz_now() AS x"), 2000)
    >>> table.column("x").to_pylist(), form
    ([True], 'timestamptz')
    """
    check_one_query(con, translated)
    now = uses_now(translated)
    forms = NOW_FORMS if form is None and now else (form or "uint64",)
    for i, f in enumerate(forms):
        text = substitute_now(translated, now_value(t, f)) if now else translated
        try:
            rel = con.sql(text)
            if rel is None:
                raise SQLError(f"not a query: {translated[:60]!r}")
            table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
            if isinstance(table, pa.RecordBatchReader):
                table = table.read_all()
            return table, f
        except SQLError:
            raise
        except Exception as e:  # duckdb's exceptions share no importable base worth naming
            if not type(e).__module__.startswith(("duckdb", "_duckdb")):
                raise
            if i + 1 < len(forms) and _NOW_TYPE_ERROR.search(str(e)):
                continue
            m = _NO_TABLE.search(str(e))
            if m:
                # DuckDB's hint names its own catalog tables: only the name matters here.
                raise SQLError(f"no table, view or task named {m.group(1)!r} in this query") from None
            raise SQLError(str(e)) from None
    raise AssertionError("unreachable")  # pragma: no cover


#: Texts DuckDB confirmed to be one query (``check_one_query``), bounded.
_ONE_QUERY: dict[str, None] = {}


def check_one_query(con, text: str) -> None:
    """Raise :class:`SQLError` unless DuckDB reads ``text`` as exactly one ``SELECT``.

    colmz's own parser decides where a statement ends; this is DuckDB's confirmation that
    the text colmz built is the one query it meant (no ``;`` smuggled past the tokenizer
    starts a ``COPY``, ``ATTACH`` or ``SET``). Confirmed texts are remembered, so a
    statement run at every time of a continual task is checked once.

    >>> check_one_query(connect(), "SELECT 1; SELECT 2")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: colmz runs one query at a time; DuckDB reads 2 statements (SELECT, SELECT) in 'SELECT 1; SELECT 2'
    """
    if text in _ONE_QUERY:
        return
    try:
        stmts = con.extract_statements(text)
    except Exception as e:
        if not type(e).__module__.startswith(("duckdb", "_duckdb")):
            raise
        raise SQLError(str(e)) from None
    if len(stmts) != 1 or stmts[0].type.name != "SELECT":
        kinds = ", ".join(st.type.name for st in stmts)
        raise SQLError(
            f"colmz runs one query at a time; DuckDB reads {len(stmts)} statement"
            f"{'s' if len(stmts) != 1 else ''} ({kinds}) in {text[:200]!r}"
        )
    if len(_ONE_QUERY) >= 4096:
        _ONE_QUERY.clear()
    _ONE_QUERY[text] = None


# ----------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Token:
    """One lexical token: ``kind`` is ``word``, ``qident``, ``string``, ``number``, ``op``."""

    kind: str
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""

    @property
    def name(self) -> str:
        """The identifier this token names (bare words fold to lower case)."""
        if self.kind == "word":
            return self.text.lower()
        if self.kind == "qident":
            return self.text[1:-1].replace('""', '"')
        raise SQLError(f"expected a name, got {self.text!r}")


_OPS = sorted(
    ["::", "->>", "->", "#>>", "#>", "<=", ">=", "<>", "!=", "||", "=>", "@>", "<@", "**",
     "(", ")", ",", ";", ".", "+", "-", "*", "/", "%", "<", ">", "=", "[", "]", ":", "^",
     "&", "|", "~", "!", "?", "@", "#"],
    key=len, reverse=True,
)
_WORD = re.compile(r"[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*")
_NUMBER = re.compile(r"(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def _escaped(text: str, k: int) -> bool:
    # In E'...' strings a quote preceded by an odd number of backslashes is escaped.
    n = 0
    while k - 1 - n >= 0 and text[k - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def tokenize(text: str) -> list[Token]:
    """Split SQL into tokens, skipping whitespace and comments.

    >>> [t.text for t in tokenize("SELECT 'a;b' -- c\\n , x::INT8")]
    ['SELECT', "'a;b'", ',', 'x', '::', 'INT8']
    """
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise SQLError(f"unterminated comment at offset {i}")
            i = j + 2
        elif c == "'" or (c in "eE" and text.startswith("'", i + 1)):
            j = i + (2 if c != "'" else 1)
            while True:
                k = text.find("'", j)
                if k < 0:
                    raise SQLError(f"unterminated string starting at offset {i}")
                if c != "'" and _escaped(text, k):
                    j = k + 1
                    continue
                if text.startswith("''", k):
                    j = k + 2
                    continue
                break
            out.append(Token("string", text[i : k + 1], i, k + 1))
            i = k + 1
        elif c == '"':
            j = i + 1
            while True:
                k = text.find('"', j)
                if k < 0:
                    raise SQLError(f"unterminated quoted identifier at offset {i}")
                if text.startswith('""', k):
                    j = k + 2
                    continue
                break
            out.append(Token("qident", text[i : k + 1], i, k + 1))
            i = k + 1
        elif c == "$" and (m := _DOLLAR.match(text, i)):
            tag = m.group(0)
            k = text.find(tag, m.end())
            if k < 0:
                raise SQLError(f"unterminated dollar-quoted string at offset {i}")
            out.append(Token("string", text[i : k + len(tag)], i, k + len(tag)))
            i = k + len(tag)
        elif m := _WORD.match(text, i):
            out.append(Token("word", m.group(0), i, m.end()))
            i = m.end()
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            m = _NUMBER.match(text, i)
            out.append(Token("number", m.group(0), i, m.end()))
            i = m.end()
        else:
            for op in _OPS:
                if text.startswith(op, i):
                    out.append(Token("op", op, i, i + len(op)))
                    i += len(op)
                    break
            else:
                raise SQLError(f"unexpected character {c!r} at offset {i}")
    return out


# ----------------------------------------------------------------------------- statements


@dataclass
class Query:
    """A query to run as it is (``SELECT``, ``VALUES``, ``WITH``, ``TABLE``)."""

    sql: str


@dataclass
class CreateTable:
    name: str
    columns: list[tuple[str, str]]


@dataclass
class InsertStatement:
    """``INSERT INTO table [(columns)] query``; ``query`` is the text after the column list."""

    table: str
    columns: list[str] | None
    query: str


@dataclass
class DeleteStatement:
    """``DELETE FROM table [WHERE predicate]``; ``where`` is ``None`` for all rows."""

    table: str
    where: str | None


@dataclass
class UpdateStatement:
    table: str
    assignments: list[tuple[str, str]]
    where: str | None


@dataclass
class CreateMaterializedView:
    name: str
    columns: list[str] | None
    query: str


@dataclass
class ContinualTaskStatement:
    """``CREATE CONTINUAL TASK``, sugar already rewritten into ``body``."""

    name: str
    columns: list[tuple[str, str]] | None
    input: str
    body: list[InsertStatement | DeleteStatement]
    snapshot: bool = True
    sugar: str | None = None
    as_of: int | None = None


@dataclass
class Drop:
    kind: str
    names: list[str]
    if_exists: bool = False


@dataclass
class _Cursor:
    text: str
    toks: list[Token]
    pos: int = 0
    end: int = field(default=-1)

    def __post_init__(self):
        if self.end < 0:
            self.end = len(self.toks)

    def peek(self, k: int = 0) -> Token | None:
        j = self.pos + k
        return self.toks[j] if j < self.end else None

    def at(self, *words: str) -> bool:
        for k, w in enumerate(words):
            t = self.peek(k)
            if t is None or (t.upper != w and not (t.kind == "op" and t.text == w)):
                return False
        return True

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.pos += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            got = self.peek()
            raise SQLError(f"expected {' '.join(words)}, got {got.text if got else 'end of statement'!r}")

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise SQLError("unexpected end of statement")
        self.pos += 1
        return t

    def name(self) -> str:
        # Qualified names keep their last part: colmz has one namespace.
        parts = [self.next().name]
        while self.at(".") and self.peek(1) is not None:
            self.pos += 1
            parts.append(self.next().name)
        return _not_reserved(parts[-1])

    def matching(self) -> int:
        """Index of the token closing the ``(`` at ``pos``."""
        depth = 0
        for j in range(self.pos, self.end):
            t = self.toks[j]
            if t.kind == "op" and t.text in "([":
                depth += 1
            elif t.kind == "op" and t.text in ")]":
                depth -= 1
                if depth == 0:
                    return j
        raise SQLError("unbalanced parentheses")

    def rest(self) -> str:
        if self.pos >= self.end:
            return ""
        return self.text[self.toks[self.pos].start : self.toks[self.end - 1].end]

    def span(self, a: int, b: int) -> str:
        if a >= b:
            return ""
        return self.text[self.toks[a].start : self.toks[b - 1].end]


def _split(toks: list[Token], lo: int, hi: int, sep: str) -> list[tuple[int, int]]:
    """Token ranges between top-level ``sep`` operators in ``toks[lo:hi]``."""
    out, depth, start = [], 0, lo
    for j in range(lo, hi):
        t = toks[j]
        if t.kind == "op" and t.text in "([":
            depth += 1
        elif t.kind == "op" and t.text in ")]":
            depth -= 1
        elif depth == 0 and t.kind == "op" and t.text == sep:
            out.append((start, j))
            start = j + 1
    out.append((start, hi))
    return [(a, b) for a, b in out if a < b]


def _not_reserved(name: str) -> str:
    if name.startswith(RESERVED_PREFIX):
        raise SQLError(f"names beginning with {RESERVED_PREFIX} are colmz's own: {name!r}")
    return name


def _column_defs(cur: _Cursor) -> list[tuple[str, str]]:
    close = cur.matching()
    cols = []
    for a, b in _split(cur.toks, cur.pos + 1, close, ","):
        name = _not_reserved(cur.toks[a].name)
        type_sql = cur.span(a + 1, b)
        if not type_sql:
            raise SQLError(f"column {name!r} has no type")
        cols.append((name, type_sql))
    cur.pos = close + 1
    return cols


def _name_list(cur: _Cursor) -> list[str]:
    close = cur.matching()
    names = [cur.toks[a].name for a, b in _split(cur.toks, cur.pos + 1, close, ",")]
    cur.pos = close + 1
    return names


def parse(text: str) -> list:
    """Parse a script of statements separated by ``;``.

    >>> s, = parse("CREATE CONTINUAL TASK up (k INT) ON INPUT t AS (INSERT INTO up SELECT k FROM t)")
    >>> s.name, s.input, s.snapshot, s.body[0].query
    ('up', 't', True, 'SELECT k FROM t')
    """
    toks = tokenize(text)
    _check_balanced(toks, text)
    out = []
    for a, b in _split(toks, 0, len(toks), ";"):
        out.append(_statement(_Cursor(text, toks, a, b)))
    return out


_QUERY_STARTS = {"SELECT", "WITH", "VALUES", "TABLE", "("}


def _check_balanced(toks: list[Token], text: str, what: str = "statement") -> None:
    # A ``)`` closing nothing would hide the ``;`` after it from the splitter (its depth
    # is negative): every parenthesis and bracket must pair.
    stack: list[Token] = []
    for t in toks:
        if t.kind == "op" and t.text in "([":
            stack.append(t)
        elif t.kind == "op" and t.text in ")]":
            if not stack or (stack[-1].text == "(") != (t.text == ")"):
                raise SQLError(f"{what}: unbalanced {t.text!r} at offset {t.start} in {text[:200]!r}")
            stack.pop()
    if stack:
        raise SQLError(f"{what}: unclosed {stack[-1].text!r} at offset {stack[-1].start} in {text[:200]!r}")


#: Words that cannot stand at the top level of one expression: they begin or continue a
#: statement (PostgreSQL reserves the first group; the second are DuckDB statements).
_NOT_IN_EXPRESSION = {
    "SELECT", "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "FETCH",
    "UNION", "EXCEPT", "INTERSECT", "WINDOW", "QUALIFY", "RETURNING", "WITH", "TABLE",
    "VALUES", "INTO", "CREATE", "GRANT",
    "INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "COPY", "ATTACH", "DETACH", "SET",
    "RESET", "PRAGMA", "INSTALL", "LOAD", "EXPORT", "IMPORT", "CALL", "EXECUTE", "PREPARE",
    "CHECKPOINT", "VACUUM", "BEGIN", "COMMIT", "ROLLBACK", "USE",
}


def check_expression(text: str, what: str) -> list[Token]:
    """The tokens of ``text`` when it is one SQL expression, else :class:`SQLError`.

    One expression: some tokens, parentheses and brackets paired, no ``;``, and none of
    the words that begin or continue a statement at its top level (inside parentheses a
    subquery may use them; a column with such a name is written quoted). ``what`` names
    the expression in the message (e.g. ``"DELETE FROM t: predicate"``).

    >>> [t.text for t in check_expression("k IN (SELECT k FROM u)", "predicate")]
    ['k', 'IN', '(', 'SELECT', 'k', 'FROM', 'u', ')']
    >>> check_expression("1=0); COPY (SELECT 1) TO 'f'; SELECT (1", "predicate")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: predicate: unbalanced ')' at offset 3 in "1=0); COPY (SELECT 1) TO 'f'; SELECT (1"
    """
    toks = tokenize(text)
    if not toks:
        raise SQLError(f"{what}: empty expression")
    _check_balanced(toks, text, what)
    depth = 0
    for t in toks:
        if t.kind == "op" and t.text in "([":
            depth += 1
        elif t.kind == "op" and t.text in ")]":
            depth -= 1
        elif t.kind == "op" and t.text == ";":
            raise SQLError(f"{what}: one expression has no ';' (at offset {t.start} in {text[:200]!r})")
        elif depth == 0 and t.upper in _NOT_IN_EXPRESSION:
            raise SQLError(
                f"{what}: {t.text} cannot stand in one expression (at offset {t.start} in "
                f"{text[:200]!r}; a column of that name is written quoted)"
            )
    return toks


def _statement(cur: _Cursor):
    first = cur.peek()
    if first.upper in _QUERY_STARTS or first.text == "(":
        return Query(cur.rest())
    if cur.accept("CREATE", "TABLE"):
        cur.accept("IF", "NOT", "EXISTS") and _unsupported("CREATE TABLE IF NOT EXISTS")
        name = cur.name()
        if not cur.at("("):
            raise SQLError(f"CREATE TABLE {name} needs a column list")
        cols = _column_defs(cur)
        _done(cur, "CREATE TABLE")
        return CreateTable(name, cols)
    if cur.accept("CREATE", "MATERIALIZED", "VIEW") or cur.accept(
        "CREATE", "OR", "REPLACE", "MATERIALIZED", "VIEW"
    ):
        name = cur.name()
        cols = _name_list(cur) if cur.at("(") else None
        if cur.accept("IN", "CLUSTER"):
            cur.name()
        if cur.at("WITH"):
            _unsupported("CREATE MATERIALIZED VIEW ... WITH (options)")
        cur.expect("AS")
        return CreateMaterializedView(name, cols, cur.rest())
    if cur.accept("CREATE", "CONTINUAL", "TASK"):
        return _continual_task(cur)
    if cur.accept("INSERT", "INTO"):
        return _insert(cur)
    if cur.accept("DELETE", "FROM"):
        return _delete(cur)
    if cur.accept("UPDATE"):
        table = cur.name()
        if cur.peek() is not None and cur.peek().upper == "AS" or (
            cur.peek() is not None and cur.peek().kind == "word" and cur.peek().upper != "SET"
        ):
            _unsupported("UPDATE with a table alias")
        cur.expect("SET")
        where_at = _find_word(cur, "WHERE")
        assigns = []
        for a, b in _split(cur.toks, cur.pos, where_at, ","):
            if b - a < 3 or cur.toks[a + 1].text != "=":
                raise SQLError(f"UPDATE {table}: expected `column = expression`, got {cur.span(a, b)!r}")
            expr = cur.span(a + 2, b)
            check_expression(expr, f"UPDATE {table}: value of {cur.toks[a].name!r}")
            assigns.append((cur.toks[a].name, expr))
        cur.pos = where_at
        where = None
        if cur.accept("WHERE"):
            where = cur.rest()
            if not where:
                raise SQLError(f"UPDATE {table}: WHERE without a predicate")
            check_expression(where, f"UPDATE {table}: predicate")
        elif cur.peek() is not None:
            raise SQLError(f"UPDATE {table}: unexpected {cur.peek().text!r}")
        return UpdateStatement(table, assigns, where)
    if cur.accept("DROP"):
        kind = None
        for words in (("TABLE",), ("MATERIALIZED", "VIEW"), ("CONTINUAL", "TASK")):
            if cur.accept(*words):
                kind = " ".join(words)
                break
        if kind is None:
            _unsupported("DROP " + (cur.peek().text if cur.peek() else ""))
        if_exists = cur.accept("IF", "EXISTS")
        names = [cur.toks[a].name for a, b in _split(cur.toks, cur.pos, cur.end, ",")]
        cur.pos = cur.end
        if not names:
            raise SQLError(f"DROP {kind} needs a name")
        return Drop(kind, names, if_exists)
    words = " ".join(t.text.upper() for t in cur.toks[cur.pos : min(cur.pos + 3, cur.end)])
    _unsupported(words)


def _unsupported(what: str):
    raise UnsupportedSQL(f"{what} is not supported by colmz")


def _done(cur: _Cursor, what: str) -> None:
    if cur.peek() is not None:
        raise SQLError(f"{what}: unexpected {cur.peek().text!r}")


def _find_word(cur: _Cursor, word: str) -> int:
    depth = 0
    for j in range(cur.pos, cur.end):
        t = cur.toks[j]
        if t.kind == "op" and t.text in "([":
            depth += 1
        elif t.kind == "op" and t.text in ")]":
            depth -= 1
        elif depth == 0 and t.upper == word:
            return j
    return cur.end


def _insert(cur: _Cursor) -> InsertStatement:
    table = cur.name()
    cols = None
    if cur.at("(") and not _is_query_paren(cur):
        cols = _name_list(cur)
    if cur.at("DEFAULT", "VALUES"):
        _unsupported("INSERT ... DEFAULT VALUES")
    query = cur.rest()
    if not query:
        raise SQLError(f"INSERT INTO {table} needs VALUES or a query")
    if _find_word(cur, "RETURNING") < cur.end:
        _unsupported("INSERT ... RETURNING")
    if _find_word(cur, "ON") < cur.end and cur.toks[_find_word(cur, "ON") + 1].upper == "CONFLICT":
        _unsupported("INSERT ... ON CONFLICT")
    return InsertStatement(table, cols, query)


def _is_query_paren(cur: _Cursor) -> bool:
    t = cur.peek(1)
    return t is not None and t.upper in ("SELECT", "WITH", "VALUES")


def _delete(cur: _Cursor) -> DeleteStatement:
    table = cur.name()
    if cur.at("USING") or (cur.peek() is not None and cur.peek().upper not in ("WHERE",)):
        _unsupported("DELETE with USING or a table alias")
    where = None
    if cur.accept("WHERE"):
        where = cur.rest()
        if not where:
            raise SQLError(f"DELETE FROM {table}: WHERE without a predicate")
        if _find_word(cur, "RETURNING") < cur.end:
            _unsupported("DELETE ... RETURNING")
        check_expression(where, f"DELETE FROM {table}: predicate")
    return DeleteStatement(table, where)


def _options(cur: _Cursor, stmt: dict) -> None:
    close = cur.matching()
    for a, b in _split(cur.toks, cur.pos + 1, close, ","):
        key = cur.toks[a].upper
        if key != "SNAPSHOT":
            _unsupported(f"CONTINUAL TASK option {cur.toks[a].text}")
        if b - a == 1:
            stmt["snapshot"] = True
            continue
        j = a + 1
        if cur.toks[j].text == "=":
            j += 1
        if j != b - 1 or cur.toks[j].upper not in ("TRUE", "FALSE"):
            raise SQLError(f"SNAPSHOT takes true or false, got {cur.span(a + 1, b)!r}")
        stmt["snapshot"] = cur.toks[j].upper == "TRUE"
    cur.pos = close + 1


def _continual_task(cur: _Cursor) -> ContinualTaskStatement:
    name = cur.name()
    st: dict = {"snapshot": True}
    cols = None
    if cur.at("("):
        cols = _column_defs(cur)
    if cur.accept("IN", "CLUSTER"):
        cur.name()
    if cur.accept("WITH"):
        _options(cur, st)
    body: list = []
    sugar = None
    if cur.accept("ON", "INPUT"):
        source = cur.name()
        if cur.accept("WITH"):
            _options(cur, st)
        cur.expect("AS")
        if not cur.at("("):
            raise SQLError("CONTINUAL TASK body must be parenthesised: AS ( ... )")
        close = cur.matching()
        for a, b in _split(cur.toks, cur.pos + 1, close, ";"):
            sub = _Cursor(cur.text, cur.toks, a, b)
            if sub.accept("INSERT", "INTO"):
                s = _insert(sub)
                if s.columns is not None:
                    _unsupported("a column list in a CONTINUAL TASK INSERT")
            elif sub.accept("DELETE", "FROM"):
                s = _delete(sub)
            else:
                raise SQLError(
                    f"CONTINUAL TASK {name}: statements are INSERT or DELETE, got {sub.rest()[:40]!r}"
                )
            if s.table != name:
                raise SQLError(
                    f"CONTINUAL TASK {name} writes only its own output, not {s.table!r}"
                )
            body.append(s)
        cur.pos = close + 1
    elif cur.accept("FROM", "TRANSFORM"):
        source = cur.name()
        cur.expect("USING")
        if not cur.at("("):
            raise SQLError("FROM TRANSFORM ... USING needs a parenthesised query")
        close = cur.matching()
        body = [InsertStatement(name, None, cur.span(cur.pos + 1, close))]
        cur.pos = close + 1
        sugar = "transform"
    elif cur.accept("FROM", "RETAIN"):
        source = cur.name()
        cur.expect("WHILE")
        if not cur.at("("):
            raise SQLError("FROM RETAIN ... WHILE needs a parenthesised predicate")
        close = cur.matching()
        pred = cur.span(cur.pos + 1, close)
        cur.pos = close + 1
        # Upstream's rewrite: keep the input rows that satisfy the predicate, and delete the
        # output rows that stopped satisfying it (evaluated at the input's times only).
        body = [
            InsertStatement(name, None, f"SELECT * FROM {_quote(source)} WHERE ({pred})"),
            DeleteStatement(name, f"NOT ({pred})"),
        ]
        sugar = "retain"
    else:
        raise SQLError(f"CONTINUAL TASK {name}: expected ON INPUT, FROM TRANSFORM or FROM RETAIN")
    as_of = None
    if cur.accept("AS", "OF"):
        t = cur.next()
        if t.kind != "number" or not t.text.isdigit():
            raise SQLError(f"AS OF takes an integer time, got {t.text!r}")
        as_of = int(t.text)
    _done(cur, f"CREATE CONTINUAL TASK {name}")
    return ContinualTaskStatement(name, cols, source, body, st["snapshot"], sugar, as_of)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# ----------------------------------------------------------------------------- translation

_UNSUPPORTED_WORDS = {
    "MZ_LOGICAL_TIMESTAMP": "mz_logical_timestamp()",
    "SUBSCRIBE": "SUBSCRIBE",
    "MUTUALLY": "WITH MUTUALLY RECURSIVE",
}
_TYPE_REWRITES = {"JSONB": "JSON", "MZ_TIMESTAMP": "UBIGINT"}


def translate(sql: str) -> str:
    """Rewrite a Materialize/PostgreSQL query or expression for DuckDB.

    ``mz_now()`` becomes :data:`MZ_NOW`, to be replaced by the evaluation time.

    >>> translate("SELECT v::JSONB ->> 'a' FROM t WHERE ts + 5 > mz_now()")
    "SELECT v::JSON ->> 'a' FROM t WHERE ts + 5 > __colmz_mz_now__"
    """
    toks = tokenize(sql)
    pieces, last = [], 0
    i = 0
    while i < len(toks):
        t = toks[i]
        up = t.upper
        if up in _UNSUPPORTED_WORDS and (up != "MUTUALLY" or (i > 0 and toks[i - 1].upper == "WITH")):
                raise UnsupportedSQL(f"{_UNSUPPORTED_WORDS[up]} is not supported by colmz")
        if up == "AS" and i + 1 < len(toks) and toks[i + 1].upper == "OF":
            raise UnsupportedSQL("AS OF in a query is not supported by colmz (use as_of=)")
        if t.kind in ("word", "qident") and t.name.startswith(RESERVED_PREFIX):
            raise SQLError(f"names beginning with {RESERVED_PREFIX} are colmz's own: {t.text!r}")
        if up == "MZ_NOW":
            if not (i + 2 < len(toks) and toks[i + 1].text == "(" and toks[i + 2].text == ")"):
                raise SQLError("mz_now takes no arguments: write mz_now()")
            pieces.append(sql[last : t.start])
            pieces.append(MZ_NOW)
            last = toks[i + 2].end
            i += 3
            continue
        if up in _TYPE_REWRITES and i > 0 and (toks[i - 1].text == "::" or toks[i - 1].upper == "AS"):
            pieces.append(sql[last : t.start])
            pieces.append(_TYPE_REWRITES[up])
            last = t.end
        i += 1
    pieces.append(sql[last:])
    return "".join(pieces)


@functools.lru_cache(maxsize=1024)
def _now_pieces(translated: str) -> tuple[str, ...]:
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
    return MZ_NOW in translated and len(_now_pieces(translated)) > 1


def substitute_now(translated: str, value: str) -> str:
    """``translated`` with every :data:`MZ_NOW` token replaced by the SQL ``value``.

    Only the placeholder token is replaced -- never text inside a string literal or a
    quoted identifier (the split is remembered per text).

    >>> substitute_now(translate("SELECT mz_now(), 'mz_now()'"), "5")
    "SELECT 5, 'mz_now()'"
    """
    if MZ_NOW not in translated:
        return translated
    return value.join(_now_pieces(translated))


_QUERY_WORDS = {"SELECT", "WITH", "VALUES", "TABLE", "FROM"}
_FROM_ENDS = {"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "WINDOW", "QUALIFY",
              "UNION", "EXCEPT", "INTERSECT", "SELECT", "RETURNING", "FETCH"}
_JOIN_WORDS = {"JOIN"}
_NOT_ALIAS = {"ON", "USING", "JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "NATURAL",
              "ASOF", "SEMI", "ANTI", "POSITIONAL", "LATERAL", "TABLESAMPLE", "AND", "OR", "NOT",
              "IS", "IN", "LIKE", "ILIKE", "BETWEEN", "AS", "WITH"} | _FROM_ENDS


def relation_name(i: int) -> str:
    """The name colmz registers the ``i``-th relation of one query under with DuckDB.

    >>> relation_name(3)
    '__colmz_r3'
    """
    return f"{RESERVED_PREFIX}r{i}"


@functools.lru_cache(maxsize=1024)
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

    >>> bind_relations('SELECT t.k, "T".k FROM t JOIN "T" USING (k)', frozenset({"t", "T"}))
    ('SELECT "__colmz_r0".k, "__colmz_r1".k FROM "__colmz_r0" JOIN "__colmz_r1" USING (k)', ('t', 'T'))
    """
    toks = tokenize(translated)
    n = len(toks)
    # Names the query defines itself: WITH names (followed by AS ( or (cols) AS () and aliases.
    own: set[str] = set()
    for j, t in enumerate(toks):
        if t.kind not in ("word", "qident") or j + 1 >= n:
            continue
        k = j + 1
        if toks[k].text == "(" and toks[k].kind == "op":
            depth = 0
            for k in range(j + 1, n):
                if toks[k].text in "([" and toks[k].kind == "op":
                    depth += 1
                elif toks[k].text in ")]" and toks[k].kind == "op":
                    depth -= 1
                    if depth == 0:
                        break
            k += 1
        if k + 1 < n and toks[k].upper == "AS" and (
            toks[k + 1].text == "(" or (toks[k + 1].upper in ("MATERIALIZED", "NOT") and k > j + 0)
        ) and (j == 0 or toks[j - 1].upper in ("WITH", "RECURSIVE") or toks[j - 1].text == ","):
            own.add(t.name)
    # Relation positions: a stack of paren levels, each knowing whether it is a query and
    # whether a FROM list is expecting a relation ("expect") or has one ("after").
    relation_at: list[int] = []
    alias_at: set[int] = set()
    aliases: set[str] = set()
    levels = [{"query": True, "from": None}]
    for j, t in enumerate(toks):
        lv = levels[-1]
        if t.kind == "op" and t.text in "([":
            nxt = toks[j + 1] if j + 1 < n else None
            if lv["from"] == "expect":
                lv["from"] = "after"
            levels.append({"query": nxt is not None and nxt.upper in _QUERY_WORDS, "from": None})
            continue
        if t.kind == "op" and t.text in ")]":
            if len(levels) > 1:
                levels.pop()
            continue
        if not lv["query"]:
            continue
        up = t.upper
        starts = (
            (up == "FROM" and not (j > 0 and toks[j - 1].upper == "DISTINCT"))  # not IS DISTINCT FROM
            or (up in _JOIN_WORDS and lv["from"] is not None)
            or (up == "TABLE" and (j == 0 or toks[j - 1].text == "(" or toks[j - 1].upper in _FROM_ENDS))
            or (t.kind == "op" and t.text == "," and lv["from"] == "after")
        )
        if starts:
            lv["from"] = "expect"
        elif up in _FROM_ENDS:
            lv["from"] = None
        elif lv["from"] == "expect" and t.kind in ("word", "qident"):
            if up == "LATERAL":
                continue
            nxt = toks[j + 1] if j + 1 < n else None
            lv["from"] = "after"
            if nxt is not None and nxt.kind == "op" and nxt.text in ("(", "."):
                continue  # a table function, or a qualified name colmz does not register
            relation_at.append(j)
        elif lv["from"] == "after" and t.kind in ("word", "qident") and up not in _NOT_ALIAS:
            prev = toks[j - 1]
            if prev.upper == "AS" or (j - 1 in relation_at) or prev.text == ")":
                alias_at.add(j)
                aliases.add(t.name)
    wanted = [j for j in relation_at if toks[j].name in names and toks[j].name not in own]
    order: dict[str, int] = {}
    for j in wanted:
        order.setdefault(toks[j].name, len(order))
    if not order:
        return translated, ()
    out, last = [], 0
    for j, t in enumerate(toks):
        if t.kind not in ("word", "qident") or t.name not in order or j in alias_at:
            continue
        is_rel = j in relation_at
        is_qualifier = (
            j + 1 < n and toks[j + 1].text == "." and toks[j + 1].kind == "op"
            and not (j > 0 and toks[j - 1].text == ".")
        )
        if not (is_rel or (is_qualifier and t.name not in aliases)):
            continue
        out.append(translated[last : t.start])
        out.append('"' + relation_name(order[t.name]) + '"')
        last = t.end
    out.append(translated[last:])
    return "".join(out), tuple(order)


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


# ----------------------------------------------------------------------------- types

_TYPES = {
    "BOOL": pa.bool_(), "BOOLEAN": pa.bool_(),
    "SMALLINT": pa.int16(), "INT2": pa.int16(),
    "INT": pa.int32(), "INTEGER": pa.int32(), "INT4": pa.int32(),
    "BIGINT": pa.int64(), "INT8": pa.int64(),
    "UINT2": pa.uint16(), "UINT4": pa.uint32(), "UINT8": pa.uint64(),
    "UBIGINT": pa.uint64(), "MZ_TIMESTAMP": pa.uint64(),
    "REAL": pa.float32(), "FLOAT4": pa.float32(),
    "DOUBLE": pa.float64(), "FLOAT8": pa.float64(), "FLOAT": pa.float64(),
    "DOUBLE PRECISION": pa.float64(),
    "TEXT": pa.string(), "STRING": pa.string(), "VARCHAR": pa.string(),
    "CHARACTER VARYING": pa.string(), "JSON": pa.string(), "JSONB": pa.string(),
    "BYTEA": pa.binary(), "BLOB": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us"),
    "TIMESTAMP WITHOUT TIME ZONE": pa.timestamp("us"),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP WITH TIME ZONE": pa.timestamp("us", tz="UTC"),
    "INTERVAL": pa.duration("us"),
}


def arrow_type(type_sql: str) -> pa.DataType:
    """The Arrow type colmz stores for a SQL column type.

    >>> arrow_type("int8"), arrow_type("varchar(10)"), arrow_type("TIMESTAMPTZ")
    (DataType(int64), DataType(string), TimestampType(timestamp[us, tz=UTC]))
    """
    key = re.sub(r"\s+", " ", type_sql.strip()).upper()
    key = re.sub(r"\s*\(\s*\d+\s*(,\s*\d+\s*)?\)$", "", key)  # varchar(10), char(3)
    if key in _TYPES:
        return _TYPES[key]
    if key in ("CHAR", "CHARACTER", "BPCHAR"):
        # PostgreSQL pads CHAR(n) with blanks and ignores trailing blanks in comparisons;
        # DuckDB reads CHAR as VARCHAR, so no mapping gives PostgreSQL's answers.
        raise UnsupportedSQL(
            f"column type {type_sql} is not supported by colmz (blank-padded, and DuckDB "
            "compares it as VARCHAR): use TEXT or VARCHAR"
        )
    if key in ("NUMERIC", "DECIMAL"):
        # DuckDB's DECIMAL and Arrow's decimal128 would carry it exactly, but colmz's column
        # encoding (colmz.order.kind_of) has no decimal kind to sort, consolidate and store.
        raise UnsupportedSQL(
            f"column type {type_sql} is not supported by colmz (no decimal columns in colmz's "
            "encoding): use BIGINT (e.g. cents) or DOUBLE"
        )
    raise UnsupportedSQL(f"column type {type_sql} is not supported by colmz")


# ----------------------------------------------------------------------------- result names


def output_names(query: str) -> list[str | None] | None:
    """The column names PostgreSQL (and Materialize) give a ``SELECT``'s results.

    One entry per select-list item: its alias, else the column or function name (casts look
    through to their operand), else ``?column?``. ``None`` when the query is not one plain
    ``SELECT`` or its list holds a ``*`` -- then DuckDB's names stand.

    >>> output_names("SELECT sum(key)::INT, b.v AS w, k + 1, CAST(x AS TEXT) FROM t")
    ['sum', 'w', '?column?', 'x']
    """
    toks = tokenize(query)
    if not toks or toks[0].upper != "SELECT":
        return None
    cur = _Cursor(query, toks, 1)
    if cur.at("DISTINCT") or cur.at("ALL"):
        cur.pos += 1
        if cur.at("ON"):
            return None
    stop = len(toks)
    depth = 0
    for j in range(cur.pos, len(toks)):
        t = toks[j]
        if t.kind == "op" and t.text in "([":
            depth += 1
        elif t.kind == "op" and t.text in ")]":
            depth -= 1
        elif depth == 0 and t.upper in ("FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT",
                                        "UNION", "EXCEPT", "INTERSECT", "WINDOW", "OFFSET"):
            if t.upper in ("UNION", "EXCEPT", "INTERSECT"):
                return None
            stop = j
            break
    for j in range(stop, len(toks)):
        if toks[j].upper in ("UNION", "EXCEPT", "INTERSECT"):
            return None
    names: list[str | None] = []
    for a, b in _split(toks, cur.pos, stop, ","):
        item = toks[a:b]
        if any(t.kind == "op" and t.text == "*" for t in item) and (
            len(item) == 1 or (len(item) >= 3 and item[-2].text == "." and item[-1].text == "*")
        ):
            return None
        names.append(_item_name(item))
    return names


_NOT_ALIASES = {
    "NULL", "TRUE", "FALSE", "END", "IS", "NOT", "AND", "OR", "IN", "LIKE", "ILIKE", "BETWEEN",
    "DISTINCT", "UNKNOWN", "ASC", "DESC", "SIMILAR", "ESCAPE", "COLLATE",
}


def rename_like_postgres(table: pa.Table, query: str) -> pa.Table:
    """``table`` (a result of ``query``) with the column names PostgreSQL would give.

    >>> rename_like_postgres(pa.table({"max(v)": [1]}), "SELECT max(v) FROM t").column_names
    ['max']
    """
    names = output_names(query)
    if names is None or len(names) != table.num_columns:
        return table
    return table.rename_columns([n if n is not None else c for n, c in zip(names, table.column_names)])


def _item_name(item: list[Token]) -> str:
    if len(item) >= 2 and item[-2].upper == "AS" and item[-1].kind in ("word", "qident"):
        return item[-1].name
    if (
        len(item) >= 2
        and item[-1].kind in ("word", "qident")
        and item[-1].upper not in _NOT_ALIASES
        and (item[-2].kind in ("word", "qident", "number", "string") or item[-2].text == ")")
        and item[-2].upper not in _NOT_ALIASES
    ):
        return item[-1].name  # ``expr alias`` without AS
    # strip trailing casts: expr::type[::type...]
    while True:
        idx = [j for j, t in enumerate(item) if t.text == "::" and _depth_at(item, j) == 0]
        if not idx:
            break
        item = item[: idx[0]]
    if len(item) >= 4 and item[0].upper == "CAST" and item[1].text == "(" and item[-1].text == ")":
        depth, j = 0, 2
        for j in range(2, len(item) - 1):
            t = item[j]
            if t.text in "([":
                depth += 1
            elif t.text in ")]":
                depth -= 1
            elif depth == 0 and t.upper == "AS":
                break
        return _item_name(item[2:j])
    if len(item) >= 2 and item[0].text == "(" and item[-1].text == ")" and _depth_at(item, len(item) - 1) == 1:
        return _item_name(item[1:-1])
    if len(item) % 2 == 1 and all(
        (t.kind in ("word", "qident")) if j % 2 == 0 else t.text == "." for j, t in enumerate(item)
    ):
        return item[-1].name
    if len(item) >= 3 and item[0].kind in ("word", "qident") and item[1].text == "(" and item[-1].text == ")":
        return item[0].name
    if (len(item) >= 5 and item[-4].kind in ("word", "qident") and item[-5].text == "."
            and item[-3].text == "(" and item[-1].text == ")"):
        return item[-4].name
    if item and item[0].upper == "CASE":
        return "case"
    return "?column?"


def _depth_at(item: list[Token], j: int) -> int:
    d = 0
    for t in item[:j]:
        if t.kind == "op" and t.text in "([":
            d += 1
        elif t.kind == "op" and t.text in ")]":
            d -= 1
    return d
