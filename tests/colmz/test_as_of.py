"""Tests for ``colmz.as_of`` (Materialize's ``src/compute-client/src/as_of_selection.rs``).

The upstream unit cases are reproduced through a helper that mirrors the original test macro:
an id with storage frontiers is a materialized view, any other id an index; inputs that are
storage collections become storage imports, the rest index imports. Property tests compare
against ``oracle``: an independent, literal transcription of the original (one collection per
export, BTreeMap iteration order, fixpoints by full sweeps).
"""

from __future__ import annotations

import random
from collections import Counter

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from colmz.as_of import (
    STEPS,
    UNSET,
    AsOfBounds,
    AsOfSelectionError,
    Bound,
    Constraint,
    ConstraintKind,
    Dataflow,
    Export,
    ExportKind,
    LagWritesBy,
    MissingStorageFrontiers,
    Multiple,
    StorageFrontiers,
    UnknownCollection,
    ValidFrom,
    _enc,
    _Selector,
    lag_writes_by,
    select_as_ofs,
)
from colmz.frontier import frontier_le, frontier_lt, meet, step_back_frontier

HARD, SOFT = ConstraintKind.HARD, ConstraintKind.SOFT
LOWER, UPPER = Bound.LOWER, Bound.UPPER
SEALED = None  # the empty frontier, as the original tests' SEALED marker


def case(storage, flows, current_time, policies=None, read_only=False, **kw):
    """Build and run an upstream-style case; ``flows`` is ``[(export_id, [input ids])]``."""
    policies = policies or {}
    dataflows = []
    for export_id, ins in flows:
        if export_id in storage:
            export = Export.materialized_view(export_id)
        else:
            export = Export.index(export_id, policies.get(export_id))
        dataflows.append(
            Dataflow(
                export,
                storage_inputs=[i for i in ins if i in storage],
                compute_inputs=[i for i in ins if i not in storage],
            )
        )
    return select_as_ofs(dataflows, storage, current_time, read_only=read_only, **kw)


# ---------------------------------------------------------------------------------------------
# Every unit case of upstream's src/compute-client/src/as_of_selection.rs tests (newest version)
# ---------------------------------------------------------------------------------------------

UPSTREAM_CASES = {
    "upstream_storage_constraints": dict(
        storage={"s1": (10, 20), "s2": (20, 30)},
        flows=[("u1", ["s1"]), ("u2", ["s2"]), ("u3", ["s1", "s2"]), ("u4", ["u1", "u2"])],
        current_time=0,
        expected=(10, 20, 20, 20),
    ),
    "downstream_storage_constraints": dict(
        storage={"s1": (10, 20), "u3": (10, 15), "u4": (10, 13)},
        flows=[("u1", ["s1"]), ("u2", ["s1"]), ("u3", ["u2"]), ("u4", ["u2"])],
        current_time=100,
        expected=(19, 12, 14, 12),
    ),
    "warmup_constraints": dict(
        storage={"s1": (10, 20), "s2": (10, 30), "s3": (10, 40), "s4": (10, 50)},
        flows=[
            ("u1", ["s1"]), ("u2", ["s2"]), ("u3", ["s3"]), ("u4", ["s4"]),
            ("u5", ["u1", "u2"]), ("u6", ["u3", "u4"]),
        ],
        current_time=100,
        expected=(19, 19, 39, 39, 19, 39),
    ),
    "index_read_policy_constraints": dict(
        storage={"s1": (10, 20), "u6": (10, 18)},
        flows=[
            ("u1", ["s1"]), ("u2", ["s1"]), ("u3", ["s1"]), ("u4", ["s1"]), ("u5", []),
            ("u6", ["s1"]),
        ],
        current_time=100,
        policies={
            "u1": lag_writes_by(5, 1),
            "u2": lag_writes_by(15, 1),
            "u3": ValidFrom(13),
            "u4": ValidFrom(5),
            "u5": lag_writes_by(5, 1),
            "u6": ValidFrom(13),  # a materialized view: read policies apply to indexes only
        },
        expected=(15, 10, 13, 10, 95, 17),
    ),
    "index_current_time_constraints": dict(
        storage={"s1": (10, 20), "s2": (20, 30), "u4": (10, 12), "u5": (10, 18)},
        flows=[
            ("u1", ["s1"]), ("u2", ["s2"]), ("u3", ["s1"]), ("u4", ["u3"]), ("u5", ["s1"]),
            ("u6", []),
        ],
        current_time=15,
        expected=(15, 20, 11, 11, 17, 15),
    ),
    "sealed_storage_sink": dict(
        storage={"s1": (10, 20), "u1": (10, SEALED)},
        flows=[("u1", ["s1"])],
        current_time=100,
        expected=(SEALED,),
    ),
    "read_only_dropped_storage_inputs": dict(
        storage={"s1": (10, 20), "s2": (SEALED, SEALED), "u4": (10, 20)},
        flows=[("u1", ["s1"]), ("u2", ["s2"]), ("u3", ["s1", "s2"]), ("u4", ["u2"])],
        current_time=15,
        read_only=True,
        expected=(15, SEALED, SEALED, SEALED),
    ),
    # Regression test for database-issues#9273: the read policy sees the storage write frontier
    # (20), not u1's compute upper (14) pinned by the downstream MV u3.
    "github_9273": dict(
        storage={"s1": (10, 20), "u3": (14, 15)},
        flows=[("u1", ["s1"]), ("u2", ["u1"]), ("u3", ["u1"])],
        current_time=100,
        policies={"u1": lag_writes_by(1, 1), "u2": lag_writes_by(1, 1)},
        expected=(14, 19, 14),
    ),
}


