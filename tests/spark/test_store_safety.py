"""A sink store that cannot be used is refused before Spark starts, and ``colmz read``
fails fast on what is not a store. No Spark session except where a test asks for one.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

# ---------------------------------------------------------------------------- the sink CLI


@pytest.mark.parametrize("damage", ["missing part", "corrupt metadata", "foreign directory"])
def test_sink_reports_a_damaged_store_before_spark_starts(tmp_path, monkeypatch, capsys, damage):
    import sqlite3

    import colmz
    from colmz.spark import cli

    path = tmp_path / "st"
    if damage == "foreign directory":
        path.mkdir()
        (path / "notes.txt").write_text("mine")
        expect = "not a colmz store"
    else:
        a = colmz.Arrangement.open(str(path), schema={"customer": pa.int64(), "region": pa.string(),
                                                       "plan": pa.string()}, name="arrangement")
        a.write(colmz.Updates({"customer": [1], "region": ["eu"], "plan": ["pro"]}, time=[0], diff=[1]))
        a.seal(1)
        if damage == "missing part":
            a.store.delete(sorted(a.referenced_keys())[0])
            expect = "part(s) its metadata names are missing"
        else:
            with sqlite3.connect(path / "consensus.sqlite") as db:
                db.execute("UPDATE consensus SET data = ?", (b"{not json",))
            expect = "is damaged"

    def no_spark(args):
        raise AssertionError("a Spark session was started before the store was checked")

    from colmz.spark.cli import base, sink

    monkeypatch.setattr(sink, "start_spark", no_spark)
    status = cli.main(["sink", "--store", str(path), "--ticks", "3", "--quiet"])
    err = capsys.readouterr().err
    assert status == base.EXIT_FAIL and expect in err and "Traceback" not in err


# ---------------------------------------------------------------------------- colmz read, fail fast


class _Stored:
    """A sink store (an arrangement sealed through tick 7) and the updates it holds."""

    def __init__(self, path):
        import colmz

        self.path = path
        a = colmz.Arrangement.open(str(path), schema={"k": pa.string()}, name="arrangement")
        self.updates = pa.table({"k": ["a", "b", "a", None, "b", "c"], "time": [1, 1, 5, 2, 7, 7],
                                 "diff": [2, 1, -1, 1, -1, 3]})
        a.write(colmz.Updates.from_arrow(self.updates))
        a.seal(8)

    def read_arrow(self):
        return self.updates


def _updates_store(tmp_path) -> _Stored:
    return _Stored(tmp_path / "st")


@pytest.fixture
def no_spark(monkeypatch):
    from colmz.spark import cli
    from colmz.spark.cli import consolidate, ct, sink, stream

    def refuse(args):
        raise AssertionError("a Spark session was started")

    for command in (sink, consolidate, stream, ct):
        monkeypatch.setattr(command, "start_spark", refuse)
    return cli


def test_read_prints_the_view_at_a_time_without_spark(tmp_path, no_spark):
    import io

    s = _updates_store(tmp_path)
    out = io.StringIO()
    assert no_spark.main(["read", str(s.path), "--as-of", "4"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["k", "count"]
    assert [ln.split() for ln in lines[2:]] == [["NULL", "1"], ["a", "2"], ["b", "1"]]
    out = io.StringIO()
    assert no_spark.main(["read", str(s.path), "--json"], out=out) == 0
    summary = json.loads(out.getvalue())  # only JSON on stdout
    assert summary["as_of"] == 7 and summary["rows"] == 3 and summary["total_count"] == 5


def test_read_writes_parquet_and_matches_the_oracle(tmp_path, no_spark):
    import io
    from collections import Counter

    import pyarrow.parquet as pq

    s = _updates_store(tmp_path)
    rows = s.read_arrow().to_pylist()
    for t in range(8):
        target = tmp_path / f"view{t}.parquet"
        assert no_spark.main(["read", str(s.path), "--as-of", str(t), "--output", str(target)], out=io.StringIO()) == 0
        want = Counter()
        for r in rows:
            if r["time"] <= t:
                want[r["k"]] += r["diff"]
        want = {k: v for k, v in want.items() if v}
        got = {r["k"]: r["count"] for r in pq.read_table(target).to_pylist()}
        assert got == want
    assert no_spark.main(["read", str(s.path), "--as-of", "1", "--output", str(target)], out=io.StringIO()) == 2


def test_read_refuses_what_is_not_a_store(tmp_path, no_spark, capsys):
    assert no_spark.main(["read", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "plain").mkdir()
    assert no_spark.main(["read", str(tmp_path / "plain")]) == 2
    assert "is not a colmz store" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["sink", "--input", "{events}"], 2, "--keys is required"),
        (["sink", "--input", "{missing}", "--keys", "k"], 2, "does not exist"),
        (["sink", "--store", "{file}"], 2, "is a file; a store is a directory"),  # bad input
        (["consolidate", "{missing}", "{out}"], 2, "does not exist"),
        (["consolidate", "{events}", "{events}"], 2, "exists; pass --overwrite"),
        (["snapshot", "{events}", "{events}", "--as-of", "3"], 2, "exists; pass --overwrite"),
    ],
)
def test_mistakes_are_reported_before_spark_starts(tmp_path, no_spark, capsys, argv, status, message):
    events = tmp_path / "events.parquet"
    events.write_bytes(b"not read")
    (tmp_path / "file").write_text("x")
    paths = {"events": str(events), "missing": str(tmp_path / "missing.parquet"), "file": str(tmp_path / "file"),
             "out": str(tmp_path / "out")}
    argv = [a.format(**paths) for a in argv]
    if argv[0] == "sink" and "--store" not in argv:
        argv += ["--store", str(tmp_path / "store")]
    assert no_spark.main(argv) == status
    assert message in capsys.readouterr().err


@pytest.mark.spark
def test_read_parts_keeps_only_rows_at_or_after_a_parts_min_time(spark, tmp_path):
    import colmz
    from colmz.arrangement.runs import write_run
    from colmz.spark.arrangement_io import read_parts

    url = str(tmp_path / "arr")
    a = colmz.Arrangement.open(url, schema={"k": pa.int64()})
    run = write_run(a.store, a.schema, colmz.Updates({"k": [1, 2, 3, 4]}, time=[0, 1, 2, 3], diff=[1, 1, 1, 1]),
                    prefix=a.prefix)
    (key,) = run.keys
    rows = lambda lo: sorted(tuple(r) for r in read_parts(spark, url, a.schema, [(key, lo)]).collect())  # noqa: E731
    assert rows(0) == [(1, 0, 1), (2, 1, 1), (3, 2, 1), (4, 3, 1)]
    assert rows(2) == [(3, 2, 1), (4, 3, 1)]
    assert rows(9) == []
