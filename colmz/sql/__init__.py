"""SQL for colmz: Materialize's statements parsed, and their queries translated for DuckDB.

Design
------
colmz runs queries in DuckDB, in process, over Arrow tables. User SQL goes one way:
**tokens -> statements -> one builder that produces every text colmz runs**.

1. :mod:`colmz.sql.tokens` splits text into tokens once (strings, quoted names, numbers,
   comments, operators: a ``;`` or a keyword in a string is never structure), reading
   comments as DuckDB's lexer does. :mod:`colmz.sql.tree` reads DuckDB's own parse tree of
   a query (:func:`parse_tree`: frozen nodes with their spans in the text) and decides with
   it when a piece of user text is one expression (:func:`check_expression`).
2. :mod:`colmz.sql.parse` reads statements from the tokens: Materialize's ``CREATE
   CONTINUAL TASK`` (column list, ``WITH (SNAPSHOT = ...)``, ``ON INPUT ... AS (...)``, the
   ``FROM TRANSFORM``/``FROM RETAIN`` sugar), ``CREATE MATERIALIZED VIEW``, ``CREATE
   TABLE``, ``DROP`` and the writes ``INSERT``/``DELETE``/``UPDATE`` -- statements DuckDB
   does not have, or that a catalog runs at logical times -- and ``CREATE SCHEMA``/``CREATE
   DATABASE``. Names of objects have 1 to 3 parts, resolved as Materialize resolves them
   (:mod:`colmz.sql.names`: default database ``materialize``, schema ``public``). Unpaired
   parentheses are refused before the script is split at ``;``.
3. :mod:`colmz.sql.translate` rewrites what means something else in DuckDB. First
   Materialize's query hints (``OPTIONS (AGGREGATE INPUT GROUP SIZE = n)``, which DuckDB
   cannot parse) are blanked, every other offset kept (:mod:`colmz.sql.hints`: they choose
   how a view is maintained, never an answer); then :mod:`colmz.sql.transforms`, a table of transforms over DuckDB's parse tree (calls whose
   DuckDB namesake means something else, row comparisons, LIKE's escape, constant
   ``numeric`` arithmetic with :mod:`colmz.sql.numeric`'s scales, ``::numeric``), applied
   once, bottom-up, to the nodes' spans, and only to texts whose tokens may hold such a
   node; then a pass over the tokens: ``mz_now()``
   becomes a placeholder token put in for the evaluation time (a ``UBIGINT``, or a
   ``timestamptz`` reading the time as milliseconds since the Unix epoch where the query
   compares it with dates, as Materialize's ``mz_timestamp`` casts), ``JSONB`` and
   ``mz_timestamp`` become ``JSON`` and ``UBIGINT``, and the relations a query reads are
   bound to the names colmz registers them under (:func:`bind_relations`: DuckDB folds
   identifiers' case, PostgreSQL does not). Constant numeric arithmetic is computed with
   PostgreSQL's scales, ``||`` and casts to text print values as PostgreSQL does, and what
   DuckDB cannot compute as PostgreSQL does is refused.
4. :mod:`colmz.sql.build` writes every text colmz adds around user text: one quoting
   function for names (:func:`identifier`) and one for values (:func:`literal`), the
   query of a ``DELETE``/``UPDATE`` predicate (:func:`select_where`, :func:`update_select`),
   the casts of ``VALUES`` literals, ``mz_now()``'s value. User text enters only as a part
   checked to be one expression.
   :mod:`colmz.sql.assign` converts an ``INSERT``'s values to its target columns by
   PostgreSQL's assignment casts (and refuses, in PostgreSQL's words, where it has none).
   :mod:`colmz.sql.lift` writes a continual task's batched queries (its statements lifted
   over many times, one union per time) and reads the ``DELETE`` predicate shapes a batch
   recognises; the continual-task code (``colmz.continual``) and the catalog build no SQL.
5. :mod:`colmz.sql.run` runs it: :func:`connect` (PostgreSQL arithmetic, the macros and
   functions translated queries call, replacement scans off, configuration locked,
   ``external_access=False`` for no file or network access), :func:`session` (a connection
   to the process's database so made, what catalogs and tasks take) and
   :func:`run_query`, which first has DuckDB confirm the text is exactly one ``SELECT``.

The rest DuckDB reads as PostgreSQL does (``::`` casts, ``INT8``/``TEXT``/``STRING``, ``->>``,
``||`` with a non-text operand); integer ``/`` truncates and a division by zero raises on
every colmz connection (DuckDB versions without ``error_on_division_by_zero`` return NULL).
Constructs colmz cannot honour raise :class:`UnsupportedSQL` naming them.

The functions :func:`parse` and :func:`translate` share their names with the modules
:mod:`colmz.sql.parse` and :mod:`colmz.sql.translate`: the package attribute is the
function; import from a module with ``from colmz.sql.parse import ...``.

Why colmz's own tokenizer, not sqlglot or DuckDB's parser
---------------------------------------------------------
colmz needs three things from a parser: Materialize's statements (``CREATE CONTINUAL
TASK`` and its sugar, ``mz_now()``, ``AS OF``), the exact text of each query (it is
persisted and re-run), and token positions to rewrite a few names in place. DuckDB's
``json_serialize_sql`` parses only ``SELECT`` and DuckDB's dialect -- none of Materialize's
statements -- and its round trip through ``json_deserialize_sql`` re-prints queries in
DuckDB's form, so it can confirm (``extract_statements``, used by :func:`check_one_query`)
and describe a query's structure (:mod:`colmz.sql.tree`, which decides what one user
expression is) but not replace the statement parser. sqlglot parses PostgreSQL into a tree and prints DuckDB, but has no
continual tasks either (its ``Command`` fallback keeps them as text), and a transpile
re-prints every query rather than rewriting a token. colmz's own tokenizer keeps the user's
text, knows Materialize's statements, and costs less per statement than either; the cost of
each path is measured by ``asv_benchmarks/bench_sql.py`` (sqlglot is not a colmz
dependency; the benchmark skips it when absent), where the figures live.
Where a rewrite needs a query's structure (a call's arguments, a row's fields, a LIKE
pattern, a constant subexpression) it reads DuckDB's own tree (:mod:`colmz.sql.transforms`)
rather than counting parentheses over tokens; DuckDB's ``json_serialize_sql`` costs several
times colmz's whole token path per new text, so the tree is read only for texts that may
hold such a node, and once per statement shape (:mod:`colmz.sql.shapes`: a text resent with
new literal values gets its shape's tree remapped, as DuckDB would give it). Where PostgreSQL's meaning depends on a value's type the translation still
leaves the choice to DuckDB's binder, which knows every type (the macros of
:mod:`colmz.sql.translate`).
"""

