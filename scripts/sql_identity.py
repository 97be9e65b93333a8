"""Same outputs before and after a refactoring of ``colmz.sql``: N of M identical.

``run OUT`` records, for the ``colmz`` importable from ``sys.path``, the output (or the
exception's type and message) of:

* every query of ``tests/sql_corpus.py`` run by a ``colmz.Catalog`` holding its tables
  (translation, ``mz_now()``, pushdown, DuckDB's errors turned into colmz's), and the
  translated text with :func:`colmz.sql.pushdown.push_filters` applied;
* the SQL scripts of ``tests/colmz/catalog`` and ``tests/colmz/continual``: each test
  function's string constants that parse as statements, executed in order by one fresh
  ``Catalog`` (``INSERT`` planning, assignment casts, ``UPDATE``/``DELETE`` queries,
  continual tasks, the results of queries);
* the write planning of every ``INSERT`` harvested from those files, over synthetic target
  types (:func:`colmz.sql.assign.typed_values`, :func:`colmz.sql.write.check_jsonb_values`,
  :func:`colmz.sql.write.insert_rows`), and the ``DELETE``/``UPDATE`` builders and the
  predicate shapes of :mod:`colmz.sql.lift` over every harvested ``DELETE``/``UPDATE``;
* the pure functions of :mod:`colmz.sql.assign`, :mod:`colmz.sql.numeric`,
  :mod:`colmz.sql.names` and :mod:`colmz.sql.build` over fixed inputs.

``compare A B`` prints how many of the cases recorded in both files are identical and
lists the others. ``both REF`` records ``REF``'s tree (``git archive`` into a temporary
directory, put first on ``PYTHONPATH``) and the working tree, then compares:

    NUMBA_CACHE_DIR=... .venv/bin/python scripts/sql_identity.py both main
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARVEST = ("tests/colmz/catalog", "tests/colmz/continual")


def _outcome(fn, *args, ordered: bool = True, **kwargs) -> str:
    # ``ordered=False``: a table's rows as a multiset (a query without a top-level ORDER BY)
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome recorded
        return f"raise {type(e).__name__}: {e}"
    if hasattr(out, "to_pylist") and hasattr(out, "schema"):
        rows = out.to_pylist()
        return f"table {out.schema} {rows if ordered else sorted(rows, key=repr)!r}"
    return repr(out)


def _constants(path: Path):
    """Per test function (or module level), its string constants in source order."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            strings = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            yield f"{path.name}::{node.name}", strings


def _corpus(out: dict) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from sql_corpus import QUERIES, SETUP
    from sql_oracle import ordered

    import colmz
    from colmz.sql import translate
    from colmz.sql.pushdown import push_filters

    cat = colmz.Catalog()
    for stmt in SETUP:
        cat.execute(stmt)
    for name, sql in QUERIES:
        out[f"corpus:{name}"] = _outcome(cat.sql, sql, ordered=ordered(sql))
        out[f"pushdown:{name}"] = _outcome(lambda s: push_filters(translate(s)), sql)


def _scripts(out: dict, statements: dict) -> None:
    import colmz
    from colmz.sql import parse

    for d in HARVEST:
        for path in sorted((ROOT / d).glob("test_*.py")):
            for where, strings in _constants(path):
                cat = None
                for i, s in enumerate(strings):
                    try:
                        stmts = parse(s)
                    except Exception:  # noqa: BLE001 - not SQL: skipped
                        continue
                    if not stmts:
                        continue
                    for st in stmts:
                        statements.setdefault(type(st).__name__, []).append(st)
                    cat = cat or colmz.Catalog()
                    key = f"script:{where}:{i}"
                    if all(type(st).__name__ in ("Query",) for st in stmts):
                        out[key] = _outcome(cat.sql, s, ordered=False)
                    else:
                        out[key] = _outcome(cat.execute, s, ordered=False)


