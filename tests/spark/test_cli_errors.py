"""What a new user's mistakes get from ``colmz``: one line on standard error, the right status,
and no Spark session started for what can be checked before (no JVM here: these run in a
second or two).

Each test reproduces a reported failure of the command line as it was: a traceback naming a
library call instead of the flag, 80 lines of JVM tracebacks for a damaged part, messages
that contradict each other, a file created in the filesystem root.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import colmz
from colmz.spark import cli
from colmz.spark.cli import base


@pytest.fixture
def no_spark(monkeypatch):
    """``cli.main`` with every command's Spark start refused."""
    from colmz.spark.cli import consolidate, ct, sink, stream

    def refuse(args):
        raise AssertionError("a Spark session was started")

    for command in (sink, consolidate, stream, ct):
        monkeypatch.setattr(command, "start_spark", refuse)
    return cli


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def sink_store(path: Path) -> colmz.Arrangement:
    a = colmz.Arrangement.open(str(path), schema={"customer": pa.int64(), "region": pa.string(),
                                                   "plan": pa.string()}, name="arrangement")
    a.write(colmz.Updates({"customer": [1, 2], "region": ["eu", "us"], "plan": ["pro", "free"]},
                          time=[0, 1], diff=[1, 1]))
    a.seal(2)
    return a


def test_s3_store_without_consensus_names_the_flag(no_spark, capsys):
    # Was: a traceback ending in a ValueError naming open_location(...), status 1.
    for argv in (["read", "s3://bucket/view"], ["sink", "--store", "s3://bucket/view"],
                 ["snapshot", "s3://bucket/view", "out", "--as-of", "3"]):
        assert no_spark.main(argv) == base.EXIT_INPUT
        line = one_line(capsys.readouterr().err)
        assert "--consensus" in line and "open_location" not in line


def test_a_corrupt_part_is_one_line_before_spark(no_spark, tmp_path, capsys):
    # Was: ~80 lines of JVM and Python tracebacks from the executors' read of the part.
    a = sink_store(tmp_path / "st")
    key = sorted(a.referenced_keys())[0]
    (tmp_path / "st" / "blob" / key).write_bytes(b"this is not parquet")
    before = (a.seqno, a.meta())
    assert no_spark.main(["sink", "--store", str(tmp_path / "st"), "--ticks", "5"]) == base.EXIT_FAIL
    line = one_line(capsys.readouterr().err)
    assert key in line and "is damaged" in line and "not a readable Parquet file" in line
    again = colmz.Arrangement.open(str(tmp_path / "st"), create=False)
    assert (again.seqno, again.meta()) == before  # the store is unchanged
    # colmz read says the same, about the same part
    assert no_spark.main(["read", str(tmp_path / "st")]) == base.EXIT_FAIL
    assert key in one_line(capsys.readouterr().err)


def test_a_part_damaged_inside_a_spark_task_is_named():
    # A part whose footer reads but whose pages do not fails inside a Python worker; the
    # sink turns the worker's CorruptPart into the one line colmz read gives.
    from colmz.spark.cli.base import damaged_part

    spark_text = ("Job aborted due to stage failure: ...\norg.apache.spark.api.python.PythonException: "
                  "Traceback (most recent call last):\n  File ...\ncolmz.arrangement.errors.CorruptPart: "
                  "part 'arrangement/parts/x.parquet' is not a readable Parquet file: bad page\n\tat org...")
    assert damaged_part(RuntimeError(spark_text)) == (
        "part 'arrangement/parts/x.parquet' is not a readable Parquet file: bad page")
    assert damaged_part(RuntimeError("executor lost")) is None


@pytest.mark.parametrize("ticks", ["0", "-5", "x"])
def test_ticks_that_are_not_positive_get_one_message(capsys, ticks):
    # Was: "expected a positive integer, got 0" but "expected a non-negative integer, got -5".
    with pytest.raises(SystemExit) as e:
        cli.main(["sink", "--ticks", ticks])
    assert e.value.code == base.EXIT_INPUT
    assert f"expected a positive integer, got {ticks if ticks != 'x' else repr(ticks)}" in capsys.readouterr().err


