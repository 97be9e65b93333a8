"""Two ``colmz stream`` processes (separate OS processes, each its own JVM and checkpoint)
write one store at the same time.

* Same input: every micro-batch is committed by exactly one of them (the other finds it in
  the store), the store equals an uninterrupted single run's output, and the store's
  committed history shows each batch id committed once, in order, by one writer.
* Other input: the store belongs to whichever query commits its first batch; the other is
  refused with a clear error (exit status 2) and commits nothing.

The same-input race is made tight: both processes run without ``--available-now`` and each
new event file is added as soon as one of them has finished the previous batch, so both plan
every batch within moments of each other and contest its commit (and a batch is computed while
the other writer's maintenance commits).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest
from test_stream_sink import logged_batches, oracle, stored, write_events

import colmz
from colmz.spark.stream import BATCH, RECENT, batch_fingerprint, checkpoint_inputs
from colmz.storage.state import apply_diff
from colmz.storage.url import open_location

pytestmark = pytest.mark.spark

JOB = os.path.join(os.path.dirname(__file__), "stream_job.py")
#: ``colmz stream``'s per-batch line (stderr with --json) and stream_job.py's (stdout)
CLI_LINE = re.compile(r"^batch (\d+): (already in the store|\d+ events)")
JOB_LINE = re.compile(r"^batch (\d+) replayed=(True|False) runs=\d+ conflicts=(\d+)")


class Writer:
    """One writer process: ``colmz stream`` (``cli=True``) or stream_job.py following the input
    until ``stop`` exists. A reader thread collects its per-batch lines; the other stream goes
    to a file."""

    def __init__(self, tmp_path, i: int, indir: str, store: str, *, cli: bool, stop: str | None = None) -> None:
        self.checkpoint = str(tmp_path / f"ck{i}")
        if cli:
            cmd = [sys.executable, "-m", "colmz.spark.cli", "stream", "--input", indir, "--store", store,
                   "--checkpoint", self.checkpoint, "--keys", "k", "--value", "v", "--files-per-batch", "1",
                   "--master", "local[1]", "--buckets", "2", "--partitions", "2", "--json", "--available-now"]
        else:
            cmd = [sys.executable, JOB, indir, store, self.checkpoint, "--until", stop]
        self.cli = cli
        work = tmp_path / f"work{i}"
        work.mkdir()
        self.log = work / "log"
        with open(self.log, "w") as other:
            self.p = subprocess.Popen(cmd, stdout=other if cli else subprocess.PIPE,
                                      stderr=subprocess.PIPE if cli else other, text=True, cwd=work)
        self.batches: dict[int, str] = {}  # batch id -> "committed" or "replayed"
        self.conflicts = 0
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in (self.p.stderr if self.cli else self.p.stdout):
            self.lines.append(line)
            m = (CLI_LINE if self.cli else JOB_LINE).match(line)
            if m:
                b = int(m.group(1))
                assert b not in self.batches, f"batch {b} reported twice"
                replayed = m.group(2).startswith("already") if self.cli else m.group(2) == "True"
                self.batches[b] = "replayed" if replayed else "committed"
                if not self.cli:
                    self.conflicts += int(m.group(3))

    def finish(self, timeout: float = 300) -> int:
        self.p.wait(timeout=timeout)
        self.reader.join(timeout=30)
        return self.p.returncode

    def text(self) -> str:
        """Everything the process printed: its lines, then the other stream."""
        return "".join(self.lines) + self.log.read_text()

    def summary(self) -> dict:
        """``colmz stream --json``'s summary line."""
        return json.loads(self.log.read_text().strip().splitlines()[-1])


def add_file(indir: str, tmp_path, i: int, seed: int):
    """Event file ``i``, written aside and renamed in (a reader never sees it half-written)."""
    aside = str(tmp_path / f"aside{i}")
    table = write_events(aside, 1, seed=seed + i, far=300)[0]
    src = os.path.join(aside, "part-0000.parquet")
    os.utime(src, (1e9 + i, 1e9 + i))
    os.replace(src, os.path.join(indir, f"part-{i:04d}.parquet"))
    return table


def wait_for(cond, what: str, writers, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while not cond():
        for w in writers:
            if w.p.poll() is not None:
                w.finish()
                raise AssertionError(f"a writer exited ({w.p.returncode}) while waiting for {what}:\n"
                                     + w.text()[-4000:])
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}: {[w.batches for w in writers]}")
        time.sleep(0.05)


def committed_history(store: str, name: str = "arrangement") -> list[dict]:
    """Every live committed version of the arrangement's record, oldest first: seqno, seal,
    the stream properties and the owner tag (``b<batch>x<token>``) of each unsealed part.
    Versions before the newest rollup that truncated the record are gone."""
    from colmz.arrangement.identity import read_identity

    loc = open_location(store, create=False)
    out, state = [], None
    # the record's key is the store's (colmz.arrangement.identity), named by its blob
    for v in loc.consensus.scan(read_identity(loc.blob, name).consensus_key, 0):
        doc = json.loads(bytes(v.data))
        if "rollup" in doc:
            state = doc["rollup"]
        else:
            assert state is not None, f"version {v.seqno} is a diff without a rollup before it"
            apply_diff(state, doc["diff"])
        meta = state["meta"]
        owners = {m.group(0)[1:-1] for b in meta["unsealed_batches"] for k in b["keys"]
                  for m in [re.search(r"-b\d+x[0-9a-f]+_", k)] if m}
        props = meta.get("properties", {})
        out.append({"seqno": v.seqno, "seal": meta["seal"], "batch": props.get(BATCH),
                    "recent": props.get(RECENT, ""), "owners": owners})
    return out