def _write_planning(out: dict, statements: dict) -> None:
    import pyarrow as pa

    from colmz.order import ColumnSpec
    from colmz.sql import session, translate
    from colmz.sql.assign import typed_values
    from colmz.sql.run import run_query
    from colmz.sql.tree import parse_tree
    from colmz.sql.write import check_jsonb_values, insert_rows

    types = [pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.date32(), pa.timestamp("us", tz="UTC"),
             pa.bool_(), pa.float32(), pa.int16(), pa.timestamp("us"), pa.binary(), pa.uint64()]
    con = session()
    seen = set()
    for st in statements.get("InsertStatement", []):
        q = st.query
        if (q, tuple(st.columns or ())) in seen:
            continue
        seen.add((q, tuple(st.columns or ())))
        try:
            (tree,) = parse_tree(q)
            values = tree.from_ is not None and tree.from_.type == "EXPRESSION_LIST"
            n = len(tree.from_.rows[0]) if values else len(tree.items)
        except Exception:  # noqa: BLE001 - no arity known: the planning is not tried
            continue
        for v in range(len(types) + 1):
            targets = [types[(v + i) % len(types)] if v < len(types) else types[i % len(types)]
                       for i in range(n + 1)]
            key = f"write:{q}:{st.columns}:{v}"
            typed = _outcome(typed_values, q, targets)
            out[key + ":typed"] = typed
            names = [f"c{i}" for i in range(n + 1)]
            out[key + ":jsonb"] = _outcome(check_jsonb_values, q, [names[i] if i % 2 else None for i in range(n)],
                                           frozenset({"v", "s"}), frozenset({"j"}), ["jsonb"] * n)
            text = typed_values(q, targets)
            try:
                rows = run_query(con, translate(text), 3)[0]
            except Exception as e:  # noqa: BLE001 - reading other relations: recorded
                out[key + ":rows"] = f"raise {type(e).__name__}: {e}"
                continue
            schema = [ColumnSpec(nm, t) for nm, t in zip(names, targets)]
            cols = names[: rows.num_columns] if st.columns else None
            out[key + ":insert"] = _outcome(insert_rows, con, rows, schema, cols, literals=values,
                                            what="INSERT INTO t", table="t", t=3)
            out[key + ":insert_all"] = _outcome(insert_rows, con, rows, schema[: rows.num_columns], None,
                                                literals=values, what="INSERT INTO t", table="t", t=3)


def _predicates(out: dict, statements: dict) -> None:
    from colmz.sql.build import select_where, update_select
    from colmz.sql.lift import in_subquery, row_local

    for st in statements.get("DeleteStatement", []):
        key = f"delete:{st.table}:{st.where}"
        out[key + ":select"] = _outcome(select_where, (*st.qualifier, st.table) if st.qualifier else st.table,
                                        st.where)
        if st.where is not None:
            for cols in (["k"], ["k", "v"], ["a", "b", "k", "v", "x"]):
                out[f"{key}:{cols}:in"] = _outcome(in_subquery, st.where, st.table, cols)
                out[f"{key}:{cols}:local"] = _outcome(row_local, st.where, st.table, cols)
    for st in statements.get("UpdateStatement", []):
        key = f"update:{st.table}:{st.assignments}:{st.where}"
        assigned = dict(st.assignments)
        out[key] = _outcome(update_select, st.table, ["k", *assigned], assigned, st.where)
        out[key + ":q"] = _outcome(update_select, ("x", st.table), [*assigned, "zz"], assigned, st.where)


