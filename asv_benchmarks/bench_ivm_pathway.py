"""The sum and join views of :mod:`bench_ivm` kept by Pathway, on the same tables and changes.

Pathway (``pip install pathway``) pins its own versions of pyarrow and other packages, so it
runs in an environment of its own: this file needs numpy, pyarrow and pathway, not colmz
(it reads :mod:`bench_ivm`'s data generators only), and is run by that environment's Python::

    python -m venv /tmp/pathway && /tmp/pathway/bin/pip install pathway
    /tmp/pathway/bin/python asv_benchmarks/bench_ivm_pathway.py N [sum|join ...] [--changes insert,bulk]

What is timed: ``t`` (:func:`bench_ivm.tables`, with a row id as primary key so that a row
can be deleted) and ``u`` read through ``pw.io.python`` connectors that commit only when told
(``autocommit_duration_ms=None``); the view's output goes to ``pw.io.subscribe``. Each change
of :func:`bench_ivm.all_batches` is sent and committed, and the time runs until the
subscriber's ``on_time_end`` for that commit (the change has been through the whole dataflow
and out). The same is timed for a dataflow whose output is ``t`` itself (the engine's commit
round trip without a view: a time with no output change never ends at a subscriber, so the
table's own changes are its output); the view's maintenance is the difference of the
lower quartiles (:data:`bench_ivm.QUANTILE`), as the other columns of :mod:`bench_ivm_pg`
are. ``ok`` is 1 when the view's rows, gathered from the subscriber's changes, equal the
query's answer computed by numpy from the changed ``t``. The initial rows are sent one by one
through the connector (``next``), so sizes beyond a few million take minutes to load.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ivm import CHANGE_KINDS, QUANTILE, all_batches, tables  # noqa: E402

#: The views Pathway is timed on (``bench_ivm.VIEWS``'s queries, written with Pathway's API).
PATHWAY_VIEWS = ("sum", "join")


def row_ids(n: int, batches: dict) -> dict:
    """For each delete or update batch, the row id of ``t`` it takes out: the first row of
    the initial table equal to it that no earlier batch took (as PostgreSQL's ``ctid``)."""
    t, _ = tables(n)
    k, v = t.column("k").to_numpy(), t.column("v").to_numpy()
    used: set = set()
    out = {}
    for kind, bs in batches.items():
        for i, b in enumerate(bs):
            if kind not in ("delete", "update"):
                continue
            d = b.column("diff").to_pylist()
            j = d.index(-1)
            bk, bv = b.column("k")[j].as_py(), b.column("v")[j].as_py()
            for r in np.flatnonzero((k == bk) & (v == bv)):
                if int(r) not in used:
                    used.add(int(r))
                    out[(kind, i)] = int(r)
                    break
    return out


def run_one(view: str, n: int, batches: dict, ids: dict, kinds) -> dict:
    """Per change kind, the seconds from sending each change to its time's end at the
    subscriber of ``view`` (``"none"``: ``t`` itself), and the view's rows."""
    import pathway as pw
    from pathway.internals.parse_graph import G

    G.clear()

    class T(pw.Schema):
        id: int = pw.column_definition(primary_key=True)
        k: int
        v: int

    class U(pw.Schema):
        uk: int = pw.column_definition(primary_key=True)
        w: int

    t0, u0 = tables(n)
    ended = threading.Event()
    times: dict = {k: [] for k in kinds}
    next_id = [n]

    class TSource(pw.io.python.ConnectorSubject):
        def run(self):
            for i, (k, v) in enumerate(zip(t0.column("k").to_pylist(), t0.column("v").to_pylist())):
                self.next(id=i, k=k, v=v)
            ended.clear()
            self.commit()
            assert ended.wait(30), "no time end"
            for kind in kinds:
                for i, b in enumerate(batches[kind]):
                    ks, vs, ds = (b.column(c).to_pylist() for c in ("k", "v", "diff"))
                    ended.clear()
                    a = time.perf_counter()
                    for k, v, d in zip(ks, vs, ds):
                        if d < 0:
                            r = ids[(kind, i)]
                            self._remove_inner(None, {"id": r, "k": k, "v": v})
                        else:
                            self.next(id=ids.get((kind, i), next_id[0]) if kind == "update" else next_id[0],
                                      k=k, v=v)
                            next_id[0] += kind != "update"
                    self.commit()
                    assert ended.wait(30), "no time end"
                    times[kind].append(time.perf_counter() - a)
            self.close()

    class USource(pw.io.python.ConnectorSubject):
        def run(self):
            for uk, w in zip(u0.column("uk").to_pylist(), u0.column("w").to_pylist()):
                self.next(uk=uk, w=w)
            self.commit()

    src = TSource(datasource_name="t")
    t = pw.io.python.read(src, schema=T, autocommit_duration_ms=None)
    u = pw.io.python.read(USource(datasource_name="u"), schema=U, autocommit_duration_ms=None)
    if view == "sum":
        out = t.groupby(pw.this.k).reduce(pw.this.k, s=pw.reducers.sum(pw.this.v), c=pw.reducers.count())
    elif view == "join":
        out = t.join(u, t.k == u.uk).select(k=t.k, v=t.v, w=u.w)
    else:
        out = t.select(pw.this.k, pw.this.v)
    rows: Counter = Counter()

    def on_change(key, row, time, is_addition):
        rows[tuple(row.values())] += 1 if is_addition else -1

    pw.io.subscribe(out, on_change=on_change, on_time_end=lambda time: ended.set())
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    return {"times": times, "rows": +rows}


def expected(view: str, n: int, batches: dict, kinds) -> Counter:
    """The view's rows over ``t`` after every batch of ``kinds`` (numpy, as a multiset)."""
    t, u = tables(n)
    k, v = [t.column("k").to_numpy()], [t.column("v").to_numpy()]
    gone: Counter = Counter()
    for kind in kinds:
        for b in batches[kind]:
            bk, bv, bd = (b.column(c).to_numpy() for c in ("k", "v", "diff"))
            k.append(bk[bd > 0])
            v.append(bv[bd > 0])
            gone.update(zip(bk[bd < 0].tolist(), bv[bd < 0].tolist()))
    rows = Counter(zip(np.concatenate(k).tolist(), np.concatenate(v).tolist()))
    rows.subtract(gone)
    rows = +rows
    if view == "join":  # u maps each key to itself
        return Counter({(kk, vv, kk): m for (kk, vv), m in rows.items()})
    sums: Counter = Counter()
    counts: Counter = Counter()
    for (kk, vv), m in rows.items():
        sums[kk] += vv * m
        counts[kk] += m
    return Counter({(kk, sums[kk], counts[kk]): 1 for kk in counts})


def measure(n: int, views=("sum", "join"), kinds=CHANGE_KINDS) -> dict:
    """``{(view, kind): figures}``: Pathway's view maintenance (milliseconds, the view's
    dataflow minus the one without a view), its commit with and without the view, and ``ok``."""
    batches = all_batches(n, kinds)
    ids = row_ids(n, batches)
    base = run_one("none", n, batches, ids, kinds)["times"]
    out = {}
    for view in views:
        got = run_one(view, n, batches, ids, kinds)
        ok = int(got["rows"] == expected(view, n, batches, kinds))
        for kind in kinds:
            with_ = 1e3 * float(np.percentile(got["times"][kind], QUANTILE))
            without = 1e3 * float(np.percentile(base[kind], QUANTILE))
            out[(view, kind)] = {"pathway_view_ms": with_ - without, "pathway_commit_ms": with_,
                                 "pathway_without_ms": without, "pathway_ok": ok}
    return out


def main(argv: list[str]) -> None:
    """The hand-run entry point (module docstring)."""
    import argparse

    ap = argparse.ArgumentParser(prog="bench_ivm_pathway.py", description="the sum and join views kept by Pathway")
    ap.add_argument("n", type=int, nargs="?", default=10_000)
    ap.add_argument("views", nargs="*", default=[], help="sum, join (default: both)")
    ap.add_argument("--changes", default=",".join(CHANGE_KINDS))
    a = ap.parse_args(argv)
    kinds = tuple(k for k in a.changes.split(",") if k)
    if bad := [k for k in kinds if k not in CHANGE_KINDS]:
        ap.error(f"--changes takes {list(CHANGE_KINDS)}, got {bad}")
    if unknown := [v for v in a.views if v not in ("sum", "join")]:
        ap.error(f"views are sum and join, got {unknown}")
    import pathway

    figures = measure(a.n, a.views or ("sum", "join"), kinds)
    print(f"Pathway {pathway.__version__}")
    print("| view | n | change | Pathway view | Pathway commit | Pathway without | ok |\n|---|---|---|---|---|---|---|")
    for (view, kind), f in figures.items():
        print(f"| {view} | {a.n:,} | {kind} | {f['pathway_view_ms']:.3f} | {f['pathway_commit_ms']:.3f} | "
              f"{f['pathway_without_ms']:.3f} | {f['pathway_ok']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
