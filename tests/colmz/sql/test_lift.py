"""``colmz.sql.lift``: the queries of a continual task's batched and per-time union evaluation.

What is proved here: names with every special character reach DuckDB through
``colmz.sql.identifier`` in the lifted and union queries (a task whose output, input and
columns are named with quotes, dots, semicolons, comment markers and non-ASCII letters gives,
batched and per-time union, exactly the time-by-time loop's output), every builder returns
one statement whatever the names, the predicate shapes the batch recognises are recognised
exactly, and no module outside ``colmz/sql`` writes SQL text.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pyarrow as pa
import pytest

import colmz
from colmz.continual import ContinualTask, MemoryCollection
from colmz.sql import connect, lift
from colmz.sql import identifier as q

ROOT = pathlib.Path(colmz.__file__).resolve().parent

OUT = 'out"; DROP TABLE x; -- é.ß'
INP = "in.put 'x' /*"
K, V = 'k"ey;1', "v'al.2"
HOSTILE = [OUT, INP, K, V, "a;b", 'x"y', "日本 .)"]


def _task(batch: bool, stepwise: bool) -> ContinualTask:
    inp = MemoryCollection({K: pa.int64(), V: pa.string()})
    body = [
        f"DELETE FROM {q(OUT)} WHERE {q(K)} IN (SELECT {q(K)} FROM {q(INP)})",  # semijoin
        f"DELETE FROM {q(OUT)} WHERE {q(OUT)}.{q(V)} = ';'' --' AND mz_now() > 2",  # row-local
        f"INSERT INTO {q(OUT)} SELECT {q(K)}, max({q(V)}) FROM {q(INP)} GROUP BY {q(K)}",
    ]
    task = ContinualTask(OUT, {INP: inp}, body, as_of=0, batch=batch,
                         columns={K: pa.int64(), V: pa.string()})
    for t in range(1, 9):
        rows = {K: [t % 3, 10 + t], V: ["a", ";' --" if t % 2 else "b"]}
        inp.compare_and_append(colmz.Updates(rows, time=[t, t], diff=[1, 1]), inp.upper, t + 1)
        if stepwise:
            task.run()
    task.run()
    return task


def _changes(task):
    return sorted(task.output.updates(0, None).to_pylist())


def test_hostile_names_give_the_loops_output_batched_and_per_time_union():
    reference = _changes(_task(batch=False, stepwise=False))
    assert any(d < 0 for *_, d in reference) and any(d > 0 for *_, d in reference)
    batched = _task(batch=True, stepwise=False)
    assert batched.batchable and batched.stats["batched_times"] == 8
    assert _changes(batched) == reference
    union = _task(batch=True, stepwise=True)
    assert union.stats["union_times"] == 8 and union.stats["batches"] == 0
    assert _changes(union) == reference


@pytest.mark.parametrize("name", HOSTILE)
def test_every_builder_is_one_statement_whatever_the_names(name):
    con = connect()
    inner = f"SELECT {q(name)} FROM {q(name)}"
    texts = [
        lift.lifted_insert(inner, name, [name, "k"], None),
        lift.lifted_delete(f"SELECT * FROM {q(name)}", name + "i", [name], name, [name, "k"], "timestamptz"),
        lift.lifted_semijoin(inner, [name, "k"], name, [name], None),
        lift.first_match(inner),
        lift.tagged_union([inner, inner]),
    ]
    for text in texts:
        assert len(con.extract_statements(text)) == 1, text


def test_the_predicate_shapes_a_batch_recognises():
    cols = ["k", "v"]
    assert lift.in_subquery("k IN (SELECT k FROM i)", "t", cols) == (["k"], "SELECT k FROM i")
    assert lift.in_subquery("(t.k, v) IN (VALUES (1, 2))", "t", cols) == (["k", "v"], "VALUES (1, 2)")
    for not_a_semijoin in [
        "k IN (SELECT k FROM t)",  # the subquery reads the output
        "k IN (SELECT k FROM i) OR (v = 1)",  # more follows the subquery
        "k IN (1, 2)",  # a list, not a subquery
        "x IN (SELECT k FROM i)",  # not a column of the output
        "k + 1 IN (SELECT k FROM i)",
    ]:
        assert lift.in_subquery(not_a_semijoin, "t", cols) is None, not_a_semijoin
    assert lift.row_local('t.k > 1 AND "t"."v" = 2 AND k < 3', "t", cols)
    for not_row_local in ["k IN (SELECT k FROM t)", "t.x = 1", "s.t.k = 1", "(SELECT count(*) FROM t) > 1"]:
        assert not lift.row_local(not_row_local, "t", cols), not_row_local


SQL_TEXT = re.compile(r"\bSELECT\s|\bUNION\b|\bLATERAL\b|\bGROUP BY\b|\bJOIN\b|\bWHERE\s")


def _strings_outside_docstrings(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        scope = isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        if scope and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            docstrings.add(id(node.body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


@pytest.mark.parametrize("module", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "catalog").glob("*.py"))
                         + ["rows.py", "subscribe.py", "continual/__init__.py", "continual/model.py",
                            "continual/batched.py"])
def test_no_sql_text_is_written_outside_colmz_sql(module):
    # f-string pieces are string constants too: a query assembled around a name shows here.
    found = [(line, text) for line, text in _strings_outside_docstrings(ROOT / module) if SQL_TEXT.search(text)]
    assert not found, f"colmz/{module} writes SQL; move it into colmz/sql: {found}"
