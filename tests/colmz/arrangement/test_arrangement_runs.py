"""Runs written by one process and committed by another (``colmz.arrangement.runs`` and
``Arrangement.append_runs``): what a Spark job's executors and driver do."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

import colmz
from colmz.arrangement import MissingPart, SealRegression, TimeBeforeSeal
from colmz.arrangement.runs import (
    RunDiscarded,
    WrittenRun,
    abort_marker_prefix,
    discard_owned,
    owned_keys,
    write_run,
)
from colmz.storage.state import CommitConflict

SCHEMA = {"k": pa.int64(), "s": pa.string()}


def ups(rows):
    k, s, t, d = zip(*rows)
    return colmz.Updates({"k": pa.array(k, pa.int64()), "s": pa.array(s, pa.string())}, time=list(t), diff=list(d))


def state(a):
    return a.seqno, a.meta(), sorted(a.store.list_keys())


@pytest.fixture
def arr(tmp_path):
    return colmz.Arrangement.open(str(tmp_path / "a"), schema=SCHEMA)


def test_runs_and_seal_commit_as_one_version(arr, tmp_path):
    r1 = write_run(arr.store, arr.schema, ups([(1, "a", 0, 1), (2, None, 3, 2)]), prefix=arr.prefix)
    r2 = write_run(arr.store, arr.schema, ups([(1, "a", 2, -1), (3, "c", 4, 1)]), prefix=arr.prefix)
    before = arr.seqno
    arr.append_runs([r1, r2.to_dict()], seal=5)
    assert arr.seqno == before + 1 and arr.get_seal() == 5
    again = colmz.Arrangement.open(str(tmp_path / "a"))
    again.validate()
    assert sorted(again.read(as_of=4).to_pylist()) == [(2, None, 4, 2), (3, "c", 4, 1)]
    assert sorted(again.read(as_of=1).to_pylist()) == [(1, "a", 1, 1)]


def test_a_run_that_consolidates_to_nothing_is_none(arr):
    assert write_run(arr.store, arr.schema, ups([(1, "a", 0, 1), (1, "a", 0, -1)]), prefix=arr.prefix) is None
    assert arr.store.list_keys(arr.prefix) == []


@pytest.mark.parametrize("bad", ["before seal", "missing part", "foreign prefix", "twice", "seal regression"])
def test_bad_runs_change_nothing(arr, bad):
    good = write_run(arr.store, arr.schema, ups([(1, "a", 5, 1)]), prefix=arr.prefix)
    arr.append_runs([good], seal=5)
    run = write_run(arr.store, arr.schema, ups([(2, "b", 6, 1)]), prefix=arr.prefix)
    seal = 7
    if bad == "before seal":
        run = write_run(arr.store, arr.schema, ups([(2, "b", 4, 1)]), prefix=arr.prefix)
        exc = TimeBeforeSeal
    elif bad == "missing part":
        arr.store.delete(run.keys[0])
        exc = MissingPart
    elif bad == "foreign prefix":
        run = write_run(arr.store, arr.schema, ups([(2, "b", 6, 1)]), prefix="elsewhere/")
        exc = ValueError
    elif bad == "twice":
        run = good
        exc = ValueError
    else:
        seal = 3
        exc = SealRegression
    before = state(arr)
    with pytest.raises(exc):
        arr.append_runs([run], seal=seal)
    assert state(arr) == before


def test_losing_the_compare_and_set_commits_nothing_and_removes_the_parts(tmp_path):
    url = str(tmp_path / "a")
    a = colmz.Arrangement.open(url, schema=SCHEMA)
    b = colmz.Arrangement.open(url)
    run = write_run(b.store, b.schema, ups([(1, "x", 0, 1)]), prefix=b.prefix, owner="jobB")
    a.write(ups([(9, "a", 0, 1)]))  # another writer commits first
    meta = b.meta()
    with pytest.raises(CommitConflict):
        b.append_runs([run], seal=1)
    assert b.meta() == meta
    assert owned_keys(b.store, b.prefix, "jobB") == []
    assert colmz.Arrangement.open(url).read().to_pylist() == [(9, "a", 0, 1)]


def test_owned_keys_find_a_failed_jobs_parts(arr):
    mine = write_run(arr.store, arr.schema, ups([(1, "a", 0, 1)]), prefix=arr.prefix, owner="job1")
    other = write_run(arr.store, arr.schema, ups([(2, "b", 0, 1)]), prefix=arr.prefix, owner="job2")
    assert owned_keys(arr.store, arr.prefix, "job1") == list(mine.keys)
    assert owned_keys(arr.store, arr.prefix, "job2") == list(other.keys)
    with pytest.raises(ValueError, match="owner must be letters and digits"):
        write_run(arr.store, arr.schema, ups([(1, "a", 0, 1)]), owner="../x")


class Interleave:
    """A blob that runs ``hook`` once, just before its ``at``-th call (any method), so a
    test can put another process's step between any two steps of a writer."""

    def __init__(self, blob, at: int, hook):
        self.blob, self.at, self.hook, self.calls = blob, at, hook, 0

    def __getattr__(self, name):
        attr = getattr(self.blob, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            if self.calls == self.at:
                self.hook()
            self.calls += 1
            return attr(*args, **kwargs)

        return call


def test_a_discard_at_any_step_of_a_write_leaves_none_of_its_parts(arr):
    # Several parts per run, so the discard also lands between one part and the next.
    many = ups([(k, "x" * 50, k % 7, 1) for k in range(600)])
    kept = write_run(arr.store, arr.schema, ups([(1, "keep", 0, 1)]), prefix=arr.prefix, owner="job1")
    referenced = set(kept.keys)  # committed state names this job-1 part: the discard keeps it
    calls = Interleave(arr.store, -1, None)
    write_run(calls, arr.schema, many, prefix=arr.prefix, owner="probe", part_rows=128)
    assert calls.calls > 6
    for at in range(calls.calls + 1):
        owner = f"job2x{at}"
        blob = Interleave(arr.store, at, lambda o=owner: discard_owned(arr.store, arr.prefix, o, referenced))
        try:
            run = write_run(blob, arr.schema, many, prefix=arr.prefix, owner=owner, part_rows=128)
        except RunDiscarded:
            pass
        else:  # the discard came after the writer's last step: it deletes by listing
            assert blob.calls == at and run is not None
            discard_owned(arr.store, arr.prefix, owner, referenced)
        assert owned_keys(arr.store, arr.prefix, owner) == [], at
    assert owned_keys(arr.store, arr.prefix, "job1") == list(kept.keys)


def test_discard_keeps_referenced_parts_and_gc_drops_old_markers(tmp_path):
    now = [2_000_000.0]
    a = colmz.Arrangement.open(str(tmp_path / "a"), schema=SCHEMA, clock=lambda: now[0], lease_seconds=100)
    committed = write_run(a.store, a.schema, ups([(1, "a", 0, 1)]), prefix=a.prefix, owner="jobA",
                          clock=lambda: now[0])
    a.append_runs([committed], seal=1)
    stray = write_run(a.store, a.schema, ups([(2, "b", 0, 1)]), prefix=a.prefix, owner="jobA",
                      clock=lambda: now[0])
    assert discard_owned(a.store, a.prefix, "jobA", a.referenced_keys(), clock=lambda: now[0]) == list(stray.keys)
    assert set(a.store.list_keys(a.prefix)) == a.referenced_keys()
    markers = a.store.list_keys(abort_marker_prefix(a.prefix))
    assert len(markers) == 1 and not set(markers) & set(a.store.list_keys(a.prefix))
    assert a.gc() == []  # inside the lease the marker stays: a task may still be writing
    now[0] += 101
    assert a.gc() == markers
    assert a.store.list_keys(abort_marker_prefix(a.prefix)) == []
    assert a.read().to_pylist() == [(1, "a", 0, 1)]
    with pytest.raises(ValueError, match="owner must be letters and digits"):
        discard_owned(a.store, a.prefix, "a/b")


def test_written_run_from_bad_dicts():
    good = {"keys": ["p/1.parquet"], "len": 1, "ts_lower": 0, "ts_upper": 0, "size_bytes": 1}
    for change, match in (({"keys": []}, "non-empty list"), ({"keys": ["../x"]}, r"\.\."),
                          ({"len": -1}, "non-negative int"), ({"ts_lower": 3}, "ts_lower > ts_upper"),
                          ({"size_bytes": True}, "non-negative int")):
        with pytest.raises(ValueError, match=match):
            WrittenRun.from_dict({**good, **change})
    with pytest.raises(ValueError, match="lacks field"):
        WrittenRun.from_dict({"keys": ["p"]})


def test_a_hundred_sink_runs_leave_logarithmically_many_batches(tmp_path):
    """What ``colmz sink`` does per run -- a few runs of small corrections, committed with the
    new seal, then maintain() -- keeps O(log) trace batches and parts, not one per run."""
    url = str(tmp_path / "a")
    a = colmz.Arrangement.open(url, schema=SCHEMA)
    n = 100
    most_batches = 0
    for i in range(n):
        runs = [write_run(a.store, a.schema, ups([(j, "v", 10 * i + j % 10, 1) for j in range(b, b + 20)]),
                          prefix=a.prefix) for b in (0, 20)]
        a.append_runs(runs, seal=10 * (i + 1))
        a.maintain()
        st = a.stats()
        most_batches = max(most_batches, st["trace_batches"] + st["unsealed_batches"])
    bound = 2 * math.log2(n)
    assert most_batches <= bound and a.stats()["parts"] <= bound
    assert len(a.read()) == sum(1 for _ in a.read().to_pylist())
    assert sum(d for *_, d in a.read(as_of=10 * n - 1).to_pylist()) == 40 * n


def test_append_runs_with_expect_lands_only_right_after_the_expected_seal(tmp_path):
    """``expect=``: the commit happens only when the seal is where the caller expects it; a
    stale handle's attempt fails its compare-and-set, and after a refresh the same call is
    refused by the check -- so a retried append lands at most once."""
    from colmz.arrangement import SealMismatch

    url = str(tmp_path / "a")
    a, b = colmz.Arrangement.open(url, schema=SCHEMA), colmz.Arrangement.open(url, schema=SCHEMA)
    run = write_run(a.store, a.schema, ups([(1, "x", 0, 1)]), prefix=a.prefix)
    a.append_runs([run], seal=1, expect=0)
    with pytest.raises(SealMismatch, match="expected the seal at 0, it is at 1"):
        a.append_runs([], seal=2, expect=0)
    stale = write_run(b.store, b.schema, ups([(2, "y", 0, 1)]), prefix=b.prefix)
    with pytest.raises(CommitConflict):  # b read seal 0: its compare-and-set loses
        b.append_runs([stale], seal=1, expect=0)
    b.refresh()
    again = write_run(b.store, b.schema, ups([(2, "y", 0, 1)]), prefix=b.prefix)
    with pytest.raises(SealMismatch):
        b.append_runs([again], seal=1, expect=0)
    assert state(b) == state(a) and b.read(as_of=0).to_pylist() == a.read(as_of=0).to_pylist()
    assert [r[:2] for r in b.read(as_of=0).to_pylist()] == [(1, "x")]
    later = write_run(b.store, b.schema, ups([(2, "y", 1, 1)]), prefix=b.prefix)
    b.append_runs([later], seal=2, expect=1)
    assert b.get_seal() == 2 and [r[:2] for r in b.read(as_of=1).to_pylist()] == [(1, "x"), (2, "y")]
