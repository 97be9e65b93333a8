"""A local store (LocalBlob + SqliteConsensus) survives SIGKILL at random moments.

A child process writes parts and commits StateLog versions naming them, in a loop, and is
killed with SIGKILL at a random point (inside a blob write, an fsync, a SQLite transaction).
Reopened, the store must hold a readable state whose every named part is present and whole,
no temporary file must be listed as a key, and a new writer must be able to continue.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from crash_worker import part_bytes  # beside this file (pytest puts this folder on sys.path)

from colmz.storage.state import StateLog
from colmz.storage.url import open_location

HERE = os.path.dirname(os.path.abspath(__file__))


def crash_once(store: str, rng: random.Random) -> None:
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "crash_worker.py"), store],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "started", p.stderr.read()
    time.sleep(rng.uniform(0.0, 0.4))
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    p.stdout.close()
    p.stderr.close()


def check_store(store: str) -> int:
    loc = open_location(store, create=False)
    seqno, state = StateLog(loc.consensus, "meta").load()
    if seqno is None:
        return 0
    for name, size in state["parts"]:
        assert loc.blob.get(name) == part_bytes(name, size), f"part {name} torn or missing"
    assert all(".colmz-tmp-" not in k for k in loc.blob.list_keys())
    return seqno


def run(tmp_path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    store = str(tmp_path / "store")
    seqnos = []
    for _ in range(kills):
        crash_once(store, rng)
        seqnos.append(check_store(store))
    # Every restart continued from the committed state: the head only moves forward.
    assert seqnos == sorted(seqnos) and seqnos[-1] > 0


def test_sigkill_during_writes_and_commits(tmp_path):
    run(tmp_path, kills=4, seed=1)


@pytest.mark.slow
def test_sigkill_many_times(tmp_path):
    run(tmp_path, kills=40, seed=2)
