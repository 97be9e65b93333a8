"""What every ``colmz`` command shares: exit codes, argument types, errors, progress, Spark.

Design
------
A command module (``colmz.spark.cli.sink``, ``read``, ...) adds its parser, runs, and renders
its summary; this module holds what they have in common, so no command imports another:

* **Exit codes** -- :data:`EXIT_OK` 0, :data:`EXIT_FAIL` 1 (the store is unchanged),
  :data:`EXIT_INPUT` 2 (bad input or usage, as argparse's own), :data:`EXIT_INTERRUPTED` 130.
* **Errors** -- :class:`InputError` (bad input, status 2) and :data:`FAILURES` (a store that
  cannot be used, a failed verification: status 1); both print one line and no traceback.
  Anything else is a bug and keeps its traceback.
* **Argument types** -- :func:`csv_list`, :func:`nonneg`, :func:`positive`,
  :func:`consensus_url` (a ``postgresql://`` URL needs psycopg installed): argparse calls
  them, so a bad value is one usage line and status 2.
* **Checks before Spark** -- each a one-line :class:`InputError`: :func:`check_store_url`
  (schemes the command line can use, a file given as a store), :func:`output_path` (local,
  not under a file), :func:`check_apart` (an output never at, inside or above an input store,
  real paths and symlinks resolved; ``s3://`` by bucket and prefix) and
  :func:`check_outside_stores` (nothing written inside any store's directory, no store
  replaced by ``--overwrite``), :func:`check_as_of` (the one ``--as-of`` rule: a final,
  uncompacted tick), :func:`parquet_schema` (an input's columns from its footers),
  :func:`probe_store_writes` (an ``s3://`` store that cannot take parts, e.g. no AWS
  credentials, named before a job writes any).
* **Progress** -- :class:`Progress` (a bar on a terminal, a line per phase elsewhere, nothing
  with ``--quiet``) and its :class:`Phase`.
* **Spark** -- :func:`start_spark`: the session a command runs on (the quick-start JVM on a
  local master); :func:`stop_started_sessions` stops it when the command ends (a session the
  caller had running is left running).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import threading
import time as _time
import urllib.parse
import uuid
from collections.abc import Sequence
from pathlib import Path

from colmz.arrangement import ArrangementError
from colmz.progress import Bar
from colmz.spark.schemas import InputError
from colmz.spark.sink_store import SinkStore, SinkStoreError, open_sink_store
from colmz.storage.url import local_path

__all__ = [
    "EXIT_FAIL",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "FAILURES",
    "damaged_part",
    "InputError",
    "Phase",
    "Progress",
    "STARTED",
    "VerificationError",
    "STORE_SCHEMES",
    "add_spark_options",
    "as_input_error",
    "check_apart",
    "check_as_of",
    "check_exists",
    "check_outside_stores",
    "check_store_url",
    "consensus_url",
    "credential_hint",
    "csv_list",
    "enclosing_store",
    "is_store_dir",
    "location_key",
    "nonneg",
    "not_a_store",
    "open_input_store",
    "output_path",
    "positive",
    "print_json",
    "probe_store_writes",
    "parquet_schema",
    "read_parquet",
    "redact",
    "start_spark",
    "stop_started_sessions",
    "url_scheme",
]

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2
#: Exit status of a command stopped by SIGINT (128 + the signal's number, as shells report it).
EXIT_INTERRUPTED = 128 + signal.SIGINT


class VerificationError(RuntimeError):
    """The store would not equal the view at some verified tick (nothing was committed)."""


#: Failures reported as ``colmz CMD: failed, store unchanged: ...`` with status 1.
FAILURES: tuple[type[BaseException], ...] = (SinkStoreError, VerificationError, ArrangementError)


def damaged_part(e: BaseException) -> str | None:
    """The line naming a part a Spark task found damaged (``CorruptPart``/``MissingPart``
    raised by ``colmz.arrangement.parts.read_part`` in a Python worker), else None."""
    if isinstance(e, (KeyboardInterrupt, SystemExit)):
        return None
    found = re.findall(r"(?:CorruptPart|MissingPart): (part .+)", str(e))
    return found[-1].strip() if found else None


# ----------------------------------------------------------------------------- argument types


def one_line(message: object) -> str:
    r"""``message`` as the one line a command's error is printed on: DuckDB's context lines
    (``LINE 1: ...`` and the carets under it) dropped, the rest joined.

    >>> one_line('Binder Error: no "x"\nCandidate bindings: "key"\n\nLINE 1: SELECT x\n               ^')
    'Binder Error: no "x" Candidate bindings: "key"'
    """
    lines = [ln.strip() for ln in str(message).splitlines()]
    kept = [ln for ln in lines if ln and not ln.startswith("LINE ") and set(ln) != {"^"}]
    return " ".join(kept)


def csv_list(s: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (column lists)."""
    return [x.strip() for x in s.split(",") if x.strip()]


