"""What ``colmz sink`` (and ``colmz stream``) write: a ``colmz.Arrangement``, opened and checked
before Spark.

This is the one place that says what the sink writes. The store is an arrangement named
:data:`NAME` holding updates ``(data..., time, diff)``; every update with ``time <= t``,
summed per data row, is the view at tick ``t`` (:func:`view_table`, ``colmz read``). Any
reader takes the list of parts from the arrangement's metadata (``Arrangement.parts()``),
never from the folder. Errors about the store are :class:`SinkStoreError`.

Design
------
The sink keeps its output in an arrangement (``colmz.arrangement``): a directory (parts in
``blob/``, metadata in ``consensus.sqlite``) or ``s3://bucket/prefix`` with a consensus URL
(PostgreSQL or SQLite). A run

1. opens the store and checks it before a Spark session starts (:func:`open_sink_store`):
   the metadata is validated and every part it names must exist, so a damaged store is
   reported at once;
2. reads the persisted updates on the executors, computes the corrections there and writes
   them as parts -- each key tagged with the run's id -- without committing anything;
3. commits them on the driver in one compare-and-set together with the new seal (the last
   tick + 1): a concurrent job that committed first makes this commit fail with nothing
   visible, and the run deletes the parts it wrote (:func:`discard_run`);
4. compacts (``Arrangement.maintain``), so after many runs the store holds a logarithmic
   number of batches, not one per run.

The seal is the sink's promise: ticks before it are final. A later run over changed events
cannot rewrite them; it writes the difference at its first tick at or after the seal, as
Materialize's sink writes corrections at the current upper of its output.
"""

from __future__ import annotations

from dataclasses import dataclass

from colmz.arrangement import Arrangement, ArrangementError, IdentityMismatch, MetadataLost
from colmz.arrangement.runs import discard_owned
from colmz.storage.base import StorageError, open_input
from colmz.storage.url import local_path

__all__ = ["NAME", "SinkStore", "SinkStoreError", "check_part_footers", "discard_run", "open_sink_store",
           "view_table"]

#: The arrangement's name in a sink store.
NAME = "arrangement"


class SinkStoreError(RuntimeError):
    """The sink's store cannot be used as asked (damaged, another layout, changed by another
    writer, another schema); whatever raised it left the store unchanged."""


def view_table(u):
    """Updates consolidated at one time as a view: the data columns and ``count``.

    ``count`` is the row's multiplicity (its diffs summed), what ``colmz read`` prints and
    writes with ``--output``.

    >>> import colmz
    >>> view_table(colmz.Updates({"k": ["a"]}, time=[3], diff=[2])).to_pylist()
    [{'k': 'a', 'count': 2}]
    """
    return u.to_arrow().drop_columns(["time"]).rename_columns([*u.column_names, "count"])


@dataclass
class SinkStore:
    """A sink store: its URL, consensus URL and the arrangement (None before the first commit)."""

    url: str
    consensus: str | None
    arrangement: Arrangement | None

    @property
    def exists(self) -> bool:
        return self.arrangement is not None

    @property
    def pinned(self) -> Arrangement | None:
        """The arrangement once its schema is pinned (it may hold updates), else None."""
        arr = self.arrangement
        return arr if arr is not None and arr.schema is not None else None

    def prepare(self) -> None:
        """Make the location (directory, blob store) exist so executors can write parts into it."""
        from colmz.storage.url import open_location

        open_location(self.url, consensus=self.consensus, create=True)

    def describe(self) -> str:
        if self.arrangement is None:
            return f"store {self.url!r}: new"
        a = self.arrangement
        st = a.stats()
        seal = a.get_seal()
        through = "nothing sealed" if seal == 0 else f"sealed through tick {seal - 1}"
        return (f"store {self.url!r}: version {a.seqno}, {st['stored_updates']} updates in "
                f"{st['parts']} parts, {through}")


