"""A changed byte in anything colmz reads back is refused, never read as other rows.

Each store -- a durable catalog holding a committed intent not yet applied (its writer died
between the record's compare-and-set and the apply), and an arrangement with trace and
unsealed parts -- is copied once per case, one byte of one thing colmz reads back is
changed, and a child process reopens the copy and reads everything: the parts, the runs an
intent names, every ``identity.json``, and the versions of the catalog's record and of the
arrangement's state in the consensus.
Each reopen must either raise a specific error (:data:`CLEAR`) or return exactly the
model's rows; a child killed by a signal (a SIGSEGV in a decoder) fails the test, naming
the case.
"""

from __future__ import annotations

import gc
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import colmz
from colmz.catalog.store import CatalogStore

#: The errors a changed byte may raise: each names what is wrong and where.
CLEAR = {"CorruptPart", "CorruptMeta", "CorruptState", "MissingPart", "IdentityMismatch",
         "MetadataLost", "MissingDefinitions"}

_CHILD = textwrap.dedent("""
    import json, sys
    import colmz

    def catalog(path):
        cat = colmz.Catalog(path)
        return {n: sorted(map(list, (tuple(r.values()) for r in cat.sql(f"SELECT * FROM {n}").to_pylist())))
                for n in cat.names}

    def arrangement(path):
        return sorted(map(list, colmz.Arrangement.open(path, create=False).read().to_pylist()))

    kind = sys.argv[1]
    for i, path in enumerate(sys.argv[2:]):
        print(json.dumps({"start": i}), flush=True)
        try:
            out = {"case": i, "rows": (catalog if kind == "catalog" else arrangement)(path)}
        except Exception as e:
            out = {"case": i, "error": type(e).__name__, "message": str(e)[:300]}
        print(json.dumps(out), flush=True)
""")