def _pure(out: dict) -> None:
    import pyarrow as pa

    from colmz.sql import assign, build, lift, names, numeric, write

    types = [pa.null(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
             pa.uint64(), pa.float16(), pa.float32(), pa.float64(), pa.decimal128(10, 2), pa.string(),
             pa.large_string(), pa.bool_(), pa.binary(), pa.large_binary(), pa.date32(), pa.date64(),
             pa.timestamp("us"), pa.timestamp("ms", tz="UTC"), pa.duration("us"),
             pa.month_day_nano_interval(), pa.list_(pa.int32())]
    for s in types:
        out[f"pg_type_name:{s}"] = _outcome(assign.pg_type_name, s)
        # the DuckDB type of a literal's column: write's, or assign's where it moved
        out[f"duckdb_type:{s}"] = _outcome(getattr(write, "duckdb_type", None) or assign.duckdb_type, s)
        for t in types:
            out[f"cast:{s}:{t}"] = _outcome(assign.assignment_cast, s, t, "c")
            out[f"select:{s}:{t}"] = _outcome(assign.assignment_select, "r", [s, t], [("a", t), ("b", s)])
    arrays = [pa.array([1, None], pa.int32()), pa.array([2**40], pa.int64()), pa.array([1.5], pa.float32()),
              pa.array(["x"]), pa.array([True])]
    for a in arrays:
        for t in types:
            out[f"arrow:{a.type}:{t}"] = _outcome(assign.arrow_assignment, pa.table({"a": a}), [t])
    for nm in (["ct"], ["x", "ct"], ["y", "z", "ct"], ["a", "b", "c", "d"], "T", ["We ird", "x"], ()):
        for fn in (names.resolve_item, names.resolve_schema, names.sql_name, names.relation_word):
            out[f"names:{fn.__name__}:{nm}"] = _outcome(fn, nm)
    for key in ("t", names.QualifiedName("materialize", "x", "t"), ("a", "b"), names.resolve_item("u")):
        for fn in (names.as_qualified, names.display_name):
            out[f"names:{fn.__name__}:{key!r}"] = _outcome(fn, key)
        out[f"names:catalog_key:{key!r}"] = _outcome(lambda k: names.catalog_key(names.as_qualified(k)), key)
    for v in ("x", 'a"b', "", "\x00", 3, None, True, 1.5, float("nan"), float("-inf"), "it's", b"x"):
        out[f"build:identifier:{v!r}"] = _outcome(build.identifier, v)
        out[f"build:literal:{v!r}"] = _outcome(build.literal, v)
        out[f"build:relation:{v!r}"] = _outcome(build.relation, v)
    for t in (0, 5, 2**63, 2**64, -1, True, "1"):
        for form in (*build.NOW_FORMS, "x"):
            out[f"build:now_value:{t!r}:{form}"] = _outcome(build.now_value, t, form)
    for form in (None, "uint64", "timestamptz"):
        out[f"build:now_sql:{form}"] = _outcome(build.now_sql, form, "t.c")
    out["build:create_table"] = _outcome(build.create_table, "my t", [("k", "BIGINT"), ('a";b', "TEXT")])
    out["build:cast_select"] = _outcome(build.cast_select, "v", [("a", "DATE"), ("b", None), ("c", "BLOB"),
                                                                 ("d", "X;Y")])
    for i in range(3):
        out[f"build:relation_name:{i}"] = _outcome(build.relation_name, i)
    out["build:splice"] = _outcome(build.splice, "SELECT a + b FROM t", [(7, 8, "x"), (11, 12, "y")], 2, 15)
    for form in (None, "timestamptz"):
        out[f"lift:insert:{form}"] = _outcome(lift.lifted_insert, "SELECT k, mz_now() FROM r1", "r1", ["k"], form)
        out[f"lift:delete:{form}"] = _outcome(lift.lifted_delete, "SELECT * FROM r0 WHERE (k > mz_now())", "r1",
                                              ["k", "v"], "r0", ["k"], form)
        out[f"lift:semijoin:{form}"] = _outcome(lift.lifted_semijoin, "SELECT k, v FROM r1 WHERE mz_now() > 1",
                                                ["k", "v"], "r1", ["k"], form)
    out["lift:first"] = _outcome(lift.first_match, "SELECT 1")
    out["lift:union"] = _outcome(lift.tagged_union, ["SELECT 1 AS k", "SELECT 2 AS k"])
    out["write:arity"] = repr([write.arity_message(a, b) for a in range(3) for b in range(3)])
    lits = ["7", "-3", "2.50", "1.5e-7", "1e5", "0", "0.000", "3.0", "2147483648", "9223372036854775808",
            "1e40", "12345678901234567890.123456789"]
    for a in lits:
        out[f"numeric:parse:{a}"] = _outcome(numeric.parse_literal, a)
        out[f"numeric:text:{a}"] = _outcome(lambda x: numeric.literal_text(numeric.parse_literal(x)), a)
        for b in lits:
            for op in "+-*/":
                out[f"numeric:{a}{op}{b}"] = _outcome(
                    lambda x, y, o: numeric.literal_text(numeric.combine(o, numeric.parse_literal(x),
                                                                         numeric.parse_literal(y))), a, b, op)
    floats = [2.0, 1e15, 1e14, 1.5e-7, -0.0, 0.0, 1e23, 9.15e21, float("nan"), float("inf"), -float("inf"),
              0.1, 1 / 3, 308148.125, 3.75e9, 5e-324, 1.7976931348623157e308, 3.4028234663852886e38, 1e-45,
              123456.7, 1e6, -2.5e-5]
    for f in floats:
        out[f"numeric:f8:{f!r}"] = _outcome(numeric.float8_text, f)
        out[f"numeric:f4:{f!r}"] = _outcome(numeric.float4_text, f)
    for s in (" 1.50 ", "+.5e-1", "1e 3", "-Inf", "nan", "1_000", "5.", ".", "1e2000", "1e99999999999",
              "1.005", "-1.005", "123.4", "1.0000000001", "Infinity", "99999999999999999999999999999999"):
        out[f"numeric:in:{s}"] = _outcome(numeric.numeric_in, s)
        for p, sc in ((None, None), (10, 2), (4, 2), (5, 0)):
            out[f"numeric:typmod:{s}:{p}:{sc}"] = _outcome(numeric.numeric_typmod, s, p, sc)


def record(path: str) -> None:
    import colmz

    out: dict[str, str] = {"colmz": os.path.dirname(colmz.__file__).removesuffix("/colmz")}
    statements: dict = {}
    _pure(out)
    _corpus(out)
    _scripts(out, statements)
    _write_planning(out, statements)
    _predicates(out, statements)
    Path(path).write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"{len(out) - 1} cases recorded from {out['colmz']} in {path}")