def open_sink_store(url: str, consensus: str | None = None) -> SinkStore:
    """Open and check the store at ``url`` (no Spark): validated metadata, every part present.

    A store that does not exist yet gives ``arrangement=None`` and creates nothing.
    """
    path = local_path(url)
    if path is not None:
        url = str(path)  # executors may run elsewhere in the file tree
        if path.exists() and not path.is_dir():
            raise SinkStoreError(f"store path {str(path)!r} exists and is not a directory")
        if not path.exists() or (not any(path.iterdir()) and consensus is None):
            return SinkStore(url, consensus, None)
        if consensus is None and not (path / "consensus.sqlite").is_file():
            raise SinkStoreError(
                f"{str(path)!r} is a non-empty directory without an arrangement "
                "(no consensus.sqlite); not a colmz store (refusing to write into it)"
            )
    try:
        arr = Arrangement.open(url, consensus=consensus, name=NAME, create=False)
    except FileNotFoundError:
        return SinkStore(url, consensus, None)
    except (IdentityMismatch, MetadataLost) as e:
        # The store is not damaged: its blob and the consensus disagree (the message says
        # what was found and how to recover); nothing is written until they agree.
        raise SinkStoreError(f"store {url!r} cannot be opened safely: {e}") from None
    except (ArrangementError, StorageError) as e:
        raise SinkStoreError(f"store {url!r} is damaged or unreachable: {e}") from None
    try:
        arr.validate()
    except ArrangementError as e:
        raise SinkStoreError(f"store {url!r} is damaged: {e}") from None
    present = set(arr.store.list_keys(arr.prefix))
    missing = sorted(arr.referenced_keys() - present)
    if missing:
        raise SinkStoreError(
            f"store {url!r} is damaged: {len(missing)} part(s) its metadata names are missing, "
            f"e.g. {missing[0]!r} (restore them, or remove the store)"
        )
    check_part_footers(arr, url)
    return SinkStore(url, consensus, arr)


def check_part_footers(arr: Arrangement, url: str) -> None:
    """Read the Parquet footer of every part ``arr``'s metadata names (a few KB each).

    A part that is not Parquet (truncated, overwritten) is reported here, in one line naming
    it, before a job starts -- not as a failed Spark task. A part whose footer reads but whose
    pages are damaged is still found when it is read (``CorruptPart``).
    """
    import pyarrow.parquet as pq

    for key in sorted(arr.referenced_keys()):
        try:
            f = open_input(arr.store, key)
            if f is None:
                raise SinkStoreError(f"store {url!r} is damaged: part {key!r} is missing")
            pq.ParquetFile(f).metadata  # noqa: B018 - reading the footer is the check
        except SinkStoreError:
            raise
        except Exception as e:  # ArrowInvalid, OSError: not a readable Parquet file
            raise SinkStoreError(f"store {url!r} is damaged: part {key!r} is not a readable "
                                 f"Parquet file ({str(e).splitlines()[0] if str(e) else type(e).__name__}); "
                                 "restore it, or remove the store") from None


def discard_run(store: SinkStore, owner: str) -> list[str]:
    """Delete every part this run wrote (its keys carry ``owner``) that no commit names;
    return the deleted keys.

    What commits name is re-read from consensus, never taken from this process's memory:
    a commit that failed with an unknown outcome may have landed, and another job may have
    created the arrangement while this one ran (two first runs into one new directory).
    When the committed state cannot be read, nothing is deleted (gc collects unreferenced
    parts after its lease). A task of the run that is still writing deletes its own parts
    when it finishes (``colmz.arrangement.runs.discard_owned``).

    A new store's directory is left in place, empty: deleting it could delete another
    job's first commit into it, and the next run starts from it as from a new store.
    """
    from colmz.storage.url import open_blob

    try:
        if store.arrangement is not None:
            store.arrangement.refresh()
            referenced = store.arrangement.referenced_keys()
        else:
            other = Arrangement.open(store.url, consensus=store.consensus, name=NAME, create=False)
            referenced = other.referenced_keys()
    except FileNotFoundError:
        referenced = frozenset()  # no arrangement: nothing is committed
    except MetadataLost:
        if store.arrangement is not None:
            return []  # the store this run read lost its record: leave everything as found
        # A new store: this run's own parts, with no record in consensus, are what makes its
        # opening look like lost metadata. No record means no commit names any part: delete
        # them, or the prefix stays refused as MetadataLost for every later run.
        referenced = frozenset()
    except Exception:  # noqa: BLE001 - committed state unknown: leave the parts to gc
        return []
    try:
        blob = open_blob(store.url)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return discard_owned(blob, f"{NAME}/parts/", owner, referenced)

