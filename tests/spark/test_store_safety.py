"""The store never loses an acknowledged commit, never deletes a live run's work, and reads
only what a well-formed manifest lists inside the store. No Spark session: these tests stage
with pyarrow (``Store.stage_arrow``) and race real processes.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from colmz.spark.store_v01 import MANIFEST, ManifestError, Store, StoreError

ROUNDS = int(os.environ.get("COLMZ_STORE_RACE_ROUNDS", "40"))


def table(*keys: str, time: int = 1) -> pa.Table:
    return pa.table({"k": list(keys), "time": [time] * len(keys), "diff": [1] * len(keys)})


# ---------------------------------------------------------------------------- racing writers


def _racer(path: str, name: str, rounds: int, barrier, results) -> None:
    store = Store(path)
    for r in range(rounds):
        barrier.wait()  # both read the same base version...
        staged = store.stage_arrow(table(f"{name}-{r}"))
        barrier.wait()  # ...and commit at the same moment
        try:
            rec = store.commit(staged)
            results.put((r, name, "ok", rec["seq"], rec["files"]))
        except StoreError as e:
            results.put((r, name, "lost", None, str(e)))
        barrier.wait()


def test_two_processes_racing_commits_never_lose_an_acknowledged_one(tmp_path):
    path = str(tmp_path / "st")
    Store(path).commit(Store(path).stage_arrow(table("seed")))
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(path, n, ROUNDS, barrier, results)) for n in ("a", "b")]
    for p in procs:
        p.start()
    got = [results.get(timeout=120) for _ in range(2 * ROUNDS)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    by_round: dict[int, list] = {}
    for r, name, outcome, seq, info in got:
        by_round.setdefault(r, []).append((name, outcome, seq, info))
    store = Store(path)
    m = store.verify()
    listed = {f for c in m["commits"] for f in c["files"]}
    for r in range(ROUNDS):
        outcomes = sorted(o for _, o, _, _ in by_round[r])
        assert outcomes == ["lost", "ok"], (r, by_round[r])  # exactly one winner per version
        (winner,) = [x for x in by_round[r] if x[1] == "ok"]
        (loser,) = [x for x in by_round[r] if x[1] == "lost"]
        assert set(winner[3]) <= listed  # an acknowledged commit is in the manifest
        assert "by pid" in loser[3]  # the loser is told who committed
    assert m["version"] == ROUNDS + 1 and len(m["commits"]) == ROUNDS + 1
    keys = sorted(store.read_arrow().column("k").to_pylist())
    assert len(keys) == ROUNDS + 1 and len(set(keys)) == ROUNDS + 1
    # the next run's cleanup keeps everything acknowledged
    store.clean(lease_seconds=0)
    assert store.verify() == m


# ---------------------------------------------------------------------------- cleanup


def test_clean_keeps_a_live_runs_staged_work(tmp_path):
    a, b = Store(tmp_path / "st"), Store(tmp_path / "st")
    a.commit(a.stage_arrow(table("x")))
    staged = a.stage_arrow(table("y"))  # run A is in flight
    assert b.clean(lease_seconds=0) == []  # run B starts and cleans up: A's work survives
    rec = a.commit(staged)
    assert rec["seq"] == 2 and sorted(a.read_arrow().column("k").to_pylist()) == ["x", "y"]


def test_clean_removes_a_killed_runs_staging(tmp_path):
    path = tmp_path / "st"
    Store(path).commit(Store(path).stage_arrow(table("x")))
    before = Store(path).listing()
    code = textwrap.dedent(
        f"""
        import os, signal, pyarrow as pa
        from colmz.spark.store_v01 import Store
        s = Store({str(path)!r})
        s.stage_arrow(pa.table({{"k": ["dead"], "time": [1], "diff": [1]}}))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False)
    assert proc.returncode == -signal.SIGKILL
    assert Store(path).listing() != before  # the dead run left its staging behind
    removed = Store(path).clean()
    assert len(removed) == 1 and Store(path).listing() == before


def test_clean_removes_unlisted_commit_dirs_and_old_ownerless_staging(tmp_path):
    s = Store(tmp_path / "st")
    s.commit(s.stage_arrow(table("a")))
    before = s.listing()
    (s.path / "commits" / ("000002-" + "d" * 32)).mkdir()  # a committer died before publishing
    (s.path / "_staging" / "legacy").mkdir(parents=True)  # no owner file (older colmz)
    assert len(s.clean()) == 1  # the legacy dir is within its lease
    assert len(s.clean(lease_seconds=0)) == 1 and s.listing() == before


def test_commit_after_staging_vanished_is_a_store_error(tmp_path):
    import shutil

    s = Store(tmp_path / "st")
    staged = s.stage_arrow(table("a"))
    shutil.rmtree(staged.path)
    with pytest.raises(StoreError, match="are gone; nothing was committed"):
        s.commit(staged)
    assert not s.exists()