from __future__ import annotations

from colmz.sql.build import (
    NOW_FORMS,
    RESERVED_PREFIX,
    cast_select,
    create_table,
    identifier,
    literal,
    now_sql,
    now_value,
    relation,
    relation_name,
    select_where,
    update_select,
)
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.names import (
    DEFAULT_DATABASE,
    DEFAULT_SCHEMA,
    QualifiedName,
    as_qualified,
    catalog_key,
    display_name,
    relation_word,
    resolve_item,
    resolve_schema,
    sql_name,
)
from colmz.sql.parse import (
    ContinualTaskStatement,
    CreateDatabase,
    CreateMaterializedView,
    CreateSchema,
    CreateTable,
    DeleteStatement,
    Drop,
    ExplainView,
    InsertStatement,
    Query,
    Show,
    Subscribe,
    UpdateStatement,
    output_names,
    parse,
    rename_like_postgres,
    select_list_is_empty,
    task_statement,
)
from colmz.sql.run import check_one_query, clear_caches, connect, require_duckdb, run_query, session
from colmz.sql.tokens import CACHED_CHARS, Token, check_balanced, tokenize
from colmz.sql.translate import (
    MZ_NOW,
    arrow_type,
    bind_relations,
    bind_relations_as,
    referenced_names,
    relation_names,
    substitute_now,
    translate,
    uses_now,
)
from colmz.sql.tree import Expression, check_expression, parse_tree
from colmz.sql.tree import Query as QueryNode

__all__ = [
    "CACHED_CHARS",
    "DEFAULT_DATABASE",
    "DEFAULT_SCHEMA",
    "MZ_NOW",
    "NOW_FORMS",
    "RESERVED_PREFIX",
    "ContinualTaskStatement",
    "CreateDatabase",
    "CreateMaterializedView",
    "CreateSchema",
    "CreateTable",
    "ExplainView",
    "Show",
    "Subscribe",
    "DeleteStatement",
    "Drop",
    "Expression",
    "InsertStatement",
    "QualifiedName",
    "Query",
    "QueryNode",
    "SQLError",
    "Token",
    "UnsupportedSQL",
    "UpdateStatement",
    "arrow_type",
    "as_qualified",
    "bind_relations",
    "bind_relations_as",
    "cast_select",
    "catalog_key",
    "create_table",
    "check_balanced",
    "check_expression",
    "check_one_query",
    "clear_caches",
    "connect",
    "display_name",
    "identifier",
    "literal",
    "now_sql",
    "now_value",
    "output_names",
    "parse",
    "parse_tree",
    "referenced_names",
    "relation",
    "relation_name",
    "relation_names",
    "relation_word",
    "rename_like_postgres",
    "require_duckdb",
    "resolve_item",
    "resolve_schema",
    "run_query",
    "select_list_is_empty",
    "select_where",
    "session",
    "sql_name",
    "substitute_now",
    "task_statement",
    "tokenize",
    "translate",
    "update_select",
    "uses_now",
]
