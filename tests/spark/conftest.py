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
def spark():
    import colmz.spark

    # Spark's Python workers take the environment the JVM started with: the moto S3 server's
    # dummy credentials (tests/storage_servers.py) must be there before it starts, whichever
    # test starts the session, or the workers' S3 requests go unsigned.
    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                 ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(k, v)
    # A persistent per-user cache (warmed by session()) so workers load kernels, not compile.
    cache = colmz.spark.default_cache_dir()
    s = colmz.spark.session("local[2]", "colmz-tests", numba_cache_dir=cache, shuffle_partitions=2)
    yield s
    s.stop()