def _positions(n: int, rng: random.Random, count: int) -> list[int]:
    # both ends (magic, footer length), spread over the middle, and a few at random
    spread = [n * j // (count - 1) for j in range(count - 1)] + [n - 1]
    return sorted(set(spread + rng.sample(range(n), min(n, 3))))


def _flip_file(path: Path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x5A
    path.write_bytes(bytes(data))


def _flip_version(db: Path, key: str, seqno: int, pos: int) -> None:
    con = sqlite3.connect(db)
    with con:
        (data,) = con.execute("SELECT data FROM consensus WHERE key = ? AND seqno = ?", (key, seqno)).fetchone()
        data = bytearray(data)
        data[pos] ^= 0x5A
        con.execute("UPDATE consensus SET data = ? WHERE key = ? AND seqno = ?", (bytes(data), key, seqno))
    con.close()


def _cases(store: Path, out: Path, record_key: str | None, rng: random.Random, per: int):
    """Copies of ``store``, each with one byte changed: ``(what, copy)``."""
    # The copies are taken with the consensus checkpointed into its main file and without its
    # -wal/-shm files: a handle of this process closing its connection meanwhile (garbage
    # collected) deletes those files, which made copytree fail on a vanished file.
    gc.collect()
    con = sqlite3.connect(store / "consensus.sqlite")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()

    def copytree(src, dst):
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.sqlite-wal", "*.sqlite-shm"))

    cases = []
    blob = store / "blob"
    for f in sorted(p for p in blob.rglob("*") if p.is_file()):
        rel = f.relative_to(store)
        for pos in _positions(f.stat().st_size, rng, per):
            copy = out / f"c{len(cases)}"
            copytree(store, copy)
            _flip_file(copy / rel, pos)
            cases.append((f"{rel} byte {pos}", copy))
    if record_key is not None:
        con = sqlite3.connect(store / "consensus.sqlite")
        versions = con.execute("SELECT seqno, length(data) FROM consensus WHERE key = ?", (record_key,)).fetchall()
        con.close()
        for seqno, n in versions:
            for pos in _positions(n, rng, per):
                copy = out / f"c{len(cases)}"
                copytree(store, copy)
                _flip_version(copy / "consensus.sqlite", record_key, seqno, pos)
                cases.append((f"record {record_key} version {seqno} byte {pos}", copy))
    return cases


def _reopen_each(kind: str, cases, tmp_path: Path) -> list[dict]:
    script = tmp_path / "reopen.py"
    script.write_text(_CHILD)
    proc = subprocess.run([sys.executable, str(script), kind, *[str(c) for _, c in cases]],
                          capture_output=True, text=True, timeout=900)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    results = [x for x in lines if "case" in x]
    if proc.returncode != 0:
        last = lines[-1]["start"] if lines and "start" in lines[-1] else None
        what = cases[last][0] if last is not None else "?"
        pytest.fail(f"the reopen of a changed {kind} store killed the process (exit {proc.returncode}) "
                    f"at case {what}: {proc.stderr[-2000:]}")
    assert len(results) == len(cases)
    return results


def _check(kind: str, cases, results, model) -> dict[str, int]:
    seen: dict[str, int] = {}
    for (what, _), r in zip(cases, results):
        if "error" in r:
            assert r["error"] in CLEAR, f"{what}: {r['error']}: {r['message']}"
            seen[r["error"]] = seen.get(r["error"], 0) + 1
        else:
            assert r["rows"] == model, f"{what}: reopened with other rows than the model's"
            seen["same rows"] = seen.get("same rows", 0) + 1
    return seen


def _catalog_with_a_pending_intent(path: Path, monkeypatch) -> tuple[dict, str]:
    cat = colmz.Catalog(path)
    cat.execute("CREATE TABLE t (k INT, v TEXT); CREATE TABLE u (k BIGINT);"
                "CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n, sum(k) AS s FROM t")
    cat.execute("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 40) g(i); INSERT INTO u VALUES (7)")
    cat.execute("DELETE FROM t WHERE k % 5 = 0")
    # The last transaction commits its record and dies before applying it.
    with monkeypatch.context() as m:
        m.setattr(CatalogStore, "apply", lambda self, state: None)
        cat.execute("INSERT INTO t SELECT i, 'w' || i FROM generate_series(100, 130) g(i); INSERT INTO u VALUES (8)")
    store = CatalogStore(colmz.storage.url.open_location(str(path)))
    state = store.load()
    pending = [e for e in state["intent"]["entries"] if e.get("runs") or e.get("blob")]
    assert pending and all(store.arrangement(e["key"]).upper == e["lower"] for e in pending)
    t = sorted([[k, f"v{k}"] for k in range(1, 41) if k % 5] + [[k, f"w{k}"] for k in range(100, 131)])
    model = {"t": t, "u": [[7], [8]], "m": [[len(t), sum(r[0] for r in t)]]}
    return model, store.key


def test_a_changed_byte_in_a_catalog_is_refused_or_harmless(tmp_path, monkeypatch):
    store = tmp_path / "store"
    model, key = _catalog_with_a_pending_intent(store, monkeypatch)
    assert _reopen_each("catalog", [("unchanged", store)], tmp_path)[0].get("rows") == model
    # the model, reopened from an unchanged copy: the pending intent lands whole
    cases = _cases(store, tmp_path / "cases", key, random.Random(36), per=4)
    kinds = {what.split(" byte")[0].rsplit("/", 1)[-1].split("-")[0] for what, _ in cases}
    assert len(cases) > 40 and "identity.json" in kinds
    results = _reopen_each("catalog", cases, tmp_path)
    seen = _check("catalog", cases, results, model)
    assert seen.get("CorruptPart", 0) > 10 and seen.get("CorruptMeta", 0) > 5, seen
    # a changed identity is said to be changed, not taken for lost definitions
    assert not [w for (w, _), r in zip(cases, results) if r.get("error") == "MissingDefinitions"]


def test_a_changed_byte_in_an_arrangement_is_refused_or_harmless(tmp_path):
    store = tmp_path / "store"
    a = colmz.Arrangement.open(store)
    rng = random.Random(7)
    for t in range(6):
        ks = rng.sample(range(1000), 30)
        a.write(colmz.Updates({"k": ks}, time=[t] * 30, diff=[1] * 30))
        a.seal(t + 1)
        if t == 3:
            a.maintain()  # trace parts beside the unsealed ones
    model = sorted(map(list, a.read().to_pylist()))
    cases = _cases(store, tmp_path / "cases", a.identity.consensus_key, random.Random(37), per=4)
    assert len(cases) > 60
    seen = _check("arrangement", cases, _reopen_each("arrangement", cases, tmp_path), model)
    assert seen.get("CorruptPart", 0) > 10, seen