@pytest.mark.parametrize("name", list(UPSTREAM_CASES))
def test_upstream_case(name):
    spec = dict(UPSTREAM_CASES[name])
    expected = spec.pop("expected")
    result = case(**spec)
    assert result.dataflow_as_ofs == expected
    assert [result.as_ofs[e] for e, _ in spec["flows"]] == list(expected)
    # None of the upstream cases hits a hard failure; strict mode must agree.
    assert result.hard_failures == ()
    assert case(**spec, strict=True).as_ofs == result.as_ofs
    assert oracle_from_case(**spec)[0] == result.as_ofs


@pytest.mark.parametrize("name", list(UPSTREAM_CASES))
def test_upstream_case_independent_of_order(name):
    spec = dict(UPSTREAM_CASES[name])
    spec.pop("expected")
    base = case(**spec).as_ofs
    rng = random.Random(name)
    for _ in range(5):
        flows = [(e, rng.sample(ins, len(ins))) for e, ins in spec["flows"]]
        rng.shuffle(flows)
        storage = dict(rng.sample(list(spec["storage"].items()), len(spec["storage"])))
        assert case(**{**spec, "flows": flows, "storage": storage}).as_ofs == base


def test_upstream_storage_constraints_story():
    """Upstream's storage-constraints case: which constraints fail and why."""
    r = case(**{k: v for k, v in UPSTREAM_CASES["upstream_storage_constraints"].items()
                if k != "expected"})
    got = [(f.collection, f.kind, f.bound, f.step) for f in r.failures]
    assert got == [
        ("u3", SOFT, UPPER, "warmup"),  # cap 19 below its lower 20 (s2 since)
        ("u4", SOFT, UPPER, "warmup"),
        ("u1", SOFT, UPPER, "index_current_time"),  # current time 0 below lower 10
        ("u2", SOFT, UPPER, "index_current_time"),
    ]
    u3 = r.failures[0]
    assert (u3.frontier, u3.lower, u3.upper, u3.sealed_at) == (19, 20, None, 20)
    ex = r.explain("u2").set_index("step")
    # Upstream propagation from u4 (sealed at 20) pins u2 to 20 in the warmup step.
    assert ex.loc["warmup", "upper"] == 20
    assert ex.loc["warmup", "constraint"] == "upper bound of downstream 'u4'"


def test_index_current_time_story():
    r = case(**{k: v for k, v in UPSTREAM_CASES["index_current_time_constraints"].items()
                if k != "expected"})
    assert [(f.collection, f.kind) for f in r.failures] == [("u2", SOFT)]
    f = r.failures[0]
    assert (f.frontier, f.lower, f.upper, f.sealed_at) == (15, 20, 29, 20)
    assert "index current time 15" in f.reason


def test_downstream_storage_old_warmup_variant_via_helpers():
    """The older warmup (002efd70) used direct storage inputs and pushed uppers downstream as
    soft constraints; on the downstream case that gives u3 = 12 instead of 14 (upstream's downstream case).
    Rebuilt from the engine's propagation helpers."""
    spec = UPSTREAM_CASES["downstream_storage_constraints"]
    flows = [
        Dataflow(Export.materialized_view(e) if e in spec["storage"] else Export.index(e),
                 [i for i in ins if i in spec["storage"]],
                 [i for i in ins if i not in spec["storage"]])
        for e, ins in spec["flows"]
    ]
    eng = _Selector(flows, spec["storage"], 100, False, False)
    eng.prune_sealed_sinks()
    eng._build_graph()
    eng.upstream_storage()
    eng.downstream_storage()
    for n in eng.topo:
        w = meet(*(eng.frontiers[s][1] for s in eng.storage_inputs[n]))
        eng.apply(n, False, False, _enc(step_back_frontier(w)), "warmup", None, w)
    eng.propagate_upper_downstream()
    eng.index_current_time()
    assert eng.result().as_ofs == {"u1": 19, "u2": 12, "u3": 12, "u4": 12}


def test_lower_upstream_helper_restores_downstream_invariant():
    # a -> b -> c; a soft raise of c's lower pulls b and a up, then flows back down (hard).
    flows = [
        Dataflow(Export.index("a")),
        Dataflow(Export.index("b"), compute_inputs=["a"]),
        Dataflow(Export.index("c"), compute_inputs=["b"]),
        Dataflow(Export.index("d"), compute_inputs=["a"]),
    ]
    eng = _Selector(flows, {}, 0, False, False)
    eng._build_graph()
    c = eng.owner["c"]
    eng.apply(c, False, True, 7, "storage_input", "x")
    eng.propagate_lower_upstream([c])
    assert eng.result() is not None
    assert [eng.lower[eng.owner[x]] for x in "abcd"] == [7, 7, 7, 7]