def check_history(history: list[dict], batches: int) -> None:
    """Each batch id is committed in exactly one version, after the one before it, moving the
    seal with it (processing ticks: batch b seals b + 1), and its parts carry one writer's tag."""
    assert history, "no committed versions"
    commits = []
    for prev, cur in zip(history, history[1:]):
        assert cur["seqno"] == prev["seqno"] + 1
        if cur["batch"] != prev["batch"]:
            assert cur["batch"] == (-1 if prev["batch"] is None else prev["batch"]) + 1, (prev, cur)
            assert cur["seal"] == cur["batch"] + 1, cur
            commits.append(cur["batch"])
        else:
            # maintenance (drains into the trace) moves neither the batch nor the seal
            assert cur["seal"] == prev["seal"], (prev, cur)
    first = history[0]
    if first["seqno"] == 1:  # nothing truncated: the record starts empty
        assert first["batch"] is None
        assert commits == list(range(batches))
    else:
        assert commits == list(range(batches - len(commits), batches))
    tags: dict[int, set[str]] = {}
    for h in history:
        for o in h["owners"]:
            tags.setdefault(int(o[1:o.index("x")]), set()).add(o)
    assert all(len(t) == 1 for t in tags.values()), tags


def blob_files(store: str) -> set[str]:
    a = colmz.Arrangement.open(store, create=False)
    return set(a.store.list_keys(a.prefix))


def race_same_input(tmp_path, files: int, seed: int) -> dict:
    indir, store = str(tmp_path / "in"), str(tmp_path / "store")
    os.makedirs(indir)
    tables = [add_file(indir, tmp_path, 0, seed)]
    stop = str(tmp_path / "stop")
    writers = [Writer(tmp_path, i, indir, store, cli=False, stop=stop) for i in range(2)]
    try:
        for i in range(files):
            if i:
                tables.append(add_file(indir, tmp_path, i, seed))
            # the next file comes as soon as one writer is done with this batch: the other is
            # then still losing this batch's compare-and-set, or (the winner) maintaining the
            # store while the first computes the next batch
            wait_for(lambda i=i: any(i in w.batches for w in writers), f"batch {i} in a writer", writers)
        wait_for(lambda: all(len(w.batches) == files for w in writers), "every batch in both writers", writers)
        open(stop, "w").close()
        status = [w.finish() for w in writers]
    finally:
        for w in writers:
            if w.p.poll() is None:
                w.p.kill()
                w.p.wait()
    assert status == [0, 0], [w.text()[-3000:] for w in writers]
    assert all("done" in w.lines[-1] for w in writers)
    # every batch was committed by exactly one writer; the other found it in the store
    for b in range(files):
        assert sorted(w.batches[b] for w in writers) == ["committed", "replayed"], b
    # both checkpoints logged the same file per batch: file i is batch i
    logs = [logged_batches(w.checkpoint) for w in writers]
    assert logs[0] == logs[1] == {f"part-{i:04d}.parquet": i for i in range(files)}
    # the output is the uninterrupted run's: each file's events in its own tick, once
    assert stored(store) == (oracle(tables), files)
    # the committed properties name each batch's input as both checkpoints record it
    a = colmz.Arrangement.open(store, create=False)
    recent = a.properties()[RECENT].split()
    assert a.properties()[BATCH] == files - 1
    for w in writers:
        assert recent == [batch_fingerprint(checkpoint_inputs(w.checkpoint, b)) for b in range(files)][-len(recent):]
    check_history(committed_history(store), files)
    # a loser of a batch deleted the parts it wrote: the blob store holds only referenced parts
    assert blob_files(store) == set(a.referenced_keys())
    return {"committed": [sum(v == "committed" for v in w.batches.values()) for w in writers],
            "conflicts": [w.conflicts for w in writers]}


def test_two_processes_race_on_one_store(tmp_path):
    figures = race_same_input(tmp_path, files=4, seed=31)
    print("race:", figures)  # shown with -s


@pytest.mark.slow
def test_two_processes_race_many_batches(tmp_path):
    # more batches than the record keeps between rollups and than the file source's log
    # compacts at: the history check then covers the versions after the last truncation
    figures = race_same_input(tmp_path, files=40, seed=41)
    print("race:", figures)  # shown with -s


def test_a_store_written_by_another_query_is_refused(tmp_path):
    """Two processes over different inputs, one store, at once: the first to commit a batch
    owns the store; the other fails with a clear error and commits nothing."""
    store = str(tmp_path / "store")
    tables = []
    for i in range(2):
        d = str(tmp_path / f"in{i}")
        tables.append(write_events(d, 2, seed=50 + i, far=200))
    writers = [Writer(tmp_path, i, str(tmp_path / f"in{i}"), store, cli=True) for i in range(2)]
    status = [w.finish() for w in writers]
    assert sorted(status) == [0, 2], (status, [w.text()[-4000:] for w in writers])
    win, lose = (0, 1) if status[0] == 0 else (1, 0)
    err = writers[lose].text()
    assert "colmz stream: bad input: " in err and "another query writes the store" in err, err[-3000:]
    assert writers[win].summary()["batches"] == 2
    assert writers[lose].batches.get(0) != "committed"
    # the store is the winner's alone: its output and fingerprints, no part of the loser's
    assert stored(store) == (oracle(tables[win]), 2)
    a = colmz.Arrangement.open(store, create=False)
    assert a.properties()[RECENT].split() == [
        batch_fingerprint(checkpoint_inputs(writers[win].checkpoint, b)) for b in range(2)]
    check_history(committed_history(store), 2)
    assert blob_files(store) == set(a.referenced_keys())
