"""``Arrangement.append_runs_together``: several arrangements' appends in one
``compare_and_set_many`` -- all of them land or none, under refusals, lost races and a
storage failure at every call of it (``colmz.storage.faults``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import colmz
from colmz.arrangement import Arrangement
from colmz.arrangement.errors import SealMismatch
from colmz.arrangement.runs import write_run
from colmz.storage.base import StorageError
from colmz.storage.state import CommitConflict
from colmz.storage.url import Location, open_location

SCHEMA = {"k": pa.int64()}


def _open(loc, name):
    return Arrangement.open(loc, schema=SCHEMA, name=name)


def _run(arr, k):
    return write_run(arr.store, arr.schema, colmz.Updates({"k": [k]}, time=[0], diff=[1]), prefix=arr.prefix)


def _seen(url):
    """Each arrangement's (seal, rows) as a fresh handle reads them."""
    loc = open_location(url)
    out = {}
    for name in ("a", "b", "c"):
        arr = Arrangement.open(loc, name=name, create=False)
        out[name] = (arr.get_seal(), sorted(r[0] for r in arr.read(as_of=0).to_pylist()) if arr.get_seal() else [])
    return out


NONE = {"a": (0, []), "b": (0, []), "c": (0, [])}
ALL = {"a": (1, [1]), "b": (1, [2]), "c": (1, [])}


def test_a_refused_call_or_a_lost_race_lands_nothing_then_all_land(tmp_path):
    url = str(tmp_path / "s")
    loc = open_location(url)
    a, b, c = (_open(loc, n) for n in "abc")
    ra, rb = _run(a, 1), _run(b, 2)
    # b is told to expect a seal it is not at: refused before anything is committed
    with pytest.raises(SealMismatch):
        Arrangement.append_runs_together([(a, [ra], 1, 0), (b, [rb], 1, 5), (c, [], 1, 0)])
    assert _seen(url) == NONE and a.get_seal() == 0
    # another writer moves c after this handle read it: the step is lost as a whole
    _open(open_location(url), "c").seal(1)
    with pytest.raises(CommitConflict):
        Arrangement.append_runs_together([(a, [ra], 1, 0), (b, [rb], 1, 0), (c, [], 2, 0)])
    assert _seen(url) == {**NONE, "c": (1, [])} and (a.get_seal(), b.get_seal()) == (0, 0)
    c.refresh()
    assert Arrangement.append_runs_together([(a, [ra], 1, 0), (b, [rb], 1, 0), (c, [], 1, 1)]) is True
    assert _seen(url) == ALL and (a.get_seal(), b.get_seal(), c.get_seal()) == (1, 1, 1)
    with pytest.raises(ValueError, match="named twice"):
        Arrangement.append_runs_together([(a, [], 2, 1), (a, [], 2, 1)])


@pytest.mark.parametrize("mode", ["before", "after"])
def test_a_failure_at_any_call_lands_all_or_none(tmp_path, mode):
    """Fail each storage call of one step in turn: a fresh handle finds all three
    arrangements moved or none; a step that returned moved all (also when its
    compare_and_set_many answered indeterminately after it landed: one head read tells);
    a step that raised moved none, and left every handle where it was."""
    from colmz.storage.faults import FaultPlan, FaultyBlob, FaultyConsensus

    def fresh(i):
        url = str(tmp_path / f"{mode}{i}")
        base = open_location(url)
        plan = FaultPlan()
        loc = Location(FaultyBlob(base.blob, plan), FaultyConsensus(base.consensus, plan), base.url)
        arrs = [_open(loc, n) for n in "abc"]
        runs = [[_run(arrs[0], 1)], [_run(arrs[1], 2)], []]
        return url, plan, arrs, runs

    url, plan, arrs, runs = fresh(0)
    start = plan.calls
    Arrangement.append_runs_together([(arr, r, 1, 0) for arr, r in zip(arrs, runs)])
    calls = [w for _, w, _ in plan.log[start:]]
    assert calls.count("consensus.compare_and_set_many") == 1 and "consensus.compare_and_set" not in calls
    assert _seen(url) == ALL
    outcomes = set()
    for n in range(1, len(calls) + 1):
        url, plan, arrs, runs = fresh(n)
        plan.fail_at, plan.mode = plan.calls + n, mode
        try:
            Arrangement.append_runs_together([(arr, r, 1, 0) for arr, r in zip(arrs, runs)])
            raised = None
        except (StorageError, CommitConflict) as e:
            raised = e
        seen = _seen(url)
        assert seen in (NONE, ALL), (n, seen)
        if raised is None:
            assert seen == ALL, n
        held = {name: arr.get_seal() for name, arr in zip("abc", arrs)}
        # a handle moves only with the store: all at 1 after a landed step, else all at 0
        assert set(held.values()) == ({1} if raised is None else {0}), (n, held)
        outcomes.add(seen == ALL)
    # before: every call failed is one not applied (none after the step's); after: the step
    # applied and answered indeterminately is resolved by reading the head -- it landed
    assert outcomes == ({False} if mode == "before" else {True, False})


def test_prepare_append_commits_nothing_and_landed_append_takes_its_own_only(tmp_path):
    # The internal API append_runs_together stands on: a prepared append changes no handle
    # and no store until its version is committed, and lands only on its own arrangement.
    from colmz.storage.state import commit_together

    url = str(tmp_path / "s")
    loc = open_location(url)
    a, b, _ = (_open(loc, n) for n in "abc")
    assert a.consensus is b.consensus is loc.consensus
    from colmz.storage import MemBlob

    assert Arrangement(MemBlob()).consensus is None  # not opened: no consensus
    p = a.prepare_append([_run(a, 1)], 1, 0)
    assert p.arrangement is a and len(p.keys) == 1
    assert a.get_seal() == 0 and _seen(url)["a"] == (0, [])
    assert b.prepare_append([], 0, 0) is None  # nothing to commit
    with pytest.raises(ValueError, match="another arrangement"):
        b.landed_append(p)
    commit_together([p.version])
    a.landed_append(p)
    assert a.get_seal() == 1 and _seen(url)["a"] == (1, [1])
