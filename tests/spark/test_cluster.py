"""End to end on ``local-cluster[2,1,1024]``: separate executor JVMs get their environment,
the UDFs serialize, the sink job verifies, and a retried run-writing task does not duplicate output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


def test_sink_on_local_cluster(tmp_path):
    job = Path(__file__).with_name("cluster_job.py")
    r = subprocess.run([sys.executable, str(job), str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    workers = res["workers"]
    # Executors' Python workers run the driver's interpreter with colmz's environment ...
    assert {w["python"] for w in workers} == {res["driver_python"]}
    assert {w["NUMBA_CACHE_DIR"] for w in workers} == {res["cache"]}
    assert {w["NUMBA_NUM_THREADS"] for w in workers} == {"1"}
    # ... under executor JVMs that are not the driver's: two of them.
    parents = {int(w["ppid"]) for w in workers}
    assert res["driver_jvm"] not in parents
    assert len(parents) == 2
    # The sink job ran, verified against Spark SQL, and is idempotent.
    assert res["status"] == 0
    s = res["summary"]
    assert s["updates_written"] > 0 and s["verified_ticks"] == [0, 20, 39, 59]
    assert res["rerun"]["updates_written"] == 0
    # A task that died after emitting rows was retried; the store holds its rows once.
    assert res["retry_equal"] and res["retry_rows_stored"] == res["retry_rows_direct"] > 0
