"""``colmz.spark.daemon``: the worker daemon loads colmz before forking, single-threaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

PROBE = """
import json, os, sys, threading
from colmz.spark.daemon import SINGLE_THREADED, preload
preload()
from colmz.kernels.decorators import DISPATCHERS
print(json.dumps({
    "modules": [m for m in ("pyspark.worker", "pyarrow", "colmz.spark.sink", "colmz.spark.arrangement_io")
                if m in sys.modules],
    "env": {k: os.environ.get(k) for k in SINGLE_THREADED},
    "threads": threading.active_count(),
    "loaded": sum(1 for d in DISPATCHERS if getattr(d, "signatures", None)),
}))
"""


def test_preload_imports_and_loads_kernels_without_threads():
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["modules"] == ["pyspark.worker", "pyarrow", "colmz.spark.sink", "colmz.spark.arrangement_io"]
    assert got["env"]["OPENBLAS_NUM_THREADS"] == "1" and got["env"]["OMP_NUM_THREADS"] == "1"
    assert got["threads"] == 1  # nothing left running for the fork to lose
    assert got["loaded"] > 0  # the kernels are in memory before any worker is forked
