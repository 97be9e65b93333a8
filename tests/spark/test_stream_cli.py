"""``colmz stream`` and ``colmz ct``: end to end, --help, and bad input reported (exit 2)
before anything is committed."""

from __future__ import annotations

import io
import json
import os
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import colmz
from colmz.spark import cli

pytestmark = pytest.mark.spark


def run(argv) -> tuple[int, dict | None]:
    out = io.StringIO()
    status = cli.main([*argv, "--json", "--quiet"], out=out)
    text = out.getvalue().strip()
    return status, (json.loads(text.splitlines()[-1]) if text else None)


def events_file(d, i: int, rows: list[tuple]) -> None:
    os.makedirs(d, exist_ok=True)
    t = pa.table({"k": [r[0] for r in rows], "value": [r[1] for r in rows],
                  "valid_from": [r[2] for r in rows], "valid_to": [r[3] for r in rows]})
    p = os.path.join(d, f"part-{i:04d}.parquet")
    pq.write_table(t, p)
    os.utime(p, (1e9 + i, 1e9 + i))


def stream_args(d, *extra):
    return ["stream", "--input", str(d / "in"), "--store", str(d / "store"), "--checkpoint", str(d / "ck"),
            "--keys", "k", "--available-now", "--files-per-batch", "1", *extra]


def seal_and_view(store: str, at: int):
    a = colmz.Arrangement.open(store, create=False)
    return a.get_seal(), Counter({(k, v): d for k, v, _, d in a.read(as_of=at).to_pylist()})


@pytest.mark.parametrize("command", ["stream", "ct"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0
    assert "usage: colmz " + command in capsys.readouterr().out


def test_stream_end_to_end_and_restart(spark, tmp_path):
    events_file(tmp_path / "in", 0, [(1, "a", 0, 3), (2, "b", 0, 100)])
    # (5, "e", 0, 4) arrives late, in tick 1: it is in the view from tick 1 on
    events_file(tmp_path / "in", 1, [(3, "c", 1, 2), (5, "e", 0, 4)])
    status, summary = run(stream_args(tmp_path))
    assert status == 0 and summary["batches"] == 2 and summary["replayed"] == 0
    store = str(tmp_path / "store")
    assert seal_and_view(store, 0) == (2, Counter({(1, "a"): 1, (2, "b"): 1}))
    assert seal_and_view(store, 1) == (2, Counter({(1, "a"): 1, (2, "b"): 1, (3, "c"): 1, (5, "e"): 1}))
    events_file(tmp_path / "in", 2, [(4, "d", 2, 9)])
    status, summary = run(stream_args(tmp_path))
    assert status == 0 and summary["batches"] == 1
    seal, v2 = seal_and_view(store, 2)
    assert seal == 3 and v2 == Counter({(1, "a"): 1, (2, "b"): 1, (4, "d"): 1, (5, "e"): 1})
    # colmz read takes the stream's store as it is
    out = io.StringIO()
    assert cli.main(["read", store, "--as-of", "2", "--json"], out=out) == 0
    assert json.loads(out.getvalue())["rows"] == 4


def test_stream_event_ticks(spark, tmp_path):
    # event ticks, delay 1: after file 0 the watermark is 5 - 1 = 4; (3, "c", 2, 9) in file 1
    # is late (2 < 4) and enters at tick 4; after file 1 the watermark is 8 - 1 = 7
    events_file(tmp_path / "in", 0, [(1, "a", 0, 3), (2, "b", 5, 100)])
    events_file(tmp_path / "in", 1, [(3, "c", 2, 9), (4, "d", 8, 9)])
    status, summary = run(stream_args(tmp_path, "--tick", "event", "--delay", "1"))
    assert status == 0 and summary["batches"] == 2
    store = str(tmp_path / "store")
    assert seal_and_view(store, 2) == (7, Counter({(1, "a"): 1}))
    assert seal_and_view(store, 3) == (7, Counter())
    assert seal_and_view(store, 6) == (7, Counter({(2, "b"): 1, (3, "c"): 1}))
    # the checkpoint is bound to its tick settings
    status, _ = run(stream_args(tmp_path, "--tick", "event", "--delay", "2"))
    assert status == 2


def bad_events(tmp_path):
    events_file(tmp_path / "in", 0, [(1, "a", 0, 3)])
    events_file(tmp_path / "in", 1, [(1, "a", 5, 3)])


@pytest.mark.parametrize("case, message", [
    ("no-dir", "is not a directory"),
    ("no-files", "holds no .parquet files"),
    ("bad-key", "key column 'nope' is not in the events"),
    ("inverted", "valid_to < valid_from"),
    ("other-store", "another query"),
])
def test_stream_bad_input(spark, tmp_path, capsys, case, message):
    extra = []
    if case == "no-files":
        os.makedirs(tmp_path / "in")
    elif case == "bad-key":
        events_file(tmp_path / "in", 0, [(1, "a", 0, 3)])
        extra = ["--keys", "nope"]
    elif case == "inverted":
        bad_events(tmp_path)
    elif case == "other-store":
        events_file(tmp_path / "in", 0, [(1, "a", 0, 3)])
        assert run(stream_args(tmp_path))[0] == 0
        extra = ["--store", str(tmp_path / "store2")]
    status, _ = run(stream_args(tmp_path, *extra))
    assert status == 2
    assert message in capsys.readouterr().err
    if case == "inverted":  # the good first batch is committed, the bad one nothing
        assert seal_and_view(str(tmp_path / "store"), 0) == (1, Counter({(1, "a"): 1}))
    elif case == "other-store":
        assert not (tmp_path / "store2").exists()
    else:
        assert not (tmp_path / "store").exists()


TASK = """CREATE TABLE t (k BIGINT, v BIGINT);
CREATE CONTINUAL TASK o (k BIGINT, v BIGINT) ON INPUT t AS (
  DELETE FROM o WHERE k IN (SELECT k FROM t);
  INSERT INTO o SELECT k, max(v) FROM t GROUP BY k)"""


def test_ct_end_to_end_and_bad_input(spark, tmp_path, capsys):
    (tmp_path / "task.sql").write_text(TASK)
    pq.write_table(pa.table({"k": [1, 1, 2, 1], "v": [5, 7, 1, 2], "time": [1, 1, 2, 3], "diff": [1, 1, 1, 1]}),
                   tmp_path / "input.parquet")
    args = ["ct", "--sql", str(tmp_path / "task.sql"), "--input", str(tmp_path / "input.parquet"),
            "--output", str(tmp_path / "out")]
    status, summary = run([*args, "--partition-by", "k"])
    assert status == 0
    got: Counter = Counter()
    for r in pq.read_table(tmp_path / "out").to_pylist():
        got[(r["k"], r["v"], r["time"])] += r["diff"]
    assert Counter({key: d for key, d in got.items() if d}) == Counter({(1, 7, 1): 1, (2, 1, 2): 1, (1, 7, 3): -1, (1, 2, 3): 1})
    assert summary["rows"] == 4
    # bad input: existing output, a missing SQL file, SQL without a task; nothing written
    before = sorted(os.listdir(tmp_path / "out"))
    assert run(args)[0] == 2 and "exists" in capsys.readouterr().err
    assert run([*args[:2], str(tmp_path / "nope.sql"), *args[3:], "--overwrite"])[0] == 2
    (tmp_path / "bad.sql").write_text("CREATE TABLE t (k BIGINT)")
    assert run([*args[:2], str(tmp_path / "bad.sql"), *args[3:], "--overwrite"])[0] == 2
    assert "exactly one CREATE CONTINUAL TASK" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path / "out")) == before