def test_a_sqlite_consensus_in_the_root_is_refused(no_spark, tmp_path, capsys):
    # Was: sqlite:///rel.sqlite silently created /rel.sqlite.
    name = f"colmz-test-{tmp_path.name}.sqlite"
    with pytest.raises(SystemExit) as e:
        cli.main(["read", str(tmp_path), "--consensus", f"sqlite:///{name}"])
    assert e.value.code == base.EXIT_INPUT
    err = capsys.readouterr().err
    assert f"sqlite:///$PWD/{name}" in err and "filesystem root" in err
    assert not Path("/", name).exists()


def test_unknown_key_columns_are_refused_before_spark(no_spark, tmp_path, capsys):
    # Was: found only after Spark had started (its read of the events' schema).
    events = tmp_path / "e.parquet"
    pq.write_table(pa.table({"customer": [1], "plan": ["pro"], "valid_from": [0], "valid_to": [3]}), events)
    argv = ["sink", "--input", str(events), "--keys", "nosuch", "--value", "plan", "--store", str(tmp_path / "st")]
    assert no_spark.main(argv) == base.EXIT_INPUT
    line = one_line(capsys.readouterr().err)
    assert "key column 'nosuch' is not in the events" in line
    assert not (tmp_path / "st").exists()


def test_there_is_no_migrate_command(no_spark, capsys):
    # colmz 0.1 was never released: its store, and the command converting it, are gone
    from colmz.spark.cli import COMMANDS

    assert "migrate" not in COMMANDS
    with pytest.raises(SystemExit) as e:
        no_spark.main(["migrate", "old", "new"])
    assert e.value.code == 2 and "invalid choice: 'migrate'" in capsys.readouterr().err


def test_stream_writes_example_events_and_names_missing_flags(no_spark, tmp_path, capsys):
    # Was: nothing created events/; --input 'events/' is not a directory.
    assert no_spark.main(["stream", "--store", "s"]) == base.EXIT_INPUT
    assert "--input, --checkpoint, --keys are required" in one_line(capsys.readouterr().err)
    out = io.StringIO()
    assert no_spark.main(["stream", "--example-events", str(tmp_path / "events")], out=out) == 0
    assert "example events over ticks 0..99 in 10 files" in out.getvalue()
    table = pq.read_table(tmp_path / "events")
    assert table.column_names == ["customer", "region", "plan", "valid_from", "valid_to"]
    assert table.num_rows == 2000 and max(table.column("valid_from").to_pylist()) >= 42
    files = sorted((tmp_path / "events").glob("*.parquet"), key=lambda p: p.stat().st_mtime)
    firsts = [min(pq.read_table(f).column("valid_from").to_pylist()) for f in files]
    assert firsts == sorted(firsts)  # arrival order is time order
    assert no_spark.main(["stream", "--example-events", str(tmp_path / "events")]) == base.EXIT_INPUT
    assert "holds Parquet files already" in one_line(capsys.readouterr().err)


def test_read_and_a_corrupt_part_on_s3_with_postgresql(no_spark, tmp_path, capsys, s3_endpoint, pg_url):
    # The documented remote store: s3:// parts (moto here) and PostgreSQL consensus. colmz read
    # reads it without Spark; the footer check reads parts through the blob store, so a
    # damaged part on S3 is named in one line too.
    from storage_servers import fresh_schema_url, s3_url

    from colmz.storage.url import open_blob

    url, cons = s3_url(s3_endpoint), fresh_schema_url(pg_url)
    a = colmz.Arrangement.open(url, consensus=cons, schema={"k": pa.string()}, name="arrangement")
    a.write(colmz.Updates({"k": ["a", "b", "a"]}, time=[0, 1, 2], diff=[1, 1, 1]))
    a.seal(3)
    out = io.StringIO()
    assert no_spark.main(["read", url, "--consensus", cons, "--as-of", "1", "--json"], out=out) == 0
    s = json.loads(out.getvalue())
    assert (s["rows"], s["total_count"]) == (2, 2)
    key = sorted(a.referenced_keys())[0]
    open_blob(url).set(key, b"not parquet")
    assert no_spark.main(["read", url, "--consensus", cons]) == base.EXIT_FAIL
    assert key in one_line(capsys.readouterr().err)


