"""Durability of ``colmz.Arrangement``: SIGKILL inside operations, and reopening after each.

A child process (``arrangement_crash_child.py``) runs a deterministic random workload of
writes, seals, compaction frontiers and maintenance on a local arrangement (blob directory +
SQLite consensus) and journals each operation it saw acknowledged. The parent kills it --
at the N-th storage call, before or after that call took effect, or after a random delay --
reopens the arrangement and checks that its contents equal the model after exactly the
acknowledged operations, or after those plus the one in flight: nothing acknowledged is lost,
nothing is duplicated, nothing is half-visible. Then it starts a new child that carries on
from there, so an arrangement survives many crashes in a row (and reopen follows every one).

``COLMZ_CRASH_KILLS`` sets the number of kills of the CI test (default 12); the slow test
makes 120 (each run prints its counts). The campaigns with rollbacks (:class:`Rollbacks`)
also restore an older copy of ``consensus.sqlite`` at random points and check that nothing
newer is lost or overwritten: open refuses, or -- where the documented rule cannot tell --
gc deletes nothing newer.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import sys
import time

import pytest

import colmz

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import arrangement_crash_child as crash_child  # noqa: E402
import arrangement_workload as wl  # noqa: E402

CI_KILLS = int(os.environ.get("COLMZ_CRASH_KILLS", "12"))
N_OPS = 40


def contents(arr) -> colmz.Updates:
    """Everything the arrangement holds (sealed or not), times as stored or advanced."""
    return arr.read()


def _journal(path: str) -> tuple[int | None, bool, int | None]:
    """The last acknowledged operation, whether the run finished, and its storage calls."""
    last, done, calls = None, False, None
    if os.path.exists(path):
        with open(path) as f:
            lines = f.read().split("\n")
        for line in lines:
            if line.isdigit():
                last = int(line)
            elif line.startswith("done"):
                done, calls = True, int(line.split()[1])
    return last, done, calls


def _forkserver():
    # The children are forked from a server process that imported colmz once (the campaign
    # starts about twenty of them; a new interpreter's imports took most of each one's
    # second). Each is still a process of its own, killed with SIGKILL.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["colmz", "colmz.storage.local", "colmz.storage.sqlite", "pytest"])
    return ctx


def _run_child(url, seed, start, journal, mode, n, rng) -> int:
    err_path = journal + ".err"
    args = [url, str(seed), str(N_OPS), str(start), journal, mode, str(n)]
    proc = _forkserver().Process(target=crash_child.run, args=(args, err_path))
    proc.start()
    if mode == "run":
        deadline = time.monotonic() + 60
        while not os.path.exists(journal) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.3, 1.5))  # opening and the first operations take tenths of a second
        proc.kill()
    proc.join(timeout=300)
    code = proc.exitcode
    if code not in (0, -9):
        err = "(no traceback written)"
        if os.path.exists(err_path):
            with open(err_path) as f:
                err = f.read()
        raise AssertionError(f"child failed ({code}):\n{err[-3000:]}")
    return code


def _sqlite_copy(src: str, dst: str) -> None:
    import sqlite3

    with sqlite3.connect(src) as s, sqlite3.connect(dst) as d:
        s.backup(d)  # a consistent copy, its write-ahead log included


class Rollbacks:
    """Restoring an older copy of the consensus at random points of a campaign
    (``colmz.arrangement.identity``, "Rolled-back metadata"): a copy is taken between two
    children; after at least one more child ran, the newest consensus is kept aside, the
    older copy restored, and then

    * a fresh open refuses with ``MetadataRolledBack`` exactly when the blob holds a part
      recording a seqno above the restored one (the documented rule), writing nothing;
    * where it does not (undetectable by that rule), it opens at the older seqno and its
      ``gc(lease_seconds=0)`` deletes no part written after the copy and none the newest
      state names;
    * the handle that read the newer state refuses (its seqno went down);

    and the newest consensus is put back: the contents are exactly as before the rollback.
    """

    def __init__(self, rng: random.Random, stats: dict):
        self.rng, self.stats, self.taken = rng, stats, None
        stats.update(rollbacks=0, rollbacks_refused=0, rollbacks_undetected=0, rollback_noop=0)

    def step(self, url: str, arr, got, tmp_path, last: bool) -> None:
        """After a reopen in the trial of ``url`` (``last``: its final one)."""
        from colmz.arrangement.errors import MetadataRolledBack
        from colmz.arrangement.identity import rollback_evidence

        db = os.path.join(url, "consensus.sqlite")
        if self.taken is not None and self.taken[0] != url:
            self.taken = None  # a new trial: a new store
        if self.taken is None:
            if not last and self.rng.random() < 0.6:
                bak = str(tmp_path / f"bak-{self.stats['runs']}.sqlite")
                _sqlite_copy(db, bak)
                self.taken = (url, bak, arr.seqno, set(arr.store.list_keys(arr.prefix)))
            return
        if not last and self.rng.random() < 0.4:
            return
        _, bak, old_seqno, keys_then = self.taken
        self.taken = None
        newest = bak + ".newest"
        _sqlite_copy(db, newest)
        keys_now = set(arr.store.list_keys(arr.prefix))
        named_now = set(arr.referenced_keys())
        _sqlite_copy(bak, db)
        self.stats["rollbacks"] += 1
        evidence = rollback_evidence(keys_now, old_seqno)
        try:
            old = colmz.Arrangement.open(url)
        except MetadataRolledBack:
            assert evidence, "refused without a part recording a newer seqno"
            self.stats["rollbacks_refused"] += 1
        else:
            assert not evidence, f"opened at seqno {old.seqno} over {evidence[:1]}"
            assert old.seqno == old_seqno
            gone = set(old.gc(lease_seconds=0))
            assert not gone & (keys_now - keys_then), "gc deleted a part written after the copy"
            assert not gone & named_now, "gc deleted a part of the newest state"
            self.stats["rollbacks_undetected" if arr.seqno > old_seqno else "rollback_noop"] += 1
        assert set(arr.store.list_keys(arr.prefix)) >= keys_now & (named_now | (keys_now - keys_then))
        if arr.seqno > old_seqno:
            with pytest.raises(MetadataRolledBack):
                arr.gc(lease_seconds=0)
        _sqlite_copy(newest, db)
        back = colmz.Arrangement.open(url)
        back.validate_data()
        assert back.seqno == arr.seqno and sorted(back.read().to_pylist(), key=repr) == sorted(got.to_pylist(), key=repr)


def crash_campaign(tmp_path, kills: int, seed: int, rollbacks: bool = False) -> dict:
    """Kill children until ``kills`` kills happened; return counts for the report.
    ``rollbacks``: restore older consensus copies at random points too (:class:`Rollbacks`)."""
    rng = random.Random(seed)
    stats = {"kills": 0, "runs": 0, "reopens": 0, "landed_in_flight": 0, "trials": 0}
    rb = Rollbacks(random.Random(seed + 1), stats) if rollbacks else None
    trial = 0
    most_calls = 60  # storage calls of a whole run, learnt from runs that finished
    while stats["kills"] < kills:
        trial += 1
        wseed = seed * 1000 + trial
        ms = wl.models(wl.workload(wseed, N_OPS))
        url = str(tmp_path / f"arr{trial}")
        start = 0
        while start < N_OPS and stats["kills"] < kills:
            mode = rng.choice(["call-before", "call-after", "run"])
            journal = str(tmp_path / f"journal-{trial}-{stats['runs']}")
            code = _run_child(url, wseed, start, journal, mode, rng.randrange(1, most_calls + 1), rng)
            stats["runs"] += 1
            stats["kills"] += code == -9
            last, done, calls = _journal(journal)
            if calls is not None and start == 0:
                most_calls = max(most_calls, calls)
            acked = start if last is None else last + 1  # operations start..last returned
            assert done or code == -9
            arr = colmz.Arrangement.open(url)
            stats["reopens"] += 1
            arr.validate()
            got = contents(arr)
            before = wl.matches(got, ms[acked])
            after = acked < N_OPS and wl.matches(got, ms[acked + 1])
            assert before or after, (
                f"trial {trial}: after a kill ({mode}) with operations {start}..{acked - 1} "
                f"acknowledged, the arrangement equals no committed state"
            )
            assert arr.get_seal() in (ms[acked].seal, ms[min(acked + 1, N_OPS)].seal)
            stats["landed_in_flight"] += (after and not before)
            if rb is not None:
                rb.step(url, arr, got, tmp_path, last=code == 0 or stats["kills"] >= kills)
            # carry on: re-run the operation in flight unless it visibly landed
            start = acked if before else acked + 1
            if code == 0:
                break
        stats["trials"] = trial
    return stats


def test_sigkill_inside_operations_loses_nothing(tmp_path):
    stats = crash_campaign(tmp_path, CI_KILLS, seed=1)
    assert stats["kills"] == CI_KILLS and stats["reopens"] >= CI_KILLS


@pytest.mark.slow
def test_sigkill_campaign_thorough(tmp_path):
    stats = crash_campaign(tmp_path, 120, seed=2)
    assert stats["kills"] == 120
    print("crash campaign:", stats)


def test_sigkill_with_restored_older_consensus_loses_nothing(tmp_path):
    stats = crash_campaign(tmp_path, max(4, CI_KILLS // 2), seed=3, rollbacks=True)
    print("crash campaign with rollbacks:", stats)
    assert stats["rollbacks"] >= 1 and stats["rollbacks_refused"] >= 1


@pytest.mark.slow
def test_sigkill_with_restored_older_consensus_thorough(tmp_path):
    stats = crash_campaign(tmp_path, 60, seed=4, rollbacks=True)
    assert stats["kills"] == 60 and stats["rollbacks"] >= 10
    print("crash campaign with rollbacks:", stats)


# ---------------------------------------------------------------------------- fault sweeps


def _sweep_run(ops, plan, ms) -> dict:
    """Run ``ops`` on a fresh in-memory store whose N-th storage call fails per ``plan``.

    After the failure: the arrangement in memory is as before the failed call, the stored
    state equals the model before or after the failed operation, and carrying on from a
    reopen reaches the model's final state.
    """
    from colmz.storage import MemBlob, MemConsensus, StorageError
    from colmz.storage.faults import FaultyBlob, FaultyConsensus
    from colmz.storage.url import Location

    blob, cons = MemBlob("sweep"), MemConsensus()
    faulty = Location(FaultyBlob(blob, plan), FaultyConsensus(cons, plan), "mem://sweep")
    clean = Location(blob, cons, "mem://sweep")
    failed_at = None
    try:
        arr = colmz.Arrangement.open(faulty, schema=wl.SCHEMA)
    except StorageError:
        failed_at = 0
        arr = None
    done = 0
    if arr is not None:
        for i, op in enumerate(ops):
            before = arr.meta()
            try:
                wl.apply(arr, op)
            except StorageError:
                if op[0] == "maintain":
                    # maintain() commits step by step: the steps before the failing one stay
                    # committed, and memory must say exactly what storage holds.
                    assert arr.meta() == colmz.Arrangement.open(clean).meta()
                else:
                    assert arr.meta() == before, f"op {i} {op[0]} raised but changed the arrangement in memory"
                failed_at = i
                break
            done = i + 1
    if failed_at is None:
        assert wl.matches(colmz.Arrangement.open(clean).read(), ms[len(ops)])
        return {"failed": False}
    # the stored state: before or after the failed operation, never in between
    reopened = colmz.Arrangement.open(clean, schema=wl.SCHEMA)
    reopened.validate()
    got = reopened.read()
    landed = failed_at < len(ops) and wl.matches(got, ms[failed_at + 1])
    assert wl.matches(got, ms[failed_at]) or landed, f"state after a fault in op {failed_at} is no committed state"
    start = failed_at if wl.matches(got, ms[failed_at]) else failed_at + 1
    for op in ops[start:]:
        wl.apply(reopened, op)
    final = colmz.Arrangement.open(clean)
    final.validate()
    assert wl.matches(final.read(), ms[len(ops)])
    return {"failed": True, "op": failed_at, "done": done}


def fault_sweep(seed: int, n_ops: int) -> dict:
    from colmz.storage.faults import FaultPlan

    ops = wl.workload(seed, n_ops)
    ms = wl.models(ops)
    probe = FaultPlan()
    _sweep_run(ops, probe, ms)
    calls = probe.calls
    counts = {"calls": calls, "runs": 0, "failures": 0}
    for mode in ("before", "after"):
        for n in range(1, calls + 1):
            out = _sweep_run(ops, FaultPlan(fail_at=n, mode=mode), ms)
            counts["runs"] += 1
            counts["failures"] += out["failed"]
    return counts


def test_every_failing_storage_call_of_a_run_loses_nothing():
    counts = fault_sweep(seed=7, n_ops=12)
    assert counts["calls"] > 20 and counts["runs"] == 2 * counts["calls"]


@pytest.mark.slow
def test_every_failing_storage_call_thorough():
    for seed in range(3):
        counts = fault_sweep(seed=100 + seed, n_ops=30)
        print("fault sweep:", counts)


# ---------------------------------------------------------------------------- racing writers


def _race_writer(url: str, name: str, writes: int, barrier, results) -> None:
    from colmz.storage.state import CommitConflict

    arr = colmz.Arrangement.open(url, schema=wl.SCHEMA)
    barrier.wait()
    acked, conflicts = [], 0
    for i in range(writes):
        rows = [(hash((name, i)) % 1000, name, 0, 1)]
        for _attempt in range(50):
            try:
                arr.write(wl.updates_of(rows))
                acked.append(rows[0])
                break
            except CommitConflict:
                conflicts += 1
                arr.refresh()
    results.put((name, acked, conflicts))


def test_two_processes_racing_writes_lose_and_duplicate_nothing(tmp_path):
    import multiprocessing as mp
    from collections import Counter

    url = str(tmp_path / "arr")
    colmz.Arrangement.open(url, schema=wl.SCHEMA)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    writes = 30
    procs = [ctx.Process(target=_race_writer, args=(url, n, writes, barrier, results)) for n in ("a", "b")]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    acked = Counter()
    for _, rows, _ in got:
        acked.update((k, s) for k, s, _, _ in rows)
    assert sum(acked.values()) == 2 * writes  # every write eventually acknowledged
    arr = colmz.Arrangement.open(url)
    arr.validate()
    stored = Counter()
    for k, s, _, d in arr.read().to_pylist():
        stored[(k, s)] += d
    assert stored == acked  # nothing lost, nothing written twice
    assert arr.seqno == 1 + 2 * writes  # one version per acknowledged write


def _conditional_appender(url: str, name: str, appends: int, barrier, results) -> None:
    # No compare-and-set loop here: the arrangement's machine retries a lost one; a seal
    # another process moved is a refusal (SealMismatch), and the next round reads again.
    from colmz.arrangement import SealMismatch
    from colmz.arrangement.runs import write_run

    arr = colmz.Arrangement.open(url, schema=wl.SCHEMA)
    barrier.wait()
    landed, refused = [], 0
    while len(landed) < appends:
        arr.refresh()
        seal = arr.get_seal()
        row = (hash((name, len(landed))) % 1000, name, seal, 1)
        run = write_run(arr.store, arr.schema, wl.updates_of([row]), prefix=arr.prefix)
        try:
            arr.append_runs([run], seal=seal + 1, expect=seal)
        except SealMismatch:
            refused += 1
            for k in run.keys:  # the caller's parts (the machine may have deleted them)
                with contextlib.suppress(Exception):
                    arr.store.delete(k)
            continue
        landed.append(row)
    results.put((name, landed, refused))


def test_two_processes_appending_with_expect_land_each_append_once(tmp_path):
    """Two processes append one run each per seal with ``expect=`` (the catalog's and the
    streaming sink's commit) and no retry loop of their own: every append that returned
    is stored exactly once, at the seal it expected, one seal step each; no part is left
    that the state does not name."""
    import multiprocessing as mp

    url = str(tmp_path / "arr")
    colmz.Arrangement.open(url, schema=wl.SCHEMA)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    appends = 15
    procs = [ctx.Process(target=_conditional_appender, args=(url, n, appends, barrier, results))
             for n in ("a", "b")]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    landed = sorted(row for _, rows, _ in got for row in rows)
    arr = colmz.Arrangement.open(url)
    arr.validate()
    assert arr.get_seal() == 2 * appends  # one seal step per landed append
    assert sorted(arr.read().to_pylist()) == landed  # each once, at the seal it expected
    assert sorted(r[2] for r in landed) == list(range(2 * appends))
    assert set(arr.store.list_keys(arr.prefix)) == arr.referenced_keys()
