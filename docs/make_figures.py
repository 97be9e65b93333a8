"""Draw the pictures of the README and ``docs/`` from running code: ``docs/img/*.png``.

Each picture is a small, seeded run of one structure drawn with ``colmz.plot``, so the
pictures show what the code does today; run this script again after a change to the
structures or the plots, and commit the PNGs it writes::

    python docs/make_figures.py            # all pictures
    python docs/make_figures.py spine      # only some

Needs the ``plot`` and ``sql`` extras (matplotlib, DuckDB); no Spark: the sink picture is the
sink loop of one key bucket -- the per-bucket work ``colmz.spark.sink`` does on an executor
-- run here with ``Correction.drain_stepwise``. PNGs are written without a timestamp or
version in their metadata, so an unchanged picture leaves git with nothing to commit.
"""

from __future__ import annotations

import sys
import tempfile
import types
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import colmz  # noqa: E402
import colmz.plot  # noqa: E402

IMG = Path(__file__).resolve().parent / "img"


def save(ax, name: str) -> Path:
    fig = ax.figure if not isinstance(ax, tuple) else ax[0].figure
    fig.tight_layout()
    path = IMG / f"{name}.png"
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return path


def temporal_filter(n: int, seed: int) -> tuple[colmz.Updates, np.ndarray]:
    """Subscriptions valid in [start, end), most ending far in the future, as updates."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 100, n)
    end = start + np.round(np.exp(rng.uniform(0, 14, n))).astype(np.int64) + 1
    key = np.concatenate([np.arange(n), np.arange(n)])
    time = np.concatenate([start, end]).astype(np.uint64)
    diff = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    return colmz.Updates({"customer": key}, time=time, diff=diff), start


def correction() -> Path:
    """The correction buffer after 60 ticks of a sink loop over a temporal filter."""
    desired, _ = temporal_filter(4_000, seed=7)
    c = colmz.Correction()
    c.insert(desired)
    for t in range(60):
        batch = colmz.concat(list(c.updates_before(t + 1)))
        c.insert_negated(batch)
        c.advance_since(t + 1)
    return save(c.plot(), "correction")


def spine() -> tuple[Path, Path]:
    """A fueled spine after 400 inserts, and its work per insert beside eager merging."""
    rng = np.random.default_rng(3)
    fueled, eager = colmz.Spine(effort=1), colmz.Spine(effort=2**30)
    fueled_stats, eager_stats = [], []
    for t in range(400):
        batch = colmz.Updates({"key": rng.integers(0, 20_000, 250)}, time=np.full(250, t, np.uint64),
                              diff=np.ones(250, np.int64))
        fueled.insert(batch, lower=t, upper=t + 1)
        eager.insert(batch, lower=t, upper=t + 1)
        fueled_stats.append(fueled.stats())
        eager_stats.append(eager.stats())
    return (save(fueled.plot(), "spine"),
            save(colmz.plot.spine_history(fueled_stats, eager=eager_stats), "spine_history"))


def as_of() -> Path:
    """As-of selection on a small deployment (the as_of notebook's)."""
    from colmz import Dataflow, Export, lag_writes_by, select_as_ofs

    storage = {"orders": (100, 180), "customers": (120, 175), "revenue_mv": (110, 150),
               "audit_ct": (90, 140)}
    dataflows = [
        Dataflow(Export.index("orders_idx"), storage_inputs=["orders"]),
        Dataflow(Export.index("customers_idx", lag_writes_by(5, 1)), storage_inputs=["customers"]),
        Dataflow(Export.index("join_idx"), compute_inputs=["orders_idx", "customers_idx"]),
        Dataflow(Export.materialized_view("revenue_mv"), compute_inputs=["join_idx"]),
        Dataflow(Export.continual_task("audit_ct"), storage_inputs=["revenue_mv", "orders"]),
    ]
    return save(select_as_ofs(dataflows, storage, current_time=200).plot(), "as_of")


def arrangement() -> Path:
    """An arrangement after 40 ticks of writes with bounded maintenance (fan-in 2)."""
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as d:
        arr = colmz.Arrangement.open(d, schema={"item": pa.string(), "price": pa.int64()}, fan_in=2)
        for t in range(40):
            items = [f"item{i:02d}" for i in rng.choice(30, 6, replace=False)]
            arr.write(colmz.Updates({"item": items, "price": rng.integers(1, 100, 6)},
                                    time=[t] * 6, diff=[1] * 6))
            arr.seal(t + 1)
            if t % 4 == 3:
                arr.maintain(fuel=100)
        arr.write(colmz.Updates({"item": ["item00", "item01"], "price": [1, 2]}, time=[43, 45],
                                diff=[1, 1]))
        arr.advance_since(20)
        return save(arr.plot(), "arrangement")


def sink() -> Path:
    """The sink loop of one key bucket over 60 ticks: corrections written per tick."""
    desired, _ = temporal_filter(3_000, seed=1)
    c = colmz.Correction()
    c.insert(desired)
    ticks = list(range(60))
    uppers = np.array([t + 1 for t in ticks], dtype=np.uint64)
    written = c.drain_stepwise(uppers)  # sorted by time: cut per tick
    per_tick = np.diff(np.searchsorted(written.time, uppers), prepend=0)
    # the buffer is largest before the first read: every desired update is in it
    stats = types.SimpleNamespace(written_per_tick=per_tick, largest_buffer=len(desired))
    return save(colmz.plot.sink(stats, ticks=ticks), "sink")


def continual_task() -> Path:
    """An upsert task's output changes per time (Catalog, DuckDB)."""
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE readings (sensor INT, value INT)")
    cat.execute("""CREATE CONTINUAL TASK upsert (sensor INT, value INT) ON INPUT readings AS (
        DELETE FROM upsert WHERE sensor IN (SELECT sensor FROM readings);
        INSERT INTO upsert SELECT sensor, max(value) FROM readings GROUP BY sensor)""")
    start = cat.now
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(1, 5))
        rows = zip(rng.integers(0, 12, n), rng.integers(0, 1000, n))
        cat.execute("INSERT INTO readings VALUES " + ", ".join(f"({s}, {v})" for s, v in rows))
    changes = cat.object("upsert").collection.updates(start + 1, cat.now + 1).to_pandas()
    ins = changes[changes["diff"] > 0].groupby("time")["diff"].sum()
    out = changes[changes["diff"] < 0].groupby("time")["diff"].sum()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(ins.index, ins.values, color="#4c72b0", label="inserted (new latest value)")
    ax.bar(out.index, out.values, color="#d62728", label="retracted (replaced value)")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlabel("time (one transaction of readings each)")
    ax.set_ylabel("updates")
    ax.set_title("CREATE CONTINUAL TASK upsert: its output's changes per time", fontsize=10)
    ax.legend(fontsize=8)
    return save(ax, "continual_task")


FIGURES = {"correction": correction, "spine": spine, "as_of": as_of, "arrangement": arrangement,
           "sink": sink, "continual_task": continual_task}


def main(names: list[str]) -> None:
    unknown = sorted(set(names) - set(FIGURES))
    if unknown:
        raise SystemExit(f"unknown figures {unknown}; choose from {sorted(FIGURES)}")
    IMG.mkdir(exist_ok=True)
    for name in names or FIGURES:
        out = FIGURES[name]()
        for p in out if isinstance(out, tuple) else (out,):
            print(p.relative_to(IMG.parent.parent))


if __name__ == "__main__":
    main(sys.argv[1:])
