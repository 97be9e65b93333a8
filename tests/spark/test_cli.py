"""The ``colmz`` CLI end to end: the example, re-runs, changed events, bad input, failures."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import colmz
from colmz.arrangement.runs import write_run
from colmz.spark import cli
from colmz.spark.cli import command_module

pytestmark = pytest.mark.spark

TICKS = 30


def run(argv, spark):
    """Run ``colmz ARGV`` in-process (it reuses the test session); return (status, summary)."""
    out = io.StringIO()
    status = cli.main([*argv, "--json", "--quiet"], out=out)
    text = out.getvalue().strip()
    return status, (json.loads(text.splitlines()[-1]) if status == 0 and text else None)


def write_events(path: Path, events: list[tuple]) -> str:
    k, region, plan, f, t = zip(*events) if events else ([],) * 5
    pq.write_table(pa.table({
        "customer": pa.array(k, pa.int64()), "region": pa.array(region, pa.string()),
        "plan": pa.array(plan, pa.string()), "valid_from": pa.array(f, pa.int64()),
        "valid_to": pa.array(t, pa.int64()),
    }), path)
    return str(path)


def sink_args(store, events=None, *extra):
    args = ["sink", "--store", str(store), "--ticks", str(TICKS), "--verify-ticks", "3"]
    if events is not None:
        args += ["--input", events, "--keys", "customer,region", "--value", "plan"]
    return [*args, *extra]


def arrangement(store) -> colmz.Arrangement:
    return colmz.Arrangement.open(str(store), create=False)


def stored_state(store, at: int) -> dict:
    """What the sink's store (an arrangement) holds at tick ``at``."""
    c = Counter()
    for k, r, p, _time, d in arrangement(store).read(as_of=at).to_pylist():
        c[(k, r, p)] += d
    return {key: d for key, d in c.items() if d}


def committed(store) -> tuple:
    """The store's committed state: its version, metadata and referenced parts."""
    a = arrangement(store)
    return a.seqno, a.meta()


