"""``asv_benchmarks/bench_ivm_pg.py``: without pg_ivm it says why and measures nothing of
PostgreSQL; with pg_ivm installed, a small run keeps views equal to PostgreSQL's answer."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "asv_benchmarks" / "bench_ivm_pg.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_ivm_pg", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_tool_is_named(bench, monkeypatch):
    servers = bench.tests_helpers()
    monkeypatch.setattr(servers, "pg_bin", lambda tool: None)
    assert bench.pg_ivm_missing() == "PostgreSQL's initdb is not installed"


def test_without_pg_ivm_the_columns_are_left_out(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "pg_ivm_missing", lambda: "pg_ivm is not installed (test)")
    monkeypatch.setattr(bench, "measure_pg", lambda *a, **k: pytest.fail("measured without pg_ivm"))
    bench.main(["100", "sum", "--no-colmz", "--changes", "insert"])
    out = capsys.readouterr().out
    assert out.startswith("pg_ivm not measured: pg_ivm is not installed (test)\n")
    assert "pg_ivm view" not in out and "pg ok" not in out
    assert "| sum | 100 | insert | - | - | - |" in out


def test_statement_parameters(bench):
    import pyarrow as pa

    update = pa.table({"k": [3, 3], "v": [7, 8], "diff": [-1, 1]})
    assert bench.parameters("update", update) == (8, 3, 7)
    bulk = pa.table({"k": [1, 2], "v": [5, 6], "diff": [1, 1]})
    assert bench.parameters("bulk", bulk) == ([1, 2], [5, 6])
    assert bench.parameters("delete", pa.table({"k": [4], "v": [9], "diff": [-1]})) == (4, 9)


def test_pg_ivm_keeps_the_views(bench):
    if (why := bench.pg_ivm_missing()) is not None:
        pytest.skip(why)
    out = bench.measure_pg(1_000, ["sum", "join", "topk"], ("insert", "delete", "update", "bulk"))
    for view in ("sum", "join"):
        assert {k: f["pg_matches"] for k, f in out[view].items()} == dict.fromkeys(bench.CHANGE_KINDS, 1)
    assert "ORDER BY" in out["topk"]["refused"]
