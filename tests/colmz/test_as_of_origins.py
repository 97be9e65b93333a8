"""Tests for ``AsOfSelection.origins()``, ``dataflows`` and ``storage``: what set each as-of.

Checked against ``explain()`` (the per-step history) and against the meaning of each cause:
a storage input's read frontier, the current time, a storage export's frontiers, a bound that
flowed along an edge.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.as_of import (
    UNSET,
    AsOfOrigin,
    Dataflow,
    Export,
    ExportKind,
    StorageFrontiers,
    lag_writes_by,
    select_as_ofs,
)
from colmz.frontier import frontier_le, step_back_frontier

STORAGE = {"s1": (10, 20), "s2": (20, 30), "u4": (10, 12), "u5": (10, 18)}
FLOWS = [
    Dataflow(Export.index("u1"), ["s1"]),
    Dataflow(Export.index("u2"), ["s2"]),
    Dataflow(Export.index("u3"), ["s1"]),
    Dataflow(Export.materialized_view("u4"), compute_inputs=["u3"]),
    Dataflow(Export.materialized_view("u5"), ["s1"]),
    Dataflow(Export.index("u6")),
]


def test_upstream_current_time_case():
    r = select_as_ofs(FLOWS, STORAGE, current_time=15)
    o = r.origins()
    assert o["u1"] == AsOfOrigin("u1", 15, 10, 15, "index_current_time", "current_time", None,
                                 "index current time 15")
    # the soft current-time cap failed on u2: its bounds collapsed onto the storage lower bound
    assert o["u2"] == AsOfOrigin("u2", 20, 20, 20, "upstream_storage", "storage_input", "s2",
                                 "storage input 's2' read frontier 20", "soft",
                                 "index current time 15")
    assert (o["u3"].cause, o["u3"].source, o["u3"].step) == (
        "downstream_upper", "u4", "downstream_storage")
    assert (o["u4"].cause, o["u4"].source, o["u4"].as_of) == ("storage_export", "u4", 11)
    assert (o["u5"].cause, o["u5"].as_of) == ("storage_export", 17)
    assert (o["u6"].cause, o["u6"].lower) == ("current_time", 0)
    assert r.dataflows == tuple(FLOWS)
    assert r.storage == {k: StorageFrontiers(*v) for k, v in STORAGE.items()}


def test_preset_pruned_and_read_policy():
    flows = [
        Dataflow(Export.index("p"), ["s"], as_of=12),
        Dataflow(Export.index("lag", lag_writes_by(5, 1)), ["s"]),
        Dataflow([Export.materialized_view("sealed"), Export.index("alive")], ["s"]),
        Dataflow(Export.index("down"), ["dropped"]),
        Dataflow(Export.index("after"), compute_inputs=["down"]),
    ]
    storage = {"s": (10, 40), "sealed": (3, None), "dropped": (None, None)}
    r = select_as_ofs(flows, storage, current_time=100, read_only=True)
    o = r.origins()
    assert (o["p"].cause, o["p"].step, o["p"].as_of) == ("preset", "initial", 12)
    assert (o["lag"].cause, o["lag"].source, o["lag"].as_of) == ("read_policy", "lag", 35)
    assert (o["sealed"].as_of, o["sealed"].cause, o["sealed"].source) == (
        None, "pruned_sealed", "sealed")
    assert o["sealed"].step == "prune_sealed_sinks"
    assert o["alive"].as_of == r.as_ofs["alive"] == 39 and o["alive"].cause == "warmup"
    assert (o["down"].cause, o["down"].source) == ("pruned_dropped", "dropped")
    assert (o["after"].cause, o["after"].source, o["after"].step) == (
        "pruned_upstream", "down", "prune_dropped_inputs")


small_frontier = st.one_of(st.integers(0, 30), st.none())


@st.composite
def scenarios(draw):
    storage = {f"s{i}": (draw(small_frontier), draw(small_frontier))
               for i in range(draw(st.integers(1, 3)))}
    flows, indexes, stored = [], [], list(storage)
    for j in range(draw(st.integers(1, 7))):
        exports = []
        for x in range(draw(st.sampled_from([1, 1, 2]))):
            kind = draw(st.sampled_from(list(ExportKind)))
            policy = draw(st.sampled_from([None, None, lag_writes_by(3, 2)]))
            exports.append(Export(f"u{j}" + "b" * x, kind, policy))
        si = draw(st.lists(st.sampled_from(stored), max_size=2, unique=True))
        ci = draw(st.lists(st.sampled_from(indexes), max_size=2, unique=True)) if indexes else []
        preset = draw(st.one_of(st.just(UNSET), small_frontier)) if draw(
            st.integers(0, 4)) == 0 else UNSET
        flows.append(Dataflow(exports, si, ci, preset))
        for e in exports:
            if e.kind is ExportKind.INDEX:
                indexes.append(e.id)
            else:
                storage[e.id] = (draw(st.integers(0, 25)), draw(small_frontier))
                stored.append(e.id)
    return flows, storage, draw(st.integers(0, 30)), draw(st.booleans())


@settings(max_examples=120, deadline=None)
@given(scenarios())
def test_origins_agree_with_explain_and_their_meaning(scenario):
    flows, storage, now, read_only = scenario
    r = select_as_ofs(flows, storage, now, read_only=read_only)
    origins = r.origins()
    assert set(origins) == set(r.as_ofs)
    ex = r.explain()
    for cid, o in origins.items():
        assert o.collection == cid and o.as_of == r.as_ofs[cid]
        rows = ex[ex.collection == cid].set_index("step")
        last = rows.iloc[-1]
        assert (o.lower, o.upper) == (last["lower"], last["upper"])
        if cid in r.pruned:
            assert o.as_of is None and o.cause is not None and o.cause.startswith("pruned_")
            continue
        assert o.as_of == o.upper
        if o.cause is None:
            assert o.as_of is None  # nothing ever lowered the upper bound from the top
            continue
        if o.failure is None:
            # the named step moved the bound to its final value, and explain names the cause
            at = rows.loc[o.step]
            assert at["upper"] == o.as_of or o.cause == "preset"
            assert at["constraint"] == o.reason
        else:
            # a failed upper constraint collapsed the bounds onto the lower bound
            assert o.as_of == o.lower and last["sealed"]
            failed = rows[rows.failure == o.failure]
            assert o.failed_reason in set(failed["constraint"])
        # what each cause means
        d = next(f for f in flows if cid in f.export_ids)
        if o.cause == "storage_input":
            assert o.source in d.storage_inputs and storage[o.source][0] == o.as_of
        elif o.cause == "current_time":
            assert o.as_of == now
        elif o.cause == "storage_export":
            assert o.source in d.export_ids
            read, write = storage[o.source]
            expect = read if frontier_le(write, read) else step_back_frontier(write)
            assert o.as_of == expect
        elif o.cause == "downstream_upper":
            consumer = next(f for f in flows if o.source in f.export_ids)
            assert set(consumer.compute_inputs) & set(d.export_ids)
        elif o.cause == "upstream_lower":
            # the source names the upstream dataflow (by its smallest export id)
            producer = next(f for f in flows if o.source in f.export_ids)
            assert set(producer.export_ids) & set(d.compute_inputs)
        elif o.cause == "preset":
            assert d.as_of is not UNSET