# ---------------------------------------------------------------------------------------------
# The constraint rule
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bounds, constraint, applied, after",
    [
        # sealed bounds are never touched
        ((10, 20, True), (HARD, LOWER, 30), (False, False), (10, 20, True)),
        ((10, 20, True), (SOFT, UPPER, 0), (False, False), (10, 20, True)),
        # lower: fail above upper (moves lower onto upper), no-op at or below lower, else raise
        ((10, 20, False), (HARD, LOWER, 21), (True, True), (20, 20, True)),
        ((20, 20, False), (HARD, LOWER, 21), (False, True), (20, 20, True)),
        ((10, 20, False), (HARD, LOWER, 10), (False, False), (10, 20, False)),
        ((10, 20, False), (SOFT, LOWER, 5), (False, False), (10, 20, False)),
        ((10, 20, False), (HARD, LOWER, 20), (True, False), (20, 20, False)),
        ((10, None, False), (HARD, LOWER, None), (True, False), (None, None, False)),
        ((10, 20, False), (HARD, LOWER, None), (True, True), (20, 20, True)),
        # upper: fail below lower (moves upper onto lower), no-op at or above upper, else lower
        ((10, 20, False), (SOFT, UPPER, 9), (True, True), (10, 10, True)),
        ((10, 10, False), (SOFT, UPPER, 9), (False, True), (10, 10, True)),
        ((10, 20, False), (SOFT, UPPER, 20), (False, False), (10, 20, False)),
        ((10, 20, False), (SOFT, UPPER, None), (False, False), (10, 20, False)),
        ((10, None, False), (HARD, UPPER, 10), (True, False), (10, 10, False)),
        ((None, None, False), (HARD, UPPER, 3), (False, True), (None, None, True)),
        ((0, 0, False), (HARD, UPPER, 0), (False, False), (0, 0, False)),
    ],
)
def test_constraint_rule(bounds, constraint, applied, after):
    b = AsOfBounds(*bounds)
    out = Constraint(*constraint).apply(b)
    assert (out.changed, out.failed) == applied
    assert (b.lower, b.upper, b.sealed) == after


frontiers = st.one_of(st.none(), st.integers(0, 12), st.just(2**64 - 1))


@given(
    lower=frontiers, upper=frontiers, sealed=st.booleans(), hard=st.booleans(),
    is_lower=st.booleans(), f=frontiers,
)
def test_engine_rule_matches_public_rule(lower, upper, sealed, hard, is_lower, f):
    if not frontier_le(lower, upper):
        lower, upper = upper, lower
    b = AsOfBounds(lower, upper, sealed)
    want = Constraint(HARD if hard else SOFT, LOWER if is_lower else UPPER, f).apply(b)
    eng = _Selector([Dataflow(Export.index("x"))], {}, 0, False, False)
    eng.lower[0], eng.upper[0], eng.sealed[0] = _enc(lower), _enc(upper), sealed
    changed = eng.apply(0, hard, is_lower, _enc(f), "current_time", None)
    assert changed == want.changed
    assert (eng.lower[0], eng.upper[0], eng.sealed[0]) == (_enc(b.lower), _enc(b.upper), b.sealed)
    assert len(eng.failures) == int(want.failed)


def test_constraint_validates_frontier():
    with pytest.raises(ValueError, match="Constraint.frontier"):
        Constraint(HARD, LOWER, -1)
    with pytest.raises(ValueError):
        Constraint("medium", LOWER, 1)


# ---------------------------------------------------------------------------------------------
# Read policies
# ---------------------------------------------------------------------------------------------


def test_read_policies():
    assert ValidFrom(13).frontier(100) == 13
    assert ValidFrom(None).frontier(5) is None
    assert lag_writes_by(5, 1).frontier(20) == 15
    assert lag_writes_by(0, 0).frontier(20) == 20  # lag 0 follows the write frontier
    assert lag_writes_by(30, 1).frontier(20) == 0  # saturates
    assert lag_writes_by(10, 4).frontier(27) == 16  # 17 rounded down to a multiple of 4
    assert lag_writes_by(3, 100).frontier(27) == 24  # granularity min(lag, max) = 3
    assert lag_writes_by(5, 1).frontier(None) == 0
    assert lag_writes_by(1, 1).frontier(0) == 0
    both = Multiple(ValidFrom(13), lag_writes_by(5, 1))
    assert both.frontier(100) == 13 and both.frontier(15) == 10
    assert (ValidFrom(13) & lag_writes_by(5, 1)) == both
    assert Multiple().frontier(7) is None
    assert repr(both) == "Multiple(ValidFrom(since=13), LagWritesBy(lag=5, max_granularity=1))"


def test_read_policy_validation():
    with pytest.raises(ValueError, match="max_granularity must be positive when lag > 0, got 0"):
        lag_writes_by(5, 0)
    with pytest.raises(ValueError, match="lag"):
        LagWritesBy(-1, 1)
    with pytest.raises(TypeError, match="ValidFrom.since"):
        ValidFrom(1.5)
    with pytest.raises(TypeError, match="Multiple policy 1"):
        Multiple(ValidFrom(1), 3)


def test_multiple_read_policy_in_selection():
    storage = {"s1": (10, 50)}
    flows = [Dataflow(Export.index("i", ValidFrom(30) & lag_writes_by(5, 5)), ["s1"])]
    assert select_as_ofs(flows, storage, 100).as_ofs == {"i": 30}
    flows = [Dataflow(Export.index("i", ValidFrom(48) & lag_writes_by(5, 5)), ["s1"])]
    assert select_as_ofs(flows, storage, 100).as_ofs == {"i": 45}


# ---------------------------------------------------------------------------------------------
# Edge cases beyond upstream's unit cases
# ---------------------------------------------------------------------------------------------


def test_preset_as_of_seals_on_conflict_and_hard_failure_is_recorded():
    storage = {"s1": (10, 20)}
    # A preset below the since: the hard lower fails, logged, sealed at the preset.
    flows = [Dataflow(Export.index("u1"), ["s1"], as_of=5)]
    r = select_as_ofs(flows, storage, 100)
    assert r.as_ofs == {"u1": 5}
    [f] = r.failures
    assert (f.collection, f.kind, f.bound, f.frontier, f.step) == (
        "u1", HARD, LOWER, 10, "upstream_storage"
    )
    assert (f.lower, f.upper, f.sealed_at) == (5, 5, 5)
    with pytest.raises(AsOfSelectionError, match="hard lower constraint 10 on 'u1'") as info:
        select_as_ofs(flows, storage, 100, strict=True)
    assert info.value.failure == f
    # A preset inside every constraint is kept (not sealed) ...
    r = select_as_ofs([Dataflow(Export.index("u1"), ["s1"], as_of=12)], storage, 100)
    assert r.as_ofs == {"u1": 12} and r.failures == ()
    # ... and a soft cap below it fails softly, keeping the preset.
    r = select_as_ofs([Dataflow(Export.index("u1"), ["s1"], as_of=12)], storage, 11)
    assert r.as_ofs == {"u1": 12}
    assert [(f.kind, f.step) for f in r.failures] == [(SOFT, "index_current_time")]


