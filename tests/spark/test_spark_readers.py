"""Spark reads an arrangement's current contents from ``Arrangement.parts()`` alone, with
``spark.read.parquet``, and gets what ``Arrangement.read()`` gives (after consolidation)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import colmz
from colmz.arrangement import Arrangement

pytestmark = pytest.mark.spark

SCHEMA = {"k": pa.string(), "n": pa.int64()}


def ups(rows) -> colmz.Updates:
    k, n, t, d = zip(*rows)
    return colmz.Updates({"k": pa.array(k, pa.string()), "n": pa.array(n, pa.int64())},
                         time=np.array(t, np.uint64), diff=np.array(d, np.int64))


def spark_contents(spark, a: Arrangement) -> Counter:
    from pyspark.sql import functions as F

    frames = []
    for kind in ("trace", "unsealed"):
        parts = [p for p in a.parts() if p.kind == kind]
        if parts:
            # Spark has no unsigned type: Parquet's uint64 ``time`` reads as decimal(20,0).
            df = spark.read.parquet(*[p.url for p in parts])
            frames.append(df.where(F.col("time") >= F.lit(parts[0].min_time)))
    df = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    rows = (df.withColumn("time", F.greatest(F.col("time"), F.lit(a.since())).cast("long"))
            .groupBy("k", "n", "time").agg(F.sum("diff").alias("diff"))
            .where(F.col("diff") != 0)
            .collect())
    return Counter({(r["k"], r["n"], r["time"]): r["diff"] for r in rows})


def test_spark_reads_parts_as_read_does(spark, tmp_path):
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA, fan_in=2, part_rows=2)
    for t in range(6):
        a.write(ups([(f"k{i}", i % 2, t, 1 if (i + t) % 3 else -1) for i in range(4)]))
        a.seal(t + 1)
        if t % 2:
            a.maintain()
    a.advance_since(3)
    a.write(ups([("z", 0, 9, 1), ("k1", 1, 8, 1)]))
    assert {p.kind for p in a.parts()} == {"trace", "unsealed"}
    expected = Counter({(k, n, t): d for k, n, t, d in a.read().to_pylist()})
    assert expected and spark_contents(spark, a) == expected


# ----------------------------------------------------------------------------- checked reads

#: A value only one row holds: its 8 little-endian bytes appear once in a part (in its plain,
#: uncompressed int64 column), so a flipped bit there still decodes -- only the digest the
#: state recorded can tell the part was changed.
MARK = 0x1122334455667788


def _flipped_store(path) -> tuple[Arrangement, str]:
    """A store whose one part has a bit flipped inside the value :data:`MARK`: the Parquet
    file reads, with the same row count and diffs, and one different value."""
    a = Arrangement.open(str(path), SCHEMA)
    # MARK is neither the least nor the greatest value, so no statistics repeat its bytes
    values = {7: MARK, 8: -(2**62), 9: 2**62}
    a.write(ups([(f"k{i}", values.get(i, i), 1, 1) for i in range(50)]))
    a.seal(2)
    (key,) = a.referenced_keys()
    part = path / "blob" / key
    data = bytearray(part.read_bytes())
    at = data.find(MARK.to_bytes(8, "little"))
    assert at > 0 and data.find(MARK.to_bytes(8, "little"), at + 1) < 0
    data[at] ^= 0x01
    part.write_bytes(bytes(data))
    # Unchecked, the part is a readable Parquet file with one changed value.
    import pyarrow.parquet as pq

    assert (MARK ^ 0x01) in pq.read_table(part).column("n").to_pylist()
    return a, key


def test_spark_executors_verify_each_part_against_its_recorded_check(spark, tmp_path):
    # Executors used to read parts by key alone (the checks lived in a registry of the
    # process that loaded the state), so this read returned the flipped value.
    from colmz.spark.arrangement_io import part_list, read_parts

    a, key = _flipped_store(tmp_path / "s")
    parts = part_list(a)
    assert [p.key for p, _ in parts] == [key] and parts[0][0].check.digest is not None
    with pytest.raises(Exception, match="CorruptPart") as e:
        read_parts(spark, str(tmp_path / "s"), a.schema, parts).collect()
    assert key in str(e.value) and "digest" in str(e.value)


def test_colmz_snapshot_on_spark_refuses_a_flipped_byte_in_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    _, key = _flipped_store(tmp_path / "s")
    exe = Path(sys.executable).parent / "colmz"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "colmz.spark.cli"]
    r = subprocess.run([*cmd, "snapshot", str(tmp_path / "s"), str(tmp_path / "out"), "--as-of", "1",
                        "--spark", "--quiet"], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0, r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("colmz snapshot: failed") and "is damaged" in last, r.stderr
    assert key in last and "digest" in last, r.stderr
    assert "Traceback" not in r.stderr and " ERROR " not in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