@pytest.mark.spark
def test_a_part_with_damaged_pages_is_one_line_after_spark(tmp_path):
    # The footer reads, the pages do not: only the executors find it. Was ~40 lines of the
    # executor's and the task manager's logged tracebacks, then the one line; now the line.
    import subprocess
    import sys

    a = sink_store(tmp_path / "st")
    n = 5000
    a.write(colmz.Updates({"customer": list(range(n)), "region": ["eu"] * n, "plan": ["pro"] * n},
                          time=[2] * n, diff=[1] * n))
    a.seal(3)
    key = max(a.referenced_keys(), key=lambda k: (tmp_path / "st" / "blob" / k).stat().st_size)
    path = tmp_path / "st" / "blob" / key
    data = bytearray(path.read_bytes())
    data[8 : len(data) // 2] = b"\xab" * (len(data) // 2 - 8)  # pages, not the footer
    path.write_bytes(bytes(data))
    assert pq.ParquetFile(path).metadata.num_rows == n  # the footer check passes it
    before = (a.seqno, a.meta())
    exe = Path(sys.executable).parent / "colmz"
    base_cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "colmz.spark.cli"]
    r = subprocess.run([*base_cmd, "sink", "--store", str(tmp_path / "st"), "--ticks", "6",
                        "--example-events", "33000", "--quiet"], capture_output=True, text=True, timeout=600)
    assert r.returncode == base.EXIT_FAIL, r.stderr
    lines = r.stderr.strip().splitlines()
    assert key in lines[-1] and "is damaged" in lines[-1]
    assert "Traceback" not in r.stderr and " ERROR " not in r.stderr, r.stderr
    again = colmz.Arrangement.open(str(tmp_path / "st"), create=False)
    assert (again.seqno, again.meta()) == before


# ----------------------------------------------------------------------------- the real entry point


def colmz_command() -> list[str]:
    """The installed ``colmz`` console script (else ``python -m colmz.spark.cli``)."""
    import sys

    exe = Path(sys.executable).parent / "colmz"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "colmz.spark.cli"]


