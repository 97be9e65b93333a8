"""SQL for colmz: Materialize's statements parsed, and their queries translated for DuckDB.

Design
------
colmz runs queries in DuckDB, in process, over Arrow tables. User SQL goes one way,
**tokens -> statements -> one builder that produces every text colmz runs**; each step's
module docstring states its rules:

1. :mod:`colmz.sql.tokens` splits text into tokens once, reading comments as DuckDB's lexer
   does; :mod:`colmz.sql.tree` reads DuckDB's own parse tree of a query (:func:`parse_tree`)
   and decides with it when a piece of user text is one expression (:func:`check_expression`).
2. :mod:`colmz.sql.parse` reads the statements DuckDB does not have, or that a catalog runs
   at logical times (continual tasks, materialized views, tables, ``DROP``, the writes);
   names of objects resolve as Materialize resolves them (:mod:`colmz.sql.names`).
3. :mod:`colmz.sql.translate` rewrites what means something else in DuckDB: query hints
   blanked (:mod:`colmz.sql.hints`), a table of transforms over the tree
   (:mod:`colmz.sql.transforms`, constant ``numeric`` arithmetic with
   :mod:`colmz.sql.numeric`), ``mz_now()`` as a placeholder, relations bound to the names
   colmz registers them under (:func:`bind_relations`); what DuckDB cannot compute as
   PostgreSQL does is refused.
4. :mod:`colmz.sql.build` writes every text colmz adds around user text (one quoting of
   names, one of values; user text only as a part checked to be one expression);
   :mod:`colmz.sql.write` plans an ``INSERT`` (target columns, literals, the assignment casts
   of :mod:`colmz.sql.assign`) for the catalog and continual tasks alike; :mod:`colmz.sql.lift`
   writes a continual task's batched queries. The catalog and ``colmz.continual`` build no SQL.
5. :mod:`colmz.sql.run` runs it: :func:`connect` (PostgreSQL arithmetic, the macros and
   functions translated queries call, configuration locked), :func:`session` (a connection to
   the process's database so made) and :func:`run_query`, which first has DuckDB confirm the
   text is exactly one ``SELECT``.

Constructs colmz cannot honour raise :class:`UnsupportedSQL` naming them.

The functions :func:`parse` and :func:`translate` share their names with the modules
:mod:`colmz.sql.parse` and :mod:`colmz.sql.translate`: the package attribute is the
function; import from a module with ``from colmz.sql.parse import ...``.

Why colmz's own tokenizer, not sqlglot or DuckDB's parser
---------------------------------------------------------
colmz needs three things from a parser: Materialize's statements (``CREATE CONTINUAL
TASK`` and its sugar, ``mz_now()``, ``AS OF``), the exact text of each query (it is
persisted and re-run), and token positions to rewrite a few names in place. DuckDB's
``json_serialize_sql`` parses only ``SELECT`` and DuckDB's dialect, and its round trip
re-prints queries in DuckDB's form, so it confirms (:func:`check_one_query`) and describes
(:mod:`colmz.sql.tree`) a query but cannot replace the statement parser. sqlglot parses
PostgreSQL into a tree and prints DuckDB, but has no continual tasks either and re-prints
every query rather than rewriting a token. colmz's own tokenizer keeps the user's text,
knows Materialize's statements, and costs less per statement than either
(``asv_benchmarks/bench_sql.py`` measures each path). Where a rewrite needs a query's
structure it reads DuckDB's tree, only for texts that may hold such a node and once per
statement shape (:mod:`colmz.sql.shapes`).
"""

from __future__ import annotations

from colmz.sql.build import (
    NOW_FORMS,
    RESERVED_PREFIX,
    cast_select,
    create_table,
    identifier,
    literal,
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
    reading_names,
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
from colmz.sql.tokens import CACHED_CHARS, tokenize
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
from colmz.sql.tree import check_expression, parse_tree

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
    "InsertStatement",
    "QualifiedName",
    "Query",
    "SQLError",
    "UnsupportedSQL",
    "UpdateStatement",
    "arrow_type",
    "as_qualified",
    "bind_relations",
    "bind_relations_as",
    "cast_select",
    "catalog_key",
    "create_table",
    "check_expression",
    "check_one_query",
    "clear_caches",
    "connect",
    "display_name",
    "reading_names",
    "identifier",
    "literal",
    "output_names",
    "parse",
    "parse_tree",
    "referenced_names",
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
