"""The store colmz 0.1's ``colmz sink`` wrote: a local, atomically committed Parquet store of
updates ``(data..., time, diff)``.

Only ``colmz migrate`` (``colmz.spark.sink_store.migrate``) uses it now, to read such a store
into an arrangement; what the sink writes today is described in ``colmz.spark.sink_store``.

Design
------
colmz 0.1's ``colmz sink`` job appended corrections to a persisted collection and must never leave it
half-written, never lose a commit it acknowledged, and never delete another run's work:

1. **Stage.** The new updates are written into ``_staging/<id>/`` -- by Spark's file commit
   protocol (:meth:`Store.stage`: each task writes into an attempt directory and only one
   attempt per task is committed, so retried or speculative tasks never duplicate rows) or by
   pyarrow (:meth:`Store.stage_arrow`). Nothing outside ``_staging`` changes. The run that
   stages holds an exclusive ``flock`` on ``_staging/<id>.owner`` until it commits or
   discards: the kernel drops that lock when the process dies, however it dies, so a later
   :meth:`Store.clean` can tell a dead run's leftovers from a live run's in-flight work.
2. **Commit.** Under an exclusive ``flock`` on ``_colmz_store.lock`` the committer checks that
   the manifest is still at the version its corrections were computed against, renames the
   staged directory into ``commits/<seq>-<id>/`` and atomically replaces the manifest
   (``os.replace``). Check and publish are one critical section, so of two racing commits
   from the same base version exactly one succeeds and the other gets :class:`StoreError`
   naming the writer that committed first. The manifest is the store: readers use only the
   files it lists.

Cleanup (:meth:`Store.clean`) removes only what no live writer can still be using: staging
directories whose owner lock it can take (the owner died) or that have no owner file and are
older than :data:`STAGING_LEASE_SECONDS` (left by older colmz versions), and unlisted commit
directories -- which exist outside the commit lock only when a committer died between rename
and publish, because ``clean`` itself runs under the commit lock.

Locks are POSIX ``flock`` locks: they hold between processes on one machine's local
filesystem. A store shared by several machines needs the arrangement's consensus (a
compare-and-set on a database), not this directory layout.

The manifest is validated field by field on every read (:class:`ManifestError` names the
field), every path it lists is confined to the store (no ``..``, no absolute paths, no
symlinks leading out), and :meth:`Store.verify` checks that the listed files exist and hold
the recorded row counts before a job starts work.

Layout::

    store/
      _colmz_store.json        manifest: format, version, schema, commits[] (files, rows, writer)
      _colmz_store.lock        commit lock (empty file)
      commits/000001-<id>/part-*.parquet
      _staging/<id>/           in-flight writes only; _staging/<id>.owner is held by its run

Any Parquet reader can read the store: the files listed in the manifest, in any order.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import time as _time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from colmz.spark.sink_store import OLD_MANIFEST, view_table

__all__ = [
    "LOCK",
    "MANIFEST",
    "STAGING_LEASE_SECONDS",
    "ManifestError",
    "Staged",
    "Store",
    "StoreError",
    "same_schema",
    "validate_manifest",
]

MANIFEST = OLD_MANIFEST
LOCK = "_colmz_store.lock"
FORMAT = "colmz-updates-store"
#: Staging directories without an owner file are removed by :meth:`Store.clean` only when
#: older than this (seconds); staging directories with an owner file are removed as soon as
#: their owner is gone.
STAGING_LEASE_SECONDS = 6 * 3600

_COMMIT_DIR = re.compile(r"^[0-9]{6,}-[0-9a-f]{32}$")
_PART_FILE = re.compile(r"^[A-Za-z0-9._=-]+\.parquet$")


class StoreError(RuntimeError):
    """The store cannot do what was asked (not a store, schema mismatch, concurrent commit)."""


class ManifestError(StoreError):
    """The manifest is malformed, or lists something that is not in the store."""


@dataclass
class Staged:
    """Updates written to the staging area, not yet part of the store."""

    path: Path
    files: list[str]
    rows: int
    base_version: int
    schema_json: str
    note: dict = field(default_factory=dict)
    owner_fd: int | None = field(default=None, repr=False)


def _fsync_dir(path: Path) -> None:
    # Make a rename/replace durable; not all platforms can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _wait_for_running_tasks(spark, timeout: float = 60.0) -> None:
    """Wait (bounded) until no executor runs a task."""
    deadline = _time.monotonic() + timeout
    tracker = spark.sparkContext.statusTracker()
    while _time.monotonic() < deadline:
        try:
            busy = sum(e.numRunningTasks() for e in spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos())
        except Exception:  # no JVM view of executors: fall back to active stages
            busy = len(tracker.getActiveStageIds())
        if not busy:
            return
        _time.sleep(0.2)


def _parquet_rows(files: list[Path]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def _writer() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _describe_writer(record: dict) -> str:
    w = record.get("writer") or {}
    who = f"pid {w['pid']} on {w['host']}" if {"pid", "host"} <= set(w) else "another writer"
    return f"commit {record.get('seq')} by {who} at {record.get('created', '?')}"


# ---------------------------------------------------------------------------- the manifest


def _field_error(path: Path, field_name: str, problem: str) -> ManifestError:
    return ManifestError(f"store manifest {str(path)!r}: field {field_name!r} {problem}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_listed_path(rel, *, where: str = "commits[].files[]", manifest: Path | None = None) -> str:
    """Validate one file path listed in a manifest: ``commits/<seq>-<id>/<part>.parquet``.

    The shape is fixed, so nothing can name a path outside the store (``..``, an absolute
    path, a nested folder); symlinks are checked when the path is resolved
    (:meth:`Store.resolve`).

    >>> check_listed_path("commits/000001-" + "0" * 32 + "/part-0.parquet")
    'commits/000001-00000000000000000000000000000000/part-0.parquet'
    >>> try:
    ...     check_listed_path("commits/../../x.parquet")
    ... except ManifestError as e:
    ...     print(e)
    store manifest '?': field 'commits[].files[]' lists 'commits/../../x.parquet', not a file of this store (expected commits/<seq>-<id>/<name>.parquet)
    """
    parts = rel.split("/") if isinstance(rel, str) else []
    if len(parts) != 3 or parts[0] != "commits" or not _COMMIT_DIR.match(parts[1]) or not _PART_FILE.match(parts[2]):
        raise _field_error(manifest or Path("?"), where, f"lists {rel!r}, not a file of this store "
                           "(expected commits/<seq>-<id>/<name>.parquet)")
    return rel


def validate_manifest(m, path: Path | None = None) -> dict:
    """Check a parsed manifest field by field; return it unchanged or raise ManifestError.

    >>> validate_manifest({"format": FORMAT, "version": 0, "schema": None, "commits": []})["version"]
    0
    >>> try:
    ...     validate_manifest({"format": FORMAT, "version": 0, "schema": None})
    ... except ManifestError as e:
    ...     print(e)
    store manifest '?': field 'commits' is missing
    """
    path = path or Path("?")
    if not isinstance(m, dict):
        raise ManifestError(f"store manifest {str(path)!r} is not a JSON object")
    if m.get("format") != FORMAT:
        raise ManifestError(f"{str(path)!r} is not a colmz store manifest (format {m.get('format')!r})")
    for name in ("version", "schema", "commits"):
        if name not in m:
            raise _field_error(path, name, "is missing")
    if not _is_int(m["version"]) or m["version"] < 0:
        raise _field_error(path, "version", f"must be a non-negative integer, not {m['version']!r}")
    schema = m["schema"]
    if schema is not None:
        try:
            fields = json.loads(schema)["fields"] if isinstance(schema, str) else None
            ok = isinstance(fields, list) and all(
                isinstance(f, dict) and isinstance(f.get("name"), str) and "type" in f for f in fields
            )
        except (ValueError, TypeError, KeyError):
            ok = False
        if not ok:
            raise _field_error(path, "schema", "must be a Spark schema in JSON (a struct with fields) or null")
    commits = m["commits"]
    if not isinstance(commits, list):
        raise _field_error(path, "commits", f"must be a list, not {type(commits).__name__}")
    last = 0
    for i, c in enumerate(commits):
        where = f"commits[{i}]"
        if not isinstance(c, dict):
            raise _field_error(path, where, "must be an object")
        for name in ("seq", "files", "rows"):
            if name not in c:
                raise _field_error(path, f"{where}.{name}", "is missing")
        if not _is_int(c["seq"]) or c["seq"] <= last:
            raise _field_error(path, f"{where}.seq", f"must be an integer above {last}, not {c['seq']!r}")
        last = c["seq"]
        if not _is_int(c["rows"]) or c["rows"] < 0:
            raise _field_error(path, f"{where}.rows", f"must be a non-negative integer, not {c['rows']!r}")
        if not isinstance(c["files"], list) or not c["files"]:
            raise _field_error(path, f"{where}.files", "must be a non-empty list of paths")
        for f in c["files"]:
            check_listed_path(f, where=f"{where}.files[]", manifest=path)
        if "note" in c and not isinstance(c["note"], dict):
            raise _field_error(path, f"{where}.note", "must be an object")
    if last > m["version"]:
        raise _field_error(path, "version", f"is {m['version']} but a commit has seq {last}")
    if commits and schema is None:
        raise _field_error(path, "schema", "is null but the store has commits")
    return m


class Store:
    """A directory holding a Parquet dataset of updates, committed atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The store directory (created at the first commit).

    Examples
    --------
    >>> import tempfile, pyarrow as pa
    >>> s = Store(tempfile.mkdtemp())
    >>> s.exists(), s.version, s.files()
    (False, 0, [])
    >>> rec = s.commit(s.stage_arrow(pa.table({"k": ["a"], "time": [1], "diff": [1]})))
    >>> rec["seq"], s.version, s.rows
    (1, 1, 1)
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).absolute()
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"store path {str(self.path)!r} exists and is not a directory")

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # ------------------------------------------------------------------ reading

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def exists(self) -> bool:
        """Whether the store has a manifest (at least one commit or a pinned schema)."""
        return self.manifest_path.is_file()

    def manifest(self) -> dict:
        """The current manifest, validated (an empty one for a store that does not exist yet)."""
        if not self.exists():
            if self.path.is_dir() and any(p.name not in ("_staging", "commits", LOCK) for p in self.path.iterdir()):
                raise StoreError(
                    f"{str(self.path)!r} is a non-empty directory without {MANIFEST}; "
                    "not a colmz store (refusing to write into it)"
                )
            return {"format": FORMAT, "version": 0, "schema": None, "commits": []}
        try:
            m = json.loads(self.manifest_path.read_text())
        except (OSError, ValueError) as e:
            raise ManifestError(f"cannot read store manifest {str(self.manifest_path)!r}: {e}") from None
        return validate_manifest(m, self.manifest_path)

    @property
    def version(self) -> int:
        """Number of commits so far (0 for a new store)."""
        return int(self.manifest()["version"])

    @property
    def schema_json(self) -> str | None:
        """The Spark schema (JSON) of the stored updates, or None before the first commit."""
        return self.manifest()["schema"]

    def resolve(self, rel: str) -> Path:
        """The absolute path of a file the manifest lists, confined to the store.

        Raises ManifestError when the path has the wrong shape or resolves (through a symlink)
        to somewhere outside the store.
        """
        check_listed_path(rel, manifest=self.manifest_path)
        p = self.path / rel
        root = self.path.resolve()
        real = p.resolve()
        if real != root and root not in real.parents:
            raise ManifestError(
                f"store manifest {str(self.manifest_path)!r} lists {rel!r}, which resolves to "
                f"{str(real)!r} outside the store (a symlink?)"
            )
        return p

    def files(self) -> list[str]:
        """Absolute paths of every committed Parquet file."""
        m = self.manifest()
        return [str(self.resolve(f)) for c in m["commits"] for f in c["files"]]

    @property
    def rows(self) -> int:
        """Updates stored (rows of all committed files)."""
        return sum(int(c["rows"]) for c in self.manifest()["commits"])

    def verify(self) -> dict:
        """Check that every listed file exists and every commit holds its recorded rows.

        Reads only Parquet footers. Returns the manifest; raises ManifestError naming the
        first missing file or wrong count. Jobs call it before any work starts.
        """
        import pyarrow.parquet as pq

        m = self.manifest()
        for c in m["commits"]:
            n = 0
            for rel in c["files"]:
                p = self.resolve(rel)
                if not p.is_file():
                    raise ManifestError(
                        f"store {str(self.path)!r}: commit {c['seq']} lists {rel!r}, which is missing "
                        "(the store was damaged; restore the file or remove the store)"
                    )
                try:
                    n += pq.ParquetFile(p).metadata.num_rows
                except Exception as e:  # ArrowInvalid, OSError: not Parquet or truncated
                    raise ManifestError(f"store {str(self.path)!r}: {rel!r} is not a readable Parquet file: {e}") from None
            if n != c["rows"]:
                raise ManifestError(
                    f"store {str(self.path)!r}: commit {c['seq']} records {c['rows']} rows but its files hold {n}"
                )
        return m

    def read(self, spark, schema=None):
        """The stored updates as a DataFrame (empty with ``schema`` when nothing is stored).

        Returns None when the store has no schema yet and none is given.
        """
        from pyspark.sql.types import StructType

        stored = self.schema_json
        if stored is not None:
            schema = StructType.fromJson(json.loads(stored))
        if schema is None:
            return None
        files = self.files()
        if not files:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).parquet(*files)

    def read_arrow(self):
        """The stored updates as one Arrow table (for tests and small stores)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        files = self.files()
        if not files:
            return None
        return pa.concat_tables([pq.read_table(f) for f in files])

    def view(self, as_of: int | None = None):
        """The collection the store holds at ``as_of``, as an Arrow table, without Spark.

        Follows the manifest (files it does not list, such as a crashed run's leftovers, are
        never read): every update with ``time <= as_of`` counts, equal data rows are summed,
        rows whose count is zero are dropped. The result has the data columns and ``count``
        (the row's multiplicity), sorted by the data. ``as_of=None`` reads the latest time in
        the store. ``None`` when the store holds nothing yet.

        >>> import tempfile, pyarrow as pa
        >>> s = Store(tempfile.mkdtemp())
        >>> _ = s.commit(s.stage_arrow(pa.table({"k": ["a", "b", "a"], "time": [1, 1, 5], "diff": [1, 1, -1]})))
        >>> s.view(as_of=3).to_pylist()
        [{'k': 'a', 'count': 1}, {'k': 'b', 'count': 1}]
        >>> s.view().to_pylist()
        [{'k': 'b', 'count': 1}]
        """
        import numpy as np
        import pyarrow as pa

        import colmz

        table = self.read_arrow()
        if table is None:
            return None
        if as_of is not None and (not isinstance(as_of, int) or isinstance(as_of, bool) or as_of < 0):
            raise ValueError(f"as_of must be a non-negative integer time, not {as_of!r}")
        times = table.column("time").to_numpy()
        if as_of is None:
            as_of = int(times.max()) if len(times) else 0
        table = table.filter(pa.array(times <= np.uint64(as_of)) if times.dtype == np.uint64 else pa.array(times <= as_of))
        return view_table(colmz.consolidate(colmz.Updates.from_arrow(table), order="data", since=as_of))

    # ------------------------------------------------------------------ writing

    def _staging_root(self) -> Path:
        return self.path / "_staging"

    @contextlib.contextmanager
    def _commit_lock(self):
        """Hold the store's exclusive commit lock (blocking) for the ``with`` body."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _new_staging(self) -> tuple[Path, int]:
        """A fresh staging path and the fd of its owner file, locked by this process."""
        root = self._staging_root()
        root.mkdir(parents=True, exist_ok=True)
        sid = uuid.uuid4().hex
        owner = root / f"{sid}.owner"
        fd = os.open(owner, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, json.dumps({**_writer(), "created": _time.time()}).encode())
        return root / sid, fd

    def _release_staging(self, path: Path, fd: int | None) -> None:
        shutil.rmtree(path, ignore_errors=True)
        (path.parent / f"{path.name}.owner").unlink(missing_ok=True)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._remove_empty_staging_root()

    def _check_stage_schema(self, base: dict, schema_json: str) -> None:
        if base["schema"] is not None and not same_schema(base["schema"], schema_json):
            raise StoreError(
                f"store schema {_describe(base['schema'])} differs from the new updates' "
                f"{_describe(schema_json)}"
            )

    def stage(self, df, note: dict | None = None) -> Staged:
        """Write ``df`` into a fresh staging directory (the store itself is unchanged).

        Spark's commit protocol makes the staged files exactly one successful attempt per
        task. The manifest version read here is the commit's base version.
        """
        base = self.manifest()
        schema_json = df.schema.json()
        self._check_stage_schema(base, schema_json)
        path, fd = self._new_staging()
        try:
            df.write.mode("errorifexists").parquet(str(path))
        except BaseException:
            # Tasks of the failed job are cancelled asynchronously and may still write into
            # their attempt directories: let them stop before removing the staging area.
            _wait_for_running_tasks(df.sparkSession)
            self._release_staging(path, fd)
            raise
        files = sorted(p for p in path.glob("part-*.parquet"))
        rows = _parquet_rows(files)
        return Staged(path, [p.name for p in files], rows, int(base["version"]), schema_json, dict(note or {}), fd)

    def stage_arrow(self, table, note: dict | None = None) -> Staged:
        """Write an Arrow table of updates into a fresh staging directory, without Spark.

        The table's columns are the data columns, then ``time`` and ``diff``; its Spark schema
        is derived from the Arrow types (what Spark itself would read back).
        """
        import pyarrow.parquet as pq

        base = self.manifest()
        schema_json = _spark_schema_json(table.schema)
        self._check_stage_schema(base, schema_json)
        path, fd = self._new_staging()
        try:
            path.mkdir()
            files = []
            if table.num_rows:
                pq.write_table(table, path / "part-00000.parquet")
                files = ["part-00000.parquet"]
        except BaseException:
            self._release_staging(path, fd)
            raise
        return Staged(path, files, table.num_rows, int(base["version"]), schema_json, dict(note or {}), fd)

    def staged_files(self, staged: Staged) -> list[str]:
        return [str(staged.path / f) for f in staged.files]

    def discard(self, staged: Staged) -> None:
        """Drop a staged write; the store is unchanged."""
        self._release_staging(staged.path, staged.owner_fd)
        staged.owner_fd = None

    def commit(self, staged: Staged) -> dict | None:
        """Make ``staged`` part of the store atomically; return the commit record.

        A staged write with no rows is discarded and nothing is committed (returns None).

        Raises
        ------
        StoreError
            The store changed since ``staged`` was staged (another writer committed: the
            message names it), the schema differs, or the staged files are gone.
        """
        try:
            with self._commit_lock():
                return self._commit_locked(staged)
        finally:
            self.discard(staged)  # no-op for what the commit moved away

    def _commit_locked(self, staged: Staged) -> dict | None:
        m = self.manifest()
        if int(m["version"]) != staged.base_version:
            newer = [c for c in m["commits"] if c["seq"] > staged.base_version]
            by = "; ".join(_describe_writer(c) for c in newer[-3:]) or "a concurrent writer"
            raise StoreError(
                f"store {str(self.path)!r} moved from version {staged.base_version} to "
                f"{m['version']} while the update was staged ({by}); corrections would be "
                "wrong, not committing (re-run the job)"
            )
        if not staged.rows:
            return None
        if m["schema"] is not None and not same_schema(m["schema"], staged.schema_json):
            raise StoreError("staged updates have a different schema than the store")
        if not all((staged.path / f).is_file() for f in staged.files):
            raise StoreError(f"staged files under {str(staged.path)!r} are gone; nothing was committed")
        seq = int(m["version"]) + 1
        name = f"{seq:06d}-{staged.path.name}"
        commits_dir = self.path / "commits"
        commits_dir.mkdir(parents=True, exist_ok=True)
        target = commits_dir / name
        # (1) move the data in place -- invisible until the manifest lists it.
        os.rename(staged.path, target)
        _fsync_dir(commits_dir)
        record = {
            "seq": seq,
            "files": [f"commits/{name}/{f}" for f in staged.files],
            "rows": staged.rows,
            "created": _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime()),
            "writer": _writer(),
            **({"note": staged.note} if staged.note else {}),
        }
        new = {
            "format": FORMAT,
            "version": seq,
            "schema": m["schema"] or staged.schema_json,
            "commits": [*m["commits"], record],
        }
        # (2) publish: write the new manifest beside the old one, then atomically replace it.
        tmp = self.path / f".{MANIFEST}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(new, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            self._before_publish()
            os.replace(tmp, self.manifest_path)
        except BaseException:
            # Not published: take the moved data out again so the directory is as it was.
            # (A crash right here leaves an unlisted directory; clean() removes it.)
            tmp.unlink(missing_ok=True)
            shutil.rmtree(target, ignore_errors=True)
            with contextlib.suppress(OSError):
                commits_dir.rmdir()
            raise
        _fsync_dir(self.path)
        return record

    def _before_publish(self) -> None:
        """Hook between moving the data and publishing the manifest (tests inject failures)."""

    def clean(self, *, lease_seconds: float = STAGING_LEASE_SECONDS) -> list[str]:
        """Remove leftovers of dead runs; return what was removed.

        Removed: staging directories whose owner process is gone (its lock is free), staging
        directories without an owner file older than ``lease_seconds``, unlisted commit
        directories, and temporary manifests. In-flight work of a live run is never touched.
        """
        if not self.path.is_dir():
            return []
        removed: list[str] = []
        with self._commit_lock():
            listed = {f.split("/")[1] for c in self.manifest()["commits"] for f in c["files"]}
            commits_dir = self.path / "commits"
            if commits_dir.is_dir():
                for d in commits_dir.iterdir():
                    if d.name not in listed:
                        shutil.rmtree(d, ignore_errors=True)
                        removed.append(str(d))
            for tmp in self.path.glob(f".{MANIFEST}.*.tmp"):
                tmp.unlink(missing_ok=True)
                removed.append(str(tmp))
        root = self._staging_root()
        if root.is_dir():
            now = _time.time()
            for d in root.iterdir():
                if d.name.endswith(".owner"):
                    if not (root / d.name[: -len(".owner")]).exists() and self._owner_is_dead(d):
                        d.unlink(missing_ok=True)  # a dead run's owner file without data
                    continue
                owner = root / f"{d.name}.owner"
                if owner.exists():
                    if not self._owner_is_dead(owner):
                        continue
                elif now - d.stat().st_mtime < lease_seconds:
                    continue
                shutil.rmtree(d, ignore_errors=True)
                owner.unlink(missing_ok=True)
                removed.append(str(d))
        self._remove_empty_staging_root()
        return removed

    @staticmethod
    def _owner_is_dead(owner: Path) -> bool:
        """Whether nobody holds the owner file's lock (its run has ended)."""
        try:
            fd = os.open(owner, os.O_RDWR)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
        return True

    def _remove_empty_staging_root(self) -> None:
        with contextlib.suppress(OSError):
            self._staging_root().rmdir()

    def listing(self) -> list[str]:
        """Every path under the store, relative and sorted (to check a store is unchanged).

        The commit lock file carries no data and is left out.
        """
        if not self.path.exists():
            return []
        return sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*") if p.name != LOCK)