def test_preset_as_of_constrains_neighbours():
    storage = {"s1": (10, 20)}
    flows = [
        Dataflow(Export.index("a"), ["s1"]),
        Dataflow(Export.index("b"), compute_inputs=["a"], as_of=13),
        Dataflow(Export.index("c"), compute_inputs=["b"]),
    ]
    r = select_as_ofs(flows, storage, 100)
    # b's preset caps its input a (upstream) and raises its consumer c's lower (downstream).
    assert r.as_ofs == {"a": 13, "b": 13, "c": 19}
    assert r.failures == ()
    ex = r.explain("c").set_index("step")
    assert ex.loc["upstream_storage", "lower"] == 13
    # A preset empty as-of: every finite upper fails against it; the as-of stays empty.
    r = select_as_ofs([Dataflow(Export.index("z"), as_of=None)], {}, 5)
    assert r.as_ofs == {"z": None} and [f.kind for f in r.failures] == [SOFT]


def test_empty_frontiers():
    storage = {"s1": (10, None), "s2": (10, 30)}
    # A storage input with write [] gives no warmup cap; only current time bounds the index.
    r = select_as_ofs([Dataflow(Export.index("i"), ["s1"])], storage, 50)
    assert r.as_ofs == {"i": 50}
    assert r.explain("i").set_index("step").loc["warmup", "upper"] is None
    # ... and the meet with a finite write frontier still caps.
    assert select_as_ofs([Dataflow(Export.index("i"), ["s1", "s2"])], storage, 50).as_ofs == {
        "i": 29
    }
    # A constant collection (no inputs): no warmup cap; read policy from current time.
    flows = [
        Dataflow(Export.index("c1")),
        Dataflow(Export.index("c2", lag_writes_by(10, 10))),
        Dataflow(Export.materialized_view("m"), compute_inputs=["c1"]),
    ]
    r = select_as_ofs(flows, {"m": (0, 70)}, 42)
    assert r.as_ofs == {"c1": 42, "c2": 30, "m": 69}
    # An MV on constants only gets an empty as-of if its output allows it (write []) -> pruned.
    r = select_as_ofs(flows, {"m": (0, None)}, 42)
    assert r.as_ofs == {"c1": 42, "c2": 30, "m": None} and r.pruned == {"m"}


def test_step_back_saturates_and_empty_output_allows_read():
    # Write frontier 0 on an input: warmup cap step_back(0) = 0, not None.
    r = select_as_ofs([Dataflow(Export.index("i"), ["s"])], {"s": (0, 0)}, 9)
    assert r.as_ofs == {"i": 0} and r.failures == ()
    # An empty output (write <= read) allows as-of == read ...
    flows = [Dataflow(Export.materialized_view("m"), ["s"])]
    assert select_as_ofs(flows, {"s": (5, 40), "m": (12, 12)}, 100).as_ofs == {"m": 12}
    assert select_as_ofs(flows, {"s": (5, 40), "m": (12, 3)}, 100).as_ofs == {"m": 12}
    # ... while a non-empty one resumes strictly before its write frontier.
    assert select_as_ofs(flows, {"s": (5, 40), "m": (12, 13)}, 100).as_ofs == {"m": 12}
    assert select_as_ofs(flows, {"s": (0, 40), "m": (0, 1)}, 100).as_ofs == {"m": 0}
    # write 0 > read? impossible; write 0 == read 0 is empty -> as-of 0.
    assert select_as_ofs(flows, {"s": (0, 40), "m": (0, 0)}, 100).as_ofs == {"m": 0}


def test_current_time_below_hard_lower_is_soft():
    r = select_as_ofs([Dataflow(Export.index("i"), ["s"])], {"s": (50, 60)}, 10, strict=True)
    assert r.as_ofs == {"i": 50}
    assert [(f.kind, f.bound, f.frontier, f.sealed_at) for f in r.failures] == [
        (SOFT, UPPER, 10, 50)
    ]


def test_read_only_prunes_downstream_cone_including_storage_exports():
    storage = {"s1": (10, 20), "dropped": (None, 30), "m1": (10, 20), "ct": (10, 20)}
    flows = [
        Dataflow(Export.index("a"), ["dropped"]),
        Dataflow(Export.index("b"), ["s1"], ["a"]),
        Dataflow(Export.materialized_view("m1"), compute_inputs=["b"]),
        Dataflow(Export.continual_task("ct"), ["m1"]),  # reads m1 as storage: not in the cone
        Dataflow(Export.index("c"), ["s1"]),
        Dataflow([Export.index("d"), Export.materialized_view("e")], compute_inputs=["c", "b"]),
    ]
    storage["e"] = (10, 20)
    r = select_as_ofs(flows, storage, 15, read_only=True)
    assert r.as_ofs == {"a": None, "b": None, "m1": None, "ct": 19, "c": 15, "d": None, "e": None}
    assert r.pruned == {"a", "b", "m1", "d", "e"}
    ex = r.explain("m1").set_index("step")
    assert ex.loc["prune_dropped_inputs", "constraint"] == "pruned: upstream 'b' was pruned"
    assert r.explain("a").set_index("step").loc["prune_dropped_inputs", "constraint"] == (
        "pruned: storage input 'dropped' was dropped (read frontier None)"
    )
    # Outside read-only mode the empty since raises the lowers of the cone to the empty
    # frontier, and the storage exports in it fail their hard upper constraints.
    r = select_as_ofs(flows, storage, 15)
    assert r.pruned == frozenset()
    assert r.as_ofs == {"a": None, "b": None, "m1": None, "ct": 19, "c": 15, "d": None, "e": None}
    assert [(f.collection, f.kind, f.step) for f in r.hard_failures] == [
        ("e", HARD, "downstream_storage"),
        ("m1", HARD, "downstream_storage"),
    ]
    with pytest.raises(AsOfSelectionError):
        select_as_ofs(flows, storage, 15, strict=True)


