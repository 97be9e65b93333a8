"""Tests for ``colmz.plot``: what each picture draws, element by element (Agg backend).

Every structure-bearing artist carries a ``gid``; the tests count and measure them against the
structure's public introspection (``stats()``, ``layers()``, ``select_as_ofs``'s result).
"""

from __future__ import annotations

import importlib
import sys
import types

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import colmz  # noqa: E402
import colmz.plot as cplot  # noqa: E402
from colmz.as_of import Dataflow, Export, ExportKind, select_as_ofs  # noqa: E402

FEW = settings(max_examples=15, deadline=None)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def gids(artists, gid):
    return [a for a in artists if a.get_gid() == gid]


# ------------------------------------------------------------------------------ the extra


def test_missing_matplotlib_names_the_extra(monkeypatch):
    c = colmz.Correction()
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(ImportError, match=r"colmz\[plot\]"):
        cplot.require_matplotlib()
    with pytest.raises(ImportError, match=r"colmz\[plot\]"):
        cplot.correction(c)
    with pytest.raises(ImportError, match=r"colmz\[plot\]"):
        cplot.spine(colmz.Spine())
    with pytest.raises(ImportError, match=r"colmz\[plot\]"):
        cplot.as_of(select_as_ofs([], {}, 0))
    st_ = types.SimpleNamespace(written_per_tick=[1], buffer_per_tick=[1])
    with pytest.raises(ImportError, match=r"colmz\[plot\]"):
        cplot.sink(st_)