def _integer(s: str, what: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None


def nonneg(s: str) -> int:
    """A non-negative integer argument (a time)."""
    v = _integer(s, "a non-negative integer")
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {v}")
    return v


def positive(s: str) -> int:
    """A positive integer argument (a count); ``0`` and ``-5`` get the same message."""
    v = _integer(s, "a positive integer")
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def consensus_url(s: str) -> str:
    """A consensus URL: ``postgresql://...`` or ``sqlite:///absolute/path``.

    ``sqlite:///name.sqlite`` is an absolute path in the filesystem root, almost always a
    relative path meant; it is refused with the absolute spelling rather than creating a file
    in ``/`` (``colmz.storage.url.sqlite_path``, the library's own rule).

    >>> consensus_url("sqlite:///tmp/c.sqlite")
    'sqlite:///tmp/c.sqlite'
    >>> consensus_url("sqlite:///c.sqlite")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'sqlite:///c.sqlite' names '/c.sqlite', a file in the filesystem root; for a path relative to here write sqlite:///ABSOLUTE/PATH, e.g. sqlite:///$PWD/c.sqlite
    """
    parts = urllib.parse.urlsplit(s)
    if parts.scheme == "sqlite":
        from colmz.storage.url import sqlite_path

        try:
            sqlite_path(s)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return s
    if parts.scheme in ("postgresql", "postgres"):
        try:
            import psycopg  # noqa: F401 - the driver a postgresql:// consensus needs
        except ImportError:
            raise argparse.ArgumentTypeError("a postgresql:// consensus needs psycopg, which is not "
                                             "installed: pip install 'colmz[postgres]'") from None
        return s
    raise argparse.ArgumentTypeError(f"expected postgresql://... or sqlite:///absolute/path, got {s!r}")


def add_spark_options(sp: argparse.ArgumentParser) -> None:
    """The options of every command that runs Spark (``--master``, ``--partitions``, ...)."""
    sp.add_argument("--master", default="local[2]", help="Spark master (default: %(default)s); "
                    "e.g. local[*], local-cluster[2,1,1024], yarn")
    sp.add_argument("--partitions", type=positive, default=None,
                    help="spark.sql.shuffle.partitions (default: the local cores)")
    sp.add_argument("--buckets", type=positive, default=None,
                    help="key buckets of the shuffle (default: --partitions)")
    sp.add_argument("--quiet", "-q", action="store_true", help="print only the summary")
    sp.add_argument("--json", action="store_true", help="print the summary as JSON")


# ----------------------------------------------------------------------------- checks


@contextlib.contextmanager
def as_input_error():
    """Report the column and argument checks' ``TypeError``/``ValueError`` as bad input.

    Only wrapped around checks that run before anything is written; everywhere else such an
    exception is a bug and keeps its traceback.
    """
    try:
        yield
    except InputError:
        raise
    except (TypeError, ValueError) as e:
        raise InputError(str(e)) from e


def check_exists(path: str, what: str) -> None:
    if not Path(path).exists():
        raise InputError(f"{what} {path!r} does not exist")


#: Store URL schemes the command line takes: a path, ``file:///abs/path``, ``s3://``.
STORE_SCHEMES = ("", "file", "s3")


def url_scheme(url: str) -> str:
    """The scheme of a store or output URL, ``""`` for a plain path.

    >>> url_scheme("out/x"), url_scheme("file:///a"), url_scheme("S3://b/p")
    ('', 'file', 's3')
    """
    return urllib.parse.urlsplit(url).scheme.lower() if "://" in url else ""


def check_store_url(url: str, consensus: str | None, flag: str = "store") -> None:
    """Refuse a store URL the command line cannot use, as bad input naming ``flag``.

    Unknown schemes (``gs://``, ``http://``, a ``sqlite://`` consensus URL given as the
    store, ``mem://`` -- a store inside one process), ``file://host/...``, an ``s3://`` store
    without ``--consensus`` (an object store has no compare-and-set) and a path that is a file.

    >>> check_store_url("gs://bucket/x", None)
    Traceback (most recent call last):
    ...
    colmz.spark.schemas.InputError: store 'gs://bucket/x' has the scheme 'gs', which colmz cannot store into; give a directory, file:///absolute/path or s3://bucket/prefix (with --consensus)
    """
    scheme = url_scheme(url)
    if scheme == "sqlite":
        raise InputError(f"{flag} {url!r} is a consensus URL: give it with --consensus, and the store's "
                         "directory or s3://bucket/prefix as the store")
    if scheme == "mem":
        raise InputError(f"{flag} {url!r} is an in-memory store, which lives inside one process; the colmz "
                         "command needs a directory, file:///absolute/path or s3://bucket/prefix")
    if scheme not in STORE_SCHEMES:
        raise InputError(f"{flag} {url!r} has the scheme {scheme!r}, which colmz cannot store into; give a "
                         "directory, file:///absolute/path or s3://bucket/prefix (with --consensus)")
    if scheme == "s3":
        if consensus is None:
            raise InputError(f"{flag} {url!r} is on S3, which has no compare-and-set: give its metadata "
                             "database with --consensus postgresql://user@host/db or sqlite:///absolute/path")
        if not urllib.parse.urlsplit(url).netloc:
            raise InputError(f"{flag} {url!r} names no bucket: give s3://bucket/prefix")
        return
    try:
        path = local_path(url)
    except ValueError as e:  # file://host/...
        raise InputError(f"{flag}: {e}") from None
    if path.is_file():
        raise InputError(f"{flag} {url!r} is a file; a store is a directory")
    if _under_file(path) is not None:
        raise InputError(f"{flag} {url!r} lies under the file {str(_under_file(path))!r}; a store is a directory")


def _under_file(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is a file (nothing can be created there)."""
    for parent in path.absolute().parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def output_path(output: str, flag: str, *, directory: bool) -> Path:
    """The local path an output names (a path or ``file:///...``), checked before anything runs:
    not a URL of another scheme, not under a file, and (``directory=False``) not a directory."""
    scheme = url_scheme(output)
    if scheme not in ("", "file"):
        raise InputError(f"{flag} {output!r}: outputs are written to a local path or file:///absolute/path, "
                         f"not {scheme}://")
    try:
        path = local_path(output)
    except ValueError as e:
        raise InputError(f"{flag}: {e}") from None
    under = _under_file(path)
    if under is not None:
        raise InputError(f"{flag} {output!r} lies under the file {str(under)!r}; give a path in a directory")
    if not directory and path.is_dir():
        raise InputError(f"{flag} {output!r} is a directory; give the Parquet file to write")
    return path


def location_key(url: str) -> tuple[str, tuple[str, ...]]:
    """Where ``url`` keeps its files, comparable by prefix: ``("file", parts)`` of the real path
    (symlinks resolved, also of a path that does not exist yet) or ``("s3://bucket", parts)`` of
    the prefix.

    >>> location_key("s3://b/p/q?region=x")
    ('s3://b', ('p', 'q'))
    """
    scheme = url_scheme(url)
    if scheme not in ("", "file"):
        parts = urllib.parse.urlsplit(url)
        return f"{scheme}://{parts.netloc}", tuple(x for x in parts.path.split("/") if x)
    return "file", Path(os.path.realpath(local_path(url))).parts


def check_apart(output: str, flag: str, stores: Sequence[str]) -> None:
    """Refuse an ``output`` that is, lies inside or contains one of ``stores`` (input stores):
    writing it would replace the store's parts or metadata, whatever ``--overwrite`` says.

    >>> check_apart("s3://b/st2", "output", ["s3://b/st?region=x"])  # another prefix
    >>> check_apart("/data/st/blob", "output", ["/data/st"])
    Traceback (most recent call last):
    ...
    colmz.spark.schemas.InputError: output '/data/st/blob' is inside the store '/data/st': writing it would overwrite the store (refused whatever --overwrite says); write it elsewhere
    >>> check_apart("s3://b", "output", ["s3://b/st?region=x"])
    Traceback (most recent call last):
    ...
    colmz.spark.schemas.InputError: output 's3://b' is a directory holding the store 's3://b/st?region=x': writing it would overwrite the store (refused whatever --overwrite says); write it elsewhere
    """
    out_scheme, out = location_key(output)
    for store in stores:
        scheme, st = location_key(store)
        if scheme != out_scheme:
            continue
        where = ("the store" if out == st else "inside the store" if out[: len(st)] == st
                 else "a directory holding the store" if st[: len(out)] == out else None)
        if where is not None:
            raise InputError(f"{flag} {output!r} is {where} {store!r}: writing it would overwrite the store "
                             "(refused whatever --overwrite says); write it elsewhere")


def probe_store_writes(url: str) -> None:
    """Write, read back and delete one small object in the ``s3://`` store at ``url`` before
    a job writes parts there, so a store that cannot take them is named before any is written.

    Without AWS credentials a request is sent unsigned: S3 refuses it (access denied), and
    some S3-compatible servers store the unsigned streaming framing with the bytes, so every
    part would read back as "not a readable Parquet file". Either is reported here, naming the
    credentials (:func:`credential_hint`).
    """
    from colmz.storage.s3 import S3Blob

    key = f"colmz-probe-{uuid.uuid4().hex}"
    value = b"colmz write probe " + key.encode()
    try:
        blob = S3Blob.from_url(url, create=True)  # the job creates a missing bucket too
        blob.set(key, value)
        try:
            back = blob.get(key)
        finally:
            blob.delete(key)
    except Exception as e:  # noqa: BLE001 - a store that cannot be written: said in one line
        raise InputError(f"store {url!r} cannot be written ({_first_line(e)}){credential_hint()}") from None
    if back != value:
        raise InputError(f"store {url!r} returns other bytes than were written (a probe object of {len(value)} "
                         f"bytes read back as {'nothing' if back is None else f'{len(back)} bytes'}): requests "
                         f"are probably sent unsigned{credential_hint()}")


def credential_hint() -> str:
    """``"; no AWS credentials found ..."`` when neither the environment nor the AWS files name
    any (the SDK's other sources, such as an instance role, are not probed), else ``""``."""
    env = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
           "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI")
    files = (os.environ.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"),
             os.environ.get("AWS_CONFIG_FILE", "~/.aws/config"))
    if any(os.environ.get(v) for v in env) or any(Path(f).expanduser().is_file() for f in files):
        return ""
    return ("; no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) "
            "in the environment. Nothing was written")


def is_store_dir(path: Path) -> bool:
    """Whether the local directory ``path`` holds a colmz store: an arrangement's
    ``consensus.sqlite`` beside ``blob/``."""
    return (path / "consensus.sqlite").is_file() and (path / "blob").is_dir()


def enclosing_store(url: str) -> Path | None:
    """The local store directory that ``url`` lies strictly inside (real paths), else None.

    >>> import tempfile, colmz, pyarrow as pa
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = colmz.Arrangement.open(str(d / "st"), schema={"k": pa.int64()})
    >>> enclosing_store(str(d / "st" / "blob" / "x")) == (d / "st").resolve(), enclosing_store(str(d / "st"))
    (True, None)
    """
    if url_scheme(url) not in ("", "file"):
        return None
    try:
        path = Path(os.path.realpath(local_path(url)))
    except ValueError:
        return None
    for parent in path.parents:
        if is_store_dir(parent):
            return parent
    return None


def check_outside_stores(url: str, flag: str, *, replaced: bool = False) -> None:
    """Refuse a path the command writes that lies inside any colmz store (its ``blob/`` is the
    store's: gc deletes what no commit names) or, when the command replaces it (``replaced``:
    an existing output with ``--overwrite``), that holds one."""
    inside = enclosing_store(url)
    if inside is not None:
        raise InputError(f"{flag} {url!r} is inside the colmz store {str(inside)!r}: writing there could "
                         "damage it or be deleted by its gc; give a path outside it")
    if not replaced or url_scheme(url) not in ("", "file"):
        return
    path = local_path(url)
    if path.is_dir():
        found = next(path.rglob("consensus.sqlite"), None)
        if found is not None and is_store_dir(found.parent):
            raise InputError(f"{flag} {url!r} holds the colmz store {str(found.parent)!r}: replacing it "
                             "would delete the store (refused whatever --overwrite says)")


def check_as_of(arr, as_of: int | None, url: str) -> int:
    """The time to read the arrangement ``arr`` at: ``as_of``, or its last final tick when None.

    Every command taking ``--as-of`` checks it here, before Spark starts: only the final,
    uncompacted ticks ``[since, seal - 1]`` have a known view (past the seal the store may
    still change; below ``since`` times were advanced).
    """
    seal = arr.get_seal()
    if seal == 0 or arr.schema is None:
        raise InputError(f"store {url!r} holds nothing final yet (nothing sealed)")
    last = (seal - 1) if seal is not None else None
    if as_of is None:
        if last is None:
            raise InputError(f"store {url!r} is closed for good; give --as-of")
        return last
    if as_of < arr.since() or (last is not None and as_of > last):
        raise InputError(f"--as-of {as_of} is outside the final, uncompacted ticks of store "
                         f"{url!r}: [{arr.since()}, {last}]")
    return as_of


def open_input_store(path: str, consensus: str | None = None) -> SinkStore | None:
    """The store at ``path`` when it is one (what ``colmz sink`` writes), checked; None for
    anything else (a Parquet path)."""
    scheme = url_scheme(path)
    if scheme not in ("", "file") or consensus is not None:
        check_store_url(path, consensus, "input" if scheme in ("", "file") else "store")
    if consensus is not None and url_scheme(consensus) == "sqlite":
        from colmz.storage.url import sqlite_path

        if not Path(sqlite_path(consensus)).is_file():  # a reader creates no database
            raise not_a_store(path, consensus)
    p = local_path(path) if scheme in ("", "file") else None
    if p is None or (p / "consensus.sqlite").is_file() or consensus is not None:
        store = open_sink_store(path, consensus)
        return store if store.exists else None
    return None


def not_a_store(url: str, consensus: str | None) -> InputError:
    """The error for a path that holds no colmz store, saying where colmz looked."""
    if consensus is not None:
        return InputError(f"{url!r} is not a colmz store: the consensus {redact(consensus)!r} has no "
                          "arrangement for it (check --consensus and the store URL)")
    return InputError(f"{url!r} is not a colmz store (no arrangement: no consensus.sqlite)")


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (error messages quote consensus URLs).

    >>> redact("postgresql://u:secret@h/db")
    'postgresql://u:***@h/db'
    """
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def parquet_schema(path: str, what: str):
    """The Spark schema of the Parquet file or directory at ``path``, read from its footers
    without Spark (so column mistakes are reported before a session starts).

    A path that does not exist, a directory without Parquet files (Spark's rule: names
    starting with ``_`` or ``.`` are skipped) and a file that is not Parquet are bad input,
    said in one line. None when Spark would type the columns differently than pyarrow can say
    here (Spark's own read then checks them).
    """
    import pyarrow.dataset as ds

    check_exists(path, what)
    try:
        dataset = ds.dataset(path, format="parquet")
        if not dataset.files:
            raise InputError(f"{what} {path!r} holds no Parquet files (names starting with '_' or '.' "
                             "are skipped)")
        schema = dataset.schema
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - ArrowInvalid, OSError: not Parquet
        raise InputError(f"cannot read {what} {path!r} as Parquet: {_first_line(e)}") from None
    try:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(schema)
    except Exception:  # noqa: BLE001 - a type this check cannot map: Spark's read reports it
        return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def read_parquet(spark, path: str, what: str):
    """``spark.read.parquet(path)``, a path that is not Parquet reported as bad input."""
    check_exists(path, what)
    try:
        return spark.read.parquet(path)
    except Exception as e:  # AnalysisException: not Parquet, no files
        raise InputError(f"cannot read {what} {path!r} as Parquet: {_first_line(e)}") from None


#: The sessions commands started in this process (not one a caller had running): stopped by
#: :func:`stop_started_sessions` when the command ends.
STARTED: list = []


def start_spark(args):
    """The session a command runs on (``--master``, ``--partitions``)."""
    from pyspark import SparkContext

    from colmz.spark.session import session

    running = SparkContext._active_spark_context is not None
    # A command is a short job: on a local master, the quick-start JVM (session's docs).
    spark = session(args.master, "colmz-" + args.command, shuffle_partitions=args.partitions,
                    quick_start=args.master.startswith("local"))
    if not running:
        STARTED.append(spark)
    quiet_task_failures(spark)
    return spark


def stop_started_sessions() -> None:
    """Stop the sessions :func:`start_spark` started, before the process exits.

    A job can return while some of its tasks still run (a job that needs only some
    partitions); their completions reach the driver's scheduler later and merge the Python
    accumulators through a socket to this process. Left to the process's exit, that socket
    may already be closed when one arrives: the JVM then prints a stack trace from
    ``PythonAccumulatorV2.merge``. ``SparkContext.stop`` stops the scheduler first and the
    accumulator server after it (pyspark's ``SparkContext.stop``), so no merge is left to fail.
    """
    while STARTED:
        spark = STARTED.pop()
        with contextlib.suppress(Exception):  # the JVM may be gone already (a crash): nothing to stop
            spark.stop()


#: Spark's loggers that print a failed task's whole Python and JVM traceback (about 40 lines)
#: as it happens. A command reports the failure itself: one line for what it recognises (a
#: damaged part), else the job's exception, whose text carries the same worker traceback.
TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def quiet_task_failures(spark) -> None:
    """Silence :data:`TASK_FAILURE_LOGGERS` in this JVM (best effort: a log4j 2 JVM)."""
    try:
        jvm = spark.sparkContext._jvm
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in TASK_FAILURE_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)
    except Exception:  # noqa: BLE001 - another logging backend: Spark's lines stay
        pass


def print_json(summary: dict, out) -> None:
    print(json.dumps(summary), file=out)


# ----------------------------------------------------------------------------- progress


class Progress:
    """What a command shows while it works, on ``out``.

    - On a terminal: a single line redrawn in place (:class:`colmz.progress.Bar`) -- the
      phase, and while Spark runs jobs the tasks done of the active stages with their rate
      and time left (library calls such as ``Arrangement.maintain`` feed it through
      :meth:`callback`); the line is wiped when the command ends, leaving its summary.
    - Elsewhere (a pipe, a file, a CI log): one line per finished phase with what it found
      and how long it took -- no bar, no redrawn frames.
    - ``--quiet``: nothing but the summary.
    """

    def __init__(self, out, spark=None, quiet: bool = False, interval: float = 0.25):
        self.bar = Bar(out, quiet=quiet)
        self.out = out
        self.spark = spark
        self.lines = not quiet and not self.bar.enabled
        self.interval = interval
        self.t0 = _time.perf_counter()
        self.phases: dict[str, float] = {}
        self.current: Phase | None = None

    def say(self, msg: str) -> None:
        """A finding: part of the running phase's line, or a line of its own outside one."""
        if self.current is not None:
            self.current.notes.append(msg)
        elif self.lines:
            print(msg, file=self.out, flush=True)
        else:
            self.bar.note(msg)

    def phase(self, name: str) -> Phase:
        return Phase(self, name)

    def callback(self, label: str):
        """A ``progress(done, total, step)`` callback drawing ``label: step`` on the bar."""

        def progress(done: int, total: int, step: str) -> None:
            if self.current is not None:
                self.current.fed = True  # the phase's own figures replace the idle line
            self.bar(done, total, f"{label}: {step}")

        return progress

    def close(self) -> None:
        self.bar.close(clear=True)


class Phase:
    def __init__(self, progress: Progress, name: str):
        self.p = progress
        self.name = name
        self.notes: list[str] = []
        self.fed = False  # a library callback draws this phase's progress
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> Phase:
        self.start = _time.perf_counter()
        self.p.current = self
        self.p.bar(0, 0, self.name)
        if self.p.bar.enabled:
            self.thread = threading.Thread(target=self._watch, daemon=True)
            self.thread.start()
        return self

    def _watch(self) -> None:
        # Spark reports task counts per stage (the sink runs all its ticks inside tasks);
        # between jobs the line shows the phase and its time so far.
        tracker = self.p.spark.sparkContext.statusTracker() if self.p.spark is not None else None
        while not self.stop.wait(self.p.interval):
            done = total = 0
            stages = []
            try:
                for sid in tracker.getActiveStageIds() if tracker is not None else ():
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        stages.append(sid)
                        done += info.numCompletedTasks
                        total += info.numTasks
            except Exception:  # the context is stopping (the command failed): the line stays
                tracker = None
            if stages:
                ids = ",".join(map(str, sorted(stages)))
                self.p.bar(done, total, f"{self.name}: stage{'s' if len(stages) > 1 else ''} {ids}")
            elif not self.fed:
                self.p.bar(0, 0, self.name)

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        self.p.current = None
        took = _time.perf_counter() - self.start
        self.p.phases[self.name] = took
        if exc[0] is None and self.p.lines:
            found = "".join(f"; {n}" for n in self.notes)
            print(f"[{_time.perf_counter() - self.p.t0:7.1f}s] {self.name}: done in {took:.1f} s{found}",
                  file=self.p.out, flush=True)
        return False


