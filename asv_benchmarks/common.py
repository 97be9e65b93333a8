"""Shared data generators and helpers for colmz's asv benchmarks.

The reference workload is the Rust speed anchor's (a std-only consolidation program): ``n`` updates
with one ``int64`` data column of ``n // 4`` distinct values drawn as
``rng.integers(0, n // 4)``, 1000 distinct times and diffs of +1 or -1. The wide variant adds
a second ``int64`` column and a string column. Every generator is deterministic (fixed seed),
so a benchmark's ``setup`` can rebuild its data cheaply in each asv process.

The Rust anchor (``rust_consolidate``) is built with cargo into a directory under the system
temporary directory; benchmarks that need it raise ``NotImplementedError`` in ``setup`` (asv
skips them) when cargo or the anchor's sources are missing. ``COLMZ_RUST_ANCHOR`` overrides
the location of the anchor's sources.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

SEED = 20_240_601
N_TIMES = 1000

#: Where benchmark artefacts (the anchor's build, its input files) go.
WORK_DIR = os.path.join(tempfile.gettempdir(), "colmz_asv")

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANCHOR_SRC = os.environ.get(
    "COLMZ_RUST_ANCHOR",
    os.path.normpath(os.path.join(_REPO, "..", "shared", "anchors", "rust_consolidate")),
)


# ----------------------------------------------------------------------------- data


def anchor_columns(n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(data int64, time uint64, diff int64)``: the anchor's workload of ``n`` updates."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, max(n // 4, 1), n, dtype=np.int64)
    time = rng.integers(0, N_TIMES, n).astype(np.uint64)
    diff = np.where(rng.integers(0, 2, n) == 1, 1, -1).astype(np.int64)
    return data, time, diff


def anchor_updates(n: int):
    """The anchor's workload as ``colmz.Updates`` with one data column ``k``."""
    import colmz

    data, time, diff = anchor_columns(n)
    return colmz.Updates({"k": data}, time, diff)


