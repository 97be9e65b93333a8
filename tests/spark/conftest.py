"""One local[2] SparkSession for the whole test run (a JVM start costs ~10-20 s here).

Spark tests are marked ``spark`` so the kernel and structure suites run without a JVM
(``pytest -m "not spark"``). The session is built by ``colmz.spark.session`` itself, so the
tests also exercise what users get: PYSPARK_PYTHON, NUMBA_CACHE_DIR and the local defaults.
"""

from __future__ import annotations

import pytest

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark():
    import colmz.spark

    # A persistent per-user cache (warmed by session()) so workers load kernels, not compile.
    cache = colmz.spark.default_cache_dir()
    s = colmz.spark.session("local[2]", "colmz-tests", numba_cache_dir=cache, shuffle_partitions=2)
    yield s
    s.stop()
