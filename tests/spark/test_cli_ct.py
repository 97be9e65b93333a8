"""``colmz ct --catalog``: the catalog is only read -- a failed command leaves no new
catalog behind, and a catalog colmz cannot write serves (no Spark session is started: every
case here fails, or is read, before it)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import colmz
from colmz.spark.cli import base

TASK = "CREATE CONTINUAL TASK o ON INPUT t AS (INSERT INTO o SELECT * FROM t)"


@pytest.fixture
def no_spark(monkeypatch):
    """``cli.main`` with ``colmz ct``'s Spark start refused."""
    from colmz.spark import cli
    from colmz.spark.cli import ct

    def refuse(args):
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(ct, "start_spark", refuse)
    return cli


def _argv(tmp_path, catalog, sql=TASK):
    (tmp_path / "task.sql").write_text(sql)
    pq.write_table(pa.table({"k": [1], "time": [1], "diff": [1]}), tmp_path / "in.parquet")
    return ["ct", "--sql", str(tmp_path / "task.sql"), "-i", str(tmp_path / "in.parquet"),
            "-o", str(tmp_path / "out"), "--catalog", str(catalog)]


def test_a_catalog_that_is_not_there_is_refused_and_not_created(no_spark, tmp_path, capsys):
    # Was: the failed command left a new empty catalog at the mistyped path.
    (tmp_path / "empty").mkdir()
    for where in (tmp_path / "typo_dir", tmp_path / "empty"):
        assert no_spark.main(_argv(tmp_path, where)) == base.EXIT_INPUT
        err = capsys.readouterr().err
        assert f"--catalog {str(where)!r}" in err and "no catalog" in err and "Traceback" not in err
    assert not (tmp_path / "typo_dir").exists() and list((tmp_path / "empty").iterdir()) == []


def test_a_failed_command_leaves_the_catalog_as_it_was(no_spark, tmp_path, capsys):
    cat = colmz.Catalog(tmp_path / "cat")
    cat.execute("CREATE TABLE u (k BIGINT)")
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "cat").rglob("*"))
    # the task's input is not in the catalog: bad input, found before Spark
    assert no_spark.main(_argv(tmp_path, tmp_path / "cat")) == base.EXIT_INPUT
    assert "'t'" in capsys.readouterr().err
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "cat").rglob("*")) == before


def test_input_columns_are_checked_before_spark_starts(no_spark, tmp_path, capsys):
    """`ct` with input updates lacking a column of the task's input is bad input in one line,
    read off the Parquet footer before any Spark session starts (it came 4-8 s into Spark)."""
    (tmp_path / "task.sql").write_text("CREATE TABLE t (k BIGINT, v BIGINT); " + TASK)
    pq.write_table(pa.table({"k": [1], "time": [1], "diff": [1]}), tmp_path / "in.parquet")
    argv = ["ct", "--sql", str(tmp_path / "task.sql"), "-i", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "out")]
    assert no_spark.main(argv) == base.EXIT_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lacks the column(s) ['v']" in err[0]
    assert no_spark.main([*argv[:-2], "-o", str(tmp_path / "out2"), "--diff", "d"]) == base.EXIT_INPUT
    assert "['v', 'd']" in capsys.readouterr().err