def same_schema(a: str, b: str) -> bool:
    """Whether two Spark schemas (JSON) have the same column names and types, in order.

    Nullability and metadata are ignored: Parquet readers and writers change them freely.
    """
    fa, fb = json.loads(a)["fields"], json.loads(b)["fields"]
    return [(f["name"], f["type"]) for f in fa] == [(f["name"], f["type"]) for f in fb]


_ARROW_TO_SPARK = {
    "int8": "byte", "int16": "short", "int32": "integer", "int64": "long",
    "uint8": "short", "uint16": "integer", "uint32": "long", "uint64": "decimal(20,0)",
    "float": "float", "double": "double", "bool": "boolean", "string": "string",
    "large_string": "string", "binary": "binary", "large_binary": "binary", "date32[day]": "date",
}


def _spark_schema_json(schema) -> str:
    fields = []
    for f in schema:
        t = str(f.type)
        if t.startswith("timestamp"):
            st = "timestamp"
        elif t in _ARROW_TO_SPARK:
            st = _ARROW_TO_SPARK[t]
        else:
            raise StoreError(f"column {f.name!r} has Arrow type {t}, which this store cannot hold")
        fields.append({"name": f.name, "type": st, "nullable": True, "metadata": {}})
    return json.dumps({"type": "struct", "fields": fields})


def _describe(schema_json: str) -> str:
    fields = json.loads(schema_json)["fields"]
    return "(" + ", ".join(f"{f['name']}: {f['type']}" for f in fields) + ")"
