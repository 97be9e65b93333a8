"""The sink's store (``colmz.spark.sink_store``) without Spark: what a failed run deletes."""

from __future__ import annotations

import pyarrow as pa

import colmz
from colmz.arrangement.runs import owned_keys, write_run
from colmz.spark.sink_store import NAME, discard_run, open_sink_store
from colmz.storage.url import open_blob

SCHEMA = {"k": pa.int64()}
PREFIX = f"{NAME}/parts/"


def ups(*keys):
    return colmz.Updates({"k": pa.array(keys, pa.int64())}, time=[0] * len(keys), diff=[1] * len(keys))


def test_a_commit_that_landed_after_all_keeps_its_parts(tmp_path):
    url = str(tmp_path / "s")
    colmz.Arrangement.open(url, schema=SCHEMA, name=NAME)
    store = open_sink_store(url)  # this job's view: nothing committed yet
    run = write_run(open_blob(url), store.arrangement.schema, ups(1, 2), prefix=PREFIX, owner="jobA")
    # The job's commit reached consensus, but the job saw an error (a timed-out reply).
    colmz.Arrangement.open(url, name=NAME).append_runs([run], seal=1)
    assert discard_run(store, "jobA") == []
    assert colmz.Arrangement.open(url, name=NAME).read().to_pylist() == [(1, 0, 1), (2, 0, 1)]


def test_two_first_runs_into_one_new_directory(tmp_path):
    url = str(tmp_path / "new")
    a = open_sink_store(url)
    assert a.arrangement is None
    a.prepare()
    ra = write_run(open_blob(url), tuple(ups().schema), ups(1), prefix=PREFIX, owner="jobA")
    b = open_sink_store(url)  # the directory exists, but no arrangement: new for job B too
    assert b.arrangement is None
    rb = write_run(open_blob(url), tuple(ups().schema), ups(7), prefix=PREFIX, owner="jobB")
    colmz.Arrangement.open(url, schema=SCHEMA, name=NAME).append_runs([rb], seal=1)
    # Job A loses (the store was created under it) and discards: job B's commit stays whole.
    assert discard_run(a, "jobA") == list(ra.keys)
    arr = colmz.Arrangement.open(url, name=NAME, create=False)
    arr.validate()
    assert arr.read().to_pylist() == [(7, 0, 1)]
    assert set(arr.store.list_keys(arr.prefix)) == arr.referenced_keys()


def test_a_failed_first_run_leaves_an_empty_store_the_next_run_starts_from(tmp_path):
    url = str(tmp_path / "new")
    a = open_sink_store(url)
    a.prepare()
    ra = write_run(open_blob(url), tuple(ups().schema), ups(1), prefix=PREFIX, owner="jobA")
    assert discard_run(a, "jobA") == list(ra.keys)
    assert owned_keys(open_blob(url), PREFIX, "jobA") == []
    again = open_sink_store(url)
    assert again.arrangement is None  # a new store: nothing was ever committed