def test_multi_export_dataflow_shares_bounds_and_first_export_rule():
    storage = {"s1": (10, 20), "m": (10, 16), "sealed": (10, None)}
    flows = [
        Dataflow([Export.index("i"), Export.materialized_view("m")], ["s1"]),
        Dataflow([Export.materialized_view("sealed"), Export.index("j")], ["s1"]),
    ]
    r = select_as_ofs(flows, storage, 100)
    assert r.as_ofs == {"i": 15, "m": 15, "sealed": None, "j": 19}
    # The dataflow's as-of is its first export's: the pruned sink makes it empty.
    assert r.dataflow_as_ofs == (15, None)
    assert r.pruned == {"sealed"}


def test_dataflow_without_exports():
    r = select_as_ofs([Dataflow((), ["s1"])], {"s1": (1, 2)}, 3)
    assert r.as_ofs == {} and r.dataflow_as_ofs == (None,)


def test_cycle_terminates():
    storage = {"s1": (10, 20), "s2": (12, 30)}
    flows = [
        Dataflow(Export.index("a"), ["s1"], ["b"]),
        Dataflow(Export.index("b"), ["s2"], ["a"]),
        Dataflow(Export.index("c"), compute_inputs=["b"]),
    ]
    r = select_as_ofs(flows, storage, 100)
    assert r.as_ofs == {"a": 19, "b": 19, "c": 19}
    assert r.as_ofs == oracle(flows, storage, 100)[0]


# ---------------------------------------------------------------------------------------------
# Errors: bad input raises before any bound moves
# ---------------------------------------------------------------------------------------------


def test_unknown_and_missing_ids():
    with pytest.raises(UnknownCollection, match="unknown collection 'u9'") as info:
        select_as_ofs([Dataflow(Export.index("u1"), compute_inputs=["u9"])], {}, 0)
    assert info.value.id == "u9" and isinstance(info.value, KeyError)
    with pytest.raises(MissingStorageFrontiers, match="'s1' .*storage input of dataflows\\[0\\]"):
        select_as_ofs([Dataflow(Export.index("u1"), ["s1"])], {}, 0)
    with pytest.raises(MissingStorageFrontiers, match="'m'.*materialized_view export"):
        select_as_ofs([Dataflow(Export.materialized_view("m"))], {}, 0)
    # raised even when a dataflow appears before the failing one would have hit a hard failure
    with pytest.raises(MissingStorageFrontiers):
        select_as_ofs(
            [Dataflow(Export.index("u0"), ["s0"], as_of=0), Dataflow(Export.index("u1"), ["x"])],
            {"s0": (5, 6)}, 0, strict=True,
        )
    with pytest.raises(UnknownCollection, match="explain"):
        select_as_ofs([], {}, 0).explain("nope")


def test_malformed_input():
    with pytest.raises(ValueError, match="export id 'u1' is exported by dataflows 0 and 1"):
        select_as_ofs([Dataflow(Export.index("u1")), Dataflow(Export.index("u1"))], {}, 0)
    with pytest.raises(ValueError, match="lists export id 'u1' twice"):
        Dataflow([Export.index("u1"), Export.materialized_view("u1")])
    with pytest.raises(ValueError, match="compute input 'm' .* is a materialized_view"):
        select_as_ofs(
            [Dataflow(Export.materialized_view("m")), Dataflow(Export.index("i"), (), ["m"])],
            {"m": (0, 1)}, 0,
        )
    with pytest.raises(ValueError, match="storage input 'i' .* is an index"):
        select_as_ofs([Dataflow(Export.index("i")), Dataflow(Export.index("j"), ["i"])], {}, 0)
    with pytest.raises(ValueError, match="index export 'i' has storage frontiers"):
        select_as_ofs([Dataflow(Export.index("i"))], {"i": (0, 1)}, 0)
    with pytest.raises(ValueError, match="current_time must be a time in \\[0, 2\\*\\*64-1\\], got -1"):
        select_as_ofs([], {}, -1)
    with pytest.raises(TypeError, match="current_time"):
        select_as_ofs([], {}, None)
    with pytest.raises(ValueError, match=r"storage\['s'\].write"):
        select_as_ofs([Dataflow(Export.index("i"), ["s"])], {"s": (0, 2**64)}, 0)
    with pytest.raises(TypeError, match=r"storage\['s'\] must be a \(read, write\) pair"):
        select_as_ofs([Dataflow(Export.index("i"), ["s"])], {"s": 5}, 0)
    with pytest.raises(TypeError, match="Dataflow.storage_inputs must be a sequence"):
        Dataflow(Export.index("i"), "s1")
    with pytest.raises(TypeError, match=r"Dataflow.compute_inputs\[0\]"):
        Dataflow(Export.index("i"), (), [1.5])
    with pytest.raises(TypeError, match="Dataflow.as_of"):
        Dataflow(Export.index("i"), as_of="5")
    with pytest.raises(ValueError, match="Export.kind must be one of"):
        Export("i", "view")
    with pytest.raises(TypeError, match="Export.id"):
        Export(True)
    with pytest.raises(TypeError, match="read_policy"):
        Export.index("i", 5)
    with pytest.raises(TypeError, match="dataflows must be an iterable of Dataflow"):
        select_as_ofs(Dataflow(Export.index("i")), {}, 0)
    with pytest.raises(TypeError, match=r"dataflows\[0\] must be a Dataflow"):
        select_as_ofs([("i",)], {}, 0)
    with pytest.raises(TypeError, match="storage must be a mapping"):
        select_as_ofs([], [("s", (0, 1))], 0)
    with pytest.raises(TypeError, match="read_only must be a bool"):
        select_as_ofs([], {}, 0, read_only=1)


