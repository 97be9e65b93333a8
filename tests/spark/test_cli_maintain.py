"""``colmz maintain STORE``: compaction and gc in place, through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

import colmz

EXE = Path(sys.executable).parent / "colmz"


def colmz_cmd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=300)


def make_store(path: Path, batches: int = 6) -> colmz.Arrangement:
    a = colmz.Arrangement.open(str(path), schema={"k": pa.int64()})
    for i in range(batches):
        keys = np.arange(50, dtype=np.int64) + i
        diffs = np.where(keys % 3 == 0, -1, 1).astype(np.int64) if i else np.ones(50, np.int64)
        a.write(colmz.Updates({"k": keys}, time=np.full(50, i, np.uint64), diff=diffs))
        a.seal(i + 1)
    return a


def test_maintain_compacts_in_place_and_keeps_every_final_tick(tmp_path):
    store = tmp_path / "st"
    a = make_store(store)
    views = {t: a.read(as_of=t).to_pylist() for t in range(6)}
    parts_before = len(a.parts())
    r = colmz_cmd("maintain", str(store), "--lease", "0", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["before"]["parts"] == parts_before and s["after"]["parts"] < parts_before
    reopened = colmz.Arrangement.open(str(store), create=False)
    assert len(reopened.parts()) == s["after"]["parts"]
    since = reopened.since()
    for t in range(since, 6):
        assert reopened.read(as_of=t).to_pylist() == views[t], t
    # the blob holds only what the state names: unreferenced parts were deleted
    named = {p.key for p in reopened.parts()}
    on_disk = {str(p.relative_to(store / "blob")) for p in (store / "blob").rglob("*.parquet")}
    assert on_disk == named
    # a second run has nothing to do
    r = colmz_cmd("maintain", str(store))
    assert r.returncode == 0 and "0 unreferenced parts deleted" in r.stdout


def test_maintain_refuses_what_is_not_a_store(tmp_path):
    for args, needle in ((["maintain", str(tmp_path / "nope")], "does not exist"),
                         (["maintain", str(tmp_path)], "not a colmz store"),
                         (["maintain", str(tmp_path), "--lease", "-1"], "--lease")):
        r = colmz_cmd(*args)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr
