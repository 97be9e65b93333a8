"""colmz.spark.stream_sink: the streaming sink against a pandas oracle, replays, bad input,
and SIGKILL at random points followed by a restart from the checkpoint."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import colmz
import colmz.spark
from colmz.spark.stream import StreamBindingError, batch_writer, range_starts, stream_sink

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
    # the same checkpoint again: nothing new to do; a fresh checkpoint on the written store is
    # another writer: its batch 0 does not follow the seal 5 and is refused, nothing written
    before = sorted(os.listdir(os.path.join(store, "blob")))
    assert run(spark, indir, store, ckpt) == []
    with pytest.raises(Exception, match="does not follow the store's seal 5"):
        run(spark, indir, store, str(tmp_path / "ck2"))
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


def kill_and_restart(tmp_path, kills: int, files: int, seed: int) -> None:
    """SIGKILL the streaming process ``kills`` times at random points, restarting it from its
    checkpoint each time; new event files arrive while it is down. The store must equal the
    uninterrupted result (the oracle the in-process test checks a clean run against)."""
    indir = str(tmp_path / "in")
    tables = write_events(indir, files, seed=seed, far=500)
    store, ckpt = str(tmp_path / "store"), str(tmp_path / "ck")
    rng = random.Random(seed)
    done_kills = 0
    while True:
        p = subprocess.Popen([sys.executable, JOB, indir, store, ckpt], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        killed = False
        if done_kills < kills:
            # after 0 or 1 batch lines plus a random delay: during start-up, inside a batch, or
            # between the store's commit and Spark's commit log
            if rng.random() < 0.7:
                p.stdout.readline()
            time.sleep(rng.uniform(0, 1.5))
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                done_kills += 1
                killed = True
        if not killed:
            out = p.communicate(timeout=600)[0]
            assert p.returncode == 0 and "done" in out
            if done_kills >= kills:
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


def logged_batches(ckpt: str) -> dict[str, int]:
    """File name -> micro-batch id, from the file source's log in the checkpoint."""
    out: dict[str, int] = {}
    d = os.path.join(ckpt, "sources", "0")
    for name in os.listdir(d):
        if name.startswith("."):
            continue
        with open(os.path.join(d, name)) as f:
            for line in f.read().splitlines()[1:]:
                e = json.loads(line)
                out[os.path.basename(e["path"])] = int(e["batchId"])
    return out


def test_sigkill_and_restart_equals_uninterrupted(tmp_path):
    kill_and_restart(tmp_path, kills=2, files=4, seed=11)


@pytest.mark.slow
def test_sigkill_twenty_times(tmp_path):
    kill_and_restart(tmp_path, kills=20, files=12, seed=12)