# ---------------------------------------------------------------------------- manifests


def _store_with_commit(tmp_path) -> Store:
    s = Store(tmp_path / "st")
    s.commit(s.stage_arrow(table("a", "b")))
    return s


def _rewrite(s: Store, change) -> None:
    m = json.loads(s.manifest_path.read_text())
    change(m)
    s.manifest_path.write_text(json.dumps(m))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: m.pop("commits"), "'commits' is missing"),
        (lambda m: m.pop("version"), "'version' is missing"),
        (lambda m: m.pop("schema"), "'schema' is missing"),
        (lambda m: m.update(version="2"), "'version' must be a non-negative integer"),
        (lambda m: m.update(version=-1), "'version' must be a non-negative integer"),
        (lambda m: m.update(commits={}), "'commits' must be a list"),
        (lambda m: m.update(schema="{not json"), "'schema' must be a Spark schema"),
        (lambda m: m.update(schema=None), "'schema' is null but the store has commits"),
        (lambda m: m["commits"].append("x"), "'commits[1]' must be an object"),
        (lambda m: m["commits"][0].pop("rows"), "'commits[0].rows' is missing"),
        (lambda m: m["commits"][0].update(rows=-3), "'commits[0].rows' must be a non-negative"),
        (lambda m: m["commits"][0].update(seq=True), "'commits[0].seq' must be an integer"),
        (lambda m: m["commits"][0].update(files="x"), "'commits[0].files' must be a non-empty list"),
        (lambda m: m["commits"][0].update(note=3), "'commits[0].note' must be an object"),
        (lambda m: m.update(version=0), "'version' is 0 but a commit has seq 1"),
        (lambda m: m["commits"][0]["files"].append("commits/../../x.parquet"), "lists 'commits/../../x.parquet'"),
        (lambda m: m["commits"][0]["files"].append("/etc/passwd.parquet"), "lists '/etc/passwd.parquet'"),
    ],
)
def test_malformed_manifest_names_the_field(tmp_path, change, field):
    s = _store_with_commit(tmp_path)
    _rewrite(s, change)
    with pytest.raises(ManifestError, match=field.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        s.manifest()


def test_manifest_that_is_not_json_or_not_an_object(tmp_path):
    s = _store_with_commit(tmp_path)
    s.manifest_path.write_text("[1, 2]")
    with pytest.raises(ManifestError, match="is not a JSON object"):
        s.manifest()
    s.manifest_path.write_text('{"format": "colmz-updates-store", "vers')
    with pytest.raises(ManifestError, match="cannot read store manifest"):
        s.manifest()


def test_symlinked_commit_dir_leading_out_is_refused(tmp_path):
    s = _store_with_commit(tmp_path)
    rel = s.manifest()["commits"][0]["files"][0]
    commit_dir = s.path / os.path.dirname(rel)
    outside = tmp_path / "elsewhere"
    commit_dir.rename(outside)
    commit_dir.symlink_to(outside, target_is_directory=True)
    with pytest.raises(ManifestError, match="outside the store"):
        s.files()
    with pytest.raises(ManifestError, match="outside the store"):
        s.verify()


def test_verify_finds_a_missing_file_and_a_wrong_row_count(tmp_path):
    s = _store_with_commit(tmp_path)
    assert s.verify()["version"] == 1
    _rewrite(s, lambda m: m["commits"][0].update(rows=5))
    with pytest.raises(ManifestError, match="records 5 rows but its files hold 2"):
        s.verify()
    _rewrite(s, lambda m: m["commits"][0].update(rows=2))
    os.unlink(s.files()[0])
    with pytest.raises(ManifestError, match="which is missing"):
        s.verify()


def test_manifest_written_by_a_commit_is_valid_and_names_its_writer(tmp_path):
    s = _store_with_commit(tmp_path)
    rec = s.manifest()["commits"][0]
    assert rec["writer"]["pid"] == os.getpid()
    assert (s.path / MANIFEST).is_file()


# ---------------------------------------------------------------------------- the sink CLI


@pytest.mark.parametrize("damage", ["missing part", "corrupt metadata", "old layout", "foreign directory"])
def test_sink_reports_a_damaged_store_before_spark_starts(tmp_path, monkeypatch, capsys, damage):
    import sqlite3

    import colmz
    from colmz.spark import cli

    path = tmp_path / "st"
    if damage == "old layout":
        _store_with_commit(tmp_path)
        expect = "colmz migrate"
    elif damage == "foreign directory":
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
        (["sink", "--store", "{file}"], 2, "is a file; a store is a directory"),  # bad input (issue 40)
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
