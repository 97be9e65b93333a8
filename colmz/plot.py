"""Pictures of colmz's structures (matplotlib, the optional ``plot`` extra).

Design
------
Each function takes the structure (or its result object) as its first argument, draws from
its *public* introspection only -- :meth:`colmz.Correction.stats`, :meth:`colmz.Spine.layers`
and :meth:`colmz.Spine.stats`, :meth:`colmz.AsOfSelection.origins`, the per-tick arrays of
``colmz.spark.SinkStats``, :meth:`colmz.Arrangement.meta` -- and returns the matplotlib ``Axes`` it drew on, so a caller can
restyle, annotate or save it. Pass ``ax=`` to draw into an existing figure.

Every drawn element that stands for a piece of the structure carries a ``gid`` naming it
(``"bucket"``, ``"chain"``, ``"layer"``, ``"edge:a->b"``, ``"as_of:u1"``, ...), so what a
picture shows can be checked element by element rather than by eye.

matplotlib is imported only when a function is called: ``import colmz.plot`` works without it,
and a call without it raises an ``ImportError`` that names the extra to install.

Time axes
~~~~~~~~~
The correction buffer's bucket chain tiles every time from the buffer's boundary to
``2**64``, in buckets whose widths grow geometrically. A linear time axis would show one
bucket; the correction plot uses a log-like scale centred on the buffer's earliest frontier
``o``: ``x -> sign(x - o) * log2(1 + |x - o|)``, so each doubling of distance from ``o`` gets
the same width and the tick labels remain real times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # matplotlib is optional: only for the annotations
    from matplotlib.axes import Axes

    from colmz.arrangement import Arrangement
    from colmz.as_of import AsOfSelection
    from colmz.correction import Correction
    from colmz.spine import Spine

__all__ = [
    "CAUSE_COLORS",
    "EDGE_IDLE",
    "arrangement",
    "as_of",
    "correction",
    "node_face",
    "require_matplotlib",
    "sink",
    "spine",
    "spine_history",
]

#: Colour per :attr:`colmz.as_of.AsOfOrigin.cause` (the kind of constraint that set an as-of).
CAUSE_COLORS: dict[str | None, str] = {
    "preset": "#7f7f7f",
    "storage_input": "#1f77b4",
    "upstream_lower": "#17becf",
    "downstream_lower": "#17becf",
    "storage_export": "#d62728",
    "downstream_upper": "#ff7f0e",
    "upstream_upper": "#ff7f0e",
    "warmup": "#9467bd",
    "read_policy": "#8c564b",
    "current_time": "#2ca02c",
    "pruned_sealed": "#c7c7c7",
    "pruned_dropped": "#c7c7c7",
    "pruned_upstream": "#c7c7c7",
    None: "#bcbd22",
}
#: Colour of edges no constraint travelled along.
EDGE_IDLE = "#c8c8c8"


def node_face(cause: str | None) -> tuple[float, float, float]:
    """The (opaque, lightened) face colour of a node whose as-of was set by ``cause``.

    >>> node_face("current_time") != node_face("warmup")
    True
    """
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(CAUSE_COLORS.get(cause, "#ffffff"))
    return (0.4 * r + 0.6, 0.4 * g + 0.6, 0.4 * b + 0.6)


def require_matplotlib():
    """``matplotlib.pyplot``, or an ``ImportError`` naming the ``plot`` extra.

    >>> require_matplotlib().__name__
    'matplotlib.pyplot'
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(
            "colmz.plot needs matplotlib, which is not installed: "
            "pip install 'colmz[plot]' (or pip install 'matplotlib>=3.8')"
        ) from e
    return plt


def _axes(ax, figsize):
    plt = require_matplotlib()
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _fmt_time(t: float | int | None) -> str:
    if t is None:
        return "[]"
    t = int(round(t))
    return str(t) if abs(t) < 10**6 else f"{t:.2e}"


def _fmt_frontier(f) -> str:
    # a frontier: an int time, or None for the empty frontier (closed)
    return "[] (closed)" if f is None else str(f)


# ------------------------------------------------------------------------------ correction


