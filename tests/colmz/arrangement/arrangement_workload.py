"""A deterministic random workload for a durable ``colmz.Arrangement`` and its multiset model.

Shared by the crash, fault and race tests (and the crash child process): the same seed gives
the same operations in every process, so a parent can compute what a killed child had
committed after each acknowledged operation.

Operations (each valid against the state the previous ones leave):

* ``("write", rows)`` -- rows ``(k, s, time, diff)`` at times at or beyond the seal, some
  cancelling each other, some NULL strings;
* ``("seal", t)`` -- ``t >= seal``;
* ``("allow_compaction", t)`` -- ``t >= since`` (sometimes beyond the seal);
* ``("maintain", fuel)`` -- ``None`` or a small budget.

The model is the multiset of ``((k, s), time) -> diff`` of every acknowledged write.
Compaction and maintenance change only the physical layout and times before the since, so
the comparison is made on the *view* at probe times at or beyond the since: for each probe
``t``, ``{(k, s): sum of diffs with time <= t}`` without zeros.
"""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa

import colmz

SCHEMA = {"k": pa.int64(), "s": pa.string()}


def workload(seed: int, n_ops: int) -> list[tuple]:
    rng = random.Random(seed)
    ops: list[tuple] = []
    seal = since = 0
    for _ in range(n_ops):
        r = rng.random()
        if r < 0.5:
            n = rng.choice([1, 3, 20, 200])
            rows = []
            for _ in range(n):
                k = rng.randrange(8)
                s = rng.choice(["a", "b", None, "a long string value"])
                t = seal + rng.randrange(6)
                d = rng.choice([1, 1, 2, -1, 3])
                rows.append((k, s, t, d))
                if rng.random() < 0.1:
                    rows.append((k, s, t, -d))  # cancels within the batch
            ops.append(("write", rows))
        elif r < 0.75:
            seal += rng.randrange(0, 4)
            ops.append(("seal", seal))
        elif r < 0.85:
            since = min(since + rng.randrange(0, 4), seal + 2)
            since = max(since, 0)
            ops.append(("allow_compaction", since))
        else:
            ops.append(("maintain", rng.choice([None, 1, 50, 1000])))
    return ops


def updates_of(rows) -> colmz.Updates:
    k, s, t, d = zip(*rows) if rows else ((), (), (), ())
    return colmz.Updates(
        {"k": pa.array(k, pa.int64()), "s": pa.array(s, pa.string())}, time=list(t), diff=list(d)
    )


def apply(arr, op) -> None:
    """Run one operation against an open arrangement."""
    kind, arg = op
    if kind == "write":
        arr.write(updates_of(arg))
    elif kind == "seal":
        arr.seal(arg)
    elif kind == "allow_compaction":
        arr.advance_since(arg)  # the durable, validated form of allow_compaction
    elif kind == "maintain":
        arr.maintain(fuel=arg)
    else:  # pragma: no cover - workload() makes only these
        raise AssertionError(kind)


class Model:
    """What the arrangement must hold after a prefix of the workload."""

    def __init__(self) -> None:
        self.updates: Counter = Counter()
        self.seal = 0
        self.since = 0

    def apply(self, op) -> None:
        kind, arg = op
        if kind == "write":
            for k, s, t, d in arg:
                self.updates[((k, s), t)] += d
        elif kind == "seal":
            self.seal = max(self.seal, arg)
        elif kind == "allow_compaction":
            self.since = max(self.since, arg)

    def view(self, t: int) -> dict:
        out: Counter = Counter()
        for (row, time), d in self.updates.items():
            if time <= t:
                out[row] += d
        return {r: d for r, d in out.items() if d}


def models(ops) -> list[Model]:
    """``models(ops)[i]`` is the model after the first ``i`` operations."""
    out, m = [], Model()
    out.append(_copy(m))
    for op in ops:
        m.apply(op)
        out.append(_copy(m))
    return out


def _copy(m: Model) -> Model:
    c = Model()
    c.updates, c.seal, c.since = Counter(m.updates), m.seal, m.since
    return c


def view_of(updates: colmz.Updates, t: int) -> dict:
    out: Counter = Counter()
    for k, s, time, d in updates.to_pylist():
        if time <= t:
            out[(k, s)] += d
    return {r: d for r, d in out.items() if d}


def probes(m: Model) -> list[int]:
    lo = m.since
    hi = max(m.seal, m.since) + 7
    return list(range(lo, hi))


def matches(updates: colmz.Updates, m: Model) -> bool:
    """Whether an arrangement's contents equal the model's at every probe time >= since."""
    return all(view_of(updates, t) == m.view(t) for t in probes(m))
