"""Fault wrappers: exact call counting, before/after semantics, and an every-N sweep showing
that a StateLog workload survives a failure at each storage call without writing twice."""

from __future__ import annotations

import pytest

from colmz.storage import (
    Blob,
    Consensus,
    Determinate,
    Indeterminate,
    MemBlob,
    MemConsensus,
    StateLog,
    StorageError,
    VersionedData,
)
from colmz.storage.faults import (
    FaultPlan,
    FaultyBlob,
    FaultyConsensus,
    InjectedDeterminate,
    InjectedIndeterminate,
)


def test_wrappers_satisfy_the_protocols_and_pass_through():
    plan = FaultPlan()
    blob, cons = FaultyBlob(MemBlob("x"), plan), FaultyConsensus(MemConsensus(), plan)
    assert isinstance(blob, Blob) and isinstance(cons, Consensus)
    assert blob.name == "x" and blob.url_of("k") == "mem://x/k"
    assert plan.calls == 0  # url_of is not I/O
    assert list(cons.keys()) == []


def test_no_fault_plan_counts_every_call_in_order():
    plan = FaultPlan()
    blob, cons = FaultyBlob(MemBlob(), plan), FaultyConsensus(MemConsensus(), plan)
    blob.set("a", b"1")
    assert blob.get("a") == b"1"
    assert cons.compare_and_set("m", None, VersionedData(1, b"x"))
    assert cons.head("m").seqno == 1
    assert cons.scan("m") == [VersionedData(1, b"x")]
    assert cons.truncate("m", 1) == 0
    assert blob.list_keys() == ["a"]
    blob.delete("a")
    assert plan.calls == 8 and plan.injected == []
    assert [w for _, w, _ in plan.log] == [
        "blob.set", "blob.get", "consensus.compare_and_set", "consensus.head", "consensus.scan",
        "consensus.truncate", "blob.list_keys", "blob.delete",
    ]


def test_before_is_not_applied_after_is_applied():
    inner = MemBlob()
    blob = FaultyBlob(inner, FaultPlan(fail_at=1, mode="before"))
    with pytest.raises(InjectedDeterminate, match=r"call 1 \(blob.set 'k'\) failed before it was applied"):
        blob.set("k", b"v")
    assert inner.get("k") is None
    blob.set("k", b"v")  # only call 1 fails
    assert inner.get("k") == b"v"

    inner = MemConsensus()
    cons = FaultyConsensus(inner, FaultPlan(fail_at=2, mode="after"))
    assert cons.compare_and_set("m", None, VersionedData(1, b"a"))
    with pytest.raises(InjectedIndeterminate, match="applied but reported a timeout"):
        cons.compare_and_set("m", 1, VersionedData(2, b"b"))
    assert inner.head("m") == VersionedData(2, b"b")
    with pytest.raises(Indeterminate):  # a CAS that lost, then timed out, is applied too (no-op)
        FaultyConsensus(inner, FaultPlan(fail_at=1, mode="after")).compare_and_set(
            "m", 0, VersionedData(9, b"z")
        )
    assert inner.head("m").seqno == 2
    assert issubclass(InjectedDeterminate, Determinate) and issubclass(InjectedIndeterminate, Indeterminate)


def test_outage_of_several_calls():
    plan = FaultPlan(fail_at=2, count=3)
    blob = FaultyBlob(MemBlob(), plan)
    outcomes = []
    for i in range(6):
        try:
            blob.set(f"k{i}", b"")
            outcomes.append("ok")
        except Determinate:
            outcomes.append("fail")
    assert outcomes == ["ok", "fail", "fail", "fail", "ok", "ok"]
    assert [n for n, *_ in plan.injected] == [2, 3, 4]


def test_bad_plans():
    with pytest.raises(ValueError, match="mode must be one of"):
        FaultPlan(fail_at=1, mode="sometimes")
    with pytest.raises(ValueError, match="fail_at must be None or an int >= 1, got 0"):
        FaultPlan(fail_at=0)
    with pytest.raises(ValueError, match="count must be an int >= 1"):
        FaultPlan(fail_at=1, count=0)


# -- the every-N sweep ---------------------------------------------------------------------

STATES = [
    {"seal": 0, "parts": []},
    {"seal": 0, "parts": ["p1"]},
    {"seal": 5, "parts": ["p1"]},
    {"seal": 5, "parts": ["p1", "p2"]},
    {"seal": 9, "parts": ["p2"]},
    {"seal": 9, "parts": ["p2", "p3"]},
    {"seal": 12, "parts": ["p2", "p3"]},
]


def workload(blob, cons) -> None:
    """Commit STATES in order (writing each new part first), as a careful writer does: on a
    storage error it reloads, and counts the commit as done iff the reloaded state is the
    one it was committing (never re-applying a change that landed)."""
    log = StateLog(cons, "meta", rollup_every=3)
    seqno = None
    for i, state in enumerate(STATES):
        for part in state["parts"]:
            while True:
                try:
                    if blob.get(part) is None:
                        blob.set(part, part.encode())
                    break
                except StorageError:
                    continue  # a part is immutable under a fresh key: writing it again is safe
        while True:
            try:
                seqno = log.commit(seqno, state)
                break
            except StorageError:
                while True:
                    try:
                        found, current = log.load()
                        break
                    except StorageError:
                        continue
                if found is not None and found == (seqno or 0) + 1 and current == state:
                    seqno = found  # it landed after all
                    break
                assert found == seqno, f"commit {i}: head moved to {found} without us"


@pytest.mark.parametrize("mode", ["before", "after"])
def test_every_failure_point_of_a_state_log_workload(mode):
    plan = FaultPlan()
    workload(FaultyBlob(MemBlob(), plan), FaultyConsensus(MemConsensus(), plan))
    total = plan.calls
    assert total > 20
    kinds = set()
    for n in range(1, total + 1):
        blob, cons = MemBlob(), MemConsensus()
        plan = FaultPlan(fail_at=n, mode=mode)
        workload(FaultyBlob(blob, plan), FaultyConsensus(cons, plan))
        assert [i[0] for i in plan.injected] == [n]
        kinds.add(plan.injected[0][1])
        # Exactly one version per state: no change was written twice, none was lost.
        assert StateLog(cons, "meta").load() == (len(STATES), STATES[-1])
        assert sorted(blob.list_keys()) == ["p1", "p2", "p3"]
    assert {"blob.get", "blob.set", "consensus.compare_and_set", "consensus.scan"} <= kinds
