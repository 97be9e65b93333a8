"""colmz.spark.stream_sink: the streaming sink against a pandas oracle, replays, bad input,
and SIGKILL at random points followed by a restart from the checkpoint."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
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
import colmz.spark
from colmz.spark.arrangement_io import range_starts
from colmz.spark.stream import (
    BATCH,
    EVENT_MAX,
    RECENT,
    TICK,
    StreamBindingError,
    batch_status,
    batch_writer,
    stream_sink,
)

pytestmark = pytest.mark.spark

SCHEMA = "k long, v string, valid_from long, valid_to long"
JOB = os.path.join(os.path.dirname(__file__), "stream_job.py")


def write_events(d: str, files: int, seed: int, rows: int = 40, far: int = 0) -> list[pa.Table]:
    """Event files, one per micro-batch (increasing mtimes fix the order); some retractions
    ``far`` ticks away."""
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(files):
        vf = rng.integers(0, i + 3, rows)
        vt = vf + rng.integers(0, 12, rows) + np.where(rng.random(rows) < 0.3, far, 0)
        t = pa.table({"k": rng.integers(0, 8, rows), "v": [f"x{j % 3}" for j in range(rows)],
                      "valid_from": vf, "valid_to": vt})
        p = os.path.join(d, f"part-{i:04d}.parquet")
        pq.write_table(t, p)
        os.utime(p, (1e9 + i, 1e9 + i))
        out.append(t)
    return out


def oracle(tables: list[pa.Table], ticks: list[int] | None = None) -> Counter:
    """Consolidated updates: the events of table ``i`` (in micro-batch ``ticks[i]``, default
    ``i``) at ``max(time, tick)``."""
    c: Counter = Counter()
    for i, t in enumerate(tables):
        i = i if ticks is None else ticks[i]
        for k, v, vf, vt in zip(*(t.column(n).to_pylist() for n in ("k", "v", "valid_from", "valid_to"))):
            c[(k, v, max(vf, i))] += 1
            c[(k, v, max(vt, i))] -= 1
    return Counter({key: d for key, d in c.items() if d})


def stored(store: str) -> tuple[Counter, int]:
    a = colmz.Arrangement.open(store, create=False)
    c: Counter = Counter()
    for k, v, t, d in a.read().to_pylist():
        c[(k, v, t)] += d
    return Counter({key: d for key, d in c.items() if d}), a.get_seal()


def run(spark, indir, store, ckpt, **kw):
    events = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(indir)
    seen = []
    q = stream_sink(events, store, ckpt, keys=["k"], value="v", available_now=True, on_batch=seen.append, **kw)
    q.awaitTermination()
    return seen


def event_oracle(tables: list[pa.Table], delay: int) -> tuple[Counter, int]:
    """Event ticks: batch ``i``'s events at ``max(time, seal)`` with the seal its batch
    found; after it the seal is ``max(seal, greatest valid_from so far - delay)``."""
    c: Counter = Counter()
    seal, top = 0, None
    for t in tables:
        vfs = t.column("valid_from").to_pylist()
        for k, v, vf, vt in zip(*(t.column(n).to_pylist() for n in ("k", "v", "valid_from", "valid_to"))):
            c[(k, v, max(vf, seal))] += 1
            c[(k, v, max(vt, seal))] -= 1
        if vfs:
            top = max(vfs) if top is None else max(top, max(vfs))
        if top is not None:
            seal = max(seal, top - delay)
    return Counter({key: d for key, d in c.items() if d}), seal


def test_batch_status_decides_replays_races_and_strangers():
    p = {BATCH: 6, TICK: "event", RECENT: "a b c"}  # batches 4, 5, 6
    assert batch_status(p, 9, 7, "d", "event") is False  # the next batch
    assert batch_status(p, 9, 6, "c", "event") is True  # Spark's replay of the last batch
    assert batch_status(p, 9, 5, "b", "event") is True  # a racing writer that lost batch 5
    assert batch_status({**p, RECENT: "a b -"}, 9, 6, "c", "event") is True  # unknown: trust Spark
    for bad in [(5, "x"), (3, "z"), (8, "e"), (6, "x")]:
        with pytest.raises(StreamBindingError):
            batch_status(p, 9, bad[0], bad[1], "event")
    with pytest.raises(StreamBindingError, match="processing ticks"):
        batch_status(p, 9, 7, "d", "processing")
    # processing ticks: seal = batch + 1, also for stores written before batch ids were kept
    assert batch_status({}, 3, 3, "-", "processing") is False
    assert batch_status({}, 3, 2, "-", "processing") is True
    with pytest.raises(StreamBindingError, match="does not follow"):
        batch_status({}, 3, 0, "-", "processing")
    with pytest.raises(StreamBindingError, match="does not follow"):
        batch_status({}, 0, 2, "-", "event")


def test_event_ticks_close_when_the_watermark_passes(spark, tmp_path):
    indir, store, ckpt = (str(tmp_path / n) for n in ("in", "store", "ck"))
    tables = write_events(indir, 5, seed=4, far=200)
    # a late file: its events are far behind the watermark, corrected at the first open tick
    late = pa.table({"k": [1, 2], "v": ["late", "late"], "valid_from": [0, 1], "valid_to": [2, 400]})
    p = os.path.join(indir, "part-0005.parquet")
    pq.write_table(late, p)
    os.utime(p, (1e9 + 5, 1e9 + 5))
    tables.append(late)
    events = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(indir)
    seen = []
    q = stream_sink(events, store, ckpt, keys=["k"], value="v", available_now=True, on_batch=seen.append,
                    tick="event", delay=2)
    q.awaitTermination()
    want, want_seal = event_oracle(tables, delay=2)
    got, seal = stored(store)
    assert (got, seal) == (want, want_seal)
    assert [f["seal"] for f in seen][-1] == want_seal
    a = colmz.Arrangement.open(store, create=False)
    props = a.properties()
    assert props[TICK] == "event" and props[BATCH] == 5
    assert props[EVENT_MAX] == max(max(t.column("valid_from").to_pylist()) for t in tables)
    # a replay of the last batch writes nothing; processing ticks on this store are refused
    fn = batch_writer(spark.read.parquet(indir).schema, store, ckpt, keys=["k"], value="v", tick="event", delay=2)
    fn(spark.read.parquet(p), 5)
    assert stored(store) == (want, want_seal)
    fn2 = batch_writer(spark.read.parquet(indir).schema, store, str(tmp_path / "ck2"), keys=["k"], value="v")
    with pytest.raises(StreamBindingError, match="event ticks"):
        fn2(spark.read.parquet(p), 6)
    # a checkpoint bound with other tick settings is another query's
    with pytest.raises(StreamBindingError, match="another query"):
        batch_writer(spark.read.parquet(indir).schema, store, ckpt, keys=["k"], value="v", tick="event", delay=3)
    with pytest.raises(ValueError, match="tick"):
        batch_writer(spark.read.parquet(indir).schema, store, ckpt, keys=["k"], value="v", tick="wall")
    with pytest.raises(ValueError, match="delay"):
        batch_writer(spark.read.parquet(indir).schema, store, ckpt, keys=["k"], value="v", delay=2)


def test_two_queries_racing_on_one_store(spark, tmp_path):
    """Two streaming queries over the same input (own checkpoints) write one store at once:
    each batch is committed by exactly one of them, nothing lost or doubled."""
    indir, store = str(tmp_path / "in"), str(tmp_path / "store")
    tables = write_events(indir, 6, seed=21, far=300)
    seen: list[list[dict]] = [[], []]
    queries = []
    for i in range(2):
        events = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(indir)
        queries.append(stream_sink(events, store, str(tmp_path / f"ck{i}"), keys=["k"], value="v",
                                   available_now=True, on_batch=seen[i].append))
    for q in queries:
        q.awaitTermination()
    logs = [logged_batches(str(tmp_path / f"ck{i}")) for i in range(2)]
    assert logs[0] == logs[1]
    names = [f"part-{i:04d}.parquet" for i in range(len(tables))]
    ticks = [logs[0][n] for n in names]
    assert stored(store) == (oracle(tables, ticks), max(ticks) + 1)
    # every batch was written by exactly one query; the other found it in the store
    for b in set(ticks):
        writers = [i for i in range(2) for f in seen[i] if f["batch"] == b and not f["replayed"]]
        assert len(writers) == 1, (b, seen)
    assert all(len(s) == len(set(ticks)) for s in seen)


def test_range_starts_cover_each_time_once():
    t = np.arange(7, 5000, dtype=np.uint64)
    s, w = range_starts(t, 7)
    assert ((s <= t) & (t < s + w)).all()
    assert (s % w == 0).all()
    d = t - np.uint64(7) + np.uint64(1)
    assert ((w <= d) & (d < 2 * w)).all()


def test_stream_sink_equals_oracle_and_replay_writes_nothing(spark, tmp_path):
    indir, store, ckpt = (str(tmp_path / n) for n in ("in", "store", "ck"))
    tables = write_events(indir, 5, seed=3, far=1000)
    seen = run(spark, indir, store, ckpt)
    assert [f["batch"] for f in seen] == list(range(5))
    got, seal = stored(store)
    assert seal == 5
    assert got == oracle(tables)
    # every tick before the seal is the temporal filter over the events that had arrived
    a = colmz.Arrangement.open(store, create=False)
    for tick in range(5):
        view: Counter = Counter()
        for i, t in enumerate(tables[: tick + 1]):
            for k, v, vf, vt in zip(*(t.column(n).to_pylist() for n in ("k", "v", "valid_from", "valid_to"))):
                if max(vf, i) <= tick < max(vt, i):
                    view[(k, v)] += 1
        assert Counter({(k, v): d for k, v, _, d in a.read(as_of=tick).to_pylist()}) == view
    # each part the executors wrote is committed with its check (the runs' schema dropped it)
    batches = (*a.unsealed_batches, *a.trace_batches)
    assert batches and all(p.check is not None and p.check.digest is not None for b in batches for p in b.parts)
    # the batch ids and input fingerprints are committed with the output
    props = a.properties()
    assert props[BATCH] == 4 and props[TICK] == "processing"
    assert len(props[RECENT].split()) == 5 and "-" not in props[RECENT].split()
    # the same checkpoint again: nothing new to do; a fresh checkpoint over the same input
    # finds every batch already in the store (same input fingerprints) and writes nothing
    before = sorted(os.listdir(os.path.join(store, "blob")))
    assert run(spark, indir, store, ckpt) == []
    seen = run(spark, indir, store, str(tmp_path / "ck2"))
    assert [f["replayed"] for f in seen] == [True] * 5
    assert stored(store) == (got, 5)
    # a fresh checkpoint over other input is another query: refused, nothing written
    other = str(tmp_path / "other")
    write_events(other, 1, seed=99)
    with pytest.raises(Exception, match="read other input than the store's batch 0"):
        run(spark, other, store, str(tmp_path / "ck3"))
    assert stored(store) == (got, 5)
    assert sorted(os.listdir(os.path.join(store, "blob"))) == before


def test_replayed_batch_id_writes_nothing(spark, tmp_path):
    indir, store, ckpt = (str(tmp_path / n) for n in ("in", "store", "ck"))
    tables = write_events(indir, 2, seed=7, far=300)
    files = sorted(os.listdir(indir))
    seen = []
    fn = batch_writer(spark.read.parquet(indir).schema, store, ckpt, keys=["k"], value="v", on_batch=seen.append)
    df0 = spark.read.parquet(os.path.join(indir, files[0]))
    fn(df0, 0)
    after0 = stored(store), sorted(os.listdir(os.path.join(store, "blob")))
    fn(df0, 0)  # Spark's retry, or a restart before its commit log
    assert (stored(store), sorted(os.listdir(os.path.join(store, "blob")))) == after0
    assert [f["replayed"] for f in seen] == [False, True]
    fn(spark.read.parquet(os.path.join(indir, files[1])), 1)
    assert stored(store) == (oracle(tables), 2)
    with pytest.raises(StreamBindingError, match="does not follow"):
        fn(df0, 5)
    assert stored(store) == (oracle(tables), 2)
    # a schema change between micro-batches
    other = df0.withColumn("v", df0["v"].cast("long"))
    with pytest.raises(colmz.spark.InputError, match="has schema"):
        fn(other, 2)
    assert stored(store) == (oracle(tables), 2)


def test_commits_of_other_writers_that_keep_the_seal_do_not_make_a_batch_recompute(spark, tmp_path):
    """Another writer's commits while a batch's runs are computed (its maintenance: neither
    seal nor batch changes) leave the runs valid: the batch commits on the latest state
    instead of losing the compare-and-set and computing again until it gives up."""
    from pyspark.sql import functions as F

    indir, store, ckpt = (str(tmp_path / n) for n in ("in", "store", "ck"))
    tables = write_events(indir, 2, seed=8, far=300)
    files = sorted(os.listdir(indir))
    seen = []
    fn = batch_writer(spark.read.parquet(indir).schema, store, ckpt, keys=["k"], value="v", on_batch=seen.append)
    fn(spark.read.parquet(os.path.join(indir, files[0])), 0)
    head = colmz.Arrangement.open(store, create=False).seqno

    @F.udf("long")
    def touching(k):
        # evaluated while the batch's runs are computed: another handle commits the state
        # unchanged, as a racing writer's maintenance step would (the tasks race each other)
        from colmz.arrangement import CommitConflict

        for _ in range(1000):
            with contextlib.suppress(CommitConflict):
                colmz.Arrangement.open(store, create=False).commit()
                return k
        raise AssertionError("no commit landed in 1000 attempts")

    df1 = spark.read.parquet(os.path.join(indir, files[1]))
    fn(df1.withColumn("k", touching("k")), 1)
    assert colmz.Arrangement.open(store, create=False).seqno > head + len(tables[1])  # they did commit
    assert [f["replayed"] for f in seen] == [False, False] and seen[1]["conflicts"] == 0
    assert stored(store) == (oracle(tables), 2)


def blob_keys(store: str) -> list[str]:
    a = colmz.Arrangement.open(store, create=False)
    return sorted(a.store.list_keys(a.prefix))


def test_a_micro_batch_commits_with_one_append_runs_and_no_retry_of_its_own(spark, tmp_path, monkeypatch):
    """Each micro-batch is one ``append_runs`` call (the arrangement's machine retries a lost
    compare-and-set, the sink does not recompute): a CommitConflict the machine gives up on
    fails the batch after that one call, nothing written. A SealMismatch is decided by
    idempotence: the store now holding this very batch makes it a replay; a seal moved by a
    writer that committed no such batch is refused. (Before, the sink looped ATTEMPTS = 5
    times around append_runs and raised StreamConflict.)"""
    from colmz.arrangement import Arrangement, CommitConflict

    indir, store, ckpt = (str(tmp_path / n) for n in ("in", "store", "ck"))
    tables = write_events(indir, 3, seed=9, far=300)
    files = sorted(os.listdir(indir))
    seen = []
    fn = batch_writer(spark.read.parquet(indir).schema, store, ckpt, keys=["k"], value="v", on_batch=seen.append)
    fn(spark.read.parquet(os.path.join(indir, files[0])), 0)
    before = stored(store), blob_keys(store)
    df1 = spark.read.parquet(os.path.join(indir, files[1]))
    real = Arrangement.append_runs
    calls = []

    def losing(self, runs, **kw):
        calls.append(len(runs))
        raise CommitConflict(self._log.key, self.seqno, self.seqno + 1)

    monkeypatch.setattr(Arrangement, "append_runs", losing)
    with pytest.raises(CommitConflict):
        fn(df1, 1)
    assert len(calls) == 1 and calls[0] > 0
    assert (stored(store), blob_keys(store)) == before  # the batch's parts are gone

    # another writer commits this very batch while it is written: a replay, exactly once
    def racing(self, runs, **kw):
        monkeypatch.setattr(Arrangement, "append_runs", real)
        other = colmz.Arrangement.open(store, create=False)
        props = other.properties()
        other.seal(2, properties={BATCH: 1, TICK: "processing", RECENT: props[RECENT] + " -"})
        calls.append(len(runs))
        return real(self, runs, **kw)

    monkeypatch.setattr(Arrangement, "append_runs", racing)
    fn(df1, 1)
    assert len(calls) == 2
    assert seen[-1]["batch"] == 1 and seen[-1]["replayed"] and seen[-1]["conflicts"] == 1
    assert stored(store) == (before[0][0], 2) and blob_keys(store) == before[1]

    # a writer that moves the seal without committing a batch: refused, nothing written
    def foreign(self, runs, **kw):
        monkeypatch.setattr(Arrangement, "append_runs", real)
        colmz.Arrangement.open(store, create=False).seal(5)
        return real(self, runs, **kw)

    monkeypatch.setattr(Arrangement, "append_runs", foreign)
    with pytest.raises(StreamBindingError, match="another writer"):
        fn(spark.read.parquet(os.path.join(indir, files[2])), 2)
    assert stored(store) == (before[0][0], 5) and blob_keys(store) == before[1]
    assert len(tables) == 3


@pytest.mark.parametrize("row, message", [
    ((1, "a", None, 3), "NULL valid_from"),
    ((1, "a", 0, None), "NULL valid_to"),
    ((1, "a", -1, 3), "negative valid_from"),
    ((1, "a", -5, -2), "negative valid_to"),
    ((1, "a", 4, 3), "valid_to < valid_from"),
])
def test_bad_values_fail_before_commit(spark, tmp_path, row, message):
    indir, store, ckpt = (str(tmp_path / n) for n in ("in", "store", "ck"))
    tables = write_events(indir, 1, seed=6)
    fn = batch_writer(spark.read.parquet(indir).schema, store, ckpt, keys=["k"], value="v")
    fn(spark.read.parquet(indir), 0)
    before = stored(store), sorted(os.listdir(os.path.join(store, "blob")))
    bad = spark.createDataFrame([(2, "b", 1, 2), row], SCHEMA)
    with pytest.raises(colmz.spark.InputError, match=f"bad events in micro-batch 1: .*1 row\\(s\\) with {message}, e.g."):
        fn(bad, 1)
    assert (stored(store), sorted(os.listdir(os.path.join(store, "blob")))) == before
    assert before[0] == (oracle(tables), 1)


def test_store_of_another_view_is_refused_and_leaves_the_checkpoint_unbound(spark, tmp_path):
    indir, store, ckpt = (str(tmp_path / n) for n in ("in", "store", "ck"))
    tables = write_events(indir, 1, seed=9)
    other = colmz.Arrangement.open(store, {"k": pa.int64()})  # another view: one column
    with pytest.raises(colmz.arrangement.SchemaMismatch, match="has schema"):
        run(spark, indir, store, ckpt)
    assert not os.path.exists(os.path.join(ckpt, "colmz_stream.json"))
    assert colmz.Arrangement.open(store, create=False).seqno == other.seqno  # nothing committed
    # the same checkpoint with the right store is still free to use
    run(spark, indir, str(tmp_path / "store2"), ckpt)
    assert stored(str(tmp_path / "store2")) == (oracle(tables), 1)


def test_bad_events_fail_before_commit(spark, tmp_path):
    indir, store, ckpt = (str(tmp_path / n) for n in ("in", "store", "ck"))
    tables = write_events(indir, 2, seed=5)
    bad = pa.table({"k": [1, 2], "v": ["a", "b"], "valid_from": [3, 4], "valid_to": [2, 9]})
    p = os.path.join(indir, "part-0002.parquet")
    pq.write_table(bad, p)
    os.utime(p, (1e9 + 2, 1e9 + 2))
    with pytest.raises(Exception, match="valid_to < valid_from"):
        run(spark, indir, store, ckpt)
    got, seal = stored(store)
    assert seal == 2 and got == oracle(tables)


def test_checkpoint_of_another_store_is_refused(spark, tmp_path):
    indir, ckpt = str(tmp_path / "in"), str(tmp_path / "ck")
    write_events(indir, 1, seed=1)
    run(spark, indir, str(tmp_path / "s1"), ckpt)
    with pytest.raises(StreamBindingError, match="another query"):
        run(spark, indir, str(tmp_path / "s2"), ckpt)
    assert not os.path.exists(tmp_path / "s2")


def test_bad_schema_is_refused_before_start(spark, tmp_path):
    events = spark.readStream.schema("k long, v string, valid_from string, valid_to long").parquet(str(tmp_path))
    with pytest.raises(TypeError, match="valid_from"):
        stream_sink(events, str(tmp_path / "s"), str(tmp_path / "ck"), keys=["k"], value="v")
    assert not os.path.exists(tmp_path / "s")


#: Set in each job's environment; the JVM, Spark's Python daemon and its workers inherit it.
RUN_MARK = "COLMZ_KILL_TEST_RUN"


def marked(mark: str) -> list[int]:
    """Pids of the live (not zombie) processes whose environment holds ``RUN_MARK=mark``."""
    needle = f"{RUN_MARK}={mark}".encode() + b"\0"
    pids = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):  # gone meanwhile
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            if needle in env and state != b"Z":
                pids.append(int(d))
    return pids


def reap(mark: str, timeout: float = 60) -> int:
    """SIGKILL every process left of one job run and wait until none is alive; how many there were.

    Killing the job's process group kills its Python driver and JVM, not Spark's Python
    daemon: the daemon makes a process group of its own (``pyspark/daemon.py``) and only
    stops, with its workers, once it reads the end of its stdin from the dead JVM. The next
    run starts after all of them are gone, so nothing of the killed run acts beside it."""
    end = time.monotonic() + timeout
    seen: set[int] = set()
    while pids := marked(mark):
        seen.update(pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert time.monotonic() < end, f"processes of {mark} still alive after {timeout} s: {pids}"
        time.sleep(0.05)
    return len(seen)


def frozen_code(root) -> dict[str, str]:
    """Environment under which job processes import colmz from a copy of its source taken now.

    The work tree may change while a long test runs (several people edit it); without the
    copy, a restart would run other code than the run before it. The copy's directory is
    named by its content and kept, so a second test over the same source reuses it and the
    compiled kernels cached for its paths."""
    import hashlib
    import shutil

    import colmz.kernels
    import colmz.spark

    trees = {"colmz": Path(colmz.__file__).parent, "colmz/kernels": Path(colmz.kernels.__file__).parent,
             "colmz/spark": Path(colmz.spark.__file__).parent}
    files = sorted((rel, src) for rel, src in (
        (f"{dest}/{p.relative_to(top)}", p) for dest, top in trees.items() for p in top.rglob("*.py")
    ) if "__pycache__" not in rel)
    h = hashlib.sha1()
    for rel, src in files:
        h.update(rel.encode() + b"\0" + src.read_bytes() + b"\0")
    home = Path(root) / h.hexdigest()[:16]
    if not home.exists():
        part = Path(root) / f".{home.name}.{os.getpid()}.tmp"
        shutil.rmtree(part, ignore_errors=True)
        for rel, src in files:
            (part / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, part / rel)
        for extra in Path(colmz.__file__).parent.rglob("py.typed"):
            shutil.copy2(extra, part / "colmz" / extra.relative_to(trees["colmz"]))
        shutil.copy2(JOB, part / os.path.basename(JOB))
        try:
            os.rename(part, home)
        except OSError:  # another test made the same copy first
            shutil.rmtree(part, ignore_errors=True)
    return {"PYTHONPATH": str(home), "COLMZ_STREAM_JOB": str(home / os.path.basename(JOB))}


def kill_and_restart(tmp_path, kills: int, files: int, seed: int, *, jvm_kills: int = 0,
                     frozen: bool = False) -> dict:
    """SIGKILL the streaming process ``kills`` times at random points, restarting it from its
    checkpoint each time; new event files arrive while it is down. The store must equal the
    uninterrupted result (the oracle the in-process test checks a clean run against).

    The first ``jvm_kills`` kills hit the JVM alone (after the run's first batch line), as
    something outside the test might: the job must then exit with stream_job's JVM_KILLED
    status and say so. With ``frozen``, every run imports colmz from one copy of the source
    (:func:`frozen_code`).

    Returns figures: kills, runs, kills before a process's first batch line, batch lines
    printed (committed and replayed: a replayed batch is one whose store commit landed before
    a kill and whose Spark commit log did not), processes left of killed runs (Spark's Python
    daemon and workers, killed before the next run), and runs whose JVM something outside the
    test killed (their job exits with stream_job's JVM_KILLED status and is restarted like a
    killed one; they do not count as kills)."""
    from stream_job import JVM_KILLED

    indir = str(tmp_path / "in")
    tables = write_events(indir, files, seed=seed, far=500)
    store, ckpt = str(tmp_path / "store"), str(tmp_path / "ck")
    rng = random.Random(seed)
    done_kills = 0
    figures = {"kills": 0, "runs": 0, "kills_before_first_batch": 0, "committed": 0, "replayed": 0,
               "left_processes": 0, "outside_kills": 0}
    env = dict(os.environ)
    job = JOB
    if frozen:
        import tempfile

        env.update(frozen_code(os.path.join(tempfile.gettempdir(), f"colmz-frozen-code-{os.getuid()}")))
        job = env["COLMZ_STREAM_JOB"]
    while True:
        log = tmp_path / f"run{figures['runs']}.err"
        mark = f"{tmp_path}/run{figures['runs']}"
        with open(log, "w") as err:
            p = subprocess.Popen([sys.executable, job, indir, store, ckpt], stdout=subprocess.PIPE,
                                 stderr=err, text=True, start_new_session=True, env={**env, RUN_MARK: mark})
        figures["runs"] += 1
        killed = False
        lines = []
        if done_kills < kills and done_kills < jvm_kills:
            # the JVM alone, after the first batch line: the driver must notice and say so
            lines.append(p.stdout.readline())
            time.sleep(rng.uniform(0, 1.5))
            jvm = [pid for pid in marked(mark) if Path(f"/proc/{pid}/comm").read_text().strip() == "java"]
            if p.poll() is None and len(jvm) == 1:
                os.kill(jvm[0], signal.SIGKILL)
                lines += p.communicate(timeout=120)[0].splitlines()
                text = log.read_text()
                assert p.returncode == JVM_KILLED and "the JVM was killed by signal 9;" in text, (
                    p.returncode, text[-4000:])
                done_kills += 1
                killed = True
        elif done_kills < kills:
            # after 0 or 1 batch lines plus a random delay: during start-up, inside a batch, or
            # between the store's commit and Spark's commit log
            if rng.random() < 0.7:
                lines.append(p.stdout.readline())
            time.sleep(rng.uniform(0, 1.5))
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                done_kills += 1
                killed = True
                lines += p.stdout.read().splitlines()  # EOF: the JVM (which holds stdout too) is gone
                figures["kills_before_first_batch"] += not any(x.startswith("batch") for x in lines)
        if not killed:
            out = p.communicate(timeout=600)[0]
            lines += out.splitlines()
            text = log.read_text()
            if p.returncode == JVM_KILLED and "the JVM was killed by signal 9;" in text:
                figures["outside_kills"] += 1  # not the test's kill: restart as after one
                print(f"run {figures['runs'] - 1}: its JVM was killed from outside the test", file=sys.stderr)
            else:
                assert p.returncode == 0 and "done" in out, (figures, p.returncode, text[-4000:])
        figures["left_processes"] += reap(mark)
        figures["committed"] += sum("replayed=False" in x for x in lines)
        figures["replayed"] += sum("replayed=True" in x for x in lines)
        if not killed and done_kills >= kills and p.returncode == 0:
            break
        if len(tables) < files + kills:
            more = write_events(str(tmp_path / f"more{len(tables)}"), 1, seed=seed + len(tables), far=500)
            src = os.path.join(str(tmp_path / f"more{len(tables)}"), "part-0000.parquet")
            dst = os.path.join(indir, f"part-{len(tables):04d}.parquet")
            os.replace(src, dst)
            os.utime(dst, (1e9 + len(tables), 1e9 + len(tables)))
            tables += more
    got, seal = stored(store)
    assert done_kills >= kills
    # Which micro-batch took each file is Spark's decision, logged in the checkpoint (after a
    # restart it may plan several new files into one batch); an uninterrupted run with the
    # same batches gives the oracle.
    batch_of = logged_batches(ckpt)
    names = [f"part-{i:04d}.parquet" for i in range(len(tables))]
    assert sorted(batch_of) == names
    ticks = [batch_of[n] for n in names]
    assert seal == max(ticks) + 1
    assert got == oracle(tables, ticks)
    figures["kills"] = done_kills
    figures["batches"] = seal
    return figures


def logged_batches(ckpt: str) -> dict[str, int]:
    """File name -> micro-batch id, from the checkpoint.

    The file source's log says in which of *its* batches each file was listed; the offset log
    says up to which of those each micro-batch read. They differ after a process died between
    the source logging a batch and the offset log naming it: the restarted query lists the new
    files as the source's next batch and its micro-batch reads both."""
    listed: dict[str, int] = {}
    d = os.path.join(ckpt, "sources", "0")
    for name in os.listdir(d):
        if name.startswith("."):
            continue
        with open(os.path.join(d, name)) as f:
            for line in f.read().splitlines()[1:]:
                e = json.loads(line)
                listed[os.path.basename(e["path"])] = int(e["batchId"])
    ends: dict[int, int] = {}  # micro-batch -> the last source batch it read
    d = os.path.join(ckpt, "offsets")
    for name in os.listdir(d):
        if name.isdigit():
            with open(os.path.join(d, name)) as f:
                ends[int(name)] = int(json.loads(f.read().splitlines()[2])["logOffset"])
    return {file: min(b for b, end in ends.items() if end >= sb) for file, sb in listed.items()}


def test_sigkill_and_restart_equals_uninterrupted(tmp_path):
    assert kill_and_restart(tmp_path, kills=2, files=4, seed=11, jvm_kills=1)["kills"] == 2


@pytest.mark.slow
def test_sigkill_twenty_times(tmp_path):
    figures = kill_and_restart(tmp_path, kills=20, files=12, seed=int(os.environ.get("COLMZ_KILL_SEED", "12")),
                               frozen=True)
    print("kill test:", figures)  # shown with -s
    assert figures["kills"] == 20
