"""``EXPLAIN MATERIALIZED VIEW`` of maintained views (``MaintainedView.explain``): a subplan
the lowering uses twice is one operator (``colmz.dataflow.render``), listed once with its
work and referred to from its other parents; an arrangement's bytes count its key indexes.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

import colmz
from colmz.dataflow.plan import plan, render

#: A join kept both as the antijoin's input and inside its semijoin (``X − X ⋉ Y``): one
#: operator with two parents.
ANTI = ("SELECT t.k, u.w FROM t JOIN u ON t.k = u.k "
        "WHERE NOT EXISTS (SELECT 1 FROM x WHERE x.k = t.k)")


def _catalog() -> colmz.Catalog:
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w BIGINT); CREATE TABLE x (k BIGINT)")
    cat.execute("INSERT INTO t VALUES (1, 2), (2, 3); INSERT INTO u VALUES (1, 5), (2, 6); INSERT INTO x VALUES (2)")
    return cat


def test_a_shared_subplan_is_listed_once_and_referred_to_from_its_other_parents():
    cat = _catalog()
    cat.execute(f"CREATE MATERIALIZED VIEW w AS {ANTI}")
    cat.execute("INSERT INTO t VALUES (1, 4)")
    ex = cat.explain("w")
    lines = ex.lines
    joins = [ln for ln in lines if ln.lstrip().startswith("Join inner on=[t.k = u.k]")]
    # the join on t.k = u.k is one operator: listed once, with its work, as shared #1 ...
    assert len(joins) == 1 and "[shared #1, read by 2 parents; last commit: 1 in, 1 out, 2 touched;" in joins[0]
    # ... and its other parent (the semijoin) refers to it instead of listing it again
    refs = [ln for ln in lines if "→ shared #1" in ln]
    assert len(refs) == 1 and refs[0].strip() == "→ shared #1 (Join inner on=[t.k = u.k] (delta join, inputs " \
                                                  "arranged by key))"
    semi = next(i for i, ln in enumerate(lines) if "Join inner on=[t.k = semi1.0]" in ln)
    depth = len(lines[semi]) - len(lines[semi].lstrip())
    assert lines[semi + 1].startswith(" " * (depth + 2) + "→ shared #1")
    # the tables under the shared join are listed once (not under the reference)
    assert sum(ln.lstrip().startswith("Get t AS t") for ln in lines) == 1
    # the work per operator is counted once: the rows touched shown sum to the view's work
    shown = sum(int(m) for m in re.findall(r", (\d+) touched", str(ex)))
    mv = cat.object("w").maintained
    assert shown == sum(w for _, _, w in mv.last_work) == 7
    assert len(mv.last_work) == len(mv.pipeline.operators)
    # the HTML repr is the same text
    assert "→ shared #1 (Join inner" in ex._repr_html_() and ex._repr_html_().count("2 touched") == 1
    assert cat.sql("EXPLAIN MATERIALIZED VIEW w").column("plan").to_pylist() == lines
    # and the view is right
    rows = [tuple(r.values()) for r in cat.sql("SELECT * FROM w ORDER BY k").to_pylist()]
    assert rows == [tuple(r.values()) for r in cat.sql(ANTI + " ORDER BY k").to_pylist()] == [(1, 5), (1, 5)]


def test_pipeline_tree_refers_to_each_shared_step_after_its_first_occurrence():
    schemas = {"t": {"k": pa.int64()}, "u": {"k": pa.int64()}}
    pipe = render(plan("SELECT k FROM t INTERSECT SELECT k FROM u", schemas))
    tree, steps = pipe.tree(), pipe.steps()
    assert [k for _, k, _, first in tree if first] == list(range(len(steps)))  # each step once, in order
    refs = [(k, shared) for _, k, shared, first in tree if not first]
    assert refs and all(shared is not None for _, shared in refs)
    for k, shared in refs:  # a reference names the number its first occurrence carries
        assert (k, shared, True) in {(kk, s, f) for _, kk, s, f in tree}
    assert len({id(op) for _, _, op, _, _ in steps}) == len(steps) == len(pipe.operators)


def test_an_arrangements_bytes_count_its_key_indexes():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w BIGINT)")
    n = 20_000
    cat.append("t", pa.table({"k": np.arange(n) % 2_000, "v": np.arange(n)}))
    cat.append("u", pa.table({"k": np.arange(2_000), "w": np.arange(2_000)}))
    cat.execute("CREATE MATERIALIZED VIEW j AS SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k")
    # a bulk change looks up many keys at once: the runs searched get key indexes
    cat.append("t", pa.table({"k": np.arange(1_000), "v": np.full(1_000, -1)}))
    arrs = cat.object("j").maintained.arrangements()
    indexed = [a for a in arrs if a.index_nbytes]
    assert indexed
    text = str(cat.explain("j"))
    for a in indexed:
        assert (f"{len(a)} rows, {a.nbytes + a.index_nbytes} bytes ({a.nbytes} runs + {a.index_nbytes} "
                "key index)") in text
    # the arrangements (runs and key indexes) hold at most 2x the Arrow size of their rows
    held = sum(a.nbytes + a.index_nbytes for a in arrs)
    arrow = 0
    for a in arrs:
        rows = a.base.snapshot()
        arrow += sum(rows.column(c).nbytes for c in rows.column_names)
    assert held <= 2 * arrow, (held, arrow)