def test_storage_frontiers_type_and_int_ids():
    flows = [Dataflow(Export.index(1), [100]), Dataflow(Export.materialized_view("m"), (), [1])]
    r = select_as_ofs(flows, {100: StorageFrontiers(3, 9), "m": [3, 7]}, 50)
    assert r.as_ofs == {1: 6, "m": 6}


# ---------------------------------------------------------------------------------------------
# explain()
# ---------------------------------------------------------------------------------------------


def test_explain_table():
    spec = {k: v for k, v in UPSTREAM_CASES["downstream_storage_constraints"].items()
            if k != "expected"}
    r = case(**spec)
    ex = r.explain()
    assert isinstance(ex, pd.DataFrame)
    assert list(ex.columns) == [
        "collection", "kind", "step", "lower", "upper", "sealed", "pruned", "moved",
        "constraint", "failure",
    ]
    steps = [s for s in STEPS if s != "prune_dropped_inputs"]
    assert r.steps == tuple(steps)
    assert len(ex) == 4 * len(steps)
    assert list(ex.loc[ex.collection == "u2", "step"]) == steps
    u2 = r.explain("u2").set_index("step")
    assert u2.loc["upstream_storage", "constraint"] == "storage input 's1' read frontier 10"
    assert u2.loc["downstream_storage", "upper"] == 12
    assert u2.loc["downstream_storage", "constraint"] == "upper bound of downstream 'u4'"
    assert bool(u2.loc["downstream_storage", "moved"]) and not bool(u2.loc["warmup", "moved"])
    u4 = r.explain("u4").set_index("step")
    assert u4.loc["downstream_storage", "constraint"] == (
        "storage export 'u4' frontiers (read, write) = (10, 13)"
    )
    assert u4.loc["initial", "upper"] is None and u4.loc["initial", "lower"] == 0
    # the final row of each collection is its as-of
    last = ex.groupby("collection").tail(1).set_index("collection")["upper"].to_dict()
    assert last == r.as_ofs
    assert ex["upper"].dtype == object
    assert "4 exports" in repr(r)


def test_explain_keeps_large_times_exact():
    big = 2**64 - 1
    r = select_as_ofs([Dataflow(Export.index("i"), ["s"])], {"s": (big - 5, None)}, big)
    assert r.as_ofs == {"i": big}
    assert r.explain("i")["upper"].iloc[-1] == big


# ---------------------------------------------------------------------------------------------
# The oracle: a literal transcription of the original (full sweeps, id order)
# ---------------------------------------------------------------------------------------------


def _key(i):
    return (0, i) if isinstance(i, int) else (1, i)


def oracle(dataflows, storage, now, read_only=False):
    """Returns (as_ofs per export, Counter of (dataflow position, step, kind) failures)."""
    colls = {}
    flow_of = {}
    for pos, d in enumerate(dataflows):
        b = [0, None, False] if d.as_of is UNSET else [d.as_of, d.as_of, False]
        for e in d.exports:
            colls[e.id] = {
                "si": list(d.storage_inputs), "ci": list(d.compute_inputs), "e": e, "b": b,
            }
            flow_of[id(b)] = pos
    storage = {k: tuple(v) for k, v in storage.items()}
    failures = Counter()
    step = ""

    def apply(cid, hard, is_lower, f):
        b = colls[cid]["b"]
        if b[2]:
            return False
        lo, up = b[0], b[1]
        if is_lower:
            if frontier_lt(up, f):
                b[0], b[2] = up, True
                failures[flow_of[id(b)], step, hard] += 1
                return frontier_lt(lo, up)
            if frontier_le(f, lo):
                return False
            b[0] = f
            return True
        if frontier_lt(f, lo):
            b[1], b[2] = lo, True
            failures[flow_of[id(b)], step, hard] += 1
            return frontier_lt(lo, up)
        if frontier_le(up, f):
            return False
        b[1] = f
        return True

    for cid in list(colls):
        if colls[cid]["e"].kind is not ExportKind.INDEX and storage[cid][1] is None:
            del colls[cid]
    if read_only:
        pruned = {c for c in colls if any(storage[s][0] is None for s in colls[c]["si"])}
        for c in pruned:
            del colls[c]
        while pruned:
            nxt = {c for c in colls if any(i in pruned for i in colls[c]["ci"])}
            for c in nxt:
                del colls[c]
            pruned = nxt
    order = sorted(colls, key=_key)

    def down_lower():
        changed = True
        while changed:
            changed = False
            for c in order:
                for i in colls[c]["ci"]:
                    changed |= apply(c, True, True, colls[i]["b"][0])

    def up_upper():
        changed = True
        while changed:
            changed = False
            for c in reversed(order):
                for i in colls[c]["ci"]:
                    changed |= apply(i, True, False, colls[c]["b"][1])

    step = "upstream_storage"
    for c in order:
        for s in colls[c]["si"]:
            apply(c, True, True, storage[s][0])
    down_lower()
    step = "downstream_storage"
    for c in order:
        if colls[c]["e"].kind is not ExportKind.INDEX:
            read, write = storage[c]
            apply(c, True, False, read if frontier_le(write, read) else step_back_frontier(write))
    up_upper()
    write = {c: meet(*(storage[s][1] for s in colls[c]["si"])) for c in order}
    changed = True
    while changed:
        changed = False
        for c in order:
            w = meet(write[c], *(write[i] for i in colls[c]["ci"]))
            changed |= w != write[c]
            write[c] = w
    step = "warmup"
    for c in order:
        apply(c, False, False, step_back_frontier(write[c]))
    up_upper()
    step = "index_read_policy"
    for c in order:
        e = colls[c]["e"]
        if e.kind is ExportKind.INDEX and e.read_policy is not None:
            apply(c, False, False, e.read_policy.frontier(now if write[c] is None else write[c]))
    up_upper()
    step = "index_current_time"
    for c in order:
        if colls[c]["e"].kind is ExportKind.INDEX:
            apply(c, False, False, now)
    up_upper()
    as_ofs = {
        e.id: colls[e.id]["b"][1] if e.id in colls else None
        for d in dataflows for e in d.exports
    }
    return as_ofs, failures


