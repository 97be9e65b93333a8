"""One local[2] SparkSession for the whole test run (a JVM start costs ~10-20 s here).

Spark tests are marked ``spark`` so the kernel and structure suites run without a JVM
(``pytest -m "not spark"``). The session is built by ``colmz.spark.session`` itself, so the
tests also exercise what users get: PYSPARK_PYTHON, NUMBA_CACHE_DIR and the local defaults.
"""

from __future__ import annotations

import os

import pytest

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    import colmz.spark

    cache = os.environ.get("NUMBA_CACHE_DIR") or str(tmp_path_factory.mktemp("numba"))
    s = colmz.spark.session("local[2]", "colmz-tests", numba_cache_dir=cache, shuffle_partitions=2)
    yield s
    s.stop()