def compare(a: str, b: str) -> int:
    before, after = json.loads(Path(a).read_text()), json.loads(Path(b).read_text())
    before.pop("colmz"), after.pop("colmz")
    keys = sorted(set(before) | set(after))
    differ = [k for k in keys if before.get(k) != after.get(k)]
    for k in differ[:40]:
        print(f"DIFFERS {k}\n  before: {before.get(k, '<absent>')[:300]}\n  after:  {after.get(k, '<absent>')[:300]}")
    print(f"{len(keys) - len(differ)} of {len(keys)} identical "
          f"(corpus {sum(k.startswith('corpus:') for k in keys)}, scripts {sum(k.startswith('script:') for k in keys)}, "
          f"write planning {sum(k.startswith('write:') for k in keys)})")
    return 1 if differ else 0


def both(ref: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        outs = [Path(tmp) / "before.json", Path(tmp) / "after.json"]
        for where, out in zip((base, ROOT), outs):
            env = dict(os.environ, PYTHONPATH=str(where))
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "run", str(out)], check=True, env=env,
                           cwd=tmp)
        return compare(*map(str, outs))


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "run":
        record(*args)
    elif cmd == "compare":
        sys.exit(compare(*args))
    elif cmd == "both":
        sys.exit(both(*args))
    else:
        sys.exit(f"unknown command {cmd!r}: run OUT | compare A B | both REF")
