"""asv benchmarks for ``colmz.select_as_ofs``.

``time_select`` runs the worklist implementation; ``time_naive_sweep`` runs, on the same
generated DAG, the obvious alternative: the original's fixpoint that re-sweeps every compute
edge until nothing changes. Read the ratio of the two. Target: 10,000 dataflows / 50,000 edges
in <= 1 s.
"""

from __future__ import annotations

import random

from colmz.as_of import UNSET, Dataflow, Export, ExportKind, lag_writes_by, select_as_ofs
from colmz.frontier import frontier_le, frontier_lt, meet, step_back_frontier


def make_dag(n_dataflows: int, n_edges: int, seed: int = 0) -> tuple[list, dict, int]:
    """A random DAG of dataflows: ``(dataflows, storage, current_time)``.

    Ids are a random permutation of topological order, so id order says nothing about
    dependency order (the worst case for a sweep in id order and the usual one in practice).
    About 70% of exports are indexes (some with read policies), 20% materialized views, 10%
    continual tasks; every dataflow reads 0-3 of 500 sources; compute edges only point from
    earlier indexes to later dataflows.
    """
    rng = random.Random(seed)
    ids = [f"u{i}" for i in rng.sample(range(n_dataflows), n_dataflows)]
    kinds = [
        rng.choices(
            [ExportKind.INDEX, ExportKind.MATERIALIZED_VIEW, ExportKind.CONTINUAL_TASK],
            [7, 2, 1],
        )[0]
        for _ in range(n_dataflows)
    ]
    index_positions: list[int] = []
    earlier_indexes: list[int] = []  # per position: how many indexes precede it
    for pos, k in enumerate(kinds):
        earlier_indexes.append(len(index_positions))
        if k is ExportKind.INDEX:
            index_positions.append(pos)
    edges: set[tuple[int, int]] = set()
    candidates = [b for b in range(n_dataflows) if earlier_indexes[b] > 0]
    capacity = sum(earlier_indexes[b] for b in candidates)
    n_edges = min(n_edges, capacity)
    while len(edges) < n_edges:
        b = rng.choice(candidates)
        a = index_positions[rng.randrange(earlier_indexes[b])]
        edges.add((a, b))
    inputs: list[list[str]] = [[] for _ in range(n_dataflows)]
    for a, b in edges:
        inputs[b].append(ids[a])

    storage: dict[str, tuple[int | None, int | None]] = {}
    sources = [f"s{i}" for i in range(500)]
    for s in sources:
        storage[s] = (rng.randrange(900, 950), rng.randrange(1000, 1100))
    dataflows = []
    for pos in range(n_dataflows):
        kind = kinds[pos]
        if kind is ExportKind.INDEX:
            policy = lag_writes_by(rng.randrange(1, 100), 10) if rng.random() < 0.3 else None
            export = Export(ids[pos], kind, policy)
        else:
            export = Export(ids[pos], kind)
            read = rng.randrange(900, 950)
            write = None if rng.random() < 0.01 else rng.randrange(950, 1100)
            storage[ids[pos]] = (read, write)
        dataflows.append(
            Dataflow(
                export,
                storage_inputs=rng.sample(sources, rng.randrange(4)),
                compute_inputs=inputs[pos],
            )
        )
    return dataflows, storage, 1100


def naive_select(dataflows: list, storage: dict, current_time: int) -> dict:
    """The original's algorithm, literally: collections in id order, full-sweep fixpoints.

    Only the newest steps and only ``read_only=False``; returns export id -> as-of.
    """
    bounds: dict = {}  # export id -> [lower, upper, sealed], shared by a dataflow's exports
    info: dict = {}  # export id -> (export, storage inputs, compute inputs)
    for d in dataflows:
        b = [0, None, False] if d.as_of is UNSET else [d.as_of, d.as_of, False]
        for e in d.exports:
            bounds[e.id] = b
            info[e.id] = (e, d.storage_inputs, d.compute_inputs)

    def apply(cid: str, is_lower: bool, f) -> bool:
        b = bounds[cid]
        if b[2]:
            return False
        lo, up = b[0], b[1]
        if is_lower:
            if frontier_lt(up, f):
                b[2], b[0] = True, up
                return frontier_lt(lo, up)
            if frontier_le(f, lo):
                return False
            b[0] = f
        else:
            if frontier_lt(f, lo):
                b[2], b[1] = True, lo
                return frontier_lt(lo, up)
            if frontier_le(up, f):
                return False
            b[1] = f
        return True

    for cid in list(info):
        e = info[cid][0]
        if e.kind is not ExportKind.INDEX and storage[cid][1] is None:
            del info[cid]
    order = sorted(info)

    def fixpoint(downstream_lower: bool) -> None:
        changed = True
        while changed:
            changed = False
            if downstream_lower:
                for cid in order:
                    for i in info[cid][2]:
                        changed |= apply(cid, True, bounds[i][0])
            else:
                for cid in reversed(order):
                    for i in info[cid][2]:
                        changed |= apply(i, False, bounds[cid][1])

    for cid in order:
        for s in info[cid][1]:
            apply(cid, True, storage[s][0])
    fixpoint(True)
    for cid in order:
        e = info[cid][0]
        if e.kind is not ExportKind.INDEX:
            read, write = storage[cid]
            apply(cid, False, read if frontier_le(write, read) else step_back_frontier(write))
    fixpoint(False)
    write = {cid: meet(*(storage[s][1] for s in info[cid][1])) for cid in order}
    changed = True
    while changed:
        changed = False
        for cid in order:
            w = meet(write[cid], *(write[i] for i in info[cid][2]))
            if w != write[cid]:
                write[cid], changed = w, True
    for cid in order:
        apply(cid, False, step_back_frontier(write[cid]))
    fixpoint(False)
    for cid in order:
        e = info[cid][0]
        if e.kind is ExportKind.INDEX and e.read_policy is not None:
            w = current_time if write[cid] is None else write[cid]
            apply(cid, False, e.read_policy.frontier(w))
    fixpoint(False)
    for cid in order:
        if info[cid][0].kind is ExportKind.INDEX:
            apply(cid, False, current_time)
    fixpoint(False)
    return {
        e.id: (bounds[e.id][1] if e.id in info else None) for d in dataflows for e in d.exports
    }


class SelectAsOfs:
    """Worklist selection vs the full-sweep fixpoint on random DAGs."""

    # One parameter whose values are tuples: wrap it, or asv reads two parameters.
    params = [[(1_000, 10_000), (10_000, 50_000)]]
    param_names = ["dataflows_edges"]
    timeout = 600

    def setup(self, shape: tuple[int, int]) -> None:
        self.dataflows, self.storage, self.now = make_dag(*shape, seed=1)

    def time_select(self, shape: tuple[int, int]) -> None:
        select_as_ofs(self.dataflows, self.storage, self.now)

    def time_naive_sweep(self, shape: tuple[int, int]) -> None:
        naive_select(self.dataflows, self.storage, self.now)

    def time_select_and_explain(self, shape: tuple[int, int]) -> None:
        select_as_ofs(self.dataflows, self.storage, self.now).explain()
