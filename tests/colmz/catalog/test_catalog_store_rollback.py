"""A durable catalog whose consensus is restored from an older copy, between SIGKILLs of
its writer (``colmz.arrangement.identity``, "Rolled-back metadata"; ``colmz.catalog.store``).

A child process commits transactions in a loop (each writes ``i`` into ``a`` and ``i, -i``
into ``b`` at time ``i``, with maintenance every 4); the parent kills it at a random moment,
reopens and checks all-or-nothing, and at random points copies ``consensus.sqlite`` aside.
After at least one more child ran, it restores that older copy and checks that nothing
newer is lost or overwritten:

* the catalog refuses to open (``MetadataRolledBack``), or -- where the documented rule
  cannot tell -- each table's arrangement gc deletes no part written after the copy;
* the catalog handle that read the newer record refuses to commit over the older one;
* the newest consensus put back, the catalog holds exactly what it held before.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

import colmz
from colmz.arrangement import Arrangement
from colmz.arrangement.errors import MetadataRolledBack
from colmz.catalog.store import CatalogStore
from colmz.storage.url import open_location

_CHILD = """
import sys
import colmz
cat = colmz.Catalog(sys.argv[1], maintain_every=4)
if "a" not in cat:
    cat.execute("CREATE TABLE a (k INT); CREATE TABLE b (k INT)")
i = cat.now
print("ready", flush=True)
while True:
    i += 1
    cat.execute(f"INSERT INTO a VALUES ({i}); INSERT INTO b VALUES ({i}), ({-i})")
"""


def q(cat, sql):
    return sorted(next(iter(r.values())) for r in cat.sql(sql).to_pylist())


def copy_db(src, dst) -> None:
    with sqlite3.connect(src) as s, sqlite3.connect(dst) as d:
        s.backup(d)  # a consistent copy, its write-ahead log included


def campaign(tmp_path, kills: int, seed: int) -> dict:
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    store = tmp_path / "store"
    db = store / "consensus.sqlite"
    rng = random.Random(seed)
    stats = {"kills": 0, "rollbacks": 0, "refused": 0, "undetected": 0, "writer_refused": 0}
    taken = None
    for k in range(kills):
        child = subprocess.Popen([sys.executable, str(script), str(store)], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.2, 1.0))
        child.send_signal(signal.SIGKILL)
        child.wait()
        stats["kills"] += 1
        cat = colmz.Catalog(store)
        a, b = q(cat, "SELECT * FROM a"), q(cat, "SELECT * FROM b")
        assert sorted(b) == sorted(a + [-x for x in a])
        assert a == list(range(1, cat.now + 1))
        loc = open_location(str(store))
        if taken is None:
            if k < kills - 1 and (k == 0 or rng.random() < 0.6):
                bak = tmp_path / f"bak-{k}.sqlite"
                copy_db(db, bak)
                taken = (bak, set(loc.blob.list_keys("")))
            continue
        if k < kills - 1 and rng.random() < 0.4:
            continue
        bak, keys_then = taken
        taken = None
        newest = tmp_path / f"newest-{k}.sqlite"
        copy_db(db, newest)
        keys_now = set(loc.blob.list_keys(""))
        copy_db(bak, db)
        stats["rollbacks"] += 1
        try:
            CatalogStore(loc).load()
        except MetadataRolledBack:
            stats["refused"] += 1
        else:
            # undetectable by the rule: no gc deletes a part written after the copy
            stats["undetected"] += 1
            for key in sorted({k.split("/parts/")[0] for k in keys_now if "/parts/" in k}):
                try:
                    gone = set(Arrangement.open(loc, name=key, create=False).gc(lease_seconds=0))
                except MetadataRolledBack:
                    continue
                assert not gone & (keys_now - keys_then), f"gc of {key} deleted a newer part"
        with pytest.raises(MetadataRolledBack):
            cat.execute(f"INSERT INTO a VALUES ({cat.now + 1}); INSERT INTO b VALUES (0)")
        stats["writer_refused"] += 1
        assert set(loc.blob.list_keys("")) >= keys_now - keys_then
        copy_db(newest, db)
        back = colmz.Catalog(store)
        assert (q(back, "SELECT * FROM a"), q(back, "SELECT * FROM b"), back.now) == (a, b, cat.now)
    return stats


def test_sigkill_and_restored_older_consensus_lose_nothing(tmp_path):
    stats = campaign(tmp_path, 4, seed=5)
    print("catalog campaign with rollbacks:", stats)
    assert stats["kills"] == 4 and stats["rollbacks"] >= 1


@pytest.mark.slow
def test_sigkill_and_restored_older_consensus_thorough(tmp_path):
    stats = campaign(tmp_path, 30, seed=6)
    print("catalog campaign with rollbacks:", stats)
    assert stats["kills"] == 30 and stats["rollbacks"] >= 5
