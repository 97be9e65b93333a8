"""LocalBlob: a Blob in a local directory, one file per key.

Design
------
A key ``a/b/c`` is the file ``root/a/b/c``. ``set`` writes the value to a temporary file in
the destination directory, flushes and fsyncs it, renames it over the destination with
``os.replace`` (atomic on POSIX within one filesystem) and fsyncs the directory so the rename
itself survives a crash; directories it had to create are fsynced into their parents too.
A reader therefore sees a whole value or no value, never a torn one, and a value is durable
once ``set`` returns. ``set_streamed`` is the same for a value produced piece by piece into
the temporary file (a Parquet part as it is encoded), with background ``fdatasync`` calls
while it is written so that the final fsync waits for the tail only. Part files are plain
files, so ``url_of`` (the absolute path) is all pyarrow.dataset, DuckDB, Polars or Spark
need to read them directly.

Invariants
----------
1. Every path the store touches resolves (symlinks followed) inside ``root``; a key that
   would lead outside -- by ``..``, an absolute path, or a symlink planted in the tree --
   raises ``ValueError`` naming the key, and nothing is read or written.
2. Temporary files carry the marker ``.colmz-tmp-`` in their name; ``list_keys`` never
   returns them and no key may contain the marker.
3. A failed ``set`` leaves the previous value (or no value) under the key and removes its
   temporary file (:class:`~colmz.storage.base.Determinate`); a failure after the rename
   (fsync of the directory) is :class:`~colmz.storage.base.Indeterminate`.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import stat
import threading
import uuid
from collections.abc import Callable

from colmz.storage.base import Determinate, Indeterminate, check_key

__all__ = ["TEMP_MARKER", "LocalBlob"]

#: Part of every temporary file name (``list_keys`` skips such files; keys may not hold it).
TEMP_MARKER = ".colmz-tmp-"


class _Writeback:
    """Background ``fdatasync`` calls on one file while it is being written.

    :meth:`poke` asks a helper thread for one unless one is still running, so the disk
    writes what was written so far while the writer encodes the rest, and the final fsync
    before the rename waits for the tail only. One helper thread serves a file's syncs (it
    is started by the first poke and ended by :meth:`join`): starting a thread per poke --
    each row group of a part -- cost more than the syncs, since ``Thread.start`` waits for
    the new thread to take the GIL from the threads gathering and encoding (13 starts a
    50 MiB write, 24 ms of its 176). An error of a background sync is kept and raised after
    :meth:`join`: on Linux a failed writeback may be reported to one fsync call only, so it
    must not be dropped.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.thread: threading.Thread | None = None
        self.error: OSError | None = None
        self._wake = threading.Event()  # set by poke (a sync asked for) and by join
        self._idle = threading.Event()  # set while no sync is asked for or running
        self._idle.set()
        self._closing = False

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            try:
                _FDATASYNC(self.fd)
            except OSError as e:
                self.error = self.error or e
            finally:
                self._idle.set()

    def poke(self) -> None:
        if not self._idle.is_set():
            return  # one is running: it covers what was written before it started
        self._idle.clear()
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="colmz-writeback", daemon=True)
            self.thread.start()
        self._wake.set()

    def join(self) -> None:
        """Wait for the sync in progress, then end the helper thread."""
        if self.thread is not None:
            self._idle.wait()
            self._closing = True
            self._wake.set()
            self.thread.join()
            self.thread = None


_FDATASYNC = getattr(os, "fdatasync", os.fsync)