def test_stream_stores_share_one_consensus_and_a_wrong_one_is_refused(spark, tmp_path, capsys):
    # Two stream stores with ONE PostgreSQL consensus URL keep their own contents (before:
    # the second stream's store opened the first one's record). The same store opened with
    # another consensus (the wrong URL) is refused, exit 1, naming what it found: before, a
    # new empty arrangement was created over its parts.
    from storage_servers import fresh_schema_url, postgres_url

    cons = fresh_schema_url(postgres_url())
    a, b = tmp_path / "a", tmp_path / "b"
    events_file(a / "in", 0, [(1, "a", 0, 3), (2, "b", 0, 100)])
    events_file(b / "in", 0, [(7, "x", 0, 9)])
    assert run([*stream_args(a), "--consensus", cons])[0] == 0
    assert run([*stream_args(b), "--consensus", cons])[0] == 0
    va = colmz.Arrangement.open(str(a / "store"), consensus=cons, create=False).read(as_of=0).to_pylist()
    vb = colmz.Arrangement.open(str(b / "store"), consensus=cons, create=False).read(as_of=0).to_pylist()
    assert sorted((k, v) for k, v, _, _ in va) == [(1, "a"), (2, "b")]
    assert sorted((k, v) for k, v, _, _ in vb) == [(7, "x")]
    capsys.readouterr()
    events_file(a / "in", 1, [(3, "c", 1, 5)])
    status, _ = run([*stream_args(a), "--consensus", fresh_schema_url(postgres_url())])
    err = capsys.readouterr().err
    assert status == 1 and "metadata was lost" in err and str(a / "store") in err
    after = colmz.Arrangement.open(str(a / "store"), consensus=cons, create=False).read(as_of=0).to_pylist()
    assert after == va
