"""Statements: Materialize's statements read from their tokens.

:func:`parse` tokenizes a script once, refuses unpaired parentheses (a ``)`` closing nothing
would hide the ``;`` after it), splits it at top-level ``;`` and reads each statement's
structure. The grammar follows ``src/sql-parser/src/parser.rs`` upstream: continual tasks
accept ``WITH`` before or after ``ON INPUT``, and the ``RETAIN`` sugar becomes an ``INSERT``
of the rows satisfying the predicate plus a ``DELETE`` of the output rows that no longer
do. Queries and predicates inside stay text, each a slice of the original (a statement is
persisted as that text); a ``DELETE``/``UPDATE`` predicate and an ``UPDATE`` value are
checked to be one expression here (:func:`colmz.sql.check_expression`) and again where the
builder puts them in a statement. :func:`output_names` reads a ``SELECT`` list for the
column names PostgreSQL gives.

Each distinct text of up to :data:`colmz.sql.tokens.CACHED_CHARS` characters is read once
(an LRU cache keyed by the text; a text that raises is not remembered): a statement re-run
at every time is not parsed again. The statements remembered are never handed out:
:func:`parse` returns copies owning their lists, so a caller setting a field changes
nothing another caller reads.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import pyarrow as pa

from colmz.sql.build import RESERVED_PREFIX, select_where
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.hints import blank_hints, option_items
from colmz.sql.names import resolve_item, sql_name
from colmz.sql.tokens import (
    Token,
    check_balanced,
    check_nesting,
    closing,
    require_text,
    share_slice,
    short_text_cache,
    tokenize,
    top_level,
)
from colmz.sql.tree import negation, parse_tree, prefetch_expressions, require_expression

__all__ = [
    "ContinualTaskStatement",
    "CreateDatabase",
    "CreateMaterializedView",
    "ExplainView",
    "Show",
    "Subscribe",
    "CreateSchema",
    "CreateTable",
    "DeleteStatement",
    "Drop",
    "InsertStatement",
    "Query",
    "UpdateStatement",
    "item_names",
    "output_names",
    "parse",
    "select_list_is_empty",
    "task_statement",
    "rename_like_postgres",
]

@dataclass
class Query:
    """A query to run as it is (``SELECT``, ``VALUES``, ``WITH``, ``TABLE``); ``as_of`` is the
    time of Materialize's trailing ``AS OF t`` (``None``: the catalog's ``now``)."""

    sql: str
    as_of: int | None = None


@dataclass
class CreateTable:
    name: str
    columns: list[tuple[str, str]]
    #: The parts before the item name (``x`` of ``x.t``, ``y, z`` of ``y.z.t``); see
    #: :func:`colmz.sql.names.resolve_item`. Every statement naming an object has one.
    qualifier: tuple[str, ...] = ()
    #: ``IF NOT EXISTS``: an existing object of the name is left as it is.
    if_not_exists: bool = False
    #: ``WITH (APPEND ONLY)``: the table only ever inserts (a retraction is refused), so the
    #: views over it may take Materialize's monotonic plans (``colmz.dataflow.plan``).
    append_only: bool = False


@dataclass
class InsertStatement:
    """``INSERT INTO table [(columns)] query``; ``query`` is the text after the column list."""

    table: str
    columns: list[str] | None
    query: str
    qualifier: tuple[str, ...] = ()


@dataclass
class DeleteStatement:
    """``DELETE FROM table [WHERE predicate]``; ``where`` is ``None`` for all rows."""

    table: str
    where: str | None
    qualifier: tuple[str, ...] = ()


@dataclass
class UpdateStatement:
    table: str
    assignments: list[tuple[str, str]]
    where: str | None
    qualifier: tuple[str, ...] = ()


@dataclass
class CreateMaterializedView:
    name: str
    columns: list[str] | None
    query: str
    qualifier: tuple[str, ...] = ()
    if_not_exists: bool = False
    #: ``WITH (INCREMENTAL = 'require' | 'allow')``: ``'require'`` refuses a view its
    #: operators cannot maintain (``colmz.dataflow.maintained``); ``None``: not said (allow).
    incremental: str | None = None


@dataclass
class ExplainView:
    """``EXPLAIN MATERIALIZED VIEW name``: how the view is maintained (rows of text)."""

    name: str
    qualifier: tuple[str, ...] = ()


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
    qualifier: tuple[str, ...] = ()
    input_qualifier: tuple[str, ...] = ()


@dataclass
class Drop:
    """``DROP kind [IF EXISTS] name, ... [CASCADE | RESTRICT]``: a one-part name is a
    ``str``, a qualified one the tuple of its parts. ``cascade`` is Materialize's default
    for the kind (``DATABASE``: cascade; the others: restrict) unless the statement says."""

    kind: str
    names: list[str | tuple[str, ...]]
    if_exists: bool = False
    cascade: bool = False


@dataclass
class Show:
    """Materialize's ``SHOW OBJECTS | TABLES | MATERIALIZED VIEWS | CONTINUAL TASKS
    [FROM schema]`` (``kind`` the objects' kind, ``None`` for every kind) and ``SHOW COLUMNS
    FROM name`` (``columns_of`` the object's name parts)."""

    kind: str | None
    schema: tuple[str, ...] | None = None
    columns_of: tuple[str, ...] | None = None


@dataclass
class Subscribe:
    """Materialize's ``SUBSCRIBE [TO] name | (query) [WITH (SNAPSHOT [= bool], PROGRESS [=
    bool])] [AS OF t] [UP TO t]``: exactly one of ``name`` (the object's name parts) and
    ``query`` (the text inside the parentheses); ``as_of``/``up_to`` integer times or ``None``.
    """

    name: tuple[str, ...] | None
    query: str | None
    as_of: int | None = None
    up_to: int | None = None
    snapshot: bool = True
    progress: bool = False


@dataclass
class CreateSchema:
    """``CREATE SCHEMA [IF NOT EXISTS] [database.]schema``."""

    name: str
    database: str | None = None
    if_not_exists: bool = False


@dataclass
class CreateDatabase:
    """``CREATE DATABASE [IF NOT EXISTS] name`` (with its schema ``public``, as Materialize)."""

    name: str
    if_not_exists: bool = False


@dataclass
class _Cursor:
    text: str
    toks: list[Token]
    pos: int
    end: int

    def peek(self, k: int = 0) -> Token | None:
        j = self.pos + k
        return self.toks[j] if j < self.end else None

    def at(self, *words: str) -> bool:
        j = self.pos
        if j + len(words) > self.end:
            return False  # (a word past the end matches nothing)
        toks = self.toks
        for w in words:  # (peek inlined: the parser asks this at nearly every token)
            t = toks[j]
            if t.upper != w and not (t.kind == "op" and t.text == w):
                return False
            j += 1
        return True

    def accept(self, *words: str) -> bool:
        if not self.at(*words):
            return False
        self.pos += len(words)
        return True

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
        """A one-part name (a column's, a cluster's)."""
        return _not_reserved(self.next().name)

    def qualified(self, most: int | None = None) -> tuple[str, ...]:
        """A possibly qualified object name: its parts, each unquoted (``x."a.b"`` is two),
        at ``most`` parts when given."""
        parts = [self.next().name]
        while self.at(".") and self.peek(1) is not None:
            self.pos += 1
            parts.append(self.next().name)
        for p in parts:
            _not_reserved(p)
        if most is not None and len(parts) > most:
            raise SQLError(f"qualified name did not have between 1 and {most} components: {'.'.join(parts)}")
        return tuple(parts)

    def object_name(self) -> tuple[str, tuple[str, ...]]:
        """``(item, qualifier)`` of an object name of 1 to 3 parts."""
        parts = self.qualified(3)
        return parts[-1], parts[:-1]

    def opening(self, word: str, missing: str) -> int:
        """After ``word``, the index of the token closing the ``(`` that must follow it
        (:class:`SQLError` ``missing`` when none does)."""
        self.expect(word)
        if not self.at("("):
            raise SQLError(missing)
        return self.matching()

    def matching(self) -> int:
        """Index of the token closing the ``(`` at ``pos``."""
        at = closing(self.toks, self.pos, self.end)
        if at < 0:
            raise SQLError("unbalanced parentheses")
        return at

    def items(self) -> list[tuple[int, int]]:
        """The token ranges of the comma-separated items in the parentheses at ``pos``, which
        it moves past them."""
        close = self.matching()
        got = _split(self.toks, self.pos + 1, close, ",")
        self.pos = close + 1
        return got

    def query_rest(self) -> str:
        """The rest of the statement, a query colmz translates next: its tokens are shared with
        :func:`colmz.sql.tokens.tokenize` (:func:`~colmz.sql.tokens.share_slice`)."""
        return share_slice(self.text, self.toks, self.pos, self.end)

    def span(self, a: int, b: int) -> str:
        if a >= b:
            return ""
        return self.text[self.toks[a].start : self.toks[b - 1].end]


def _split(toks: list[Token], lo: int, hi: int, sep: str) -> list[tuple[int, int]]:
    """Token ranges between top-level ``sep`` operators in ``toks[lo:hi]``."""
    cuts = [j for j in top_level(toks, lo, hi) if toks[j].kind == "op" and toks[j].text == sep]
    return [(a, b) for a, b in zip([lo, *(j + 1 for j in cuts)], [*cuts, hi]) if a < b]


def _not_reserved(name: str) -> str:
    if name.startswith(RESERVED_PREFIX):
        raise SQLError(f"names beginning with {RESERVED_PREFIX} are colmz's own: {name!r}")
    return name


def _column_defs(cur: _Cursor) -> list[tuple[str, str]]:
    cols = []
    for a, b in cur.items():
        name = _not_reserved(cur.toks[a].name)
        type_sql = cur.span(a + 1, b)
        if not type_sql:
            raise SQLError(f"column {name!r} has no type")
        cols.append((name, type_sql))
    return cols


#: The ``WITH (...)`` options each statement reads, and the values each takes as written
#: (lower-cased; ``None``: the name alone). ``APPEND ONLY`` is colmz's declaration of an
#: append-only table (Materialize infers append-only inputs from their sources);
#: ``INCREMENTAL 'require'`` refuses a view its operators cannot maintain.
_BOOL = {None: True, "true": True, "false": False}
_WITH_OPTIONS = {
    "CREATE TABLE": {"APPEND ONLY": {None: True}},
    "CREATE MATERIALIZED VIEW": {"INCREMENTAL": {"'require'": "require", "'allow'": "allow"}},
    "CONTINUAL TASK": {"SNAPSHOT": _BOOL},
    "SUBSCRIBE": {"SNAPSHOT": _BOOL, "PROGRESS": _BOOL},
}


def _with_options(cur: _Cursor, statement: str) -> dict[str, object]:
    """``WITH (NAME [[=] value], ...)`` at ``cur`` (or nothing: ``{}``): each option's value by
    its name (lower case, ``_`` for a space), the options and values :data:`_WITH_OPTIONS`
    gives ``statement``; any other option is unsupported."""
    if not cur.at("WITH"):
        return {}
    known = _WITH_OPTIONS[statement]
    close = cur.opening("WITH", f"{statement} ... WITH needs an option list in parentheses")
    got = {}
    for name, eq, value, written in option_items(cur.text, cur.toks, cur.pos + 1, close, tuple(known)):
        if name is None:
            _unsupported(f"{statement} ... WITH ({written}) (the options colmz reads: {', '.join(known)})")
        key = value[0].text.lower() if len(value) == 1 else None if not (eq or value) else ""
        if key not in known[name]:
            raise SQLError(f"{statement} option {name} takes {' or '.join(k for k in known[name] if k) or 'no value'}, "
                           f"got {cur.text[value[0].start:value[-1].end] if value else ''!r}")
        got[name.lower().replace(" ", "_")] = known[name][key]
    cur.pos = close + 1
    return got


def _name_list(cur: _Cursor) -> list[str]:
    return [cur.toks[a].name for a, _ in cur.items()]


def parse(text: str) -> list:
    """Parse a script of statements separated by ``;``.

    >>> s, = parse("CREATE CONTINUAL TASK up (k INT) ON INPUT t AS (INSERT INTO up SELECT k FROM t)")
    >>> s.name, s.input, s.snapshot, s.body[0].query
    ('up', 't', True, 'SELECT k FROM t')
    """
    return [_fresh(s) for s in _parsed(require_text(text, "text"))]


@short_text_cache(1024)
def _parsed(text: str) -> tuple:
    # The statements of ``text``, remembered per text (a statement re-run at every time is
    # parsed once): what is read depends on the text alone. Never handed out -- callers get
    # copies (:func:`_fresh`), as they may set fields (the catalog sets a task's ``as_of``).
    toks = tokenize(text)
    check_balanced(toks, text)
    check_nesting(toks, text)
    # (a text without a ";" is one statement: its tokens are not walked for one)
    ranges = _split(toks, 0, len(toks), ";") if ";" in text else [(0, len(toks))] if toks else []
    return tuple(_statement(_Cursor(text, toks, a, b)) for a, b in ranges)


def _fresh(s):
    # A copy of statement ``s`` owning its lists (a task's ``body`` copied statement by
    # statement); the rest of its fields are strings, numbers and tuples, shared.
    c = object.__new__(type(s))
    d = c.__dict__
    d.update(s.__dict__)
    for k, v in d.items():
        if type(v) is list:
            d[k] = [_fresh(x) if hasattr(x, "__dataclass_fields__") else x for x in v]
    return c


parse.cache_clear = _parsed.cache_clear
parse.cache_info = _parsed.cache_info


_QUERY_STARTS = {"SELECT", "WITH", "VALUES", "TABLE"}


def _statement(cur: _Cursor):
    first = cur.peek()
    if first.upper in _QUERY_STARTS or first.text == "(":
        return _query(cur)
    for words, read in _STATEMENTS:
        if cur.accept(*words):
            return read(cur)
    words = " ".join(t.text.upper() for t in cur.toks[cur.pos : min(cur.pos + 3, cur.end)])
    if first.text.upper() not in STATEMENT_WORDS:
        # Not a statement PostgreSQL knows either (a typo such as SELEC): its syntax error.
        raise SQLError(f"syntax error at or near {first.text!r}: not the start of an SQL statement")
    _unsupported(words)


def _create_table(cur: _Cursor) -> CreateTable:
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    name, qual = cur.object_name()
    if cur.at("AS"):
        _unsupported("CREATE TABLE ... AS")
    if not cur.at("("):
        raise SQLError(f"CREATE TABLE {name} needs a column list")
    cols = _column_defs(cur)
    if not cols:  # PostgreSQL's table of no columns: colmz's collections have at least one
        _unsupported(f"CREATE TABLE {name} () (a table of no columns)")
    append_only = _with_options(cur, "CREATE TABLE").get("append_only", False)
    _done(cur, "CREATE TABLE")
    return CreateTable(name, cols, qual, if_not_exists, append_only)


def _create_view(cur: _Cursor) -> CreateMaterializedView:
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    name, qual = cur.object_name()
    cols = _name_list(cur) if cur.at("(") else None
    if cur.accept("IN", "CLUSTER"):
        cur.name()
    incremental = _with_options(cur, "CREATE MATERIALIZED VIEW").get("incremental")
    cur.expect("AS")
    return CreateMaterializedView(name, cols, cur.query_rest(), qual, if_not_exists, incremental)


def _explain_view(cur: _Cursor) -> ExplainView:
    name, qual = cur.object_name()
    _done(cur, "EXPLAIN MATERIALIZED VIEW")
    return ExplainView(name, qual)


def _create_schema(cur: _Cursor) -> CreateSchema:
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    parts = cur.qualified(2)
    _done(cur, "CREATE SCHEMA")
    return CreateSchema(parts[-1], parts[0] if len(parts) == 2 else None, if_not_exists)


def _create_database(cur: _Cursor) -> CreateDatabase:
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    parts = cur.qualified()
    if len(parts) != 1:
        raise SQLError(f"a database name has one part, got {'.'.join(parts)}")
    _done(cur, "CREATE DATABASE")
    return CreateDatabase(parts[0], if_not_exists)


def _update(cur: _Cursor) -> UpdateStatement:
    table, qual = cur.object_name()
    alias = cur.peek()
    if alias is not None and alias.kind == "word" and alias.upper != "SET":  # AS too
        _unsupported("UPDATE with a table alias")
    cur.expect("SET")
    if _find_word(cur, "RETURNING") < cur.end:
        _unsupported("UPDATE ... RETURNING")
    where_at = _find_word(cur, "WHERE")
    if any(cur.toks[j].upper == "FROM" and cur.toks[j - 1].upper != "DISTINCT"  # (IS DISTINCT FROM)
           for j in top_level(cur.toks, cur.pos, where_at)):
        _unsupported("UPDATE ... FROM")
    assigns: list[tuple[str, str]] = []
    for a, b in _split(cur.toks, cur.pos, where_at, ","):
        pairs = _multiple_assignment(cur, a, b, table) if cur.toks[a].text == "(" else None
        if pairs is None:
            if b - a < 3 or cur.toks[a + 1].text != "=":
                raise SQLError(f"UPDATE {table}: expected `column = expression`, got {cur.span(a, b)!r}")
            pairs = [(cur.toks[a].name, share_slice(cur.text, cur.toks, a + 2, b))]
        for name, expr in pairs:
            if any(name == n for n, _ in assigns):  # PostgreSQL's words (its transformUpdateTargetList)
                raise SQLError(f'multiple assignments to same column "{name}"')
            assigns.append((name, expr))
    cur.pos = where_at  # the end, or a WHERE
    where = cur.query_rest() if cur.accept("WHERE") else None
    # every piece DuckDB checks, parsed in one call (a call costs about a short text's parse)
    prefetch_expressions([expr for _, expr in assigns] + ([where] if where else []))
    for name, expr in assigns:
        require_expression(expr, f"UPDATE {table}: value of {name!r}")
    if where is not None:
        if not where:
            raise SQLError(f"UPDATE {table}: WHERE without a predicate")
        require_expression(where, f"UPDATE {table}: predicate")
    return UpdateStatement(table, assigns, where, qual)


def _multiple_assignment(cur: _Cursor, a: int, b: int, table: str) -> list[tuple[str, str]] | None:
    """The ``(column, expression)`` pairs of ``SET (c1, c2) = (e1, e2)`` or ``= ROW(e1, e2)``
    at ``toks[a:b]``, one per column as PostgreSQL's grammar expands them (each value read
    from the old row); ``None`` when it is not that form. A sub-``SELECT`` source is refused
    by name; a parenthesised source of one column, and a count that differs, raise
    PostgreSQL's errors."""
    toks = cur.toks
    close = closing(toks, a, b)
    if close < 0 or close + 2 >= b or toks[close + 1].text != "=":
        return None
    names = [toks[x].name for x, y in _split(toks, a + 1, close, ",") if y == x + 1 and toks[x].kind == "word"]
    if not names or len(names) != len(_split(toks, a + 1, close, ",")):
        return None
    src = close + 2
    row = toks[src].upper == "ROW" and src + 1 < b and toks[src + 1].text == "("
    open_at = src + 1 if row else src
    if toks[open_at].text != "(" or closing(toks, open_at, b + 1) != b - 1:
        return None
    first = toks[open_at + 1] if open_at + 1 < b - 1 else None
    if not row and first is not None and first.upper in ("SELECT", "WITH", "VALUES", "TABLE"):
        _unsupported(f"UPDATE {table} SET (columns) = (sub-SELECT)")
    if not row and len(names) == 1:
        raise SQLError("source for a multiple-column UPDATE item must be a sub-SELECT or ROW() expression")
    values = _split(toks, open_at + 1, b - 1, ",")
    if len(values) != len(names):
        raise SQLError("number of columns does not match number of values")
    return [(n, share_slice(cur.text, toks, x, y)) for n, (x, y) in zip(names, values)]


#: The first words of PostgreSQL's statements (its ``gram.y``): a statement starting with
#: one colmz does not run is unsupported; starting with anything else, a syntax error.
STATEMENT_WORDS = frozenset((
    "ABORT", "ALTER", "ANALYZE", "BEGIN", "CALL", "CHECKPOINT", "CLOSE", "CLUSTER", "COMMENT",
    "COMMIT", "COPY", "CREATE", "DEALLOCATE", "DECLARE", "DELETE", "DISCARD", "DO", "DROP", "END",
    "EXECUTE", "EXPLAIN", "FETCH", "GRANT", "IMPORT", "INSERT", "LISTEN", "LOAD", "LOCK", "MERGE",
    "MOVE", "NOTIFY", "PREPARE", "REASSIGN", "REFRESH", "REINDEX", "RELEASE", "RESET", "REVOKE",
    "ROLLBACK", "SAVEPOINT", "SECURITY", "SELECT", "SET", "SHOW", "START", "TABLE", "TRUNCATE",
    "UNLISTEN", "UPDATE", "VACUUM", "VALUES", "WITH", "SUBSCRIBE", "TAIL",
))

def _query(cur: _Cursor) -> Query:
    """A query, with Materialize's trailing ``AS OF t`` taken off (``t`` an integer
    literal; ``AS OF AT LEAST`` and expressions are not supported)."""
    toks, end = cur.toks, cur.end
    written = cur.text[toks[cur.pos].start : toks[end - 1].end]
    # (an OF is "of" folded, in ASCII: a text without one is not walked for it)
    for j in top_level(toks, cur.pos, end - 1) if "of" in written.lower() or not written.isascii() else ():
        t = toks[j]
        if t.upper == "AS" and toks[j + 1].upper == "OF":
            when = toks[j + 2 : end]
            if not when or not (when[0].kind == "number" or when[0].upper in ("AT", "NOW", "MZ_NOW")):
                continue  # a column named "of" (SELECT x AS of), not Materialize's AS OF
            if len(when) == 1 and when[0].kind == "number" and when[0].text.isdigit():
                text = cur.text[toks[cur.pos].start : t.start].strip()
                return Query(text, int(when[0].text))
            _unsupported(f"AS OF {cur.text[toks[j + 2].start : toks[end - 1].end] if when else ''}".strip()
                         + " (AS OF takes an integer time)")
    return Query(cur.query_rest())


#: ``SHOW`` kinds: the words after ``SHOW`` and the catalog kind they list.
_SHOW_KINDS = {("OBJECTS",): None, ("TABLES",): "table", ("MATERIALIZED", "VIEWS"): "materialized view",
               ("CONTINUAL", "TASKS"): "continual task"}


def _show(cur: _Cursor) -> Show:
    if cur.accept("COLUMNS"):
        if not (cur.accept("FROM") or cur.accept("IN")):
            raise SQLError("SHOW COLUMNS needs FROM name")
        parts = cur.qualified()
        _done(cur, "SHOW COLUMNS")
        return Show(None, None, tuple(parts))
    for words, kind in _SHOW_KINDS.items():
        if cur.accept(*words):
            schema = tuple(cur.qualified()) if (cur.accept("FROM") or cur.accept("IN")) else None
            _done(cur, "SHOW " + " ".join(words))
            return Show(kind, schema)
    words = " ".join(t.text.upper() for t in cur.toks[cur.pos : min(cur.pos + 3, cur.end)])
    _unsupported(f"SHOW {words}".strip())


def _subscribe(cur: _Cursor) -> Subscribe:
    """The rest of ``SUBSCRIBE`` (after the word), as ``src/sql-parser/src/parser.rs``
    upstream reads it: ``[TO] name | (query)``, then ``WITH (...)``, ``AS OF``, ``UP TO``."""
    cur.accept("TO")
    name = query = None
    if cur.at("("):
        close = cur.matching()
        query = cur.span(cur.pos + 1, close).strip()
        if not query:
            raise SQLError("SUBSCRIBE (): the parentheses hold no query")
        cur.pos = close + 1
    else:
        if cur.peek() is None:
            raise SQLError("SUBSCRIBE needs an object name or a (query)")
        name = cur.qualified(3)
    if cur.at("ENVELOPE") or cur.at("WITHIN"):
        _unsupported(f"SUBSCRIBE ... {cur.peek().text.upper()}")
    out = Subscribe(name, query, **_with_options(cur, "SUBSCRIBE"))
    out.as_of, out.up_to = _time(cur, "SUBSCRIBE", "AS", "OF"), _time(cur, "SUBSCRIBE", "UP", "TO")
    _done(cur, "SUBSCRIBE")
    return out


def _unsupported(what: str):
    raise UnsupportedSQL(f"{what} is not supported by colmz")


def _time(cur: _Cursor, what: str, *words: str) -> int | None:
    """The integer time of Materialize's ``AS OF t`` or ``UP TO t`` (``words``) at ``cur``,
    ``None`` when the clause is not there (``AS OF AT LEAST`` is not supported)."""
    if not cur.accept(*words):
        return None
    t = cur.peek()
    if t is not None and t.upper == "AT":
        _unsupported(f"{what} ... AS OF AT LEAST (AS OF takes an integer time)")
    if t is None or t.kind != "number" or not t.text.isdigit():
        raise SQLError(f"{what} ... {' '.join(words)} takes an integer time, got "
                       f"{t.text if t else 'end of statement'!r}")
    cur.pos += 1
    return int(t.text)


def _done(cur: _Cursor, what: str) -> None:
    if cur.peek() is not None:
        raise SQLError(f"{what}: unexpected {cur.peek().text!r}")


def _find_word(cur: _Cursor, word: str) -> int:
    return next((j for j in top_level(cur.toks, cur.pos, cur.end) if cur.toks[j].upper == word), cur.end)


def _drop(cur: _Cursor) -> Drop:
    kinds = (("TABLE",), ("MATERIALIZED", "VIEW"), ("CONTINUAL", "TASK"), ("SCHEMA",), ("DATABASE",))
    kind = next((" ".join(words) for words in kinds if cur.accept(*words)), None)
    if kind is None:
        _unsupported("DROP " + (cur.peek().text if cur.peek() else ""))
    if_exists = cur.accept("IF", "EXISTS")
    # Materialize drops a database with its schemas unless told RESTRICT, anything else
    # only when told CASCADE.
    cascade = kind == "DATABASE"
    if cur.end > cur.pos and cur.toks[cur.end - 1].upper in ("CASCADE", "RESTRICT"):
        cascade = cur.toks[cur.end - 1].upper == "CASCADE"
        cur.end -= 1
    if cur.peek() is None:
        raise SQLError(f"DROP {kind} needs a name")
    names: list[str | tuple[str, ...]] = []
    while not names or cur.accept(","):
        parts = cur.qualified({"SCHEMA": 2, "DATABASE": 1}.get(kind, 3))
        names.append(parts[0] if len(parts) == 1 else parts)
    _done(cur, f"DROP {kind}")
    if kind in ("SCHEMA", "DATABASE") and len(names) > 1:
        _unsupported(f"DROP {kind} with multiple names")
    return Drop(kind, names, if_exists, cascade)


def _insert(cur: _Cursor) -> InsertStatement:
    table, qual = cur.object_name()
    cols = None
    if cur.at("(") and not (cur.peek(1) is not None and cur.peek(1).upper in ("SELECT", "WITH", "VALUES")):
        cols = _name_list(cur)
    if cur.at("DEFAULT", "VALUES"):
        _unsupported("INSERT ... DEFAULT VALUES")
    query = cur.query_rest()
    if not query:
        raise SQLError(f"INSERT INTO {table} needs VALUES or a query")
    if _find_word(cur, "RETURNING") < cur.end:
        _unsupported("INSERT ... RETURNING")
    if (on := _find_word(cur, "ON")) < cur.end and cur.toks[on + 1].upper == "CONFLICT":
        _unsupported("INSERT ... ON CONFLICT")
    return InsertStatement(table, cols, query, qual)


def _delete(cur: _Cursor) -> DeleteStatement:
    table, qual = cur.object_name()
    if cur.peek() is not None and not cur.at("WHERE"):
        _unsupported("DELETE with USING or a table alias")
    where = None
    if cur.accept("WHERE"):
        where = cur.query_rest()
        if not where:
            raise SQLError(f"DELETE FROM {table}: WHERE without a predicate")
        if _find_word(cur, "RETURNING") < cur.end:
            _unsupported("DELETE ... RETURNING")
        require_expression(where, f"DELETE FROM {table}: predicate")
    return DeleteStatement(table, where, qual)


#: A continual task's forms: the words before its input, the word before its parenthesised
#: part (the statements, the query, the predicate), the sugar's name (``None``: the
#: statements written out) and the error when no parentheses follow.
_TASK_FORMS = ((("ON", "INPUT"), "AS", None, "CONTINUAL TASK body must be parenthesised: AS ( ... )"),
               (("FROM", "TRANSFORM"), "USING", "transform", "FROM TRANSFORM ... USING needs a parenthesised query"),
               (("FROM", "RETAIN"), "WHILE", "retain", "FROM RETAIN ... WHILE needs a parenthesised predicate"))


def _continual_task(cur: _Cursor) -> ContinualTaskStatement:
    name, qual = cur.object_name()
    me = resolve_item((*qual, name))
    label = sql_name((*qual, name))
    cols = _column_defs(cur) if cur.at("(") else None
    if cur.accept("IN", "CLUSTER"):
        cur.name()
    options = _with_options(cur, "CONTINUAL TASK")
    form = next((f for f in _TASK_FORMS if cur.accept(*f[0])), None)
    if form is None:
        raise SQLError(f"CONTINUAL TASK {label}: expected ON INPUT, FROM TRANSFORM or FROM RETAIN")
    _, word, sugar, missing = form
    source, source_qual = cur.object_name()
    if sugar is None:
        options.update(_with_options(cur, "CONTINUAL TASK"))
    close = cur.opening(word, missing)
    lo, cur.pos = cur.pos + 1, close + 1
    if sugar is None:
        body = [_task_statement(_Cursor(cur.text, cur.toks, a, b), f"CONTINUAL TASK {label} statement {i + 1}", me,
                                label) for i, (a, b) in enumerate(_split(cur.toks, lo, close, ";"))]
    elif sugar == "transform":
        body = [InsertStatement(name, None, share_slice(cur.text, cur.toks, lo, close), qual)]
    else:
        # Upstream's rewrite: keep the input rows that satisfy the predicate, and delete the
        # output rows that stopped satisfying it (evaluated at the input's times only). The
        # predicate is checked once; its negation is then one expression too (negation).
        pred = share_slice(cur.text, cur.toks, lo, close)
        body = [
            InsertStatement(name, None, select_where((*source_qual, source), pred), qual),
            DeleteStatement(name, negation(pred, f"DELETE FROM {'.'.join((*source_qual, source))}: predicate"), qual),
        ]
    as_of = _time(cur, f"CREATE CONTINUAL TASK {label}", "AS", "OF")
    _done(cur, f"CREATE CONTINUAL TASK {label}")
    return ContinualTaskStatement(name, cols, source, body, options.get("snapshot", True), sugar, as_of, qual,
                                  source_qual)


def _task_statement(sub: _Cursor, where: str, me, label: str) -> InsertStatement | DeleteStatement:
    # One statement of a task's body: an INSERT INTO or a DELETE FROM its own output, its
    # errors named by ``where`` (the task and the statement's number).
    try:
        if sub.accept("INSERT", "INTO"):
            s = _insert(sub)
            if s.columns is not None:
                _unsupported("a column list in a CONTINUAL TASK INSERT")
        elif sub.accept("DELETE", "FROM"):
            s = _delete(sub)
        else:
            raise SQLError(f"statements are INSERT or DELETE, got {sub.span(sub.pos, sub.end)[:40]!r}")
    except SQLError as e:
        raise type(e)(f"{where}: {e}") from None
    if resolve_item((*s.qualifier, s.table)) != me:
        kind = "INSERT INTO" if isinstance(s, InsertStatement) else "DELETE FROM"
        raise SQLError(f"{where} ({kind} {sql_name((*s.qualifier, s.table))}): a continual task writes only its "
                       f"own output {label}")
    return s


#: Each statement colmz runs (a query aside): its first words and its reader, which reads
#: what follows them.
_STATEMENTS = (
    (("CREATE", "TABLE"), _create_table),
    (("CREATE", "MATERIALIZED", "VIEW"), _create_view),
    (("CREATE", "OR", "REPLACE", "MATERIALIZED", "VIEW"), _create_view),
    (("CREATE", "SCHEMA"), _create_schema),
    (("CREATE", "DATABASE"), _create_database),
    (("CREATE", "CONTINUAL", "TASK"), _continual_task),
    (("EXPLAIN", "MATERIALIZED", "VIEW"), _explain_view),
    (("INSERT", "INTO"), _insert),
    (("DELETE", "FROM"), _delete),
    (("UPDATE",), _update),
    (("DROP",), _drop),
    (("SHOW",), _show),
    (("SUBSCRIBE",), _subscribe),
)


def select_list_is_empty(query: str) -> bool:
    """Whether ``query`` is a ``SELECT`` of no columns (``SELECT FROM t``: PostgreSQL's
    zero-column rows, which DuckDB cannot parse).

    >>> select_list_is_empty("SELECT FROM t WHERE k > 1"), select_list_is_empty("SELECT k FROM t")
    (True, False)
    """
    toks = tokenize(query)
    j = 1 if toks and toks[0].upper == "SELECT" else None
    if j is None:
        return False
    if j < len(toks) and toks[j].upper in ("DISTINCT", "ALL") and not (
            j + 1 < len(toks) and toks[j + 1].upper == "ON"):
        j += 1
    return j == len(toks) or toks[j].upper in (
        "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "UNION", "EXCEPT", "INTERSECT")


def task_statement(task: str | tuple[str, ...], index: int, kind: str, predicate: bool = False) -> str:
    """How errors name statement ``index`` (0-based) of continual task ``task``: its number
    (1-based, as written in ``AS (...)``) and its construct.

    >>> task_statement("ct", 1, "delete", predicate=True)
    'CONTINUAL TASK ct statement 2 (DELETE FROM ct WHERE ...)'
    """
    name = task if isinstance(task, str) else sql_name(task[-3:] if len(task) > 3 else task)
    construct = (f"INSERT INTO {name}" if kind == "insert"
                 else f"DELETE FROM {name}" + (" WHERE ..." if predicate else ""))
    return f"CONTINUAL TASK {name} statement {index + 1} ({construct})"


def output_names(query: str) -> list[str | None] | None:
    """The column names PostgreSQL (and Materialize) give a query's results.

    One entry per select-list item of DuckDB's tree of the query: its alias, else the
    column or function name (casts look through to their operand), else ``?column?``, by
    PostgreSQL's rule (``FigureColnameInternal``, ``src/backend/parser/parse_target.c``). A
    set operation (``UNION``, ``EXCEPT``, ``INTERSECT``) is named by its first ``SELECT``, as
    PostgreSQL names it. ``None`` when the list holds a ``*`` (or DuckDB cannot parse the
    text) -- then DuckDB's names stand.

    >>> output_names("SELECT sum(key)::INT, b.v AS w, k + 1, CAST(x AS TEXT) FROM t")
    ['sum', 'w', '?column?', 'x']
    >>> output_names("SELECT 1 UNION SELECT 2 AS b")
    ['?column?']
    >>> output_names("SELECT NULL, NULL::int, trim(x), (SELECT max(v) FROM t), DATE '2024-01-01'")
    ['?column?', 'int4', 'btrim', 'max', 'date']
    >>> output_names("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS m, (s).f::text FROM t")
    ['m', 'f']
    """
    query = blank_hints(query)  # OPTIONS (...) hints name nothing (same offsets)
    if "?" in query or "#>" in query:  # jsonb's ?, #> ... (DuckDB reads ? as a parameter)
        from colmz.sql.jsonb import spell_operators  # (imports this package's modules)

        query = spell_operators(query, tokenize(query))
    try:
        q = parse_tree(query)[0]
    except SQLError:
        return None
    toks = tokenize(query)
    return _names(q, query, toks, [t.start for t in toks])


def item_names(q, text: str) -> list[str | None] | None:
    """:func:`output_names` of query node ``q`` of ``text`` (a node of ``parse_tree(text)``,
    also one inside it).

    >>> item_names(parse_tree("SELECT a + 1, b::text AS c, count(*) FROM t")[0], "SELECT a + 1, b::text AS c, count(*) FROM t")
    ['?column?', 'c', 'count']
    """
    toks = tokenize(text)
    return _names(q, text, toks, [t.start for t in toks])


def _names(q, text: str, toks: list[Token], starts: list[int]) -> list[str | None] | None:
    # output_names of query node ``q`` of ``text`` (also a scalar subquery's, in place)
    while q.type != "SELECT_NODE":
        if not q.children:
            return None
        q = q.children[0]
    if any(e.cls == "STAR" for e in q.items):
        return None
    return [_alias(e, text, toks, starts) if e.alias else _figure_name(e, text, toks, starts)[0] for e in q.items]


def _alias(e, text: str, toks: list[Token], starts: list[int]) -> str:
    # An item's alias as PostgreSQL reads it (a bare word folded to lower case): the first
    # word after the item's span (its parentheses and AS skipped) spelling DuckDB's alias.
    for t in toks[bisect.bisect_left(starts, max(e.end, 0)):]:
        if t.kind in ("word", "qident") and t.name.lower() == e.alias.lower():
            return t.name
    return e.alias


def rename_like_postgres(table: pa.Table, query: str) -> pa.Table:
    """``table`` (a result of ``query``) with the column names PostgreSQL would give.

    >>> rename_like_postgres(pa.table({"max(v)": [1]}), "SELECT max(v) FROM t").column_names
    ['max']
    """
    names = output_names(query)
    if names is not None:
        _check_order_names(query, names)
    if names is None or len(names) != table.num_columns:
        # a column translate marked as a repeated name (a subquery's second ?column? under
        # a *) gets its name back (colmz.sql.transforms.duplicate_name)
        from colmz.sql.transforms import undo_duplicate_name

        columns = [undo_duplicate_name(c) for c in table.column_names]
        return table if columns == table.column_names else table.rename_columns(columns)
    return table.rename_columns([n if n is not None else c for n, c in zip(names, table.column_names)])


def _check_order_names(query: str, names: list) -> None:
    # PostgreSQL reads a bare name in ORDER BY as an output column first: a name that two
    # output columns of different expressions bear is its error (DuckDB takes one of them).
    # Expressions are compared by their text without spaces or case, a column by its name
    # (a superset of equal).
    if "?" in query or "#>" in query:  # (jsonb's operators, as output_names reads them)
        return
    q = parse_tree(blank_hints(query))[0]
    if q.type != "SELECT_NODE":
        return
    for m in q.modifiers:
        for e in m.expressions if m.type == "ORDER_MODIFIER" else ():
            if e.cls == "COLUMN_REF" and len(e.name) == 1:
                texts = {x.name[-1].lower() if x.cls == "COLUMN_REF" else "".join(query[x.start : x.end].split()).lower()
                         for x, n in zip(q.items, names) if n == e.name[0] and x.start >= 0}
                if len(texts) > 1:
                    raise SQLError(f'ORDER BY "{e.name[0]}" is ambiguous')


#: The names PostgreSQL's grammar gives the SQL spellings of its types; a cast names its
#: column by them (``1::integer`` is ``int4``).
_TYPE_NAMES = {
    "int": "int4", "integer": "int4", "int4": "int4", "bigint": "int8", "int8": "int8",
    "smallint": "int2", "int2": "int2", "real": "float4", "float4": "float4",
    "double precision": "float8", "float8": "float8", "float": "float8", "numeric": "numeric",
    "decimal": "numeric", "dec": "numeric", "boolean": "bool", "bool": "bool",
    "character varying": "varchar", "varchar": "varchar", "character": "bpchar", "char": "bpchar",
    "timestamp with time zone": "timestamptz", "timestamp without time zone": "timestamp",
    "time with time zone": "timetz", "time without time zone": "time",
}


def _type_name(toks: list[Token]) -> str:
    # The type of a cast as PostgreSQL names it: its top-level words joined (modifiers
    # ``(..)`` and array bounds ``[]`` dropped), the grammar's spellings mapped
    # (``_TYPE_NAMES``); ``float(p)`` is real up to p = 24.
    words = [toks[k].name for k in top_level(toks, 0) if toks[k].kind in ("word", "qident")]
    if words[:1] == ["float"] and len(toks) > 2 and toks[1].text == "(" and toks[2].kind == "number" \
            and toks[2].text.isdigit() and int(toks[2].text) <= 24:
        return "float4"
    return _TYPE_NAMES.get(" ".join(words), words[-1] if words else "?column?")


#: DuckDB's node types PostgreSQL names by their construct.
_NODE_NAMES = {"OPERATOR_COALESCE": "coalesce", "ARRAY_CONSTRUCTOR": "array", "GROUPING_FUNCTION": "grouping"}


def _figure_name(e, text: str, toks: list[Token], starts: list[int]) -> tuple[str, int]:
    # PostgreSQL's FigureColnameInternal over DuckDB's node ``e``: a name and its strength --
    # 2 for a column, a call, EXISTS/ARRAY/a scalar subquery; 1 for ``case`` and a cast's type
    # name; 0 for ``?column?`` (an operator's result, a constant).
    if e.cls == "COLUMN_REF" and e.end > 0:
        i = bisect.bisect_left(starts, e.end) - 1
        return (toks[i].name, 2) if i >= 0 and toks[i].kind in ("word", "qident") else (e.name[-1], 2)
    if e.cls == "CAST":
        name, strength = _figure_name(e.children[0], text, toks, starts)
        t = e.children[1]
        if strength <= 1 and t.start < t.end:
            return _type_name(toks[bisect.bisect_left(starts, t.start) : bisect.bisect_left(starts, t.end)]), 1
        if strength <= 1 and e.start >= 0:  # a typed literal (INTERVAL '1 day'): the word before it
            return _type_name(toks[bisect.bisect_left(starts, e.start) :][:1]), 1
        return name, strength
    if e.cls == "CASE":
        name, strength = _figure_name(e.children[-1], text, toks, starts) if e.children else ("", 0)
        return (name, 2) if strength >= 2 else ("case", 1)
    if e.cls == "COLLATE" or e.type in ("ARRAY_EXTRACT", "ARRAY_SLICE"):
        return _figure_name(e.children[0], text, toks, starts)
    if e.type == "STRUCT_EXTRACT":
        i = bisect.bisect_left(starts, e.end) - 1
        return toks[i].name, 2
    if e.type in _NODE_NAMES:
        return _NODE_NAMES[e.type], 2
    if e.cls == "SUBQUERY" and not e.children and e.start >= 0:
        word = text[e.start : e.start + 6].upper()
        if word in ("EXISTS", "ARRAY(", "ARRAY "):
            return ("exists" if word == "EXISTS" else "array"), 2
        names = _names(e.subquery, text, toks, starts) if text[e.start] == "(" else None
        return (names[0], 2) if names and names[0] not in (None, "?column?") else ("?column?", 0)
    if e.cls in ("FUNCTION", "WINDOW") and e.name:
        if e.name == ("row",):
            return "row", 2
        if e.name[-1].startswith("to_") and e.start >= 0 and (i := bisect.bisect_left(starts, e.start)) < len(toks) \
                and toks[i].start == e.start and toks[i].upper == "INTERVAL":
            return "interval", 1  # INTERVAL '1' DAY: a typed literal (DuckDB's to_days call)
        written = _call_name(e, toks, starts)
        if written is not None:
            return ({"trim": "btrim"}.get(e.name[-1], e.name[-1]) if written == "trim" else written), 2
    return "?column?", 0


def _call_name(e, toks: list[Token], starts: list[int]) -> str | None:
    # The name of the call written at ``e``'s span (``f(...)``, ``s.f(...)``, with FILTER,
    # OVER or WITHIN GROUP after it) when the call is the whole node, else None (an operator
    # node starting with a call: ``f(x) * 2``).
    i = bisect.bisect_left(starts, e.start)
    while i + 2 < len(toks) and toks[i].kind in ("word", "qident") and toks[i + 1].text == ".":
        i += 2
    if not (i + 1 < len(toks) and toks[i].kind in ("word", "qident") and toks[i + 1].text == "("):
        return None
    end = closing(toks, i + 1)
    if end < 0:
        return None
    if toks[end].end >= e.end or (end + 1 < len(toks) and toks[end + 1].upper in ("FILTER", "OVER", "WITHIN")):
        return toks[i].name
    return None