def correction(c: Correction, ax: Axes | None = None) -> Axes:
    """The correction buffer's bucket chain over time.

    Each bucket ``[offset, offset + 2**bits)`` is a rectangle on the strip at the bottom
    (``gid="bucket"``; empty buckets light, occupied ones dark); above it, the bucket's
    chains are stacked bars of their update counts (``gid="chain"``), oldest (largest) chain
    at the bottom, as the legend says. The axis is logarithmic from the boundary, where each
    bucket is twice as wide as the one before it, so every bucket draws about as wide: the
    strip labels buckets with their widths (``2^k``, ``gid="width"``) so the doubling shows.
    Vertical lines mark the ``since`` (``gid="since"``) and the ``boundary``, the largest
    read upper so far (``gid="boundary"``); when they are equal, one line carries both names.
    The title counts what the buffer holds outside the bucket chain -- staged updates and
    updates below the boundary (``pending_low``), the same figures as
    :func:`colmz.display.correction_html` -- and the last read's result separately.

    Parameters
    ----------
    c : colmz.Correction
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import colmz, colmz.plot
    >>> c = colmz.Correction()
    >>> c.insert(colmz.Updates({"k": [1, 2]}, time=[3, 100], diff=[1, 1]))
    >>> _ = list(c.updates_before(1))  # a read sorts the staged updates into buckets
    >>> ax = colmz.plot.correction(c)
    >>> sum(p.get_gid() == "bucket" for p in ax.patches) == len(c.stats()["buckets"])
    True
    """
    ax = _axes(ax, (10, 4))
    from matplotlib.patches import Rectangle

    s = c.stats()
    buckets = s["buckets"]
    since, boundary = s["since"], s["boundary"]
    marks = [f for f in (since, boundary) if f is not None]
    origin = min(marks) if marks else 0

    def fwd(x):
        d = np.asarray(x, dtype=np.float64) - float(origin)
        return np.sign(d) * np.log2(1.0 + np.abs(d))

    def inv(y):
        y = np.asarray(y, dtype=np.float64)
        return float(origin) + np.sign(y) * (np.exp2(np.abs(y)) - 1.0)

    ax.set_xscale("function", functions=(fwd, inv))
    # Ticks at the origin plus powers of two: each lands on a bucket boundary when the
    # origin is the boundary (buckets are aligned to their width).
    ks = [0, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    ticks = [float(origin)] + [float(origin) + 2.0**k for k in ks[1:] if origin + 2**k <= 2**64]
    ax.set_xticks(ticks, [_fmt_time(t) for t in ticks])

    top = max([sum(b["chain_counts"]) for b in buckets] + [1])
    depth = max([b["chains"] for b in buckets] + [0])
    cmap = require_matplotlib().get_cmap("viridis")
    colors = [cmap(i / max(depth - 1, 1)) for i in range(max(depth, 1))]
    strip = ax.get_xaxis_transform()  # x in data, y in axes fraction
    # Width labels on the strip: every bucket while they fit, else every few (the doubling
    # is what they show, so the first bucket of each new width is always labelled).
    step = max(1, len(buckets) // 16)
    for i, b in enumerate(buckets):
        lo, width = b["offset"], 2**b["bits"]
        if i % step == 0:
            ax.text(lo + width / 2, 0.035, f"2^{b['bits']}",
                    transform=strip, gid="width", ha="center", va="center", fontsize=6,
                    color="white" if b["chains"] > 0 else "#555555")
        occupied = b["chains"] > 0
        ax.add_patch(Rectangle(
            (lo, 0.005), width, 0.06, transform=strip, gid="bucket",
            facecolor="#4c72b0" if occupied else ("#dde3ee" if i % 2 else "#eef1f7"),
            edgecolor="white", linewidth=0.8,
        ))
        bottom = 0
        for j, n in enumerate(b["chain_counts"]):
            ax.add_patch(Rectangle(
                (lo, bottom), width, n, gid="chain", facecolor=colors[j], edgecolor="black",
                linewidth=0.4,
                label=f"chain {j}" + (" (oldest, stacked at the bottom)" if j == 0 else " (stacked above)"),
            ))
            bottom += n
    if since is not None and since == boundary:
        ax.axvline(since, color="#d62728", linewidth=1.5, gid="since",
                   label=f"since = boundary (largest read upper) = {since}")
    else:
        if since is not None:
            ax.axvline(since, color="#d62728", linewidth=1.5, gid="since", label=f"since = {since}")
        if boundary is not None:
            ax.axvline(boundary, color="black", linestyle="--", linewidth=1.2, gid="boundary",
                       label=f"boundary (largest read upper) = {boundary}")
    right = 2.0**64
    left = float(origin) - 1.0 if origin > 0 else float(origin)
    ax.set_xlim(left, right)
    ax.set_ylim(-0.13 * top, 1.08 * top)
    ax.set_xlabel("time (log scale from the boundary; the strip: bucket ranges, each labelled "
                  "with its width 2^k -- twice the one before)")
    ax.set_ylabel("updates per chain, stacked per bucket")
    occupied = sum(1 for b in buckets if b["chains"])
    below = sum(s["pending_low"])
    ax.set_title(
        f"Correction: {s['updates']} updates, {occupied} of {len(buckets)} buckets occupied; "
        f"staged {s['stage']}, below the boundary {below} (last read returned {s['emitted']})",
        fontsize=10,
    )
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    if seen:
        ax.legend(seen.values(), seen.keys(), fontsize=8, loc="upper right")
    return ax


# ------------------------------------------------------------------------------ spine


def spine(s: Spine, ax: Axes | None = None) -> Axes:
    """The spine's layers: one bar per occupied layer with the updates it holds.

    Bars (``gid="layer"``) stand at their layer index, height the layer's updates (both
    inputs of a merge); blue for a single batch, orange hatched for two batches merging.
    A tick (``gid="capacity"``) marks the layer's capacity, ``2**level`` updates for a
    single batch and ``2**(level + 1)`` for the output of a merge. A merging layer is
    labelled with the fuel it may still need -- at most the updates of its inputs, since a
    merge writes at most that many (the exact remainder of a merge in progress is not
    public). Pending batches (waiting for the physical frontier) stand at ``-1``
    (``gid="pending"``). The y axis is logarithmic.

    Parameters
    ----------
    s : colmz.Spine
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import colmz, colmz.plot
    >>> s = colmz.Spine()
    >>> for t in range(5):
    ...     s.insert(colmz.Updates({"k": [t]}, time=[t], diff=[1]), lower=t, upper=t + 1)
    >>> ax = colmz.plot.spine(s)
    >>> sorted(int(p.get_x() + p.get_width() / 2) for p in ax.patches if p.get_gid() == "layer")
    [0, 2]
    """
    ax = _axes(ax, (8, 4))
    layers = s.layers()
    occupied = [(lvl, cnt, n) for lvl, cnt, n in layers if cnt > 0]
    ymax = 1
    for lvl, cnt, n in occupied:
        merging = cnt == 2
        (bar,) = ax.bar(
            lvl, max(n, 0.5), width=0.7, log=True,
            color="#ff7f0e" if merging else "#4c72b0",
            hatch="//" if merging else None, edgecolor="black", linewidth=0.5,
            label="merging (2 batches)" if merging else "single batch",
        )
        bar.set_gid("layer")
        cap = 2 ** (lvl + 1) if merging else 2**lvl
        ax.hlines(cap, lvl - 0.4, lvl + 0.4, colors="black", linewidth=1.5,
                  label="capacity", gid="capacity")
        text = f"{n}" + (f" (fuel ≤ {n})" if merging else "")
        ax.annotate(text, (lvl, max(n, 0.5)), xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8, gid="layer_label", rotation=90)
        ymax = max(ymax, cap, n)
    pending = s.pending
    if pending:
        n = sum(len(b) for b in pending)
        (bar,) = ax.bar(-1, max(n, 0.5), width=0.7, log=True, color="#bbbbbb",
                        edgecolor="black", linewidth=0.5, label="pending")
        bar.set_gid("pending")
        ax.annotate(f"{n} in {len(pending)} batches", (-1, max(n, 0.5)), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8,
                    rotation=90)
        ymax = max(ymax, n)
    levels = [lvl for lvl, _, _ in layers]
    ticks = ([-1] if pending else []) + sorted(levels)
    ax.set_xticks(ticks, ["pending" if t == -1 else str(t) for t in ticks])
    ax.set_ylim(0.5, ymax * 2000)  # room above the bars for their (vertical) labels
    ax.set_xlabel("layer (vacant layers have no bar)")
    ax.set_ylabel("updates")
    st = s.stats()
    ax.set_title(
        f"Spine: upper {_fmt_frontier(s.upper)}, {st['records']} updates in {st['batches']} "
        f"batches; effort {s.effort}; {st['merge_copies']} merge copies so far", fontsize=10,
    )
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    if seen:
        ax.legend(seen.values(), seen.keys(), fontsize=8, loc="upper left")
    return ax


def _work_per_insert(stats: Sequence[dict]) -> np.ndarray:
    copies = np.array([int(st["merge_copies"]) for st in stats], dtype=np.int64)
    return np.diff(copies, prepend=0)


def spine_history(
    stats: Sequence[dict], eager: Sequence[dict] | None = None, ax: Axes | None = None,
) -> Axes:
    """Merge work per insert over a run, beside eager merging's.

    ``stats`` is :meth:`colmz.Spine.stats` taken after each insert (the first one included);
    the work of insert ``i`` is the growth of ``merge_copies`` (updates written by merges)
    from the previous entry. ``eager`` is the same for a spine that merges at once -- e.g.
    ``Spine(effort=2**30)`` fed the same batches. Lines carry ``gid="fueled"`` and
    ``gid="eager"``; dotted lines (``gid="fueled_max"``, ``gid="eager_max"``) mark each
    run's largest single insert. The y axis is symmetric-log so quiet inserts (0) show.

    Parameters
    ----------
    stats : sequence of dict
    eager : sequence of dict, optional
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import colmz, colmz.plot
    >>> s, history = colmz.Spine(), []
    >>> for t in range(8):
    ...     s.insert(colmz.Updates({"k": [t]}, time=[t], diff=[1]), lower=t, upper=t + 1)
    ...     history.append(s.stats())
    >>> ax = colmz.plot.spine_history(history)
    >>> [line.get_gid() for line in ax.lines]
    ['fueled', 'fueled_max']
    """
    ax = _axes(ax, (9, 4))
    series = [("fueled", stats, "#4c72b0")]
    if eager is not None:
        series.append(("eager", eager, "#d62728"))
    for name, st, color in series:
        if not len(st):
            raise ValueError(f"{name} stats must hold at least one entry, got {len(st)}")
        for i, entry in enumerate(st):
            if not isinstance(entry, dict) or "merge_copies" not in entry:
                raise TypeError(
                    f"{name} stats[{i}] must be a Spine.stats() dict (with 'merge_copies'), "
                    f"got {entry!r}"
                )
        work = _work_per_insert(st)
        x = np.arange(1, len(work) + 1)
        total, peak = int(work.sum()), int(work.max())
        ax.plot(x, work, drawstyle="steps-mid", color=color, linewidth=1, gid=name,
                label=f"{name}: total {total}, largest insert {peak}")
        ax.axhline(peak, color=color, linestyle=":", linewidth=1, gid=f"{name}_max")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("insert")
    ax.set_ylabel("updates written by merges")
    ax.set_title("Merge work per insert", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return ax


# ------------------------------------------------------------------------------ as-of


def _graph(selection: AsOfSelection):
    """Nodes (one per dataflow, one per storage collection no dataflow exports) and edges."""
    flows = selection.dataflows
    owner: dict[Any, int] = {}
    for i, d in enumerate(flows):
        for e in d.exports:
            owner[e.id] = i
    nodes: list[tuple[str, Any]] = [("flow", i) for i in range(len(flows))]
    index: dict[tuple[str, Any], int] = {key: k for k, key in enumerate(nodes)}
    edges: list[tuple[int, int, Any, str]] = []  # (from, to, collection id carried, kind)
    for i, d in enumerate(flows):
        for sid in dict.fromkeys(d.storage_inputs):
            if sid in owner:
                src = index[("flow", owner[sid])]
            else:
                key = ("storage", sid)
                if key not in index:
                    index[key] = len(nodes)
                    nodes.append(key)
                src = index[key]
            edges.append((src, index[("flow", i)], sid, "storage"))
        for cid in dict.fromkeys(d.compute_inputs):
            if cid in owner and owner[cid] != i:
                edges.append((index[("flow", owner[cid])], index[("flow", i)], cid, "compute"))
    return nodes, edges


def _depths(n: int, edges) -> list[int]:
    # Longest-path depth by Kahn's algorithm. On a cycle no node becomes ready: the waiting
    # node with the fewest unplaced inputs is placed anyway (one column past its placed
    # inputs), which breaks the cycle and lets what lies downstream of it follow.
    ins: list[list[int]] = [[] for _ in range(n)]
    outs: list[list[int]] = [[] for _ in range(n)]
    for a, b, _, _ in edges:
        ins[b].append(a)
        outs[a].append(b)
    indeg = [len(x) for x in ins]
    depth = [0] * n
    placed = [False] * n
    ready = [v for v in range(n) if indeg[v] == 0]
    left = n
    while left:
        if not ready:
            ready.append(min((v for v in range(n) if not placed[v]), key=lambda v: (indeg[v], v)))
        v = ready.pop()
        if placed[v]:
            continue
        placed[v] = True
        left -= 1
        for w in outs[v]:
            if placed[w]:
                continue
            depth[w] = max(depth[w], depth[v] + 1)
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return depth


def as_of(selection: AsOfSelection, ax: Axes | None = None) -> Axes:
    """:meth:`colmz.AsOfSelection.explain` as a picture: the dependency graph with each
    export's as-of and bounds, coloured by the constraint that set it.

    Storage collections no dataflow exports sit in the leftmost column; each dataflow is one
    node, placed one column right of its deepest input (a layered layout by topological
    depth). A node's label (``gid="as_of:<export id>"`` per export) reads
    ``id: as_of [lower, upper]``; its box is coloured by
    :data:`CAUSE_COLORS` of :attr:`colmz.as_of.AsOfOrigin.cause`, with a thick red border for
    a hard failure and a dashed one for a soft failure (the bounds collapsed onto the lower
    bound). An edge (``gid="edge:<from>-><to>"``) takes the colour of the constraint
    that travelled along it -- a storage input's read frontier, a lower flowing downstream,
    an upper flowing upstream -- and stays grey otherwise; solid for compute edges (imported
    indexes), dashed for storage edges.

    Parameters
    ----------
    selection : colmz.AsOfSelection
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import colmz.plot
    >>> from colmz.as_of import Dataflow, Export, select_as_ofs
    >>> r = select_as_ofs([Dataflow(Export.index("i"), ["s"])], {"s": (10, 20)}, 15)
    >>> ax = colmz.plot.as_of(r)
    >>> [t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("as_of:")]
    ['i: 15 [10, 15]']
    """
    require_matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    origins = selection.origins()
    nodes, edges = _graph(selection)
    flows = selection.dataflows
    depth = _depths(len(nodes), edges)
    storage = selection.storage

    def name(v: int) -> str:
        kind, ref = nodes[v]
        if kind == "storage":
            return str(ref)
        ids = flows[ref].export_ids
        return ", ".join(map(str, ids)) if ids else f"dataflow {ref}"

    columns: dict[int, list[int]] = {}
    for v in range(len(nodes)):
        columns.setdefault(depth[v], []).append(v)
    pos: dict[int, tuple[float, float]] = {}
    for d, vs in columns.items():
        vs.sort(key=lambda v: (nodes[v][0] != "storage", name(v)))
        for j, v in enumerate(vs):
            pos[v] = (float(d), -(j - (len(vs) - 1) / 2.0))
    height = max((len(vs) for vs in columns.values()), default=1)
    width = max(columns, default=0) + 1
    ax = _axes(ax, (max(6.0, 3.2 * width), max(3.0, 1.3 * height + 1)))

    # Which edge carried the constraint behind each export's as-of: from the collection the
    # constraint came from (its node) into the export's node, or out to it for constraints
    # that flowed upstream.
    node_of: dict[Any, int] = {}
    for v, (kind, ref) in enumerate(nodes):
        for cid in ([ref] if kind == "storage" else flows[ref].export_ids):
            node_of[cid] = v
    edge_set = {(a, b) for a, b, _, _ in edges}
    carrier: dict[tuple[int, int], str] = {}
    for v, (kind, ref) in enumerate(nodes):
        if kind != "flow":
            continue
        for e in flows[ref].exports:
            o = origins[e.id]
            u = node_of.get(o.source)
            if u is None or u == v:
                continue
            key = (u, v) if o.cause in ("storage_input", "upstream_lower", "upstream_upper") \
                else (v, u)
            if key in edge_set:
                carrier[key] = o.cause

    used: set[str | None] = set()
    box: dict[int, Any] = {}  # node -> the text whose box its edges attach to
    for v, (kind, ref) in enumerate(nodes):
        x, y = pos[v]
        if kind == "storage":
            read, write = storage.get(ref, (None, None))
            box[v] = ax.text(
                x, y, f"{ref}\nread {_fmt_time(read)}, write {_fmt_time(write)}",
                ha="center", va="center", fontsize=8, gid=f"storage:{ref}", zorder=3,
                bbox=dict(boxstyle="round", facecolor="#f2f2f2", edgecolor="#888888"))
            continue
        exports = flows[ref].exports
        if not exports:
            box[v] = ax.text(x, y, name(v), ha="center", va="center", fontsize=8, zorder=3,
                             bbox=dict(boxstyle="round", facecolor="white"))
            continue
        for i, e in enumerate(exports):
            o = origins[e.id]
            used.add(o.cause)
            hard = o.failure == "hard"
            soft = o.failure == "soft"
            label = f"{e.id}: {_fmt_time(o.as_of)} [{_fmt_time(o.lower)}, {_fmt_time(o.upper)}]"
            if o.as_of is None and e.id in selection.pruned:
                label = f"{e.id}: pruned"
            t = ax.text(
                x, y - 0.22 * (i - (len(exports) - 1) / 2.0), label, ha="center", va="center",
                fontsize=8, gid=f"as_of:{e.id}", zorder=3,
                bbox=dict(boxstyle="round", facecolor=node_face(o.cause),
                          edgecolor="#d62728" if hard else "#444444",
                          linewidth=2.5 if hard else 0.8, linestyle="--" if soft else "-"),
            )
            box.setdefault(v, t)

    for a, b, _, kind in edges:
        cause = carrier.get((a, b))
        color = CAUSE_COLORS.get(cause, EDGE_IDLE) if cause else EDGE_IDLE
        # Edges that skip columns bend, so they do not run through the nodes between.
        bend = 0.12 if abs(depth[b] - depth[a]) > 1 else 0.0
        arrow = FancyArrowPatch(
            pos[a], pos[b], arrowstyle="-|>", mutation_scale=14, shrinkA=2, shrinkB=2,
            patchA=box[a].get_bbox_patch(), patchB=box[b].get_bbox_patch(),
            connectionstyle=f"arc3,rad={bend}",
            color=color, linewidth=2.2 if cause else 1.0,
            linestyle="-" if kind == "compute" else "--",
            # above the boxes: a text positions its box when drawn, and the arrow is clipped
            # to the boxes, so the boxes must be drawn first
            gid=f"edge:{name(a)}->{name(b)}", zorder=5 if cause else 4,
        )
        arrow.colmz_cause = cause  # the constraint the colour stands for (None: idle)
        ax.add_patch(arrow)

    for cause in carrier.values():
        used.add(cause)
    ax.set_xlim(-0.6, width - 0.4)
    ax.set_ylim(-(height / 2.0) - 0.2, height / 2.0 + 0.2)
    ax.set_xticks(range(width), [f"depth {d}" for d in range(width)])
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    handles = [Line2D([], [], color=CAUSE_COLORS[c], linewidth=6, alpha=0.6,
                      label=str(c) if c else "unconstrained")
               for c in CAUSE_COLORS if c in used]
    if handles:
        ax.legend(handles=handles, title="set by", fontsize=7, title_fontsize=8,
                  loc="upper left", bbox_to_anchor=(1.0, 1.0))
    hard = len(selection.hard_failures)
    ax.set_title(
        f"As-of selection at current time {selection.current_time}: {len(selection.as_ofs)} "
        f"exports, {len(selection.failures)} failed constraints ({hard} hard)", fontsize=10,
    )
    return ax


# ------------------------------------------------------------------------------ sink


def sink(stats: Any, ticks: Sequence[int] | None = None, ax: Axes | None = None):
    """Corrections written and correction-buffer size per tick of a Spark sink run.

    ``stats`` is a ``colmz.spark.SinkStats`` after its action ran (or any object with the
    array ``written_per_tick`` and either ``buffer_per_tick`` or ``largest_buffer``). Bars
    (``gid="written"``) on the left axis count the corrections written at each tick; on a
    twin right axis the line (``gid="buffer"``) is the updates all key buckets' buffers held
    after each tick's read -- or, when only the largest buffer is known (the sink drains all
    ticks of a bucket in one ``Correction.drain_stepwise`` call, so it has no per-tick
    figure), a dashed level at that size. ``ticks`` puts tick times on the x axis.

    Returns
    -------
    (matplotlib.axes.Axes, matplotlib.axes.Axes)
        The written axis and the buffer axis (its twin).

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import types, numpy as np, colmz.plot
    >>> st = types.SimpleNamespace(written_per_tick=np.array([5, 0, 2]),
    ...                            buffer_per_tick=np.array([40, 38, 30]))
    >>> ax, ax_buffer = colmz.plot.sink(st)
    >>> [float(p.get_height()) for p in ax.patches if p.get_gid() == "written"]
    [5.0, 0.0, 2.0]
    """
    require_matplotlib()
    written = np.asarray(stats.written_per_tick, dtype=np.int64)
    per_tick = getattr(stats, "buffer_per_tick", None)
    if per_tick is None:
        buffer = np.full(len(written), int(stats.largest_buffer), dtype=np.int64)
    else:
        buffer = np.asarray(per_tick, dtype=np.int64)
    if len(written) != len(buffer):
        raise ValueError(
            f"stats: written_per_tick has {len(written)} ticks but buffer_per_tick {len(buffer)}"
        )
    if ticks is None:
        x = np.arange(len(written))
        xlabel = "tick"
    else:
        x = np.asarray(list(ticks), dtype=np.float64)
        if len(x) != len(written):
            raise ValueError(f"ticks has {len(x)} entries but stats hold {len(written)} ticks")
        xlabel = "tick time"
    ax = _axes(ax, (10, 4))
    step = float(np.min(np.diff(x))) if len(x) > 1 else 1.0
    bars = ax.bar(x, written.astype(np.float64), width=0.8 * step, color="#4c72b0",
                  label=f"written (total {int(written.sum())})")
    for b in bars:
        b.set_gid("written")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("corrections written", color="#4c72b0")
    right = ax.twinx()
    right.plot(x, buffer, color="#d62728", linewidth=1.2, gid="buffer",
               linestyle="-" if per_tick is not None else "--",
               label=f"buffer (largest {int(buffer.max()) if len(buffer) else 0})")
    right.set_ylabel("updates in the correction buffers", color="#d62728")
    right.set_ylim(bottom=0)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = right.get_legend_handles_labels()
    right.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper right")
    ax.set_title(f"Sink: {len(written)} ticks", fontsize=10)
    return ax, right


# ------------------------------------------------------------------------------ arrangement


def arrangement(arr: Arrangement, ax: Axes | None = None) -> Axes:
    """An arrangement's trace batches on a time axis by level, its unsealed part, seal and since.

    Each trace batch is a rectangle from its ``lower`` to its ``upper`` on the row of its
    level (``gid="trace_batch"``), labelled with its updates and parts; the rows go up with
    the level, so the big, old, merged batches stand above the small recent ones. The unsealed
    batches -- appended but not yet drained into the trace -- are hatched rectangles over the
    times they hold, ``[ts_lower, ts_upper]``, on a row of their own below level 0
    (``gid="unsealed"``). Vertical lines mark the since (``gid="since"``: reads before it
    are no longer possible) and the seal (``gid="seal"``: times before it are final); each
    line's label is ``"since = N"`` / ``"seal = N"``. A seal of the empty frontier (closed for
    good) draws no seal line and says so in the title. It reads only :meth:`Arrangement.meta`.

    Parameters
    ----------
    arr : colmz.Arrangement
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import colmz, colmz.plot
    >>> a = colmz.Arrangement.open("mem://plot-doc")
    >>> for t in range(4):
    ...     a.write(colmz.Updates({"k": [t]}, time=[t], diff=[1])); a.seal(t + 1)
    >>> _ = a.maintain()
    >>> ax = colmz.plot.arrangement(a)
    >>> sum(p.get_gid() == "trace_batch" for p in ax.patches) == len(a.meta()["trace_batches"])
    True
    """
    ax = _axes(ax, (10, 3.5))
    from matplotlib.patches import Rectangle

    meta = arr.meta()
    trace, unsealed = meta["trace_batches"], meta["unsealed_batches"]
    seal, since = meta["seal"], meta["since"]
    # the time range: every batch, the since and the seal, with a margin on the right
    ends = [since, *(b["desc"][0] for b in trace), *(b["ts_lower"] for b in unsealed)]
    tops = [since + 1, *(b["desc"][1] for b in trace if b["desc"][1] is not None),
            *(b["ts_upper"] + 1 for b in unsealed)]
    if seal is not None:
        tops.append(seal)
    lo, hi = min(ends), max(tops)
    right = hi + max(1, (hi - lo) // 20)
    levels = sorted({b["level"] for b in trace})
    row = {lvl: i for i, lvl in enumerate(levels)}  # one row per occupied level
    cmap = require_matplotlib().get_cmap("viridis")
    biggest = max([b["len"] or 0 for b in trace] + [1])
    for b in trace:
        lower, upper, _ = b["desc"]
        upper = right if upper is None else upper
        y = row[b["level"]]
        shade = np.log1p(b["len"] or 0) / np.log1p(biggest)
        ax.add_patch(Rectangle((lower, y - 0.38), upper - lower, 0.76, gid="trace_batch",
                               facecolor=cmap(0.15 + 0.7 * shade), edgecolor="black", linewidth=0.6))
        ax.annotate(f"{b['len']}\n{len(b['keys'])} part{'s' if len(b['keys']) != 1 else ''}",
                    ((lower + upper) / 2, y), ha="center", va="center", fontsize=7,
                    color="white" if shade < 0.55 else "black", gid="trace_label")
    for b in unsealed:
        ax.add_patch(Rectangle((b["ts_lower"], -1 - 0.38), b["ts_upper"] + 1 - b["ts_lower"], 0.76,
                               gid="unsealed", facecolor="#f2c48d", edgecolor="#b5651d",
                               hatch="//", linewidth=0.6, alpha=0.8))
        ax.annotate(f"{b['len']}", (b["ts_lower"], -1), xytext=(2, 0), textcoords="offset points",
                    ha="left", va="center", fontsize=7, gid="unsealed_label")
    ax.axvline(since, color="#d62728", linewidth=1.5, gid="since", label=f"since = {since}")
    if seal is not None:
        ax.axvline(seal, color="black", linestyle="--", linewidth=1.2, gid="seal", label=f"seal = {seal}")
    ax.set_xlim(lo - max(1, (hi - lo) // 50), right)
    ax.set_ylim(-1.6, max(len(levels), 1) - 0.4)
    ax.set_yticks([-1, *range(len(levels))], ["unsealed", *(f"level {lvl}" for lvl in levels)])
    ax.set_xlabel("time (a trace batch spans [lower, upper); unsealed batches the times they hold)")
    st = arr.stats()
    ax.set_title(
        f"Arrangement: {len(trace)} trace batches, {len(unsealed)} unsealed; "
        f"{st['stored_updates']} updates in {st['parts']} parts; seal "
        f"{'[] (closed for good)' if seal is None else seal}, since {since}", fontsize=10,
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax
