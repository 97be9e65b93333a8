"""A local, atomically committed Parquet store of updates ``(data..., time, diff)``.

Design
------
The ``colmz sink`` job appends corrections to a persisted collection and must never leave it
half-written: a job that fails midway leaves the store as it was, and a Spark task that is
retried must not write its rows twice. The store gets both from two steps:

1. **Stage.** Spark writes the new updates into ``_staging/<id>/`` with its file commit
   protocol: each task writes into an attempt directory and only one attempt per task is
   committed, so retried or speculative tasks never duplicate rows. Nothing outside
   ``_staging`` changes.
2. **Commit.** The staged directory is renamed into ``commits/<seq>-<id>/`` (one
   ``rename``, atomic on a local filesystem) and a new manifest listing every committed file
   replaces the old one with ``os.replace`` (atomic). The manifest is the store: readers use
   only the files it lists, so a crash between the two steps leaves an unlisted directory
   that readers ignore and :meth:`Store.clean` removes.

The manifest also pins the schema, and each commit records the manifest version it was
computed against: a commit whose base version is no longer current is refused
(:class:`StoreError`), because its corrections were computed against a persisted collection
that has since changed (a concurrent writer).

Layout::

    store/
      _colmz_store.json        manifest: format, version, schema, commits[] (files, rows)
      commits/000001-<id>/part-*.parquet
      _staging/<id>/           in-flight writes only

Any Parquet reader can read the store: the files listed in the manifest, in any order.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time as _time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MANIFEST", "Staged", "Store", "StoreError", "same_schema"]

MANIFEST = "_colmz_store.json"
FORMAT = "colmz-updates-store"


class StoreError(RuntimeError):
    """The store cannot do what was asked (not a store, schema mismatch, concurrent commit)."""


@dataclass
class Staged:
    """Updates written to the staging area, not yet part of the store."""

    path: Path
    files: list[str]
    rows: int
    base_version: int
    schema_json: str
    note: dict = field(default_factory=dict)


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


class Store:
    """A directory holding a Parquet dataset of updates, committed atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The store directory (created at the first commit).

    Examples
    --------
    >>> import tempfile
    >>> s = Store(tempfile.mkdtemp())
    >>> s.exists(), s.version, s.files()
    (False, 0, [])
    >>> staged = s.stage(df)  # doctest: +SKIP
    >>> s.commit(staged)  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).absolute()
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"store path {str(self.path)!r} exists and is not a directory")

    # ------------------------------------------------------------------ reading

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def exists(self) -> bool:
        """Whether the store has a manifest (at least one commit or a pinned schema)."""
        return self.manifest_path.is_file()

    def manifest(self) -> dict:
        """The current manifest (an empty one for a store that does not exist yet)."""
        if not self.exists():
            if self.path.is_dir() and any(p.name not in ("_staging", "commits") for p in self.path.iterdir()):
                raise StoreError(
                    f"{str(self.path)!r} is a non-empty directory without {MANIFEST}; "
                    "not a colmz store (refusing to write into it)"
                )
            return {"format": FORMAT, "version": 0, "schema": None, "commits": []}
        try:
            m = json.loads(self.manifest_path.read_text())
        except (OSError, ValueError) as e:
            raise StoreError(f"cannot read store manifest {str(self.manifest_path)!r}: {e}") from None
        if m.get("format") != FORMAT:
            raise StoreError(f"{str(self.manifest_path)!r} is not a colmz store manifest (format {m.get('format')!r})")
        return m

    @property
    def version(self) -> int:
        """Number of commits so far (0 for a new store)."""
        return int(self.manifest()["version"])

    @property
    def schema_json(self) -> str | None:
        """The Spark schema (JSON) of the stored updates, or None before the first commit."""
        return self.manifest()["schema"]

    def files(self) -> list[str]:
        """Absolute paths of every committed Parquet file."""
        m = self.manifest()
        return [str(self.path / f) for c in m["commits"] for f in c["files"]]

    @property
    def rows(self) -> int:
        """Updates stored (rows of all committed files)."""
        return sum(int(c["rows"]) for c in self.manifest()["commits"])

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

    # ------------------------------------------------------------------ writing

    def _staging_root(self) -> Path:
        return self.path / "_staging"

    def stage(self, df, note: dict | None = None) -> Staged:
        """Write ``df`` into a fresh staging directory (the store itself is unchanged).

        Spark's commit protocol makes the staged files exactly one successful attempt per
        task. The manifest version read here is the commit's base version.
        """
        base = self.manifest()
        schema_json = df.schema.json()
        if base["schema"] is not None and not same_schema(base["schema"], schema_json):
            raise StoreError(
                f"store schema {_describe(base['schema'])} differs from the new updates' "
                f"{_describe(schema_json)}"
            )
        root = self._staging_root()
        root.mkdir(parents=True, exist_ok=True)
        path = root / uuid.uuid4().hex
        try:
            df.write.mode("errorifexists").parquet(str(path))
        except BaseException:
            # Tasks of the failed job are cancelled asynchronously and may still write into
            # their attempt directories: let them stop before removing the staging area.
            _wait_for_running_tasks(df.sparkSession)
            shutil.rmtree(path, ignore_errors=True)
            self._remove_empty_staging_root()
            raise
        files = sorted(p for p in path.glob("part-*.parquet"))
        rows = _parquet_rows(files)
        return Staged(path, [p.name for p in files], rows, int(base["version"]), schema_json, dict(note or {}))

    def staged_files(self, staged: Staged) -> list[str]:
        return [str(staged.path / f) for f in staged.files]

    def discard(self, staged: Staged) -> None:
        """Drop a staged write; the store is unchanged."""
        shutil.rmtree(staged.path, ignore_errors=True)
        self._remove_empty_staging_root()

    def commit(self, staged: Staged) -> dict | None:
        """Make ``staged`` part of the store atomically; return the commit record.

        A staged write with no rows is discarded and nothing is committed (returns None).

        Raises
        ------
        StoreError
            The store changed since ``staged`` was staged (its base version is stale), or
            the schema differs.
        """
        m = self.manifest()
        if int(m["version"]) != staged.base_version:
            self.discard(staged)
            raise StoreError(
                f"store {str(self.path)!r} moved from version {staged.base_version} to "
                f"{m['version']} while the update was staged; corrections would be wrong, "
                "not committing (re-run the job)"
            )
        if not staged.rows:
            self.discard(staged)
            return None
        if m["schema"] is not None and not same_schema(m["schema"], staged.schema_json):
            self.discard(staged)
            raise StoreError("staged updates have a different schema than the store")
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
            self._remove_empty_staging_root()
            raise
        _fsync_dir(self.path)
        self._remove_empty_staging_root()
        return record

    def _before_publish(self) -> None:
        """Hook between moving the data and publishing the manifest (tests inject failures)."""

    def clean(self) -> list[str]:
        """Remove leftovers of failed runs (staging dirs, unlisted commit dirs); return them."""
        removed = []
        listed = {f.split("/")[1] for c in self.manifest()["commits"] for f in c["files"]}
        commits_dir = self.path / "commits"
        if commits_dir.is_dir():
            for d in commits_dir.iterdir():
                if d.name not in listed:
                    shutil.rmtree(d, ignore_errors=True)
                    removed.append(str(d))
        root = self._staging_root()
        if root.is_dir():
            for d in root.iterdir():
                shutil.rmtree(d, ignore_errors=True)
                removed.append(str(d))
        for tmp in self.path.glob(f".{MANIFEST}.*.tmp") if self.path.is_dir() else ():
            tmp.unlink(missing_ok=True)
            removed.append(str(tmp))
        self._remove_empty_staging_root()
        return removed

    def _remove_empty_staging_root(self) -> None:
        with contextlib.suppress(OSError):
            self._staging_root().rmdir()

    def listing(self) -> list[str]:
        """Every path under the store, relative and sorted (to check a store is unchanged)."""
        if not self.path.exists():
            return []
        return sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*"))


def same_schema(a: str, b: str) -> bool:
    """Whether two Spark schemas (JSON) have the same column names and types, in order.

    Nullability and metadata are ignored: Parquet readers and writers change them freely.
    """
    fa, fb = json.loads(a)["fields"], json.loads(b)["fields"]
    return [(f["name"], f["type"]) for f in fa] == [(f["name"], f["type"]) for f in fb]


def _describe(schema_json: str) -> str:
    fields = json.loads(schema_json)["fields"]
    return "(" + ", ".join(f"{f['name']}: {f['type']}" for f in fields) + ")"