def test_module_imports_without_matplotlib(monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.delitem(sys.modules, "colmz.plot")
    # the re-import rebinds the package attributes too: have them restored afterwards
    monkeypatch.setattr(colmz, "plot", cplot)
    monkeypatch.setattr(colmz, "display", getattr(colmz, "display", None), raising=False)
    monkeypatch.delitem(sys.modules, "colmz.display", raising=False)
    fresh = importlib.import_module("colmz.plot")
    assert fresh is not cplot and callable(fresh.correction)
    importlib.import_module("colmz.display")
    with pytest.raises(ImportError, match="pip install 'colmz\\[plot\\]'"):
        fresh.spine(colmz.Spine())


# ------------------------------------------------------------------------------ correction


def check_correction_drawing(c, ax):
    s = c.stats()
    buckets = s["buckets"]
    rects = gids(ax.patches, "bucket")
    assert len(rects) == len(buckets)
    assert [(int(r.get_x()), int(r.get_width())) for r in rects] == [
        (b["offset"], 2 ** b["bits"]) for b in buckets
    ]
    chains = gids(ax.patches, "chain")
    assert len(chains) == sum(b["chains"] for b in buckets)
    expected = [(b["offset"], n) for b in buckets for n in b["chain_counts"]]
    assert [(int(r.get_x()), int(r.get_height())) for r in chains] == expected
    # chains of one bucket are stacked: each starts where the previous one ends
    for b in buckets:
        mine = [r for r in chains if int(r.get_x()) == b["offset"]]
        assert [int(r.get_y()) for r in mine] == list(np.cumsum([0, *b["chain_counts"]])[:-1])
    if s["since"] is not None and s["since"] == s["boundary"]:
        # one line, both names (two lines at one place hid each other)
        lines = gids(ax.lines, "since")
        assert len(lines) == 1 and lines[0].get_xdata()[0] == s["since"]
        assert "boundary" in lines[0].get_label() and gids(ax.lines, "boundary") == []
        return
    for name in ("since", "boundary"):
        lines = gids(ax.lines, name)
        if s[name] is None:
            assert lines == []
        else:
            assert len(lines) == 1 and lines[0].get_xdata()[0] == s[name]


def temporal_filter(n=500, seed=0):
    """Rows valid in ``[start, end)``: an insert at start, a retraction far in the future."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 100, n)
    start = rng.integers(0, 50, n)
    end = start + rng.integers(1, 10**7, n)
    return colmz.Updates(
        {"k": np.concatenate([k, k])},
        time=np.concatenate([start, end]).astype(np.uint64),
        diff=np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)]),
    )


def test_correction_temporal_filter_buckets_and_marks():
    c = colmz.Correction()
    c.insert(temporal_filter())
    for t in range(0, 40, 8):
        out = colmz.concat(list(c.updates_before(t + 1)))
        c.insert_negated(out)
        c.advance_since(t + 1)
    ax = cplot.correction(c)
    check_correction_drawing(c, ax)
    s = c.stats()
    assert sum(b["chains"] > 0 for b in s["buckets"]) > 5  # far-future retractions spread out
    assert f"{s['updates']} updates" in ax.get_title()
    assert ax.get_xscale() == "function"


def test_correction_fresh_and_closed_buffers():
    c = colmz.Correction()
    ax = cplot.correction(c)
    check_correction_drawing(c, ax)
    assert gids(ax.patches, "chain") == []
    c.insert(colmz.Updates({"k": [1, 2]}, time=[5, 9], diff=[1, 1]))
    list(c.updates_before(None))  # a read at the empty frontier: no bucket chain remains
    ax = cplot.correction(c)
    check_correction_drawing(c, ax)
    assert gids(ax.patches, "bucket") == [] and c.stats()["boundary"] is None


def test_correction_draws_into_given_axes_and_keeps_structure():
    c = colmz.Correction()
    c.insert(colmz.Updates({"k": [1, 2, 3]}, time=[3, 70, 4000], diff=[1, 1, -1]))
    list(c.updates_before(2))
    before = c.stats()
    fig, (a, b) = plt.subplots(1, 2)
    assert cplot.correction(c, ax=b) is b
    assert len(a.patches) == 0 and gids(b.patches, "bucket")
    assert c.stats() == before


@FEW
@given(st.lists(
    st.tuples(st.sampled_from(["insert", "negated", "read", "since"]),
              st.lists(st.integers(0, 2**20), min_size=1, max_size=20),
              st.integers(0, 2**12)),
    max_size=8,
))
def test_correction_drawing_matches_stats(ops):
    c = colmz.Correction()
    for op, times, x in ops:
        u = colmz.Updates({"k": [t % 7 for t in times]}, time=times, diff=[1] * len(times))
        if op == "insert":
            c.insert(u)
        elif op == "negated":
            c.insert_negated(u)
        elif op == "read":
            if c.since is not None and c.since < x:
                list(c.updates_before(x))
        elif c.since is not None and x >= c.since:
            c.advance_since(x)
    ax = cplot.correction(c)
    check_correction_drawing(c, ax)
    plt.close(ax.figure)


# ------------------------------------------------------------------------------ spine


def batches(n_batches, size, seed=0):
    rng = np.random.default_rng(seed)
    for t in range(n_batches):
        yield t, colmz.Updates({"k": rng.integers(0, 10**6, size)}, time=np.full(size, t, np.uint64),
                               diff=np.ones(size, np.int64))


def check_spine_drawing(s, ax):
    layers = s.layers()
    occupied = {lvl: (cnt, n) for lvl, cnt, n in layers if cnt}
    bars = gids(ax.patches, "layer")
    assert len(bars) == len(occupied)
    drawn = {round(b.get_x() + b.get_width() / 2): b for b in bars}
    assert set(drawn) == set(occupied)
    for lvl, (cnt, n) in occupied.items():
        assert drawn[lvl].get_height() == max(n, 0.5)
        assert (drawn[lvl].get_hatch() == "//") == (cnt == 2)
    caps = gids(ax.collections, "capacity")
    assert sorted(seg[0][1] for c in caps for seg in c.get_segments()) == sorted(
        2 ** (lvl + 1) if cnt == 2 else 2**lvl for lvl, (cnt, _) in occupied.items()
    )
    labels = gids(ax.texts, "layer_label")
    assert sorted(int(t.get_text().split(" ")[0]) for t in labels) == sorted(
        n for _, n in occupied.values()
    )
    # merging layers say how much fuel they may still need: at most their inputs
    assert sorted(t.get_text() for t in labels if "fuel" in t.get_text()) == sorted(
        f"{n} (fuel ≤ {n})" for cnt, n in occupied.values() if cnt == 2
    )


def test_spine_layers_bars_and_merges_in_progress():
    s = colmz.Spine(effort=1)
    for t, u in batches(150, 64):
        s.insert(u, t, t + 1)
    assert any(cnt == 2 for _, cnt, _ in s.layers())  # a merge is in progress
    ax = cplot.spine(s)
    check_spine_drawing(s, ax)
    assert gids(ax.patches, "pending") == []
    assert f"{len(s)} updates" in ax.get_title()


def test_spine_pending_batches_stand_apart():
    s = colmz.Spine(auto_physical=False)
    for t, u in batches(5, 10):
        s.insert(u, t, t + 1)
    assert len(s.pending) == 5
    ax = cplot.spine(s)
    check_spine_drawing(s, ax)
    (bar,) = gids(ax.patches, "pending")
    assert bar.get_height() == sum(len(b) for b in s.pending) and bar.get_x() < -0.5


@FEW
@given(st.lists(st.integers(0, 300), min_size=0, max_size=25), st.integers(1, 3))
def test_spine_drawing_matches_layers(sizes, effort):
    s = colmz.Spine(effort=effort)
    for t, n in enumerate(sizes):
        s.insert(colmz.Updates({"k": np.arange(n) % 50}, time=np.full(n, t, np.uint64),
                               diff=np.ones(n, np.int64)), t, t + 1)
    ax = cplot.spine(s)
    check_spine_drawing(s, ax)
    plt.close(ax.figure)


def test_spine_history_against_eager():
    fueled, eager = colmz.Spine(effort=1), colmz.Spine(effort=2**30)
    hf, he = [], []
    for t, u in batches(200, 50):
        fueled.insert(u, t, t + 1)
        eager.insert(u, t, t + 1)
        hf.append(fueled.stats())
        he.append(eager.stats())
    ax = cplot.spine_history(hf, eager=he)
    (lf,) = gids(ax.lines, "fueled")
    (le,) = gids(ax.lines, "eager")
    wf = np.diff([0] + [h["merge_copies"] for h in hf])
    we = np.diff([0] + [h["merge_copies"] for h in he])
    assert list(lf.get_ydata()) == list(wf) and list(le.get_ydata()) == list(we)
    assert list(lf.get_xdata()) == list(range(1, 201))
    (mf,) = gids(ax.lines, "fueled_max")
    (me,) = gids(ax.lines, "eager_max")
    assert mf.get_ydata()[0] == wf.max() == hf[-1]["max_insert_work"]
    assert me.get_ydata()[0] == we.max()
    assert wf.max() < we.max()  # fuel spreads the big merges that eager merging does at once
    assert "largest insert" in lf.get_label()


def test_spine_history_rejects_bad_input():
    with pytest.raises(ValueError, match="fueled stats must hold at least one entry"):
        cplot.spine_history([])
    with pytest.raises(TypeError, match=r"eager stats\[1\] must be a Spine.stats\(\) dict"):
        cplot.spine_history([colmz.Spine().stats()], eager=[colmz.Spine().stats(), {"x": 1}])


# ------------------------------------------------------------------------------ as-of


UPSTREAM = dict(
    storage={"s1": (10, 20), "s2": (20, 30), "u4": (10, 12), "u5": (10, 18)},
    flows=[
        Dataflow(Export.index("u1"), ["s1"]),
        Dataflow(Export.index("u2"), ["s2"]),
        Dataflow(Export.index("u3"), ["s1"]),
        Dataflow(Export.materialized_view("u4"), compute_inputs=["u3"]),
        Dataflow(Export.materialized_view("u5"), ["s1"]),
        Dataflow(Export.index("u6")),
    ],
)


def labelled_as_ofs(ax):
    out = {}
    for t in ax.texts:
        gid = t.get_gid() or ""
        if gid.startswith("as_of:"):
            cid, rest = t.get_text().split(": ", 1)
            assert cid == gid[len("as_of:"):]
            out[cid] = None if rest == "pruned" else rest.split(" ")[0]
    return out


def expected_labels(result):
    return {
        cid: None if cid in result.pruned else ("[]" if a is None else str(a))
        for cid, a in result.as_ofs.items()
    }


def test_as_of_graph_labels_and_constraint_colours():
    r = select_as_ofs(UPSTREAM["flows"], UPSTREAM["storage"], current_time=15)
    ax = cplot.as_of(r)
    assert labelled_as_ofs(ax) == expected_labels(r) == {
        "u1": "15", "u2": "20", "u3": "11", "u4": "11", "u5": "17", "u6": "15"}
    edges = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("edge:")}
    assert set(edges) == {"edge:s1->u1", "edge:s2->u2", "edge:s1->u3", "edge:u3->u4",
                          "edge:s1->u5"}
    # u3's as-of is the upper bound of its downstream materialized view u4: that edge carries it
    assert edges["edge:u3->u4"].colmz_cause == "downstream_upper"
    assert edges["edge:u3->u4"].get_edgecolor() == matplotlib.colors.to_rgba(
        cplot.CAUSE_COLORS["downstream_upper"])
    # u2's soft current-time cap failed: its as-of is its storage input's read frontier
    assert edges["edge:s2->u2"].colmz_cause == "storage_input"
    # u1, u5 got theirs from the current time and the MV's own frontiers: no edge carries them
    for g in ("edge:s1->u1", "edge:s1->u5", "edge:s1->u3"):
        assert edges[g].colmz_cause is None
        assert edges[g].get_edgecolor() == matplotlib.colors.to_rgba(cplot.EDGE_IDLE)
    # compute edges solid, storage edges dashed
    assert edges["edge:u3->u4"].get_linestyle() == "-"
    assert edges["edge:s1->u1"].get_linestyle() == "--"
    # node boxes take the colour of what set them
    origins = r.origins()
    for t in ax.texts:
        gid = t.get_gid() or ""
        if gid.startswith("as_of:"):
            cause = origins[gid[6:]].cause
            fc = t.get_bbox_patch().get_facecolor()
            assert fc[:3] == pytest.approx(cplot.node_face(cause))
    # layered by topological depth: sources left of u3, u3 left of u4
    pos = {t.get_gid()[6:]: t.get_position() for t in ax.texts
           if (t.get_gid() or "").startswith("as_of:")}
    spos = {t.get_gid()[8:]: t.get_position() for t in ax.texts
            if (t.get_gid() or "").startswith("storage:")}
    assert spos["s1"][0] < pos["u3"][0] < pos["u4"][0]
    assert set(spos) == {"s1", "s2"}


def test_as_of_materialized_view_as_storage_input_and_pruning():
    flows = [
        Dataflow(Export.materialized_view("mv"), ["s"]),
        Dataflow(Export.index("i"), ["mv"]),  # reads the MV's storage collection
        Dataflow(Export.materialized_view("gone"), ["s"]),
    ]
    r = select_as_ofs(flows, {"s": (5, 9), "mv": (5, 8), "gone": (3, None)}, current_time=30)
    ax = cplot.as_of(r)
    assert "gone" in r.pruned
    assert labelled_as_ofs(ax) == expected_labels(r)
    edges = {p.get_gid() for p in ax.patches if (p.get_gid() or "").startswith("edge:")}
    assert edges == {"edge:s->mv", "edge:mv->i", "edge:s->gone"}  # no separate 'mv' source
    assert [t.get_text() for t in ax.texts if t.get_gid() == "as_of:gone"] == ["gone: pruned"]


@st.composite
def deployments(draw):
    n = draw(st.integers(1, 7))
    storage = {f"s{i}": (r, r + draw(st.integers(0, 9)))
               for i, r in enumerate(draw(st.lists(st.integers(0, 20), min_size=1, max_size=3)))}
    flows, indexes, stored = [], [], list(storage)
    for j in range(n):
        kind = draw(st.sampled_from(list(ExportKind)))
        eid = f"u{j}"
        si = draw(st.lists(st.sampled_from(stored), max_size=2, unique=True))
        ci = draw(st.lists(st.sampled_from(indexes), max_size=2, unique=True)) if indexes else []
        flows.append(Dataflow(Export(eid, kind), si, ci))
        if kind is ExportKind.INDEX:
            indexes.append(eid)
        else:
            storage[eid] = (draw(st.integers(0, 25)), draw(st.one_of(st.integers(0, 30), st.none())))
            stored.append(eid)
    return flows, storage, draw(st.integers(0, 30))


@FEW
@given(deployments())
def test_as_of_labels_equal_select_as_ofs(dep):
    flows, storage, now = dep
    r = select_as_ofs(flows, storage, now)
    ax = cplot.as_of(r)
    assert labelled_as_ofs(ax) == expected_labels(r)
    # one arrow per distinct (input, dataflow) dependency
    n_edges = sum(len(set(d.storage_inputs)) + len(set(d.compute_inputs)) for d in flows)
    assert len([p for p in ax.patches if (p.get_gid() or "").startswith("edge:")]) == n_edges
    # a coloured edge always leads into (or, for uppers flowing upstream, out of) the export
    # whose origin names the other end
    origins = r.origins()
    for p in ax.patches:
        gid = p.get_gid() or ""
        if gid.startswith("edge:") and p.colmz_cause is not None:
            a, b = gid[5:].split("->")
            assert (origins.get(b) and origins[b].source == a) or (
                origins.get(a) and origins[a].source == b)
    plt.close(ax.figure)


# ------------------------------------------------------------------------------ sink


def test_sink_bars_and_buffer_line():
    st_ = types.SimpleNamespace(written_per_tick=np.array([4, 0, 0, 7, 1]),
                                buffer_per_tick=np.array([100, 96, 96, 80, 79]))
    ax, right = cplot.sink(st_, ticks=[10, 20, 30, 40, 50])
    bars = gids(ax.patches, "written")
    assert [b.get_height() for b in bars] == [4, 0, 0, 7, 1]
    assert [b.get_x() + b.get_width() / 2 for b in bars] == [10, 20, 30, 40, 50]
    (line,) = gids(right.lines, "buffer")
    assert list(line.get_ydata()) == [100, 96, 96, 80, 79]
    assert list(line.get_xdata()) == [10, 20, 30, 40, 50]
    assert right.get_shared_x_axes().joined(ax, right)
    legend = [t.get_text() for t in right.get_legend().get_texts()]
    assert legend == ["written (total 12)", "buffer (largest 100)"]


def test_sink_rejects_mismatched_input():
    bad = types.SimpleNamespace(written_per_tick=np.array([1, 2]), buffer_per_tick=np.array([1]))
    with pytest.raises(ValueError, match="written_per_tick has 2 ticks but buffer_per_tick 1"):
        cplot.sink(bad)
    ok = types.SimpleNamespace(written_per_tick=np.array([1, 2]), buffer_per_tick=np.array([1, 1]))
    with pytest.raises(ValueError, match="ticks has 3 entries but stats hold 2 ticks"):
        cplot.sink(ok, ticks=[1, 2, 3])


def test_as_of_method_wiring():
    r = select_as_ofs(UPSTREAM["flows"], UPSTREAM["storage"], current_time=15)
    ax = r.plot()
    assert labelled_as_ofs(ax) == expected_labels(r)


def test_as_of_cycle_multi_export_and_exportless_dataflow():
    storage = {"s1": (10, 20), "s2": (12, 30)}
    flows = [
        Dataflow(Export.index("a"), ["s1"], ["b"]),
        Dataflow([Export.index("b"), Export.index("b2")], ["s2"], ["a"]),
        Dataflow(Export.index("c"), compute_inputs=["b2"]),
        Dataflow((), ["s1"]),
    ]
    r = select_as_ofs(flows, storage, 100)
    ax = cplot.as_of(r)
    assert labelled_as_ofs(ax) == expected_labels(r) == {"a": "19", "b": "19", "b2": "19",
                                                         "c": "19"}
    edges = {p.get_gid() for p in ax.patches if (p.get_gid() or "").startswith("edge:")}
    assert edges == {"edge:s1->a", "edge:s2->b, b2", "edge:b, b2->a", "edge:a->b, b2",
                     "edge:b, b2->c", "edge:s1->dataflow 3"}
    x = {t.get_gid()[6:]: t.get_position()[0] for t in ax.texts
         if (t.get_gid() or "").startswith("as_of:")}
    # the two exports of one dataflow share its node; the cycle a <-> b is broken at a, and
    # c, downstream of the cycle, still comes after it
    assert x["b"] == x["b2"] and 0 < x["a"] < x["b"] < x["c"]


def test_structures_plot_and_display_themselves():
    import matplotlib

    matplotlib.use("Agg")
    import colmz

    c = colmz.Correction()
    c.insert(colmz.Updates({"k": [1, 2]}, time=[0, 50], diff=[1, 1]))
    list(c.updates_before(1))
    assert c.plot() is not None and "Correction" in c._repr_html_()
    s = colmz.Spine()
    s.insert(colmz.Updates({"k": [1]}, time=[0], diff=[1]), 0, 1)
    assert s.plot() is not None and "<table" in s._repr_html_()


def test_sink_plot_with_only_the_largest_buffer():
    import types

    import matplotlib

    matplotlib.use("Agg")
    import numpy as np

    import colmz.plot

    st = types.SimpleNamespace(written_per_tick=np.array([3, 0, 1, 4]), largest_buffer=17)
    ax, right = colmz.plot.sink(st)
    assert [float(p.get_height()) for p in ax.patches if p.get_gid() == "written"] == [3.0, 0.0, 1.0, 4.0]
    (line,) = [ln for ln in right.get_lines() if ln.get_gid() == "buffer"]
    assert list(line.get_ydata()) == [17, 17, 17, 17] and line.get_linestyle() == "--"


# ------------------------------------------------------------------------------ arrangement


def check_arrangement_drawing(a, ax):
    meta = a.meta()
    rects = gids(ax.patches, "trace_batch")
    assert len(rects) == len(meta["trace_batches"])
    levels = sorted({b["level"] for b in meta["trace_batches"]})
    right = ax.get_xlim()[1]
    for r, b in zip(rects, meta["trace_batches"]):
        lower, upper, _ = b["desc"]
        assert r.get_x() == lower
        assert r.get_x() + r.get_width() == (right if upper is None else upper)
        assert round(r.get_y() + r.get_height() / 2) == levels.index(b["level"])  # its level's row
    labels = [t.get_text() for t in gids(ax.texts, "trace_label")]
    assert [int(t.split("\n")[0]) for t in labels] == [b["len"] for b in meta["trace_batches"]]
    unsealed = gids(ax.patches, "unsealed")
    assert [(r.get_x(), r.get_x() + r.get_width()) for r in unsealed] == [
        (b["ts_lower"], b["ts_upper"] + 1) for b in meta["unsealed_batches"]]
    assert all(round(r.get_y() + r.get_height() / 2) == -1 for r in unsealed)
    (since,) = gids(ax.get_lines(), "since")
    assert since.get_label() == f"since = {a.since()}" and since.get_xdata()[0] == a.since()
    seal = gids(ax.get_lines(), "seal")
    if a.get_seal() is None:
        assert seal == [] and "closed for good" in ax.get_title()
    else:
        assert [s.get_label() for s in seal] == [f"seal = {a.get_seal()}"]
        assert seal[0].get_xdata()[0] == a.get_seal()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["unsealed", *(f"level {lv}" for lv in levels)]


def levelled_arrangement(url="mem://plot-levels"):
    a = colmz.Arrangement.open(url)
    for t in range(24):
        a.write(colmz.Updates({"k": [t % 5, t]}, time=[t, t], diff=[1, 1]))
        a.seal(t + 1)
        if t % 3 == 2:
            a.maintain()
    a.write(colmz.Updates({"k": [1, 2]}, time=[24, 25], diff=[1, 1]))
    a.seal(26)
    a.maintain(fuel=1)  # drains a small level-0 batch; its merge barely starts
    a.write(colmz.Updates({"k": [7, 8]}, time=[30, 33], diff=[1, -1]))  # unsealed, after the seal
    a.advance_since(10)
    return a


def test_arrangement_batches_levels_seal_and_since():
    a = levelled_arrangement()
    before = a.meta()
    assert len({b["level"] for b in before["trace_batches"]}) >= 2  # several rows to draw
    ax = cplot.arrangement(a)
    check_arrangement_drawing(a, ax)
    assert len(gids(ax.patches, "unsealed")) == 1
    assert a.meta() == before  # drawing changes nothing
    # the method draws into a given axes
    fig, own = plt.subplots()
    assert a.plot(ax=own) is own
    check_arrangement_drawing(a, own)


def test_arrangement_empty_and_closed():
    a = colmz.Arrangement.open("mem://plot-empty")
    ax = cplot.arrangement(a)
    check_arrangement_drawing(a, ax)
    assert gids(ax.patches, "trace_batch") == []
    a.write(colmz.Updates({"k": [1, 2]}, time=[0, 4], diff=[1, 1]))
    a.seal(None)
    a.maintain()
    ax = cplot.arrangement(a)
    check_arrangement_drawing(a, ax)
    assert any(b.desc.upper is None for b in a.trace_batches)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.booleans(), st.integers(0, 3)), min_size=1, max_size=12))
def test_arrangement_drawing_matches_meta(steps):
    a = colmz.Arrangement.open("mem://plot-hypothesis-" + str(abs(hash(tuple(steps)))))
    t = 0
    for advance, maintain, fuel in steps:
        a.write(colmz.Updates({"k": list(range(advance))}, time=[t] * advance, diff=[1] * advance))
        t += advance
        a.seal(t)
        if maintain:
            a.maintain(fuel=None if fuel == 0 else fuel)
        if fuel == 3:
            a.advance_since(t // 2)
    check_arrangement_drawing(a, cplot.arrangement(a))
    plt.close("all")


def test_correction_figure_agrees_with_the_summary_and_shows_the_doubling():
    """The notebook's figure: since = boundary drawn once with both names; the strip labels
    bucket widths (the doubling a log axis hides); the title's 'below the boundary' is the
    buffer's pending_low, as in the HTML summary, with the last read's result apart; the
    legend says chains are stacked."""
    c = colmz.Correction()
    c.insert(colmz.Updates({"k": np.arange(200)}, time=np.arange(200) * 7 % 500, diff=np.ones(200, np.int64)))
    batch = colmz.concat(list(c.updates_before(40)))
    c.insert_negated(batch)
    c.advance_since(40)
    s = c.stats()
    assert s["since"] == s["boundary"] == 40 and s["emitted"] > 0
    ax = colmz.plot.correction(c)
    lines = [ln for ln in ax.get_lines() if ln.get_gid() in ("since", "boundary")]
    assert len(lines) == 1 and "since = boundary" in lines[0].get_label()
    widths = [t.get_text() for t in ax.texts if t.get_gid() == "width"]
    bits = [b["bits"] for b in s["buckets"]]
    assert widths and widths[0] == f"2^{bits[0]}" and len(set(widths)) > 1
    assert f"below the boundary {sum(s['pending_low'])} (last read returned {s['emitted']})" in ax.get_title()
    assert any("stacked" in t.get_text() for t in ax.get_legend().get_texts())
