"""``JsonbCheck``: the check of jsonb columns a DISTINCT, GROUP BY, set operation or join key
compares as text, rendered and run without DuckDB (sessions opened counted: none at render,
none at a step), refusing a number written with trailing zeros as the query path does and
leaving the pipeline as it was."""

from __future__ import annotations

import pyarrow as pa
import pytest

import colmz
import colmz.sql
import colmz.sql.run
from colmz.dataflow.jsonbcheck import JsonbCheck
from colmz.dataflow.plan import plan
from colmz.dataflow.plan_nodes import JsonbCheck as JsonbCheckNode
from colmz.dataflow.render import render
from colmz.sql import UnsupportedSQL

SCHEMA = {"n": {"id": pa.int64(), "j": pa.string()}}
KINDS = {"n": (None, "jsonb")}


@pytest.fixture
def sessions(monkeypatch):
    """The DuckDB sessions opened (a work counter), through either name of ``session``."""
    opened = []
    real = colmz.sql.run.session

    def counting(*args, **kwargs):
        opened.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(colmz.sql.run, "session", counting)
    monkeypatch.setattr(colmz.sql, "session", counting)
    return opened


def _nodes(node):
    yield node
    for i in node.inputs:
        yield from _nodes(i)


@pytest.mark.parametrize("body", [
    "SELECT j, count(*) AS c FROM n GROUP BY j",
    "SELECT DISTINCT j FROM n",
    "SELECT j FROM n UNION SELECT j FROM n",
])
def test_a_check_opens_no_duckdb_session_at_render_or_step(sessions, body):
    p = plan(body, SCHEMA, kinds=KINDS)
    checks = {n for n in _nodes(p.root) if isinstance(n, JsonbCheckNode)}
    assert checks and "Check [jsonb text of" in p.explain() and "via SQL" not in p.explain()
    sessions.clear()  # planning asks DuckDB for its aggregates' names (once per process)
    pipe = render(p)
    ops = [op for _, _, op, *_ in pipe.steps() if isinstance(op, JsonbCheck)]
    assert len(ops) == len(checks)
    rows = colmz.Updates({"id": [1, 2, 3, 4], "j": ['[1, 2.5]', '{"a": 1}', None, '[2]']},
                         time=[1] * 4, diff=[1] * 4)
    out = pipe.step(1, {"n": rows})
    pipe.step(2, {"n": colmz.Updates({"id": [1], "j": ['[1, 2.5]']}, time=[2], diff=[-1])})
    pipe.step(3, {})
    assert sessions == []
    assert sum(op.values_checked for op in ops) == 4 * len(ops)  # 3 + 1 non-NULL values each
    assert len(out) > 0


def test_a_refused_value_leaves_the_pipeline_as_it_was(sessions):
    p = plan("SELECT j, count(*) AS c FROM n GROUP BY j", SCHEMA, kinds=KINDS)
    sessions.clear()
    pipe = render(p)
    pipe.step(1, {"n": colmz.Updates({"id": [1], "j": ["[1]"]}, time=[1], diff=[1])})
    with pytest.raises(UnsupportedSQL, match="number written with trailing zeros"):
        pipe.step(2, {"n": colmz.Updates({"id": [2, 3], "j": ["[1]", "[1.0]"]}, time=[2, 2], diff=[1, 1])})
    out = pipe.step(2, {"n": colmz.Updates({"id": [2], "j": ["[1]"]}, time=[2], diff=[1])})
    assert sorted(out.to_pylist()) == [("[1]", 1, 2, -1), ("[1]", 2, 2, 1)]
    assert sessions == []


def test_bad_columns_are_named():
    with pytest.raises(ValueError, match="columns: 2 is not a position of the 2 input column"):
        JsonbCheck(SCHEMA["n"], [1, 2])