def wide_columns(n: int, seed: int = SEED) -> dict[str, np.ndarray]:
    """Two ``int64`` columns and one string column, plus ``time`` and ``diff``.

    ``a`` has ``n // 4`` distinct values as in the anchor's workload, ``b`` 16, and ``s`` is
    one of 1000 strings of 4 to 24 characters, so rows repeat about as often as the
    anchor's.
    """
    rng = np.random.default_rng(seed + 1)
    words = np.array(
        [f"item-{i:04d}-" + "x" * int(rng.integers(0, 14)) for i in range(1000)], dtype=object
    )
    return {
        "a": rng.integers(0, max(n // 4, 1), n, dtype=np.int64),
        "b": rng.integers(0, 16, n, dtype=np.int64),
        "s": words[rng.integers(0, len(words), n)],
        "time": rng.integers(0, N_TIMES, n).astype(np.uint64),
        "diff": np.where(rng.integers(0, 2, n) == 1, 1, -1).astype(np.int64),
    }


def wide_updates(n: int):
    """:func:`wide_columns` as ``colmz.Updates`` (the string column as an Arrow string)."""
    import pyarrow as pa

    import colmz

    c = wide_columns(n)
    return colmz.Updates(
        {"a": c["a"], "b": c["b"], "s": pa.array(c["s"], pa.string())}, c["time"], c["diff"]
    )


def sorted_runs(n: int, k: int):
    """``k`` runs of the anchor's workload (``n`` updates in all), each sorted by
    ``(data, time)`` and consolidated, as ``(keys (m, 1) uint64, time, diff)`` of colmz's
    encoding of the data column."""
    from colmz.kernels.consolidate import sort_consolidate

    u = anchor_updates(n)
    enc = u.encode()
    bounds = np.linspace(0, n, k + 1).astype(np.int64)
    return [
        sort_consolidate(enc.keys[a:b], enc.time[a:b], enc.diff[a:b], "data")
        for a, b in zip(bounds[:-1], bounds[1:])
    ]


# ----------------------------------------------------------------------------- alternatives


def reduce_sorted(data, time, diff):
    """Sum the diffs of equal adjacent ``(data, time)`` and drop zeros (numpy ``reduceat``)."""
    n = len(data)
    if n == 0:
        return data, time, diff
    flags = np.empty(n, np.bool_)
    flags[0] = True
    np.not_equal(data[1:], data[:-1], out=flags[1:])
    flags[1:] |= time[1:] != time[:-1]
    starts = np.flatnonzero(flags)
    sums = np.add.reduceat(diff, starts)
    keep = sums != 0
    return data[starts][keep], time[starts][keep], sums[keep]


def numpy_lexsort_consolidate(data, time, diff):
    order = np.lexsort((time, data))
    return reduce_sorted(data[order], time[order], diff[order])


def packed_key(data, time):
    """``(data - min) << bits(time span) | (time - min)`` as one ``uint64`` per row."""
    d = data.astype(np.int64)
    dmin = d.min() if len(d) else 0
    tmin = time.min() if len(time) else np.uint64(0)
    tspan = int(time.max() - tmin) if len(time) else 0
    tbits = max(tspan.bit_length(), 1)
    return ((d - dmin).astype(np.uint64) << np.uint64(tbits)) | (time - tmin)


def numpy_packed_argsort_consolidate(data, time, diff, kind=None):
    key = packed_key(data, time)
    order = np.argsort(key, kind=kind)
    return reduce_sorted(data[order], time[order], diff[order])


def pandas_groupby_consolidate(df, keys):
    s = df.groupby(keys, sort=True)["diff"].sum()
    return s[s != 0]


# ----------------------------------------------------------------------------- Rust anchor


def anchor_binary() -> str:
    """Build the Rust anchor (once) and return its binary; ``NotImplementedError`` if we cannot."""
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    if not os.path.exists(cargo) or not os.path.isdir(ANCHOR_SRC):
        raise NotImplementedError("cargo or the Rust anchor's sources are not available")
    target = os.path.join(WORK_DIR, "rust_target")
    binary = os.path.join(target, "release", "rust_consolidate")
    r = subprocess.run(
        [cargo, "build", "--release", "--offline", "--quiet", "--target-dir", target],
        cwd=ANCHOR_SRC,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0 or not os.path.exists(binary):
        raise NotImplementedError(f"building the Rust anchor failed: {r.stderr[-2000:]}")
    return binary


def write_consolidate_input(path: str, data, time, diff) -> None:
    """The anchor's consolidate input: ``u64 n``, then data, time, diff (little-endian)."""
    with open(path, "wb") as f:
        f.write(np.array([len(data)], "<u8").tobytes())
        for col, dt in ((data, "<u8"), (time, "<u8"), (diff, "<i8")):
            f.write(np.ascontiguousarray(col).astype(dt, copy=False).tobytes())


def write_merge_input(path: str, runs) -> None:
    """The anchor's merge input: ``u64 k``, run lengths, then the columns of all runs."""
    with open(path, "wb") as f:
        f.write(np.array([len(runs)], "<u8").tobytes())
        f.write(np.array([len(r[0]) for r in runs], "<u8").tobytes())
        for j, dt in ((0, "<u8"), (1, "<u8"), (2, "<i8")):
            for r in runs:
                f.write(np.ascontiguousarray(r[j]).astype(dt, copy=False).tobytes())


def read_output(path: str):
    """The anchor's ``OUT`` file as ``(data, time, diff)``."""
    raw = np.fromfile(path, "<u8")
    m = int(raw[0])
    return raw[1 : 1 + m], raw[1 + m : 1 + 2 * m], raw[1 + 2 * m : 1 + 3 * m].view(np.int64)


def run_anchor(binary: str, cmd: str, inp: str, reps: int = 3) -> dict:
    """Run the anchor; return its JSON report (``times_s`` per repetition, after a warm-up)."""
    out = inp + ".out"
    r = subprocess.run([binary, cmd, inp, out, str(reps)], capture_output=True, text=True, check=True)
    report = json.loads(r.stdout.strip().splitlines()[-1])
    report["out"] = out
    return report


_SPARK = None


def spark_session(conf: dict | None = None):
    """One local[2] SparkSession per asv process (asv runs each benchmark in its own
    process); ``NotImplementedError`` -- asv's "skip" -- without pyspark or Java.

    ``conf`` applies only to the session this process creates first.
    """
    global _SPARK
    if _SPARK is None:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            raise NotImplementedError("pyspark is not installed") from None
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise NotImplementedError("no Java for Spark")
        import colmz.spark

        _SPARK = colmz.spark.session("local[2]", "colmz-asv", conf=conf)
    return _SPARK