def oracle_from_case(storage, flows, current_time, policies=None, read_only=False):
    policies = policies or {}
    dataflows = [
        Dataflow(
            Export.materialized_view(e) if e in storage else Export.index(e, policies.get(e)),
            [i for i in ins if i in storage], [i for i in ins if i not in storage],
        )
        for e, ins in flows
    ]
    return oracle(dataflows, storage, current_time, read_only)


# ---------------------------------------------------------------------------------------------
# Property tests over random DAGs
# ---------------------------------------------------------------------------------------------

small_frontier = st.one_of(st.none(), st.integers(0, 25))
policies = st.one_of(
    st.none(),
    st.builds(ValidFrom, small_frontier),
    st.builds(LagWritesBy, st.integers(0, 8), st.integers(1, 4)),
    st.builds(lambda a, b: a & b, st.builds(ValidFrom, small_frontier),
              st.builds(LagWritesBy, st.integers(0, 8), st.integers(1, 4))),
)


@st.composite
def scenarios(draw, max_flows=8, presets=True):
    n = draw(st.integers(1, max_flows))
    names = draw(st.permutations(range(n)))  # id order unrelated to dependency order
    storage = {}
    sources = [f"s{i}" for i in range(draw(st.integers(1, 4)))]
    for s in sources:
        if draw(st.booleans()):
            read = draw(st.integers(0, 20))
            storage[s] = (read, read + draw(st.integers(0, 10)))
        else:
            storage[s] = (draw(small_frontier), draw(small_frontier))
    flows, index_ids, storage_ids = [], [], list(sources)
    for j in range(n):
        exports = []
        for x in range(draw(st.sampled_from([1, 1, 1, 2]))):
            eid = f"u{names[j]}" + ("" if x == 0 else "b")
            kind = draw(st.sampled_from(list(ExportKind)))
            exports.append(Export(eid, kind, draw(policies)))
        si = draw(st.lists(st.sampled_from(storage_ids), max_size=3, unique=True))
        ci = (
            draw(st.lists(st.sampled_from(index_ids), max_size=3, unique=True))
            if index_ids else []
        )
        as_of = draw(st.one_of(st.just(UNSET), small_frontier)) if presets and draw(
            st.integers(0, 5)) == 0 else UNSET
        flows.append(Dataflow(exports, si, ci, as_of))
        for e in exports:
            if e.kind is ExportKind.INDEX:
                index_ids.append(e.id)
            else:
                read = draw(st.integers(0, 25))
                write = draw(st.one_of(st.integers(0, 30), st.none()))
                storage[e.id] = (read, write)
                storage_ids.append(e.id)
    now = draw(st.integers(0, 30))
    read_only = draw(st.booleans())
    return flows, storage, now, read_only


def check_invariants(flows, storage, result):
    """as_of_selection's invariants after every step, read from the recorded history."""
    ex = result.explain()
    flow_of = {e.id: pos for pos, d in enumerate(flows) for e in d.exports}
    steps = list(result.steps)
    state = {
        (r.collection, r.step): (r.lower, r.upper, r.sealed, r.pruned)
        for r in ex.itertuples(index=False)
    }
    hard_steps = {f.step for f in result.hard_failures}
    failed_flows: dict = {}
    for f in result.failures:
        failed_flows.setdefault(flow_of[f.collection], steps.index(f.step))
    seen_hard = False
    for k, step in enumerate(steps):
        seen_hard |= step in hard_steps
        for pos, d in enumerate(flows):
            rows = [state[e.id, step] for e in d.exports]
            # (4) exports of one dataflow share one bounds object
            assert len({r[:3] for r in rows}) <= 1
            for e, (lo, up, sealed, pruned) in zip(d.exports, rows):
                # (2) lower <= upper; sealed <=> some failure so far; then lower == upper
                assert frontier_le(lo, up)
                assert sealed == (failed_flows.get(pos, len(steps)) <= k), (e.id, step)
                if sealed:
                    assert lo == up
                if k:
                    plo, pup, psealed, ppruned = state[e.id, steps[k - 1]]
                    # (3) monotone; sealed bounds never change
                    assert frontier_le(plo, lo) and frontier_le(up, pup), (e.id, step)
                    if psealed:
                        assert (lo, up, sealed) == (plo, pup, True)
                    if ppruned:  # (its bounds may still be shared with live exports)
                        assert pruned
        if seen_hard:
            continue
        # (1) and (2) on every compute edge between live dataflows, from the step that
        # establishes each (preset as-ofs may break them before that).
        for d in flows:
            for e in d.exports:
                lo_b, up_b, _, pruned_b = state[e.id, step]
                if pruned_b:
                    continue
                for i in d.compute_inputs:
                    lo_a, up_a, _, pruned_a = state[i, step]
                    assert not pruned_a  # pruning takes the whole downstream cone
                    if k >= steps.index("upstream_storage"):
                        assert frontier_le(lo_a, lo_b), (i, e.id, step)
                    if k >= steps.index("downstream_storage"):
                        assert frontier_le(up_a, up_b), (i, e.id, step)
    # (5) without hard failures the as-ofs are correct for inputs and outputs.
    if not result.hard_failures:
        for d in flows:
            for e in d.exports:
                if e.id in result.pruned:
                    continue
                a = result.as_ofs[e.id]
                for s in d.storage_inputs:
                    assert frontier_le(storage[s][0], a), (e.id, s)
                if e.kind is not ExportKind.INDEX:
                    read, write = storage[e.id]
                    if frontier_le(write, read):
                        assert frontier_le(a, read)
                    else:
                        assert frontier_lt(a, write)


