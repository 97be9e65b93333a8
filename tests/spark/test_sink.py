"""The sink against a reference model of the correction buffer, and its two properties:
a re-run appends nothing, a re-run after a change appends exactly the difference."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import colmz.spark
from colmz.spark.sink import SinkStats

pytestmark = pytest.mark.spark

SCHEMA = "k long, v string, time long, diff long"


def reference_sink(desired, persisted, ticks, since=0):
    """The correction buffer's caller contract on a naive multiset (the reference model)."""
    m = Counter()
    for k, v, t, d in desired:
        m[(k, v, t)] += d
    for k, v, t, d in persisted:
        m[(k, v, t)] -= d
    out = []
    for tick in ticks:
        upper = tick + 1
        emitted = Counter()
        for (k, v, t), d in m.items():
            t2 = max(t, since)
            if t2 < upper:
                emitted[(k, v, t2)] += d
        emitted = {key: d for key, d in emitted.items() if d}
        out.extend((*key, d) for key, d in emitted.items())
        # advance the multiset to the since, then feed back what was written
        adv = Counter()
        for (k, v, t), d in m.items():
            adv[(k, v, max(t, since))] += d
        for key, d in emitted.items():
            adv[key] -= d
        m = Counter({key: d for key, d in adv.items() if d})
        since = max(since, upper)
    return sorted(out)


def events_to_updates(events):
    ups = []
    for k, v, f, t in events:
        ups.append((k, v, f, 1))
        ups.append((k, v, t, -1))
    return ups


def random_events(rng, n, horizon):
    f = rng.integers(0, horizon, n)
    return [(int(k), str(v), int(a), int(a + 1 + d)) for k, v, a, d in
            zip(rng.integers(0, 30, n), rng.choice(["p", "q", "r"], n), f, rng.integers(0, horizon, n))]


def accumulate(rows, at):
    c = Counter()
    for k, v, t, d in rows:
        if t <= at:
            c[(k, v)] += d
    return {key: d for key, d in c.items() if d}


@pytest.fixture(scope="module")
def scenario():
    rng = np.random.default_rng(11)
    old = random_events(rng, 300, 40)
    new = list(old[:250])  # drop 50 events
    new[:20] = [(k, v, f, t + 3) for k, v, f, t in new[:20]]  # move 20 ends
    new += random_events(rng, 30, 40)  # add 30
    return old, new


def test_sink_matches_reference_and_accumulates_to_desired(spark, scenario):
    old, _ = scenario
    desired = events_to_updates(old)
    ticks = list(range(0, 40))
    st = SinkStats(spark)
    out = colmz.spark.sink(spark.createDataFrame(desired, SCHEMA), None, ticks, stats=st)
    got = sorted(tuple(r) for r in out.collect())
    assert got == reference_sink(desired, [], ticks)
    for t in ticks:
        assert accumulate(got, t) == accumulate(desired, t)
    assert all(r[2] <= ticks[-1] for r in got)  # nothing written beyond the last tick
    assert st.written == len(got)
    assert len(st.written_per_tick) == len(ticks)
    assert st.inserted == len(desired)
    assert st.largest_buffer >= 1


def test_rerun_appends_nothing(spark, scenario):
    old, _ = scenario
    desired = spark.createDataFrame(events_to_updates(old), SCHEMA)
    ticks = range(40)
    first = colmz.spark.sink(desired, None, ticks).collect()
    persisted = spark.createDataFrame([tuple(r) for r in first], SCHEMA)
    assert colmz.spark.sink(desired, persisted, ticks).count() == 0


def test_rerun_after_change_appends_exactly_the_difference(spark, scenario):
    old, new = scenario
    d_old, d_new = events_to_updates(old), events_to_updates(new)
    ticks = list(range(40))
    first = [tuple(r) for r in colmz.spark.sink(spark.createDataFrame(d_old, SCHEMA), None, ticks).collect()]
    second = sorted(tuple(r) for r in colmz.spark.sink(
        spark.createDataFrame(d_new, SCHEMA), spark.createDataFrame(first, SCHEMA), ticks).collect())
    # exactly desired_new - desired_old, consolidated, at times <= the last tick
    diff = Counter()
    for k, v, t, d in d_new:
        diff[(k, v, t)] += d
    for k, v, t, d in d_old:
        diff[(k, v, t)] -= d
    want = sorted((*key, d) for key, d in diff.items() if d and key[2] <= ticks[-1])
    assert second == want
    assert second == reference_sink(d_new, first, ticks)
    for t in ticks:
        assert accumulate(first + second, t) == accumulate(d_new, t)


def test_sparse_ticks_history_and_since(spark):
    # Updates before the first tick, between ticks, and after the last one.
    desired = [(1, "a", 0, 1), (1, "a", 7, -1), (2, "b", 3, 1), (3, "c", 12, 1), (4, "d", 50, 1),
               (2, "b", 11, -1), (5, "e", 5, 2)]
    persisted = [(5, "e", 5, 1), (6, "z", 1, 1)]
    ticks = [4, 8, 12, 20]
    df_d, df_p = spark.createDataFrame(desired, SCHEMA), spark.createDataFrame(persisted, SCHEMA)
    got = sorted(tuple(r) for r in colmz.spark.sink(df_d, df_p, ticks).collect())
    assert got == reference_sink(desired, persisted, ticks)
    got = sorted(tuple(r) for r in colmz.spark.sink(df_d, df_p, ticks, since=6, buckets=3).collect())
    assert got == reference_sink(desired, persisted, ticks, since=6)
    assert all(r[2] >= 6 for r in got)