def unchanged_on_disk(store, before: tuple, settle: float = 30.0) -> bool:
    """The committed state is ``before`` and, within ``settle`` seconds, no part outside it
    is left behind: a failed job's Python worker can outlive its task for a moment, finish a
    part and then delete it (colmz.arrangement.runs.discard_owned)."""
    deadline = time.monotonic() + settle
    while True:
        a = arrangement(store)
        if committed(store) != before:
            return False
        if set(a.store.list_keys(a.prefix)) == set(a.referenced_keys()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def view(events, at: int) -> dict:
    return dict(Counter((k, r, p) for k, r, p, f, t in events if f <= at < t))


def random_events(seed: int, n: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    f = rng.integers(0, TICKS, n)
    return [(int(k), str(r), str(p), int(a), int(a + d)) for k, r, p, a, d in zip(
        rng.integers(0, 40, n), rng.choice(["eu", "us"], n), rng.choice(["free", "pro"], n), f,
        rng.integers(0, TICKS, n))]


def test_help_everywhere():
    exe = Path(sys.executable).parent / "colmz"
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "colmz.spark.cli"]
    for sub in ([], ["sink"], ["read"], ["consolidate"], ["snapshot"]):
        r = subprocess.run([*base, *sub, "--help"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "usage: colmz" in r.stdout
    r = subprocess.run([*base, "sink", "--ticks", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "positive integer" in r.stderr


def test_example_end_to_end_and_idempotent(spark, tmp_path):
    store = tmp_path / "store"
    status, s = run([*sink_args(store), "--example-events", "50000"], spark)
    assert status == 0
    assert s["ticks"] == TICKS and s["events"] == 1500
    assert s["updates_written"] > 0 and s["sealed_through"] == TICKS - 1
    assert s["store_updates"] == s["updates_written"] and s["store_parts"] >= 1
    assert s["largest_correction_buffer"] > 0
    assert s["verified_ticks"] == [0, 14, 29] and s["verified_with"] == "local"  # small: in the driver
    before = committed(store)
    # the same events again: every tick is final, nothing to append, store untouched
    status, s2 = run([*sink_args(store), "--example-events", "50000"], spark)
    assert status == 0 and s2["updates_written"] == 0 and s2["live_ticks"] == 0
    assert committed(store) == before
    # human-readable output: progress and a summary, over ticks beyond the seal
    out = io.StringIO()
    argv = ["sink", "--store", str(store), "--ticks", str(2 * TICKS), "--example-events", "50000", "--verify-ticks", "0"]
    assert cli.main(argv, out=out) == 0
    text = out.getvalue()
    for needle in ("reading events", f"sink over {TICKS} ticks", "updates written", "largest correction buffer",
                   "sealed through tick 59", "time"):
        assert needle in text
    # not a terminal: no bar, one line per finished phase
    assert "\r" not in text
    phase_lines = [line for line in text.splitlines() if line.startswith("[")]
    assert [line.split("] ", 1)[1].split(":")[0] for line in phase_lines] == [
        "starting Spark", "reading events", "reading store",
        f"sink over {TICKS} ticks ({TICKS}..{2 * TICKS - 1}, writing corrections)", "committing", "compacting"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_quiet_with_quiet(spark, tmp_path):
    store = tmp_path / "store"
    tty = Terminal()
    assert cli.main([*sink_args(store), "--example-events", "16000"], out=tty) == 0
    text = tty.getvalue()
    bar, summary = text.split("summary\n")
    assert "\n" not in bar  # one line, redrawn: no scroll of phase lines
    frames = [f.strip() for f in bar.split("\r") if f.strip()]
    assert frames[0].startswith("starting Spark")
    assert any(f.startswith(f"sink over {TICKS} ticks (0..{TICKS - 1}") for f in frames)
    assert any(f.startswith("verifying 3 ticks") for f in frames)
    assert any(f.startswith("compacting: ") for f in frames)  # Arrangement.maintain's callback
    assert bar.endswith("\r")  # wiped before the summary
    assert "updates written" in summary
    # --quiet on a terminal: the summary only
    tty = Terminal()
    argv = ["sink", "--store", str(store), "--ticks", str(TICKS + 5), "--example-events", "16000", "--quiet"]
    assert cli.main(argv, out=tty) == 0
    assert "\r" not in tty.getvalue() and tty.getvalue().startswith("summary\n")


def test_changed_events_append_exactly_the_difference(spark, tmp_path):
    """Ticks before the store's seal are final; a later run over changed events writes the
    difference at its first tick at or after the seal (as Materialize's sink writes
    corrections at its output's upper), and from there on the store equals the new view."""
    store = tmp_path / "store"
    old = random_events(1, 400)
    new = old[:350] + random_events(2, 40)
    new[:10] = [(k, r, p, f, t + 2) for k, r, p, f, t in new[:10]]
    p_old = write_events(tmp_path / "old.parquet", old)
    p_new = write_events(tmp_path / "new.parquet", new)
    assert run(sink_args(store, p_old), spark)[0] == 0
    first_rows = arrangement(store).stats()["stored_updates"]
    longer = ["sink", "--store", str(store), "--ticks", str(2 * TICKS), "--verify-ticks", "3",
              "--input", p_new, "--keys", "customer,region", "--value", "plan"]
    status, s = run(longer, spark)
    assert status == 0 and s["live_ticks"] == TICKS and s["verified_ticks"][0] == TICKS
    # expected: desired_new minus what the first run persisted (old updates at times before
    # the seal), with every time before the seal moved to the seal
    d = Counter()
    for sign, evs, upto in ((1, new, 2 * TICKS - 1), (-1, old, TICKS - 1)):
        for k, r, p, f, t in evs:
            for at, diff in ((f, sign), (t, -sign)):
                if at <= upto:
                    d[(k, r, p, max(at, TICKS))] += diff
    want = {key: v for key, v in d.items() if v}
    assert s["updates_written"] == len(want)
    assert arrangement(store).stats()["stored_updates"] <= first_rows + len(want)  # compaction may merge
    for at in range(TICKS):
        assert stored_state(store, at) == view(old, at)  # history is final
    for at in range(TICKS, 2 * TICKS):
        assert stored_state(store, at) == view(new, at)
    # and once more: nothing
    assert run(longer, spark)[1]["updates_written"] == 0


def test_both_verifications_check_the_same_ticks(spark, tmp_path):
    """``--verify-with local`` and ``spark`` evaluate the view independently of the sink, over
    the store's parts and the run's, and agree; a run over a store that holds parts already
    reads those too."""
    events = random_events(12, 300)
    path = write_events(tmp_path / "e.parquet", events)
    for where in ("spark", "local"):
        store = tmp_path / where
        status, s = run(sink_args(store, path, "--verify-with", where), spark)
        assert status == 0 and s["verified_with"] == where and s["verified_ticks"] == [0, 14, 29]
        status, s = run([*sink_args(store, path, "--verify-with", where), "--ticks", str(2 * TICKS)], spark)
        assert status == 0 and s["verified_with"] == where and s["verified_ticks"][0] == TICKS
        for at in (0, TICKS + 3, 2 * TICKS - 1):
            assert stored_state(store, at) == view(events, at)
    # auto: the events (a Parquet input, collected to the driver) are small, so local
    status, s = run(sink_args(tmp_path / "auto", path), spark)
    assert status == 0 and s["verified_with"] == "local"


def test_verification_catches_a_wrong_store_in_both_places(spark, tmp_path, monkeypatch):
    # A sink that loses one correction: both verifications find it and nothing is committed.
    # The module the CLI dispatches to (not an attribute of the package, which a second import
    # of the file under another name can replace).
    sink_command = command_module("sink")
    real_sink = sink_command.sink

    def lossy_sink(*args, **kwargs):
        out = real_sink(*args, **kwargs)
        return out.filter("NOT (customer = 7 AND diff > 0)")

    path = write_events(tmp_path / "e.parquet", [(7, "eu", "pro", 2, 20), (8, "us", "free", 1, 5)])
    monkeypatch.setattr(sink_command, "sink", lossy_sink)
    for where in ("spark", "local"):
        status, _ = run(sink_args(tmp_path / where, path, "--verify-with", where), spark)
        assert status == 1
        assert arrangement_missing_or_empty(tmp_path / where)


def arrangement_missing_or_empty(store) -> bool:
    """Nothing committed and no part left (a failed first run leaves an empty store)."""
    try:
        a = arrangement(store)
    except FileNotFoundError:
        return not (store / "blob").exists() or not [p for p in (store / "blob").rglob("*.parquet")]
    return a.get_seal() in (0, None) and not a.parts() and not a.store.list_keys(a.prefix)


BAD = {
    "missing column": (lambda t: t.drop(["valid_to"]), "valid_to column 'valid_to' is not in the events"),
    "mistyped time": (lambda t: t.set_column(3, "valid_from", t.column("valid_from").cast(pa.string())),
                      "valid_from column 'valid_from' has type string"),
    "negative time": (lambda t: t.set_column(3, "valid_from", pa.array([-5] + t.column("valid_from").to_pylist()[1:])),
                      "1 row(s) with negative valid_from"),
    "null time": (lambda t: t.set_column(4, "valid_to", pa.array([None] + t.column("valid_to").to_pylist()[1:], pa.int64())),
                  "1 row(s) with NULL valid_to"),
    "inverted interval": (lambda t: t.set_column(4, "valid_to", pa.array([0] + t.column("valid_to").to_pylist()[1:], pa.int64())),
                          "row(s) with valid_to < valid_from"),
    "unsupported key type": (lambda t: t.set_column(0, "customer", pa.array([[1]] * t.num_rows)),
                             "key column 'customer' has type array<bigint>"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_reported_before_anything_is_written(spark, tmp_path, capsys, case):
    store = tmp_path / "store"
    events = random_events(3, 50)
    events[0] = (1, "eu", "pro", 5, 9)
    good = write_events(tmp_path / "good.parquet", events)
    assert run(sink_args(store, good), spark)[0] == 0
    before = committed(store)
    change, message = BAD[case]
    path = tmp_path / "bad.parquet"
    pq.write_table(change(pq.read_table(good)), path)
    longer = [*sink_args(store, str(path)), "--first-tick", str(TICKS)]  # ticks beyond the seal
    status, _ = run(longer, spark)
    assert status == 2
    assert message in capsys.readouterr().err
    assert unchanged_on_disk(store, before)


def test_bad_input_to_a_new_store_creates_nothing(spark, tmp_path, capsys):
    status, _ = run(sink_args(tmp_path / "store", str(tmp_path / "missing.parquet")), spark)
    assert status == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()
    events = write_events(tmp_path / "e.parquet", random_events(4, 20))
    status, _ = run(["sink", "--store", str(tmp_path / "store"), "--input", events], spark)
    assert status == 2 and "--keys is required" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_failing_job_midway_leaves_the_store_as_it_was(spark, tmp_path, monkeypatch):
    from collections.abc import Iterator

    store = tmp_path / "store"
    old = write_events(tmp_path / "old.parquet", random_events(5, 200))
    new = write_events(tmp_path / "new.parquet", random_events(6, 200))
    assert run(sink_args(store, old), spark)[0] == 0
    before = committed(store)

    def later(store, events):  # the next runs go on beyond the seal
        return [*sink_args(store, events), "--first-tick", str(TICKS)]

    # The module the CLI dispatches to (not an attribute of the package, which a second import
    # of the file under another name can replace).
    sink_command = command_module("sink")
    real_sink = sink_command.sink

    def failing_sink(*args, **kwargs):
        # One task fails after the others may have written their files into staging.
        def boom(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from pyspark import TaskContext

            if TaskContext.get().partitionId() != 1:
                time.sleep(0.5)  # still writing when the job fails: a straggler
            yield from batches
            if TaskContext.get().partitionId() == 1:
                raise RuntimeError("executor lost midway")

        out = real_sink(*args, **kwargs)
        return out.mapInArrow(boom, out.schema)

    monkeypatch.setattr(sink_command, "sink", failing_sink)
    with pytest.raises(Exception, match="executor lost midway"):
        run(later(store, new), spark)
    # nothing committed, and the parts the failed run's tasks wrote are gone
    assert unchanged_on_disk(store, before)

    # a verification failure also commits nothing
    monkeypatch.setattr(sink_command, "sink", real_sink)
    for where, verifier in (("spark", "verify"), ("local", "verify_local")):
        monkeypatch.setattr(sink_command, verifier, lambda *a, **k: {0: {"rows": 1, "mismatches": 3}})
        status, _ = run([*later(store, new), "--verify-with", where], spark)
        assert status == 1
        assert unchanged_on_disk(store, before)

    # and the next healthy run works from the untouched store
    monkeypatch.undo()
    status, s = run(later(store, new), spark)
    assert status == 0 and s["store_version"] > before[0] and s["sealed_through"] == 2 * TICKS - 1


def test_consolidate_and_snapshot_commands(spark, tmp_path, capsys):
    rng = np.random.default_rng(9)
    n = 1000
    table = pa.table({"k": pa.array(rng.choice(["a", "b", "c"], n)), "x": pa.array(rng.integers(0, 4, n)),
                      "time": pa.array(rng.integers(0, 10, n)), "diff": pa.array(rng.integers(-1, 2, n))})
    src = tmp_path / "in.parquet"
    pq.write_table(table, src)
    u = colmz.Updates.from_arrow(table)

    out = tmp_path / "out"
    status, s = run(["consolidate", str(src), str(out), "--since", "3", "--upper", "8"], spark)
    assert status == 0 and s["input_rows"] == n
    got = sorted(tuple(r.values()) for r in pq.read_table(out).to_pylist())
    want = sorted(r for r in colmz.consolidate(u, since=3).to_pylist() if r[2] < 8)
    assert got == want and s["output_rows"] == len(want)

    status, _ = run(["consolidate", str(src), str(out)], spark)
    assert status == 2 and "exists" in capsys.readouterr().err
    status, _ = run(["consolidate", str(src), str(out), "--overwrite"], spark)
    assert status == 0
    assert sorted(tuple(r.values()) for r in pq.read_table(out).to_pylist()) == sorted(colmz.consolidate(u).to_pylist())

    snap = tmp_path / "snap"
    assert run(["snapshot", str(src), str(snap), "--as-of", "5", "--partial"], spark)[0] == 0
    got = sorted(tuple(r.values()) for r in pq.read_table(snap).to_pylist())
    assert got == sorted(r for r in colmz.consolidate(u, since=5).to_pylist() if r[2] < 6)

    bad = tmp_path / "bad.parquet"
    pq.write_table(table.set_column(2, "time", pa.array([-1] * n)), bad)
    status, _ = run(["consolidate", str(bad), str(tmp_path / "never")], spark)
    assert status == 2 and "negative time" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()
    status, _ = run(["consolidate", str(src), str(tmp_path / "never"), "--data", "nope"], spark)
    assert status == 2 and "data column 'nope'" in capsys.readouterr().err


def test_snapshot_and_consolidate_read_a_store_through_its_metadata(spark, tmp_path):
    store = tmp_path / "store"
    events = write_events(tmp_path / "e.parquet", random_events(11, 60))
    assert run(sink_args(store, events), spark)[0] == 0
    a = arrangement(store)
    # a crashed run's part that no commit names must not be read
    stray = write_run(a.store, a.schema, a.read().slice(0, 5), prefix=a.prefix, owner="crashed")
    assert stray is not None
    # a small store is consolidated in process (as colmz read reads it), --spark on Spark: equal
    for at, engine in ((0, "local"), (13, "local"), (13, "spark"), (TICKS - 1, "spark")):
        out = tmp_path / f"snap{at}{engine}"
        status, s = run(["snapshot", str(store), str(out), "--as-of", str(at),
                         *(["--spark"] if engine == "spark" else [])], spark)
        assert status == 0 and s["input_rows"] == a.stats()["stored_updates"] and s["ran_on"] == engine
        got = Counter()
        for r in pq.read_table(out).to_pylist():
            assert r["time"] == at
            got[(r["customer"], r["region"], r["plan"])] += r["diff"]
        assert {k: v for k, v in got.items() if v} == stored_state(store, at) == view(random_events(11, 60), at)
    outs = {}
    for engine in ("local", "spark"):
        out = tmp_path / f"cons{engine}"
        status, s = run(["consolidate", str(store), str(out), "--since", "4", "--upper", "20",
                         *(["--spark"] if engine == "spark" else [])], spark)
        assert status == 0 and s["ran_on"] == engine
        outs[engine] = sorted(tuple(r.values()) for r in pq.read_table(out).to_pylist())
    assert outs["local"] == outs["spark"] and outs["local"]
    assert {r[3] for r in outs["local"]} <= set(range(4, 20)) and all(r[4] for r in outs["local"])
    status, s = run(["consolidate", str(store), str(tmp_path / "cons")], spark)
    assert status == 0 and s["output_rows"] == a.stats()["stored_updates"]


def test_json_output_is_only_json(spark, tmp_path, capsys):
    out = io.StringIO()
    status = cli.main(sink_args(tmp_path / "store", None, "--json", "--example-events", "6000"), out=out)
    assert status == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["ticks"] == TICKS
    assert "reading events" in capsys.readouterr().err  # progress went to stderr


def test_the_main_job_in_a_fresh_process(tmp_path):
    """``colmz sink`` as the README runs it: its own process and JVM (the quick-start session),
    the generated example checked and verified in the driver, JSON alone on stdout; a second
    run over the same store appends nothing and starts no Spark."""
    exe = Path(sys.executable).parent / "colmz"
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "colmz.spark.cli"]
    argv = [*base, "sink", "--store", str(tmp_path / "s"), "--ticks", "40", "--example-events", "20000", "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["events"] == 800 and s["verified_with"] == "local" and len(s["verified_ticks"]) == 5
    assert s["store_updates"] == s["updates_written"] > 0 and s["sealed_through"] == 39
    assert "against a local evaluation" in r.stderr and "0 mismatches" in r.stderr
    assert "rows with multiplicity" in r.stderr  # not colmz read's distinct rows
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and json.loads(r.stdout)["updates_written"] == 0
    assert "starting Spark" not in r.stderr


def test_two_stores_share_one_consensus_and_lost_metadata_is_refused(spark, tmp_path, capsys):
    # Two sink stores with ONE PostgreSQL consensus URL work side by side (before: the
    # second opened the first one's record, and its commit made the first unreadable, which
    # the CLI then called damaged: "remove the store"). A store whose metadata is lost (its
    # consensus.sqlite truncated) is refused, exit 1, with what was found and how to recover,
    # never recreated empty over its parts.
    from storage_servers import fresh_schema_url, postgres_url

    cons = fresh_schema_url(postgres_url())
    a, b = tmp_path / "a", tmp_path / "b"
    ea = write_events(tmp_path / "ea.parquet", random_events(11, 40))
    eb = write_events(tmp_path / "eb.parquet", random_events(12, 30))
    assert run([*sink_args(a, ea), "--consensus", cons], spark)[0] == 0
    view_a = colmz.Arrangement.open(str(a), consensus=cons).read().to_pylist()
    status, s = run([*sink_args(b, eb), "--consensus", cons], spark)
    assert status == 0 and s["store_version"] >= 1
    assert colmz.Arrangement.open(str(a), consensus=cons).read().to_pylist() == view_a
    for store, events in ((a, random_events(11, 40)), (b, random_events(12, 30))):
        arr = colmz.Arrangement.open(str(store), consensus=cons)
        got = Counter()
        for k, r, p, _t, d in arr.read(as_of=TICKS - 1).to_pylist():
            got[(k, r, p)] += d
        assert {key: d for key, d in got.items() if d} == view(events, TICKS - 1)
    # again into a: nothing to write, both stores as they were
    status, s = run([*sink_args(a, ea), "--consensus", cons], spark)
    assert status == 0 and s["updates_written"] == 0
    # a store opened with a consensus that lacks its record (the wrong URL, or a lost or
    # emptied database): before, a new empty arrangement was committed over its parts
    c = tmp_path / "c"
    assert run(sink_args(c, ea), spark)[0] == 0
    parts = sorted(p.name for p in (c / "blob").rglob("*.parquet"))
    capsys.readouterr()
    status, _ = run([*sink_args(c, ea), "--consensus", f"sqlite:///{tmp_path}/empty.sqlite"], spark)
    err = capsys.readouterr().err
    assert status == 1
    assert "metadata was lost" in err and "consensus" in err
    assert "remove the store" not in err and "re-run the job" not in err
    assert sorted(p.name for p in (c / "blob").rglob("*.parquet")) == parts
    assert run(sink_args(c, ea), spark)[0] == 0  # with its own consensus it is whole
