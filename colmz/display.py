"""HTML summaries of colmz's structures for notebooks (``_repr_html_`` bodies).

Design
------
Each function takes the structure as its first argument and returns a compact HTML fragment:
a caption line, a summary table of the numbers that explain the structure's shape, and a
small detail table (the first rows of a batch, the occupied buckets, the layers, the
exports). They read only public introspection (``stats()``, ``layers()``, ``origins()``,
``schema``, ``slice``) and never change the structure. Every value that reaches the page goes
through :func:`html.escape`, so data such as ``"<script>"`` shows as text.

The classes' ``_repr_html_`` methods delegate here, so the HTML can be changed without
touching the structures; plain ``repr`` stays one line (or a short head for ``Updates``).

Frontiers print as their time, or ``[]`` for the empty frontier (nothing more will come).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from colmz.as_of import AsOfSelection
    from colmz.catalog import Catalog
    from colmz.continual import ContinualTask
    from colmz.correction import Correction
    from colmz.spine import Spine
    from colmz.updates import Updates

__all__ = ["as_of_html", "catalog_html", "continual_task_html", "correction_html", "spine_html", "updates_html"]

_STYLE = "border-collapse:collapse;font-size:0.9em"
_CELL = "padding:1px 6px;text-align:left"


def _e(v: Any) -> str:
    return html.escape(str(v))


def _frontier(f) -> str:
    return "[]" if f is None else str(f)


def _table(header: Sequence[str] | None, rows: Iterable[Sequence[Any]], cls: str) -> str:
    head = ""
    if header:
        head = "<tr>" + "".join(f'<th style="{_CELL}">{_e(h)}</th>' for h in header) + "</tr>"
    body = "".join(
        "<tr>" + "".join(f'<td style="{_CELL}">{_e(v)}</td>' for v in r) + "</tr>" for r in rows
    )
    return f'<table class="{cls}" style="{_STYLE}">{head}{body}</table>'


def _caption(title: str, text: str) -> str:
    return f"<p><b>{_e(title)}</b> {_e(text)}</p>"


def updates_html(u: Updates, rows: int = 10) -> str:
    """A head table of an :class:`colmz.Updates` batch, with its schema and row count.

    Parameters
    ----------
    u : colmz.Updates
    rows : int
        Rows to show (the first ones; the batch's order).

    >>> import colmz
    >>> h = updates_html(colmz.Updates({"k": ["<a>"]}, time=[1], diff=[1]))
    >>> "1 update" in h and "&lt;a&gt;" in h and "string" in h
    True
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise ValueError(f"rows must be a non-negative int, got {rows!r}")
    n = len(u)
    schema = [(s.name, str(s.type)) for s in u.schema] + [("time", "uint64"), ("diff", "int64")]
    names = [name for name, _ in schema]
    # strings and bytes as repr, so "" and " " and None stay distinguishable
    head = [
        [repr(v) if isinstance(v, str | bytes) else v for v in r]
        for r in u.slice(0, min(rows, n)).to_pylist()
    ]
    more = f"<p>… {n - rows} more</p>" if n > rows else ""  # numbers only: nothing to escape
    types = ", ".join(f"{name}: {t}" for name, t in schema)
    return (
        '<div class="colmz-updates">'
        + _caption("Updates", f"{n} update{'s' if n != 1 else ''} — {types}")
        + _table(names, head, "colmz-head")
        + more
        + "</div>"
    )


def correction_html(c: Correction) -> str:
    """A summary of a :class:`colmz.Correction` from its ``stats()``.

    Shows the update count, ``since`` and ``boundary`` (the largest read upper), what is
    staged and below the boundary, chains, chunks, bytes and work counters, then one row per
    *occupied* bucket: its time range, chains and their counts.

    >>> import colmz
    >>> c = colmz.Correction()
    >>> n = 100
    >>> c.insert(colmz.Updates({"k": range(2 * n)}, time=[3] * n + [100] * n, diff=[1] * (2 * n)))
    >>> _ = list(c.updates_before(1))  # a read routes the staged updates into buckets
    >>> h = correction_html(c)
    >>> "since" in h and "[2, 4)" in h and "[64, 128)" in h
    True
    """
    s = c.stats()
    buckets = s["buckets"]
    occupied = [b for b in buckets if b["chains"]]
    summary = [
        ("updates", s["updates"]),
        ("since", _frontier(s["since"])),
        ("boundary (largest read upper)", _frontier(s["boundary"])),
        ("staged", s["stage"]),
        ("below the boundary (pending)", sum(s["pending_low"])),
        ("last read's result (emitted)", s["emitted"]),
        ("buckets occupied / total", f"{len(occupied)} / {len(buckets)}"),
        ("chains", s["chains"]),
        ("chunks", s["chunks"]),
        ("bytes", s["bytes"]),
        ("work", ", ".join(f"{k} {v}" for k, v in s["work"].items())),
    ]
    detail = [
        (f"[{b['offset']}, {b['offset'] + 2 ** b['bits']})", b["bits"], sum(b["chain_counts"]),
         ", ".join(map(str, b["chain_counts"])))
        for b in occupied
    ]
    return (
        '<div class="colmz-correction">'
        + _caption("Correction", f"{s['updates']} updates")
        + _table(None, summary, "colmz-summary")
        + (_table(["bucket", "bits", "updates", "chain counts"], detail, "colmz-buckets")
           if detail else "")
        + "</div>"
    )


def spine_html(s: Spine) -> str:
    """A summary of a :class:`colmz.Spine`: frontiers, sizes, work and one row per layer.

    >>> import colmz
    >>> s = colmz.Spine()
    >>> s.insert(colmz.Updates({"k": [1, 2, 3]}, time=[0, 1, 2], diff=[1, 1, 1]), 0, 3)
    >>> h = spine_html(s)
    >>> "single" in h and "upper" in h
    True
    """
    st = s.stats()
    summary = [
        ("upper", _frontier(s.upper)),
        ("logical compaction", _frontier(s.get_logical_compaction())),
        ("physical compaction", _frontier(s.get_physical_compaction())),
        ("effort", s.effort),
        ("updates", st["records"]),
        ("batches", st["batches"]),
        ("pending batches", len(s.pending)),
        ("merges started / completed", f"{st['merges_started']} / {st['merges_completed']}"),
        ("merge copies (per inserted update)",
         f"{st['merge_copies']} ({st['copies_per_update']:.2f})"),
        ("largest insert's merge work", st["max_insert_work"]),
    ]
    state = {0: "vacant", 1: "single", 2: "merging"}
    layers = [
        (lvl, state[cnt], n, 2 ** (lvl + 1) if cnt == 2 else 2**lvl) for lvl, cnt, n in s.layers()
    ]
    return (
        '<div class="colmz-spine">'
        + _caption("Spine", f"{st['records']} updates in {st['batches']} batches")
        + _table(None, summary, "colmz-summary")
        + (_table(["layer", "state", "updates", "capacity"], layers, "colmz-layers")
           if layers else "")
        + "</div>"
    )


def as_of_html(result: AsOfSelection) -> str:
    """A summary of an as-of selection: one row per export with its as-of, bounds and the
    constraint that set it (:meth:`colmz.AsOfSelection.origins`), then the failures.

    >>> from colmz.as_of import Dataflow, Export, select_as_ofs
    >>> r = select_as_ofs([Dataflow(Export.index("i"), ["s"])], {"s": (10, 20)}, 15)
    >>> "index current time 15" in as_of_html(r)
    True
    """
    origins = result.origins()
    rows = []
    for cid, o in origins.items():
        set_by = o.reason or "nothing (unconstrained)"
        if o.failure:
            set_by += f"; {o.failure} failure: {o.failed_reason}"
        rows.append((cid, _frontier(o.as_of), f"[{_frontier(o.lower)}, {_frontier(o.upper)}]",
                     o.step or "", set_by))
    fails = [(f.collection, f.kind.value, f.bound.value, _frontier(f.frontier), f.step, f.reason)
             for f in result.failures]
    hard = len(result.hard_failures)
    text = (f"{len(result.as_ofs)} exports, {len(result.pruned)} pruned, "
            f"{len(result.failures)} failed constraints ({hard} hard), "
            f"current time {result.current_time}")
    return (
        '<div class="colmz-as-of">'
        + _caption("As-of selection", text)
        + _table(["export", "as-of", "bounds", "step", "set by"], rows, "colmz-as-ofs")
        + (_table(["collection", "kind", "bound", "frontier", "step", "reason"], fails,
                  "colmz-failures") if fails else "")
        + "</div>"
    )


def catalog_html(cat: Catalog) -> str:
    """A summary of a :class:`colmz.Catalog`: where it is stored, its time, and one row per
    object with its kind, what it reads, its since and upper and the updates it holds.

    >>> from colmz.catalog import Catalog
    >>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT)")
    >>> "<td" in catalog_html(cat) and "in memory" in catalog_html(cat)
    True
    """
    rows = []
    for name in cat.names:
        obj = cat.object(name)
        c = obj.collection
        rows.append((name, obj.kind, ", ".join(sorted(map(str, obj.deps))) or "", c.since, _frontier(c.upper),
                     ", ".join(f"{s.name} {s.type}" for s in obj.schema)))
    where = f"stored in {cat.path}" if cat.path is not None else "in memory"
    text = f"{len(rows)} objects, now {cat.now}, {where}"
    return (
        '<div class="colmz-catalog">'
        + _caption("Catalog", text)
        + (_table(["name", "kind", "reads", "since", "upper", "columns"], rows, "colmz-objects")
           if rows else "")
        + "</div>"
    )


def continual_task_html(task: ContinualTask, statements: Sequence[tuple[str, str]]) -> str:
    """A summary of a :class:`colmz.ContinualTask`: its input and references, its frontier
    (the next time it will process), its ``statements`` (kind and text, as the task lists
    them) and the counts of its work.

    >>> from colmz.continual import ContinualTask, Insert, MemoryCollection
    >>> inp = MemoryCollection({"k": "BIGINT"})
    >>> t = ContinualTask("copy", {"inp": inp}, [Insert("SELECT k FROM inp")])
    >>> "SELECT k FROM inp" in t._repr_html_()
    True
    """
    refs = ", ".join(sorted(map(str, task.references))) or "none"
    text = (f"{task.name!r} on input {task.input_name!r} (references: {refs}), frontier "
            f"{_frontier(task.frontier)}, columns "
            + ", ".join(f"{s.name} {s.type}" for s in task.schema))
    rows = [(i, kind, sql) for i, (kind, sql) in enumerate(statements)]
    return (
        '<div class="colmz-continual-task">'
        + _caption("Continual task", text)
        + _table(["#", "statement", "SQL"], rows, "colmz-statements")
        + _table(None, list(task.stats.items()), "colmz-task-stats")
        + "</div>"
    )
