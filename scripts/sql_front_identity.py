"""Identity of colmz's SQL front end across two checkouts: tokens, statements, shapes.

Reads every text of the dialect corpus (``tests/sql_corpus.py``) and every string constant
of the SQL front end's tests (``tests/colmz/sql/test_parse.py``, ``test_tokens.py``,
``test_hints.py``, ``test_shapes.py`` and ``tests/colmz/catalog``), and records for each what
:func:`colmz.sql.tokenize`, :func:`colmz.sql.parse`, :func:`colmz.sql.shapes.shape_of` and
the token helpers (bracket matching, top-level runs, balance and nesting checks, hints,
output names) give -- each result or its exception's type and message.

``dump ROOT OUT`` imports colmz from checkout ``ROOT`` and writes the records to ``OUT``
(JSON); ``compare A B`` prints how many texts have identical records in both, and the
first differences.

    NUMBA_CACHE_DIR=/work/main/.numba_cache .venv/bin/python scripts/sql_front_identity.py dump /work/main /tmp/before.json
    NUMBA_CACHE_DIR=/work/main/.numba_cache .venv/bin/python scripts/sql_front_identity.py dump . /tmp/after.json
    .venv/bin/python scripts/sql_front_identity.py compare /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

SOURCES = ["tests/sql_corpus.py", "tests/colmz/sql/test_parse.py", "tests/colmz/sql/test_tokens.py",
           "tests/colmz/sql/test_hints.py", "tests/colmz/sql/test_shapes.py", "tests/colmz/catalog"]


#: Statements off the readers' common paths (malformed, unusual clauses), read besides.
EXTRA = [
    "CREATE CONTINUAL TASK c WITH SNAPSHOT = false ON INPUT t AS (INSERT INTO c SELECT * FROM t)",
    "CREATE CONTINUAL TASK c (k INT) WITH (SNAPSHOT) ON INPUT t WITH (SNAPSHOT = true) AS (DELETE FROM c WHERE k > 1)",
    "CREATE CONTINUAL TASK c ON INPUT t AS (UPDATE c SET k = 1)", "CREATE CONTINUAL TASK c ON INPUT t AS OF 3",
    "CREATE CONTINUAL TASK c FROM RETAIN t WHILE (k > 1) AS OF 7", "CREATE CONTINUAL TASK c FROM TRANSFORM t USING",
    "CREATE TABLE t (k INT) WITH (APPEND ONLY)", "CREATE TABLE t (k INT) WITH (APPEND)", "CREATE TABLE t (k INT,)",
    "CREATE TABLE t", "CREATE TABLE IF NOT EXISTS a.b.t (k INT, v TEXT) extra",
    "CREATE MATERIALIZED VIEW v WITH (INCREMENTAL = 'require') AS SELECT 1", "CREATE MATERIALIZED VIEW v WITH (INCREMENTAL 'x') AS SELECT 1",
    "CREATE OR REPLACE MATERIALIZED VIEW IF NOT EXISTS s.v (a, b) IN CLUSTER c AS SELECT 1, 2",
    "CREATE MATERIALIZED VIEW v WITH INCREMENTAL AS SELECT 1", "EXPLAIN MATERIALIZED VIEW a.b", "EXPLAIN SELECT 1",
    "CREATE SCHEMA IF NOT EXISTS d.s", "CREATE SCHEMA a.b.c", "CREATE DATABASE d.x", "CREATE DATABASE IF NOT EXISTS d",
    "SUBSCRIBE TO a.b.c.d", "SUBSCRIBE (SELECT 1) WITH (SNAPSHOT = false, PROGRESS) AS OF 3 UP TO 9",
    "SUBSCRIBE t WITH (SNAPSHOT false, FOO)", "SUBSCRIBE t AS OF AT LEAST 3", "SUBSCRIBE ()", "SUBSCRIBE t UP TO x",
    "SUBSCRIBE t ENVELOPE UPSERT", "SUBSCRIBE", "SHOW COLUMNS IN a.b", "SHOW MATERIALIZED VIEWS FROM s", "SHOW SOURCES",
    "SHOW TABLES IN d.s extra", "DROP TABLE IF EXISTS a, b.c CASCADE", "DROP SCHEMA a, b", "DROP DATABASE d RESTRICT",
    "DROP TABLE a.b.c.d", "DROP VIEW v", "DROP TABLE", "INSERT INTO t DEFAULT VALUES", "INSERT INTO t (a, b) SELECT 1, 2 RETURNING a",
    "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING", "INSERT INTO t (SELECT 1)", "INSERT INTO t",
    "DELETE FROM t USING u WHERE t.k = u.k", "DELETE FROM t x", "DELETE FROM t WHERE", "DELETE FROM t WHERE k = 1 RETURNING *",
    "UPDATE t x SET k = 1", "UPDATE t SET k = 1, v = WHERE k = 2", "UPDATE t SET k", "UPDATE t SET k = 1 extra = 2",
    "SELECT 1 AS OF 5", "SELECT x AS of FROM t", "SELECT 1 AS OF now()", "SELEC 1", "ALTER TABLE t ADD k INT",
    "SELECT 1; ; SELECT 2", "SELECT (1]", "SELECT ((1)", "SELECT 1)", "SELECT a[1:2]::float(10)[], b::float(30), c::\"float\"(3)",
    "SELECT CAST(x AS double precision), y::timestamp with time zone, z::character varying(3) FROM t",
    "SELECT k FROM t GROUP BY k OPTIONS (AGGREGATE INPUT GROUP SIZE = 5) UNION SELECT (SELECT 1 OPTIONS (LIMIT INPUT GROUP SIZE = 2))",
    "SELECT a[(SELECT 1)] FROM t OPTIONS (X = 1)", "SELECT options(1), f(x) OPTIONS (DISTINCT ON INPUT GROUP SIZE = 0)",
]


def texts(root: Path) -> list[str]:
    """Every string constant of :data:`SOURCES` (under ``root``) and :data:`EXTRA`, each
    once, in a fixed order."""
    found: set[str] = set(EXTRA)
    for source in SOURCES:
        path = root / source
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
                    found.add(node.value)
    return sorted(found)


def outcome(fn, *args):
    try:
        return repr(fn(*args))
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return f"{type(e).__name__}: {e}"


def record(text: str) -> dict:
    from colmz.sql import parse, tokenize
    from colmz.sql import tokens as tk
    from colmz.sql.hints import select_offset, strip_hints
    from colmz.sql.parse import output_names, select_list_is_empty
    from colmz.sql.shapes import shape_of

    out = {"tokens": outcome(lambda: [(t.kind, t.text, t.start, t.end) for t in tokenize(text)]),
           "parse": outcome(parse, text), "shape": outcome(shape_of, text),
           "hints": outcome(strip_hints, text), "names": outcome(output_names, text),
           "empty_select": outcome(select_list_is_empty, text), "ctes": outcome(tk.cte_columns_of, text)}
    try:
        toks = tokenize(text)
    except Exception:  # noqa: BLE001 - recorded above
        return out
    out["balanced"] = outcome(tk.check_balanced, toks, text)
    out["depth"] = outcome(tk.nesting_depth, toks)
    if len(toks) <= 400:
        # (closing is asked at an opening bracket)
        out["closing"] = [tk.closing(toks, i) for i, t in enumerate(toks) if t.kind == "op" and t.text in "(["]
        out["top_level"] = [list(tk.top_level(toks, i)) for i in range(len(toks))]
        out["select_at"] = [select_offset(toks, i) for i in range(len(toks))]
    return out


def main() -> None:
    if sys.argv[1] == "dump":
        root = Path(sys.argv[2]).resolve()
        sys.path.insert(0, str(root))
        import colmz

        assert Path(colmz.__file__).resolve().is_relative_to(root), colmz.__file__
        # the texts from this checkout's tests, so both runs read the same ones
        here = Path(os.environ.get("COLMZ_TEXTS_FROM", Path(__file__).resolve().parent.parent))
        got = {t: record(t) for t in texts(here)}
        Path(sys.argv[3]).write_text(json.dumps(got))
        print(f"{len(got)} texts recorded from {root}")
        return
    a, b = (json.loads(Path(p).read_text()) for p in sys.argv[2:4])
    same = [t for t in a if a[t] == b.get(t)]
    print(f"identical: {len(same)} of {len(a)} texts ({len(b)} in the second)")
    for t in [t for t in a if a[t] != b.get(t)][:10]:
        diff = {k: (a[t].get(k), b.get(t, {}).get(k)) for k in a[t] if a[t].get(k) != b.get(t, {}).get(k)}
        print(repr(t[:120]), json.dumps(diff)[:600])


if __name__ == "__main__":
    main()