def test_sink_errors(spark):
    d = spark.createDataFrame([(1, "a", 0, 1)], SCHEMA)
    p = spark.createDataFrame([(1, 1, 0, 1)], "k long, v long, time long, diff long")
    with pytest.raises(TypeError, match="persisted column 'v' has type bigint but desired has string"):
        colmz.spark.sink(d, p, [1])
    with pytest.raises(ValueError, match="strictly increasing"):
        colmz.spark.sink(d, None, [2, 2])
    with pytest.raises(ValueError, match="ticks must not be empty"):
        colmz.spark.sink(d, None, [])
    with pytest.raises(ValueError, match="chain_proportionality"):
        colmz.spark.sink(d, None, [1], tunables={"chain_proportionality": 0.5})
    with pytest.raises(colmz.spark.ColumnMissingError, match="diff column 'diff'"):
        colmz.spark.sink(d.drop("diff"), None, [1])


def test_runs_written_on_executors_record_the_version_the_driver_read(spark, tmp_path):
    """Parts written by Spark tasks carry the arrangement version the driver read (as the
    driver's own writes do), so a consensus later restored to an older copy is refused
    instead of trusted -- and a run written against the current head is still appended."""
    import pyarrow as pa

    import colmz
    from colmz.arrangement import MetadataRolledBack
    from colmz.arrangement.parts import key_seqno
    from colmz.spark.arrangement_io import write_runs

    url = str(tmp_path / "st")
    arr = colmz.Arrangement.open(url, schema={"k": pa.int64()})
    arr.write(colmz.Updates({"k": [1]}, time=[0], diff=[1]))
    arr.seal(1)
    df = spark.createDataFrame([(2, 1, 1), (3, 1, 1)], "k long, time long, diff long")
    runs = write_runs(df, url, arr.schema, prefix=arr.prefix, seqno=arr.seqno)
    assert runs and all(key_seqno(k) == arr.seqno for r in runs for k in r.keys)
    # and each part's check comes back with the run (it was dropped on the way back to the
    # driver before, so the state recorded no check for parts written on executors)
    assert all(r.checks is not None and len(r.checks) == len(r.keys) and len(r.checks[0]) == 3 for r in runs)
    arr.append_runs(runs, seal=2)
    assert sorted(r[0] for r in arr.read().to_pylist()) == [1, 2, 3]
    recorded = {k: c for b in arr.unsealed_batches for k, c in zip(b.keys, b.checks or [None] * len(b.keys))}
    assert all(recorded[k] is not None for r in runs for k in r.keys)
    # a run recording a version above the record's head proves the record went back
    ahead = write_runs(df, url, arr.schema, prefix=arr.prefix, seqno=arr.seqno + 5)
    assert ahead
    with pytest.raises(MetadataRolledBack):
        colmz.Arrangement.open(url, create=False)


def test_one_run_writer_for_batch_and_stream(spark, tmp_path):
    """``write_runs`` is the run writer of the batch sink (one run per partition) and of the
    streaming sink (``split_from``: one run per aligned time range, ``range_starts``); both
    write the same updates, consolidated."""
    from collections import Counter

    import numpy as np
    import pyarrow as pa

    import colmz
    from colmz.arrangement.parts import read_parts
    from colmz.spark.arrangement_io import range_starts, write_runs

    url = str(tmp_path / "st")
    arr = colmz.Arrangement.open(url, schema={"k": pa.int64()})
    rows = [(k, t, d) for k, t, d in zip(range(40), [3, 4, 5, 9, 17, 40, 300, 301] * 5, [1, -1] * 20)]
    rows += [(0, 3, -1)]  # cancels (0, 3, +1)
    df = spark.createDataFrame(rows, "k long, time long, diff long").repartition(2)
    want = Counter()
    for k, t, d in rows:
        want[(k, t)] += d
    want = Counter({key: d for key, d in want.items() if d})

    def contents(runs):
        got = Counter()
        for r in runs:
            for u in read_parts(arr.store, list(r.parts), arr.schema):
                for row in u.to_arrow().to_pylist():
                    got[(row["k"], row["time"])] += row["diff"]
        return got

    whole = write_runs(df, url, arr.schema, prefix=arr.prefix, seqno=arr.seqno)
    assert len(whole) == 2 and contents(whole) == want
    split = write_runs(df, url, arr.schema, prefix=arr.prefix, seqno=arr.seqno, split_from=3)
    assert contents(split) == want
    for r in split:  # each run is inside one aligned range
        starts, _ = range_starts(np.array([r.ts_lower, r.ts_upper], np.uint64), 3)
        assert starts[0] == starts[1]
    assert len(split) > len(whole)
    arr.append_runs(whole + split, seal=1000)  # both commit alike
    assert arr.stats()["stored_updates"] == 2 * len(want)