def run_colmz(argv, cwd, env=None, **kw):
    import os
    import subprocess

    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*colmz_command(), *argv], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=120, **kw)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A workspace every error case runs in: a store ``st`` (sealed through 1), a link to it,
    a file, an empty directory, a file that is not Parquet, updates and events as Parquet, a
    store streamed with event ticks, and a ``psycopg`` that cannot be imported."""
    from colmz.spark.stream import TICK

    d = tmp_path_factory.mktemp("ws")
    sink_store(d / "st")
    (d / "link").symlink_to(d / "st")
    (d / "afile").write_text("not a directory\n")
    (d / "empty").mkdir()
    (d / "bad.parquet").write_text("not parquet\n")
    pq.write_table(pa.table({"k": ["a"], "time": [1], "diff": [1]}), d / "updates.parquet")
    (d / "events").mkdir()
    pq.write_table(pa.table({"customer": [1], "plan": ["pro"], "valid_from": [0], "valid_to": [3]}),
                   d / "events" / "e.parquet")
    ev = colmz.Arrangement.open(str(d / "evst"), schema={"customer": pa.int64(), "plan": pa.string()})
    ev.seal(3, properties={TICK: "event"})
    (d / "task.sql").write_text("CREATE CONTINUAL TASK c (k text) ON INPUT t AS (INSERT INTO c SELECT * FROM t);\n")
    (d / "holder").mkdir()
    sink_store(d / "holder" / "inner")
    (d / "nopsycopg" / "psycopg").mkdir(parents=True)
    (d / "nopsycopg" / "psycopg" / "__init__.py").write_text("raise ImportError(\"No module named 'psycopg'\")\n")
    return d


#: (argv, what stderr's one line says); ``{d}`` is the workspace. Each was a traceback with
#: status 1, a wrong answer with status 0, or found only after Spark had started.
ERROR_CASES = {
    # unknown or unusable store URLs
    "s3x": (["read", "s3x://bucket/p"], "scheme 's3x'"),
    "gs": (["read", "gs://bucket/p"], "scheme 'gs'"),
    "ftp": (["sink", "--store", "ftp://host/p"], "scheme 'ftp'"),
    "http": (["consolidate", "http://host/p", "{d}/out"], "scheme 'http'"),
    "sqlite-store": (["read", "sqlite:///{d}/c.sqlite"], "give it with --consensus"),
    "file-host": (["read", "file://host/data/st"], "file:///absolute/path"),
    "mem": (["read", "mem://x"], "inside one process"),
    "no-psycopg": (["read", "{d}/st", "--consensus", "postgresql://u@127.0.0.1:9/db"],
                   "pip install 'colmz[postgres]'"),
    # a file where a directory is due, a directory under a file
    "store-file": (["sink", "--store", "{d}/afile"], "is a file"),
    "store-under-file": (["sink", "--store", "{d}/afile/st"], "lies under the file"),
    "catalog-file": (["ct", "--sql", "{d}/task.sql", "--input", "{d}/updates.parquet", "-o", "{d}/out",
                      "--catalog", "{d}/afile"], "is a file"),
    "checkpoint-file": (["stream", "--input", "{d}/events", "--store", "{d}/st2", "--checkpoint", "{d}/afile",
                         "--keys", "customer", "--value", "plan"], "--checkpoint"),
    "read-o-under-file": (["read", "{d}/st", "-o", "{d}/afile/x.parquet"], "lies under the file"),
    "read-o-url": (["read", "{d}/st", "-o", "gs://bucket/x.parquet"], "local path"),
    "read-o-dir": (["read", "{d}/st", "-o", "{d}/empty"], "is a directory"),
    # a path a command writes inside another store's directory, or a replaced output holding one
    "sink-store-in-blob": (["sink", "--store", "{d}/st/blob/new"], "inside the colmz store"),
    "stream-checkpoint-in-store": (["stream", "--input", "{d}/events", "--store", "{d}/st5", "--checkpoint",
                                    "{d}/st/blob/ck", "--keys", "customer", "--value", "plan"],
                                   "inside the colmz store"),
    "snapshot-into-other-store": (["snapshot", "{d}/evst", "{d}/st/blob/x", "--as-of", "1"],
                                  "inside the colmz store"),
    "read-o-other-store": (["read", "{d}/evst", "-o", "{d}/link/v.parquet"], "inside the colmz store"),
    "consolidate-over-stores": (["consolidate", "{d}/updates.parquet", "{d}/holder", "--overwrite"],
                                "holds the colmz store"),
    # outputs at, inside or above their input store, whatever --overwrite says
    "read-o-store": (["read", "{d}/st", "-o", "{d}/st"], "is the store"),
    "read-o-consensus": (["read", "{d}/st", "-o", "{d}/st/consensus.sqlite", "--overwrite"], "inside the store"),
    "snapshot-into-blob": (["snapshot", "{d}/st", "{d}/st/blob", "--as-of", "1", "--overwrite"], "inside the store"),
    "snapshot-via-link": (["snapshot", "{d}/st", "{d}/link/blob", "--as-of", "1", "--overwrite"],
                          "inside the store"),
    "snapshot-via-file-url": (["snapshot", "file://{d}/st", "{d}/st/blob", "--as-of", "1", "--overwrite"],
                              "inside the store"),
    "consolidate-in-place": (["consolidate", "{d}/st", "{d}/st", "--overwrite"], "is the store"),
    "consolidate-above": (["consolidate", "{d}/link", "{d}", "--overwrite"], "a directory holding the store"),
    # --as-of past the seal: every command taking it refuses it alike
    "snapshot-past-seal": (["snapshot", "{d}/st", "{d}/out", "--as-of", "5000"], "outside the final"),
    "read-past-seal": (["read", "{d}/st", "--as-of", "5000"], "outside the final"),
    # inputs
    "empty-dir": (["consolidate", "{d}/empty", "{d}/out"], "holds no Parquet files"),
    "events-empty-dir": (["sink", "--input", "{d}/empty", "--keys", "customer", "--store", "{d}/st3"],
                         "holds no Parquet files"),
    "not-parquet": (["consolidate", "{d}/bad.parquet", "{d}/out"], "magic bytes not found"),
    "not-a-store-sqlite": (["read", "{d}/empty", "--consensus", "sqlite:///{d}/c.sqlite"],
                           "the consensus 'sqlite:///"),
    "since-above-upper": (["consolidate", "{d}/updates.parquet", "{d}/out", "--since", "100", "--upper", "50"],
                          "--since 100 is not below --upper 50"),
    # column and store errors found from metadata, before Spark starts
    "consolidate-data": (["consolidate", "{d}/updates.parquet", "{d}/out", "--data", "nosuch"], "'nosuch'"),
    "consolidate-store-data": (["consolidate", "{d}/st", "{d}/out", "--data", "nosuch"], "'nosuch'"),
    "stream-keys": (["stream", "--input", "{d}/events", "--store", "{d}/st4", "--checkpoint", "{d}/ck",
                     "--keys", "nosuch", "--value", "plan"], "key column 'nosuch'"),
    "stream-tick": (["stream", "--input", "{d}/events", "--store", "{d}/evst", "--checkpoint", "{d}/ck",
                     "--keys", "customer", "--value", "plan"], "written with event ticks"),
    # usage
    "usage": (["read"], "the following arguments are required: store"),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_error_paths_are_one_line_and_status_2(ws, case):
    # The real console script: one line `colmz CMD: ...` naming the fix, status 2, no
    # traceback, and no Spark session (its start prints lines of its own on stderr).
    argv, says = ERROR_CASES[case]
    argv = [a.format(d=ws) for a in argv]
    before = (sink_store_state(ws / "st"), sorted(p.name for p in ws.iterdir()))
    env = {"PYTHONPATH": str(ws / "nopsycopg")} if case == "no-psycopg" else None
    r = run_colmz(argv, cwd=ws, env=env)
    assert r.returncode == base.EXIT_INPUT, r.stderr
    line = one_line(r.stderr)
    assert line.startswith(f"colmz {argv[0]}:") and says.format(d=ws) in line, line
    assert r.stdout == ""
    # nothing written: the store as it was, no new file beside it
    assert (sink_store_state(ws / "st"), sorted(p.name for p in ws.iterdir())) == before


def sink_store_state(path: Path) -> tuple:
    a = colmz.Arrangement.open(str(path), create=False)
    return a.seqno, a.meta(), sorted(p.name for p in (path / "blob").rglob("*"))


def test_version_and_a_closed_pipe(ws):
    import subprocess

    r = run_colmz(["--version"], cwd=ws)
    assert r.returncode == 0 and r.stdout.startswith("colmz ") and r.stderr == ""
    # `colmz read STORE | head -2`: the reader goes away after two lines. Was a BrokenPipeError
    # traceback (2 runs in 3); now quiet, as cat is. A store with many rows, so the pipe fills.
    big = colmz.Arrangement.open(str(ws / "big"), schema={"k": pa.int64()})
    n = 20_000
    big.write(colmz.Updates({"k": list(range(n))}, time=[0] * n, diff=[1] * n))
    big.seal(1)
    for _ in range(3):
        p = subprocess.Popen([*colmz_command(), "read", str(ws / "big"), "--limit", str(n)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout.readline() and p.stdout.readline()
        p.stdout.close()  # as head does after its lines
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) in (0, 141) and err == "", err


# ----------------------------------------------------------------------------- S3 sink failures


def test_s3_sink_without_credentials_is_named_before_any_part(ws, s3_endpoint, pg_url):
    # Issue 36 item 7. Was: Spark started, its tasks wrote 2 parts with unsigned requests
    # (which this S3 server stores with their chunk framing), the verification failed with "not
    # a readable Parquet file", status 1 -- and the parts stayed, so every later run on the
    # prefix was refused as MetadataLost. Now a write probe names the credentials, no Spark.
    import os

    from storage_servers import fresh_schema_url, s3_url

    from colmz.storage.url import open_blob

    url, cons = s3_url(s3_endpoint), fresh_schema_url(pg_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(ws / "empty")  # no ~/.aws either
    import subprocess

    r = subprocess.run([*colmz_command(), "sink", "--store", url, "--consensus", cons, "--ticks", "5"],
                       env=env, capture_output=True, text=True, timeout=120, cwd=ws)
    assert r.returncode == base.EXIT_INPUT, r.stderr
    line = one_line(r.stderr)
    assert "AWS_ACCESS_KEY_ID" in line and "Nothing was written" in line, line
    assert open_blob(url).list_keys("") == []


def test_a_failed_first_run_deletes_its_parts_on_s3(s3_endpoint, pg_url):
    # A new store whose first run failed after its tasks wrote parts: opening it finds parts
    # and no record (MetadataLost), which discard_run took for "committed state unknown" and
    # left every part -- bricking the prefix. With no record nothing is committed: all go.
    import time

    from storage_servers import fresh_schema_url, s3_url

    from colmz.arrangement.runs import write_run
    from colmz.spark.sink_store import NAME, SinkStore, discard_run, open_sink_store
    from colmz.storage.s3 import S3Blob

    url, cons = s3_url(s3_endpoint), fresh_schema_url(pg_url)
    blob = S3Blob.from_url(url, create=True)
    u = colmz.Updates({"k": [1, 2]}, time=[0, 1], diff=[1, 1])
    # Parts written a week ago (a long run, a slow clean-up): old enough that any store
    # opening them without a record takes them for lost metadata.
    week_ago = lambda: time.time() - 7 * 86400  # noqa: E731
    keys = [k for _ in range(2)
            for k in write_run(blob, u.schema, u, prefix=f"{NAME}/parts/", owner="job1", clock=week_ago).keys]
    assert sorted(discard_run(SinkStore(url, cons, None), "job1")) == sorted(keys)
    assert blob.list_keys(f"{NAME}/parts/") == []
    assert not open_sink_store(url, cons).exists  # a new store again, not MetadataLost


@pytest.mark.spark
def test_a_failed_s3_sink_leaves_its_prefix_usable(spark, s3_endpoint, pg_url, monkeypatch, capsys):
    # The whole run on S3 + PostgreSQL: its tasks write parts, then it fails (the verification
    # here); every part it wrote is deleted (docs/spark.md), and the next run succeeds.
    from storage_servers import fresh_schema_url, s3_url

    from colmz.spark.cli import sink as sink_cli
    from colmz.storage.url import open_blob

    url, cons = s3_url(s3_endpoint), fresh_schema_url(pg_url)
    argv = ["sink", "--store", url, "--consensus", cons, "--ticks", "6", "--example-events", "200",
            "--verify-with", "local", "--quiet"]
    written = []

    def fail(events, after, spec, sample):
        written.extend(open_blob(url).list_keys("arrangement/parts/"))
        raise base.VerificationError("injected after the tasks wrote their parts")

    monkeypatch.setattr(sink_cli, "verify_local", fail)
    assert cli.main(argv, out=io.StringIO()) == base.EXIT_FAIL
    assert "injected" in one_line(capsys.readouterr().err)
    assert written  # the tasks had written parts
    assert open_blob(url).list_keys("arrangement/parts/") == []
    monkeypatch.undo()
    out = io.StringIO()
    assert cli.main([*argv, "--json"], out=out) == 0, capsys.readouterr().err
    assert json.loads(out.getvalue())["sealed_through"] == 5
    assert cli.main(["read", url, "--consensus", cons, "--json"], out=(out := io.StringIO())) == 0
    assert json.loads(out.getvalue())["as_of"] == 5


def test_a_part_the_run_wrote_that_reads_back_damaged_names_credentials():
    # Executors without the driver's AWS credentials send unsigned requests; some servers
    # store the streaming framing with the bytes, and the run's own parts read back damaged.
    # Was: "store ... is damaged", as if the store had been damaged before the run.
    from colmz.arrangement.errors import CorruptPart
    from colmz.spark.cli.sink import written_part_unreadable

    own = CorruptPart("part 'arrangement/parts/179-abc123_x.parquet' is not a readable Parquet file: magic")
    line = written_part_unreadable(own, "abc123", "s3://b/p")
    assert "this run wrote" in line and "AWS_ACCESS_KEY_ID" in line and "deleted" in line
    assert "AWS" not in written_part_unreadable(own, "abc123", "/data/st")
    assert written_part_unreadable(own, "other", "s3://b/p") is None  # a part of the store: damaged
    spark_text = RuntimeError("Job aborted ...\ncolmz.arrangement.errors.CorruptPart: part "
                              "'arrangement/parts/179-abc123_x.parquet' is not a readable Parquet file: bad\n\tat")
    assert "this run wrote" in written_part_unreadable(spark_text, "abc123", "s3://b/p")


@pytest.mark.spark
def test_a_bad_micro_batch_is_one_line(tmp_path):
    # Found by Spark in a micro-batch (valid_to < valid_from). Was ~79 lines of Spark's and
    # Java's trace before colmz's line; now the line (the trace only with --verbose).
    (tmp_path / "events").mkdir()
    pq.write_table(pa.table({"customer": [1, 2], "plan": ["pro", "free"], "valid_from": [0, 5],
                             "valid_to": [3, 2]}), tmp_path / "events" / "e.parquet")
    r = run_colmz(["stream", "--input", "events", "--store", "st", "--checkpoint", "ck", "--keys", "customer",
                   "--value", "plan", "--available-now", "--quiet"], cwd=tmp_path)
    assert r.returncode == base.EXIT_INPUT, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("colmz stream: bad input:") and "valid_to" in lines[-1], r.stderr
    assert "Traceback" not in r.stderr and " ERROR " not in r.stderr and "\tat " not in r.stderr, r.stderr
    # --verbose: the same line last, Spark's trace of the failed batch before it
    v = run_colmz(["stream", "--input", "events", "--store", "st", "--checkpoint", "ck", "--keys", "customer",
                   "--value", "plan", "--available-now", "--quiet", "--verbose"], cwd=tmp_path)
    assert v.returncode == base.EXIT_INPUT and v.stderr.strip().splitlines()[-1] == lines[-1], v.stderr
    assert "Traceback" in v.stderr and "InputError" in v.stderr


def test_snapshot_of_a_small_store_needs_no_spark(no_spark, tmp_path):
    # Was: a Spark session (5-8 s) for what colmz read answers in 0.04 s.
    a = sink_store(tmp_path / "st")
    a.write(colmz.Updates({"customer": [1, 3], "region": ["eu", "eu"], "plan": ["pro", "pro"]},
                          time=[2, 2], diff=[-1, 2]))
    a.seal(4)
    out = io.StringIO()
    assert no_spark.main(["snapshot", str(tmp_path / "st"), str(tmp_path / "snap"), "--as-of", "3", "--json",
                          "-q"], out=out) == 0
    s = json.loads(out.getvalue())
    assert s["ran_on"] == "local" and s["input_rows"] == 4 and s["output_rows"] == 2
    got = sorted(tuple(r.values()) for r in pq.read_table(tmp_path / "snap").to_pylist())
    assert got == [(2, "us", "free", 3, 1), (3, "eu", "pro", 3, 2)]
    schema = pq.read_schema(next((tmp_path / "snap").glob("part-*.parquet")))
    assert [(f.name, str(f.type), f.nullable) for f in schema][-2:] == [("time", "int64", False),
                                                                         ("diff", "int64", False)]
    assert no_spark.main(["consolidate", str(tmp_path / "st"), str(tmp_path / "c"), "--since", "1", "-q"],
                         out=io.StringIO()) == 0
    got = sorted(tuple(r.values()) for r in pq.read_table(tmp_path / "c").to_pylist())
    assert got == [(1, "eu", "pro", 1, 1), (1, "eu", "pro", 2, -1), (2, "us", "free", 1, 1), (3, "eu", "pro", 2, 2)]
