"""Arrangement.properties: user metadata committed in the same compare-and-set as
append_runs/seal, kept through reopen, rollups and maintenance, untouched by a failed call."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.arrangement import Arrangement, CommitConflict, SealRegression
from colmz.arrangement.errors import CorruptMeta
from colmz.arrangement.meta import meta_from_dict, properties_from_dict, validate_meta
from colmz.arrangement.runs import write_run

SCHEMA = {"k": pa.int64()}


def ups(rows):
    return colmz.Updates({"k": [r[0] for r in rows]}, time=[r[1] for r in rows], diff=[r[2] for r in rows])


def test_seal_and_append_runs_commit_properties_and_reopen(tmp_path):
    d = str(tmp_path / "s")
    a = Arrangement.open(d, SCHEMA)
    assert a.properties() == {} and "properties" not in a.meta()
    a.seal(2, properties={"batch": 1, "src": "e"})
    run = write_run(a.store, a.schema, ups([(1, 2, 1), (2, 9, 1)]), prefix=a.prefix)
    a.append_runs([run], seal=3, properties={"batch": 2, "src": None})
    assert a.properties() == {"batch": 2}
    b = Arrangement.open(d)
    assert b.properties() == {"batch": 2} and b.get_seal() == 3
    assert b.meta() == a.meta() and b.meta()["properties"] == {"batch": 2}
    # a properties-only commit (no runs, same seal) still commits
    seq = b.seqno
    b.append_runs([], properties={"batch": 7})
    assert b.seqno == seq + 1 and Arrangement.open(d).properties() == {"batch": 7}
    # nothing changed: no commit
    b.seal(3, properties={"batch": 7})
    assert b.seqno == seq + 1
    # the returned dict is a copy
    b.properties()["batch"] = 99
    assert b.properties() == {"batch": 7}
    # maintenance (its own commits) keeps them
    b.maintain()
    assert b.trace_ts_upper() == 3
    assert Arrangement.open(d).properties() == {"batch": 7}


def test_failed_compare_and_set_leaves_old_properties(tmp_path):
    d = str(tmp_path / "s")
    a = Arrangement.open(d, SCHEMA)
    a.seal(1, properties={"batch": 0})
    stale = Arrangement.open(d)
    a.seal(2, properties={"batch": 1})
    run = write_run(stale.store, stale.schema, ups([(5, 4, 1)]), prefix=stale.prefix)
    meta = stale.meta()
    with pytest.raises(CommitConflict):
        stale.append_runs([run], seal=2, properties={"batch": 1, "other": "x"})
    assert stale.meta() == meta and stale.properties() == {"batch": 0}
    with pytest.raises(CommitConflict):
        stale.seal(5, properties={"batch": 4})
    assert stale.properties() == {"batch": 0}
    fresh = Arrangement.open(d)
    assert fresh.properties() == {"batch": 1} and fresh.get_seal() == 2
    assert fresh.read().to_pylist() == []  # the loser's run was not committed
    stale.refresh()
    assert stale.properties() == {"batch": 1}


@pytest.mark.parametrize("bad", [
    {"": 1}, {1: 1}, {"b": True}, {"b": 1.5}, {"b": [1]}, {"b": 2**63}, {"b": "x" * 5000}, ["b"],
])
def test_bad_properties_raise_and_change_nothing(tmp_path, bad):
    d = str(tmp_path / "s")
    a = Arrangement.open(d, SCHEMA)
    a.seal(1, properties={"batch": 0})
    before, seq, keys = a.meta(), a.seqno, sorted(a.store.list_keys())
    with pytest.raises(TypeError, match="properties"):
        a.seal(2, properties=bad)
    run = write_run(a.store, a.schema, ups([(1, 3, 1)]), prefix=a.prefix)
    with pytest.raises(TypeError, match="properties"):
        a.append_runs([run], seal=2, properties=bad)
    assert (a.meta(), a.seqno) == (before, seq)
    assert Arrangement.open(d).meta() == before
    a.append_runs([run])  # the run was not consumed by the failed call
    assert set(a.store.list_keys()) - set(keys) == set(run.keys)


def test_seal_regression_with_properties_changes_nothing(tmp_path):
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA)
    a.seal(4, properties={"batch": 3})
    with pytest.raises(SealRegression):
        a.seal(2, properties={"batch": 9})
    assert a.properties() == {"batch": 3}


def test_corrupt_properties_are_named():
    with pytest.raises(CorruptMeta, match="properties"):
        properties_from_dict({"properties": {"b": 1.5}})
    with pytest.raises(CorruptMeta, match="properties"):
        properties_from_dict({"properties": [1]})


@settings(max_examples=25, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]),
                                st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
                                max_size=3), min_size=1, max_size=12))
def test_properties_follow_a_dict_model_through_rollups(tmp_path_factory, changes):
    d = str(tmp_path_factory.mktemp("p"))
    a = Arrangement.open(d, SCHEMA, rollup_every=2)
    model: dict = {}
    for i, c in enumerate(changes):
        a.seal(i + 1, properties=c)
        for k, v in c.items():
            if v is None:
                model.pop(k, None)
            else:
                model[k] = v
        assert a.properties() == model
    b = Arrangement.open(d)
    assert b.properties() == model and b.get_seal() == len(changes)
    m = b.meta()
    validate_meta(*meta_from_dict(m))
    assert properties_from_dict(m) == model
    assert Arrangement.from_meta(m, b.store).properties() == model
