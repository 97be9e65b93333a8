"""Stopping a streaming query: ``stop=`` on the batch writer, and SIGINT (Ctrl-C) to
``colmz stream`` while it races another writer on the same store."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from test_stream_race import add_file, blob_files
from test_stream_sink import RUN_MARK, marked, oracle, stored, write_events

import colmz
from colmz.spark.cli.base import EXIT_INTERRUPTED
from colmz.spark.stream import StreamStopped, batch_writer

pytestmark = pytest.mark.spark

LINE = re.compile(r"^batch (\d+): (already in the store|\d+ events)")


def test_a_set_stop_makes_the_next_batch_stop_before_its_commit(spark, tmp_path):
    indir, store, ckpt = (str(tmp_path / n) for n in ("in", "store", "ck"))
    tables = write_events(indir, 2, seed=12, far=300)
    files = sorted(os.listdir(indir))
    stop = threading.Event()
    fn = batch_writer(spark.read.parquet(indir).schema, store, ckpt, keys=["k"], value="v", stop=stop)
    fn(spark.read.parquet(os.path.join(indir, files[0])), 0)
    before = stored(store), blob_files(store)
    stop.set()
    with pytest.raises(StreamStopped, match="micro-batch 1 stopped before its commit"):
        fn(spark.read.parquet(os.path.join(indir, files[1])), 1)
    assert (stored(store), blob_files(store)) == before
    assert before[0] == (oracle(tables[:1]), 1)
    # cleared, the same batch commits: the stop wrote nothing a retry would trip over
    stop.clear()
    fn(spark.read.parquet(os.path.join(indir, files[1])), 1)
    assert stored(store) == (oracle(tables), 2)


class Streamer:
    """``colmz stream`` following a directory (no ``--available-now``) in its own session; a
    thread collects its per-batch lines (stderr, with ``--json``)."""

    def __init__(self, tmp_path, name: str, indir: str, store: str, checkpoint: str) -> None:
        self.mark = str(tmp_path / name)
        self.checkpoint = checkpoint
        cmd = [sys.executable, "-m", "colmz.spark.cli", "stream", "--input", indir, "--store", store,
               "--checkpoint", self.checkpoint, "--keys", "k", "--value", "v", "--files-per-batch", "1",
               "--master", "local[1]", "--buckets", "2", "--partitions", "2", "--json"]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True, env={**os.environ, RUN_MARK: self.mark})
        self.lines: list[str] = []
        self.batches: dict[int, str] = {}
        self.out = ""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.p.stderr:
            self.lines.append(line)
            if m := LINE.match(line):
                self.batches[int(m.group(1))] = "replayed" if m.group(2).startswith("already") else "committed"

    def interrupt(self, timeout: float) -> float:
        """SIGINT; the seconds until the process and everything it started are gone."""
        t0 = time.monotonic()
        os.kill(self.p.pid, signal.SIGINT)
        self.p.wait(timeout=timeout)
        self.out = self.p.stdout.read()  # the JSON summary (stderr is the reader thread's)
        self.reader.join(timeout=10)
        with open(f"{self.mark}.err", "w") as f:
            f.write(self.text())
        while marked(self.mark):
            assert time.monotonic() - t0 < timeout, f"processes of {self.mark} left: {marked(self.mark)}"
            time.sleep(0.05)
        return time.monotonic() - t0

    def kill(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()

    def text(self) -> str:
        return "".join(self.lines)

    def started(self) -> bool:
        """The query runs (its first line after the session started is printed)."""
        return any(x.startswith("streaming ") for x in self.lines)

    def planned(self, batch: int) -> bool:
        """Spark logged the batch's offsets: the batch runs now or has run."""
        return os.path.exists(os.path.join(self.checkpoint, "offsets", str(batch)))


def wait_for(cond, what: str, streamers, timeout: float = 240) -> None:
    end = time.monotonic() + timeout
    while not cond():
        for s in streamers:
            assert s.p.poll() is None, f"a writer exited ({s.p.returncode}) waiting for {what}:\n{s.text()[-4000:]}"
        assert time.monotonic() < end, f"timed out waiting for {what}: {[s.batches for s in streamers]}"
        time.sleep(0.05)


@pytest.mark.slow
def test_sigint_while_racing_another_writer_stops_promptly(tmp_path):
    """Two ``colmz stream`` processes write one store from one input; one of them gets SIGINT
    while a batch is in flight (computing, or contesting the compare-and-set), three times,
    restarted from its checkpoint after each. Each time it exits within the bound with status
    130 and says what the store holds; Spark's processes go with it. The store ends equal to
    an uninterrupted run: nothing of an interrupted batch is half-committed, lost or doubled."""
    indir, store = str(tmp_path / "in"), str(tmp_path / "store")
    os.makedirs(indir)
    seed = 61
    tables = [add_file(indir, tmp_path, 0, seed)]
    other = Streamer(tmp_path, "other", indir, store, str(tmp_path / "ck-other"))
    started = [other]
    took = []
    try:
        for round_ in range(3):
            s = Streamer(tmp_path, f"interrupted{round_}", indir, store, str(tmp_path / "ck"))
            started.append(s)
            n = len(tables)
            wait_for(lambda n=n, s=s: s.started() and n - 1 in other.batches, f"batch {n - 1}", [s, other])
            # a new file: both plan its batch; the interrupt lands while it is computed or
            # while the slower writer contests the commit
            tables.append(add_file(indir, tmp_path, n, seed))
            wait_for(lambda n=n, s=s: s.planned(n), f"batch {n} planned", [s, other])
            time.sleep(0.4 * round_)
            took.append(s.interrupt(timeout=90))
            err = s.text()
            assert s.p.returncode == EXIT_INTERRUPTED, (s.p.returncode, err[-4000:])
            assert "colmz stream: interrupted: stopped after" in err, err[-4000:]
            assert "KeyboardInterrupt" not in err and "Traceback" not in err, err[-4000:]
            assert '"interrupted": true' in s.out
            # the other writer carries on (it commits the batch if the interrupted one did not)
            wait_for(lambda n=n: n in other.batches, f"batch {n} in the other writer", [other])
        took.append(other.interrupt(timeout=90))
        assert other.p.returncode == EXIT_INTERRUPTED, other.text()[-4000:]
    finally:
        for s in started:
            s.kill()
    print("seconds from SIGINT to exit:", [round(t, 1) for t in took])  # shown with -s
    assert max(took) < 60, took
    # every file in its own tick, once; no part of an interrupted batch left in the store
    assert stored(store) == (oracle(tables), len(tables))
    a = colmz.Arrangement.open(store, create=False)
    assert blob_files(store) == set(a.referenced_keys())