def _fsync_dir(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalBlob:
    """A Blob in the directory ``root`` (created when missing).

    Examples
    --------
    >>> import tempfile
    >>> b = LocalBlob(tempfile.mkdtemp())
    >>> b.set("parts/p1", b"abc"); b.get("parts/p1"), b.list_keys("parts/")
    (b'abc', ['parts/p1'])
    >>> b.path_of("parts/p1").read_bytes()
    b'abc'
    >>> b.delete("parts/p1"); b.get("parts/p1") is None
    True
    """

    def __init__(self, root: str | os.PathLike) -> None:
        path = pathlib.Path(root)
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(f"blob root {str(path)!r} is a file, not a directory")
        path.mkdir(parents=True, exist_ok=True)
        self.root = path.resolve()
        self._root_text = str(self.root)

    def __repr__(self) -> str:
        return f"LocalBlob({str(self.root)!r})"

    def path_of(self, key: str) -> pathlib.Path:
        """The file of ``key``, checked to stay inside ``root`` (symlinks followed)."""
        check_key(key)
        if TEMP_MARKER in key:
            raise ValueError(f"storage key {key!r} contains the reserved marker {TEMP_MARKER!r}")
        segments = key.split("/")
        path = self.root.joinpath(*segments)
        # A path under the resolved root whose segments are neither '.' nor '..' (check_key)
        # nor symlinks stays inside the root: one lstat per segment proves it, far cheaper
        # than resolving the whole path (a commit names a dozen parts). A symlink anywhere
        # below the root is followed and the result checked in full.
        cur = self._root_text
        for seg in segments:
            cur = f"{cur}{os.sep}{seg}"
            try:
                mode = os.lstat(cur).st_mode
            except (FileNotFoundError, NotADirectoryError):
                return path  # the rest does not exist: no symlink below
            except OSError:
                break
            if stat.S_ISLNK(mode):
                break
        else:
            return path
        resolved = path.resolve()
        if self.root not in resolved.parents:
            raise ValueError(
                f"storage key {key!r} resolves to {str(resolved)!r}, outside the blob root "
                f"{str(self.root)!r} (a symlink in the store?)"
            )
        return path

    def url_of(self, key: str) -> str:
        """The absolute path of ``key``'s file (what outside readers open)."""
        return str(self.path_of(key))

    def open_input(self, key: str, *, mapped: bool = False):
        """A random-access file for reading ``key`` (a ``pyarrow.NativeFile``), or None.

        ``mapped=True`` memory-maps the file, so a reader decoding the whole part reads
        straight from the page cache.

        Parquet readers use it to read a part's footer and one row group at a time, so a
        merge of many parts holds a row group of each, not whole parts.
        """
        import pyarrow as pa

        path = self.path_of(key)
        try:
            return pa.memory_map(str(path), "r") if mapped else pa.OSFile(str(path), "r")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise Determinate(f"blob open {key!r} ({path}): {e}") from e

    def get(self, key: str) -> bytes | None:
        path = self.path_of(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            # A "directory key" is only a prefix of other keys: it has no value.
            return None
        except OSError as e:
            raise Determinate(f"blob get {key!r} ({path}): {e}") from e

    def _make_parents(self, path: pathlib.Path) -> None:
        missing = []
        parent = path.parent
        while parent != self.root and not parent.is_dir():
            missing.append(parent)
            parent = parent.parent
        for d in reversed(missing):
            try:
                d.mkdir()
            except FileExistsError:
                if not d.is_dir():
                    raise
            _fsync_dir(d.parent)

    def set(self, key: str, value: bytes | memoryview) -> None:
        def write(fd: int, tmp: pathlib.Path) -> None:
            view = memoryview(value).cast("B")
            while view:
                view = view[os.write(fd, view) :]

        self._install(key, write)

    def set_if_absent(self, key: str, value: bytes | memoryview) -> bool:
        """Store ``value`` under ``key`` as :meth:`set` does, unless ``key`` already has a
        value: then change nothing and return False. Of two concurrent calls exactly one
        stores (the temporary file is hard-linked into place, which fails when the name
        exists, where :meth:`set` renames over it).

        >>> import tempfile
        >>> b = LocalBlob(tempfile.mkdtemp())
        >>> b.set_if_absent("id", b"a"), b.set_if_absent("id", b"b"), b.get("id")
        (True, False, b'a')
        """
        def write(fd: int, tmp: pathlib.Path) -> None:
            view = memoryview(value).cast("B")
            while view:
                view = view[os.write(fd, view) :]

        return self._install(key, write, exclusive=True)

    def set_streamed(self, key: str, fill: Callable) -> int:
        """Write the value ``fill`` produces under ``key``, durably and atomically as
        :meth:`set` does, without holding it in memory; return its size in bytes.

        ``fill(out, writeback)`` writes the value into ``out`` (a ``pyarrow.NativeFile`` on
        the temporary file) and may call ``writeback()`` after each large piece: that
        syncs what was written so far on a helper thread (one at a time), so the disk
        works while ``fill`` goes on and the final fsync waits for the tail only. If
        ``fill`` raises, nothing is stored (the temporary file is removed) and the error
        propagates as it is.

        >>> import tempfile
        >>> b = LocalBlob(tempfile.mkdtemp())
        >>> b.set_streamed("p", lambda out, writeback: (out.write(b"ab"), writeback(), out.write(b"c")))
        3
        >>> b.get("p")
        b'abc'
        """
        import pyarrow as pa

        size = 0

        def write(fd: int, tmp: pathlib.Path) -> None:
            nonlocal size
            writeback = _Writeback(fd)
            try:
                with pa.OSFile(str(tmp), "w") as out:
                    fill(out, writeback.poke)
                    size = out.tell()
            finally:
                writeback.join()  # if the fill raised, its error is the one to report
            if writeback.error is not None:
                raise writeback.error

        self._install(key, write)
        return size

    def _install(self, key: str, write: Callable[[int, pathlib.Path], None], *,
                 exclusive: bool = False) -> bool:
        # Temporary file, written by ``write(fd, tmp)``, fsynced, renamed over the key's file
        # (``exclusive``: hard-linked to its name, False when the name exists); then the
        # directory fsynced. OSError before the rename is Determinate (the temporary file is
        # removed); any other error from ``write`` propagates unchanged.
        path = self.path_of(key)
        if path.is_dir():
            # A directory tree left empty by deletes is no key's; one holding keys is a
            # conflict.
            try:
                for dirpath, _dirs, _files in os.walk(path, topdown=False):
                    os.rmdir(dirpath)
            except OSError:
                raise ValueError(
                    f"storage key {key!r} names a directory of other keys in {self.root}"
                ) from None
        tmp = path.with_name(f"{path.name}{TEMP_MARKER}{uuid.uuid4().hex}")
        try:
            self._make_parents(path)
            # The parents now exist: re-check confinement (a symlinked directory could have
            # been created concurrently in the tree).
            self.path_of(key)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                write(fd, tmp)
                os.fsync(fd)
            finally:
                os.close(fd)
            if exclusive:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return False
                finally:
                    tmp.unlink(missing_ok=True)
            else:
                os.replace(tmp, path)
        except OSError as e:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise Determinate(f"blob set {key!r} ({path}): {e}") from e
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise
        try:
            _fsync_dir(path.parent)
        except OSError as e:
            raise Indeterminate(
                f"blob set {key!r}: renamed into place but the directory fsync failed: {e}"
            ) from e
        return True

    def delete(self, key: str) -> None:
        path = self.path_of(key)
        try:
            path.unlink(missing_ok=True)
        except (NotADirectoryError, IsADirectoryError):
            return
        except OSError as e:
            raise Determinate(f"blob delete {key!r} ({path}): {e}") from e

    def list_keys(self, prefix: str = "") -> list[str]:
        # Walk only the deepest directory the prefix names entirely.
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root.joinpath(*head.split("/")) if head else self.root
        if head:
            check_key(head)
        if not start.is_dir():
            return []
        out = []
        for dirpath, _dirs, files in os.walk(start):
            rel = os.path.relpath(dirpath, self.root)
            base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            for name in files:
                if TEMP_MARKER in name:
                    continue
                key = base + name
                if key.startswith(prefix):
                    out.append(key)
        out.sort()
        return out