def engine_failures(flows, result):
    flow_of = {e.id: pos for pos, d in enumerate(flows) for e in d.exports}
    return Counter(
        (flow_of[f.collection], f.step, f.kind is HARD) for f in result.failures
    )


def shuffled(flows, storage, rnd):
    flows = [
        Dataflow(d.exports, rnd.sample(d.storage_inputs, len(d.storage_inputs)),
                 rnd.sample(d.compute_inputs, len(d.compute_inputs)), d.as_of)
        for d in flows
    ]
    perm = rnd.sample(range(len(flows)), len(flows))
    storage = dict(rnd.sample(list(storage.items()), len(storage)))
    return [flows[p] for p in perm], storage, perm


PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY
@given(scenarios())
def test_matches_full_sweep_oracle_and_invariants(scenario):
    flows, storage, now, read_only = scenario
    r = select_as_ofs(flows, storage, now, read_only=read_only)
    want_as_ofs, want_failures = oracle(flows, storage, now, read_only)
    assert r.as_ofs == want_as_ofs
    assert engine_failures(flows, r) == want_failures
    assert r.dataflow_as_ofs == tuple(
        want_as_ofs[d.exports[0].id] if d.exports else None for d in flows
    )
    check_invariants(flows, storage, r)
    if r.hard_failures:
        with pytest.raises(AsOfSelectionError) as info:
            select_as_ofs(flows, storage, now, read_only=read_only, strict=True)
        assert info.value.failure == r.hard_failures[0]
    else:
        assert select_as_ofs(flows, storage, now, read_only=read_only, strict=True).as_ofs == (
            r.as_ofs
        )


@PROPERTY
@given(scenarios(), st.randoms(use_true_random=False))
def test_result_independent_of_id_order(scenario, rnd):
    flows, storage, now, read_only = scenario
    r = select_as_ofs(flows, storage, now, read_only=read_only)
    flows2, storage2, perm = shuffled(flows, storage, rnd)
    r2 = select_as_ofs(flows2, storage2, now, read_only=read_only)
    assert r2.as_ofs == r.as_ofs
    assert r2.failures == r.failures
    assert r2.pruned == r.pruned
    assert r2.dataflow_as_ofs == tuple(r.dataflow_as_ofs[p] for p in perm)
    pd.testing.assert_frame_equal(r2.explain(), r.explain())


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(max_flows=30), st.randoms(use_true_random=False))
def test_large_random_dags_slow(scenario, rnd):
    flows, storage, now, read_only = scenario
    r = select_as_ofs(flows, storage, now, read_only=read_only)
    want_as_ofs, want_failures = oracle(flows, storage, now, read_only)
    assert r.as_ofs == want_as_ofs
    assert engine_failures(flows, r) == want_failures
    check_invariants(flows, storage, r)
    flows2, storage2, _ = shuffled(flows, storage, rnd)
    assert select_as_ofs(flows2, storage2, now, read_only=read_only).failures == r.failures


def test_benchmark_generator_agrees_with_oracle():
    """The asv DAG shape, small: worklist and full sweep select the same as-ofs."""
    rng = random.Random(7)
    n = 60
    names = [f"u{i}" for i in rng.sample(range(n), n)]
    storage = {f"s{i}": (rng.randrange(0, 20), rng.randrange(15, 40)) for i in range(6)}
    flows, idx = [], []
    for j in range(n):
        kind = rng.choice([ExportKind.INDEX] * 3 + [ExportKind.MATERIALIZED_VIEW])
        if kind is not ExportKind.INDEX:
            storage[names[j]] = (rng.randrange(0, 20), rng.choice([None, rng.randrange(5, 40)]))
        pol = lag_writes_by(rng.randrange(1, 9), 3) if rng.random() < 0.3 else None
        flows.append(Dataflow(
            Export(names[j], kind, pol),
            rng.sample(sorted(k for k in storage if k.startswith("s")), rng.randrange(3)),
            rng.sample(idx, min(len(idx), rng.randrange(6))),
        ))
        if kind is ExportKind.INDEX:
            idx.append(names[j])
    r = select_as_ofs(flows, storage, 30)
    assert r.as_ofs == oracle(flows, storage, 30)[0]
    check_invariants(flows, storage, r)
