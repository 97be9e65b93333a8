"""Parts: the Parquet files an arrangement keeps its updates in -- their format, keys and reads.

Layer
-----
The *parts* layer of ``colmz.arrangement`` (``docs/arrangement.md``): it may touch the blob
store (writing, reading, listing parts) and never the state or the consensus. Follows
persist-client's part encoding and fetching (``src/persist-client/src/internal/encoding.rs``,
``src/persist-client/src/fetch.rs``). Its other modules: :mod:`colmz.arrangement.part_ref`
(what a read of a part verifies), :mod:`colmz.arrangement.part_writer` (writing parts),
:mod:`colmz.arrangement.merge` (the streaming merge of runs of parts) and
:mod:`colmz.arrangement.gather` (rows gathered by position).

Design
------
A *part* is one Parquet file in the blob store under a fresh key: the data columns as their
Arrow types, then ``time`` (``uint64``) and ``diff`` (``int64``), sorted by ``(data, time)`` in
colmz's total order on data (``colmz.order``) and consolidated, with no zero diff. Parts are
bounded (``part_rows`` rows and about ``part_bytes`` bytes of Arrow data each); a batch that
is larger is a list of parts that, read in order, is one sorted run. The file's key-value
metadata ``colmz.arrangement`` names what it is (``{"kind", "desc" or "seqnos", "index"}``),
so a part found on its own can be placed; any Parquet reader reads the rows.

Keys are ``<prefix><creation ms, 13 digits>-<token>[_s<seqno>].parquet``. The creation
time in the key is what ``Arrangement.gc`` leases on: a part younger than the lease is never
collected, whoever references it. ``seqno`` (:func:`key_seqno`) is the version of the state
its writer read -- the version its commit expects to replace -- so the part can become
visible only through a later version: a blob holding a part at ``s`` proves that the
store's record reached ``s`` (``colmz.arrangement.identity``, rolled-back metadata). Runs
written without a state carry none.

A read takes a :class:`~colmz.arrangement.part_ref.PartRef` (the key and the check its state
recorded) and decodes the whole part (:func:`read_part`: one Parquet read, memory-mapped on a
local store) or a row group or a bounded batch at a time (:func:`iter_part`, what merges
read). Parts of local and S3 stores are read by concurrent threads (:func:`read_parts`,
:func:`read_ahead`); other stores one call after another, in a repeatable order.

Invariant: a read returns the part's updates exactly as written, or raises
:class:`~colmz.arrangement.errors.MissingPart` / :class:`~colmz.arrangement.errors.CorruptPart`
-- never other rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from colmz.arrangement import part_ref
from colmz.arrangement.errors import CorruptPart, MissingPart
from colmz.arrangement.part_ref import (
    PART_METADATA_KEY,
    DigestCheck,
    PartCheck,
    PartRef,
    add_wrapped,
    check_diffs,
    check_footer,
    diff_sum,
    has_page_checksums,
)
from colmz.column_types import from_storage
from colmz.ops import concat
from colmz.order import ColumnSpec
from colmz.storage.base import Blob, open_input
from colmz.storage.local import LocalBlob
from colmz.storage.s3 import S3Blob
from colmz.threads import shared_pool
from colmz.updates import Updates

__all__ = [
    "DEFAULT_PART_BYTES",
    "DEFAULT_PART_ROWS",
    "PAGE_BUFFER",
    "READ_THREADS",
    "WRITE_COMPRESSION",
    "concurrent_calls",
    "group_statistics",
    "iter_part",
    "key_created_ms",
    "key_seqno",
    "make_key",
    "matching_groups",
    "open_part",
    "part_kind",
    "part_metadata",
    "read_ahead",
    "read_groups",
    "read_matching_groups",
    "read_part",
    "read_parts",
    "run_contents",
]

#: Default bound on the rows of one part.
DEFAULT_PART_ROWS = 1 << 20
#: Default bound on the Arrow bytes of one part (the data columns, time and diff).
DEFAULT_PART_BYTES = 64 << 20
#: Parquet codec of the parts a write creates (``Arrangement(write_compression=)``); merges
#: -- drains of several batches, compactions -- use ``Arrangement(compression=)``, snappy.
#: A write's latency is what its caller waits for, and snappy more than doubles the encoding
#: time of poorly compressible data (random 40-byte strings: 52 ms uncompressed, 115 ms
#: snappy, 17% smaller); the parts a trace keeps long are compressed when compaction
#: rewrites them.
WRITE_COMPRESSION = "none"
#: Bytes a merge input's Parquet reader buffers per column (pages are read through it).
PAGE_BUFFER = 1 << 16

_KEY_RE = re.compile(r"(?:^|/)(\d{13})-[0-9A-Za-z_]+\.parquet$")
_SEQNO_RE = re.compile(r"(?:^|/)\d{13}-[0-9A-Za-z_]*_s(\d+)\.parquet$")


def make_key(prefix: str, ms: int, token: str, seqno: int | None = None) -> str:
    """The blob key of a part created at epoch millisecond ``ms`` by a writer that read the
    state at ``seqno`` (None: no state, or not recorded). ``token`` is letters, digits and
    ``_`` without an ``s`` after its last ``_`` (a uuid's hex, ``<owner>_<hex>``).

    >>> make_key("parts/", 1700000000000, "ab12"), make_key("parts/", 1700000000000, "ab12", 7)
    ('parts/1700000000000-ab12.parquet', 'parts/1700000000000-ab12_s7.parquet')
    """
    tail = "" if seqno is None else f"_s{int(seqno)}"
    return f"{prefix}{int(ms):013d}-{token}{tail}.parquet"


def key_seqno(key: str) -> int | None:
    """The seqno of the state a part's writer read, from its key (:func:`make_key`); None
    when the key records none.

    >>> key_seqno("parts/1700000000000-ab12_s7.parquet"), key_seqno("parts/1700000000000-ab12.parquet")
    (7, None)
    """
    m = _SEQNO_RE.search(key)
    return int(m.group(1)) if m else None


def key_created_ms(key: str) -> int | None:
    """The creation millisecond embedded in a part key, or None for other keys.

    >>> key_created_ms("parts/1700000000000-ab12.parquet"), key_created_ms("parts/x")
    (1700000000000, None)
    """
    m = _KEY_RE.search(key)
    return int(m.group(1)) if m else None


def _whole_digest(store: Blob, key: str, expect: PartCheck) -> DigestCheck:
    # The digest check of the part under ``key``, opened whole (open_part) for it.
    whole = open_part(store, key)
    if whole is None:
        raise MissingPart(f"part {key!r} is missing from the blob store")
    with whole:
        return DigestCheck(whole, key, expect)


def open_part(store: Blob, key: str):
    """A random-access ``pyarrow`` file holding the whole part under ``key`` (what
    :func:`read_part` decodes), or None when it is missing.

    A local part is memory-mapped: the Parquet reader decodes straight from the page cache,
    with no read into an intermediate buffer. Other stores fetch the value in one call
    (``get``: a single request on S3, where the whole object is wanted anyway).
    """
    if type(store) is LocalBlob:  # the type, not a method: a fault wrapper forwards methods
        return store.open_input(key, mapped=True)
    data = store.get(key)
    return None if data is None else pa.BufferReader(data)


def read_part(store: Blob, part: PartRef | str, schema: Sequence[ColumnSpec]) -> Updates:
    """The updates of ``part`` (a :class:`PartRef`: its key and recorded check; a bare key
    reads with no recorded check), checked against ``schema`` and the check.

    The whole part is decoded by one Parquet read into contiguous columns: a part of one row
    group by ``ParquetFile.read`` (its columns decoded side by side), a longer one as one
    batch as long as the part, so the reader fills each column across the row groups itself
    and no concatenation copies them again.

    Raises :class:`MissingPart` when the key is absent and :class:`CorruptPart` when the
    value is not a Parquet file with the schema's data columns, ``time`` and ``diff``, or
    its digest, row count or diff sum is not the one recorded.
    """
    key, recorded = PartRef.of(part)
    f = open_part(store, key)
    if f is None:
        raise MissingPart(f"part {key!r} is missing from the blob store")
    with f:
        # the whole part is here: its digest, when recorded, stands for its pages' CRCs
        digest = DigestCheck(f, key, recorded)
        try:
            pf = pq.ParquetFile(f, page_checksum_verification=part_ref.PAGE_CHECKSUMS and not digest.done)
            expect = check_footer(pf, key, recorded)
            digest.raise_if_wrong()
            if pf.metadata.num_row_groups == 1:
                # 15 one-group parts of the sink's k = 14 read, one after another: 45-56 ms
                # of CPU so, 57-84 by the batch reader
                table = pf.read(use_threads=True)
            else:
                rows = pf.metadata.num_rows
                batches = list(pf.iter_batches(batch_size=max(rows, 1), use_threads=True))
                table = pa.Table.from_batches(batches, schema=pf.schema_arrow)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise CorruptPart(f"part {key!r} is not a readable Parquet file: {e}") from None
    u = _checked(table, key, schema)
    if expect is not None:
        check_diffs(expect, key, diff_sum(u.diff))
    return u


#: Most parts :func:`read_parts` reads at once.
READ_THREADS = 8


def concurrent_calls(store: Blob) -> bool:
    """Whether calls on ``store`` run in threads -- part reads (:func:`read_parts`,
    :func:`read_ahead`) and the parts of a large write encoded side by side
    (``colmz.arrangement.part_writer.PartWriter``): local and S3 stores, not the in-memory
    one or wrappers such as the fault injector, whose calls must come in a repeatable order."""
    return type(store) in (LocalBlob, S3Blob)


def read_ahead(store: Blob, keys: Sequence[PartRef | str], schema: Sequence[ColumnSpec],
               pool: ThreadPoolExecutor | None) -> Iterator[Updates]:
    """:func:`read_part` of each part (``keys``: references, or bare keys) in order, the next part read by ``pool`` while the
    caller works on this one (the first is requested at once, so the runs of a merge are
    fetched together); with ``pool=None``, one after another."""
    keys = list(keys)
    if pool is None or not keys:
        return (read_part(store, k, schema) for k in keys)
    first = pool.submit(read_part, store, keys[0], schema)

    def parts() -> Iterator[Updates]:
        pending = first
        try:
            for i in range(len(keys)):
                u = pending.result()
                if i + 1 < len(keys):
                    pending = pool.submit(read_part, store, keys[i + 1], schema)
                yield u
        finally:  # a caller that stops early leaves no read queued on the shared pool
            pending.cancel()

    return parts()


def read_parts(store: Blob, keys: Sequence[PartRef | str], schema: Sequence[ColumnSpec]) -> list[Updates]:
    """:func:`read_part` of every part (references, or bare keys), in order; parts of a local or S3 store are read by
    concurrent threads (Arrow decodes and fetches without the GIL). Other stores -- the
    in-memory one, wrappers such as the fault injector -- are read one key after another,
    so their calls happen in a repeatable order. The first failing key's error is raised.
    """
    keys = list(keys)
    if len(keys) < 2 or not concurrent_calls(store):
        return [read_part(store, k, schema) for k in keys]
    return list(shared_pool("read", READ_THREADS).map(lambda k: read_part(store, k, schema), keys))


def run_contents(parts: Sequence[Updates], upper: int | None, since: int,
                 schema: Sequence[ColumnSpec]) -> Updates | None:
    """One sorted, consolidated run (``parts`` in order) with the times before ``upper``
    kept and advanced to ``since`` -- or None when that could need consolidation.

    Keeping rows by time leaves a run sorted and consolidated; advancing times can make two
    rows of one data equal, except when no kept time is before ``since`` (nothing moves) or
    every kept time is the same (each data has one row). In those cases the run is the
    answer with no merge and no encoding; otherwise the caller merges.

    >>> import colmz
    >>> run = [colmz.Updates({"k": [1, 1, 2]}, time=[0, 3, 0], diff=[1, 1, 1])]
    >>> run_contents(run, None, 0, run[0].schema).to_pylist()
    [(1, 0, 1), (1, 3, 1), (2, 0, 1)]
    >>> run_contents(run, 1, 2, run[0].schema).to_pylist()
    [(1, 2, 1), (2, 2, 1)]
    >>> run_contents(run, None, 3, run[0].schema) is None  # (1, 0) and (1, 3) would meet
    True
    """
    kept: list[Updates] = []
    lo, hi = None, None
    for u in parts:
        if not len(u):
            continue
        if upper is not None:
            mask = u.time < np.uint64(upper)
            if not mask.all():
                if not mask.any():
                    continue
                sel = pa.array(mask)
                u = Updates({s.name: u.column(s.name).filter(sel) for s in u.schema},
                            u.time[mask], u.diff[mask], copy=False)  # fresh arrays
        t_lo, t_hi = int(u.time.min()), int(u.time.max())
        lo = t_lo if lo is None else min(lo, t_lo)
        hi = t_hi if hi is None else max(hi, t_hi)
        kept.append(u)
    if not kept:
        return Updates.empty(schema)
    if lo < since and lo != hi:
        return None
    out = kept[0] if len(kept) == 1 else concat(kept)
    if lo < since:
        out = Updates({s.name: out.column(s.name) for s in out.schema},
                      np.full(len(out), since, np.uint64), out.diff, copy=False)
    return out


def iter_part(store: Blob, part: PartRef | str, schema: Sequence[ColumnSpec],
              batch_rows: int | None = None) -> Iterator[Updates]:
    """The updates of ``part`` (a :class:`PartRef`, or a bare key), one Parquet row group at a time -- or, with
    ``batch_rows``, in batches of that many rows, read page by page through a small buffer
    (what merges read, so that a merge of many parts holds a bounded slice of each); checked
    as :func:`read_part` checks them. Local and S3 blobs are read by ranges, never whole --
    except that a local part whose digest is recorded is first checked whole, memory-mapped
    (and one without page checksums on another store, fetched whole: only parts written to
    a local directory lack them, ``part_ref.writes_page_checksums``)."""
    key, recorded = PartRef.of(part)
    digest = None
    if type(store) is LocalBlob and recorded is not None and recorded.digest is not None:
        # hashed through a mapping closed at once, and read through a file of its own: the
        # pages a mapping touched count in the process's memory while it is open, and a
        # merge holds many parts open while it reads a slice of each
        digest = _whole_digest(store, key, recorded)
    verified = digest is not None
    f = open_input(store, key)
    if f is None:
        raise MissingPart(f"part {key!r} is missing from the blob store")
    with f:
        try:
            if batch_rows is None:
                pf = pq.ParquetFile(f, page_checksum_verification=part_ref.PAGE_CHECKSUMS and not verified)
            else:
                # No pre-buffering: a column chunk is read through PAGE_BUFFER bytes at a
                # time instead of whole, so an open input costs about a page per column.
                pf = pq.ParquetFile(f, pre_buffer=False, buffer_size=PAGE_BUFFER,
                                    page_checksum_verification=part_ref.PAGE_CHECKSUMS and not verified)
            expect = check_footer(pf, key, recorded)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise CorruptPart(f"part {key!r} is not a readable Parquet file: {e}") from None
        if digest is None and expect is not None and expect.digest is not None \
                and not has_page_checksums(pf):
            digest = _whole_digest(store, key, expect)
        if digest is not None:
            digest.raise_if_wrong()
        if pf.metadata.num_row_groups == 0:
            yield _checked(pf.schema_arrow.empty_table(), key, schema)
            check_diffs(expect, key, 0)
            return
        # The diff sum is known once the last rows are read: a merge reading a part whose
        # diffs were rewritten fails before it can commit what it wrote from them.
        total = 0
        if batch_rows is not None:
            batches = pf.iter_batches(batch_size=max(1, int(batch_rows)), use_threads=False)
            while True:
                try:
                    b = next(batches)
                except StopIteration:
                    check_diffs(expect, key, total)
                    return
                except (pa.ArrowException, OSError, ValueError) as e:
                    raise CorruptPart(f"part {key!r} is not readable: {e}") from None
                u = _checked(pa.Table.from_batches([b]), key, schema)
                total = add_wrapped(total, diff_sum(u.diff))
                yield u
        for i in range(pf.metadata.num_row_groups):
            try:
                table = pf.read_row_group(i)
            except (pa.ArrowException, OSError, ValueError) as e:
                raise CorruptPart(f"part {key!r} row group {i} is not readable: {e}") from None
            u = _checked(table, key, schema)
            total = add_wrapped(total, diff_sum(u.diff))
            yield u
        check_diffs(expect, key, total)


def read_matching_groups(store: Blob, part: PartRef | str, schema: Sequence[ColumnSpec],
                         first: Sequence, verified: set | None = None) -> Updates:
    """The updates of the row groups of ``part`` that may hold a row whose first data column
    is one of ``first`` (Python values, ``None`` for NULL): a row group is read when its
    first column's min/max statistics admit one of them, or when it has none a value can be
    compared with -- so the rows returned are a superset of the part's rows with those
    first values, and a point lookup in a sorted part reads about one row group
    (``ROW_GROUP_ROWS`` rows) per value, not the part.

    Checked as :func:`read_groups` checks them.
    """
    _, got = read_groups(store, part, schema, lambda groups: matching_groups(groups, first), verified)
    if not got:
        return Updates.empty(schema)
    return concat(list(got.values())) if len(got) > 1 else next(iter(got.values()))


def group_statistics(md: pq.FileMetaData) -> tuple:
    """Each row group's rows and first column's statistics (None: none kept), in order: what
    :func:`matching_groups` tells groups apart by."""
    return tuple((md.row_group(i).num_rows,
                  md.row_group(i).column(0).statistics if md.num_columns else None)
                 for i in range(md.num_row_groups))


def matching_groups(groups: tuple, first: Sequence) -> list[int]:
    """The row groups (of :func:`group_statistics`) that may hold a row whose first data
    column is one of ``first``: a non-empty group whose statistics admit one of the values,
    or that has none a value can be compared with."""
    return [i for i, (rows, stats) in enumerate(groups) if rows and _may_hold(stats, first)]


def read_groups(store: Blob, part: PartRef | str, schema: Sequence[ColumnSpec], choose,
                verified: set | None = None) -> tuple[tuple, dict[int, Updates]]:
    """The part's :func:`group_statistics` and the updates of the row groups
    ``choose(statistics)`` names (a list of group numbers), one ``Updates`` per group.

    Checked as :func:`iter_part` checks the pages it reads (page CRCs, or the whole part's
    recorded digest where the part has none: once per key when ``verified`` is given, the
    set of keys checked so, which it extends); the diff sum, recorded for the whole part,
    is not checked by a read of some groups. Raises :class:`MissingPart` /
    :class:`CorruptPart` as :func:`read_part` does.
    """
    key, recorded = PartRef.of(part)
    done = verified is not None and key in verified
    if not done and type(store) is LocalBlob and recorded is not None and recorded.digest is not None:
        _whole_digest(store, key, recorded).raise_if_wrong()
        done = True
    f = open_input(store, key)
    if f is None:
        raise MissingPart(f"part {key!r} is missing from the blob store")
    with f:
        try:
            pf = pq.ParquetFile(f, page_checksum_verification=part_ref.PAGE_CHECKSUMS and not done)
            expect = check_footer(pf, key, recorded)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise CorruptPart(f"part {key!r} is not a readable Parquet file: {e}") from None
        if not done and expect is not None and expect.digest is not None and not has_page_checksums(pf):
            _whole_digest(store, key, expect).raise_if_wrong()
        if verified is not None:
            verified.add(key)
        stats = group_statistics(pf.metadata)
        groups = sorted(set(choose(stats)))
        if not groups:
            return stats, {}
        try:
            table = pf.read_row_groups(groups)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise CorruptPart(f"part {key!r} row groups {groups} are not readable: {e}") from None
    u = _checked(table, key, schema)
    if len(u) != sum(stats[g][0] for g in groups):
        raise CorruptPart(f"part {key!r} row groups {groups} hold {len(u)} rows, not the footer's")
    out, at = {}, 0
    for g in groups:
        n = stats[g][0]
        out[g] = u if len(groups) == 1 else u.slice(at, at + n)
        at += n
    return stats, out


def _may_hold(stats, values: Sequence) -> bool:
    # Whether a row group whose first column has ``stats`` may hold one of ``values``: only
    # a comparison that can be made proves it cannot (a NULL is admitted by a null count
    # above zero; NaN, unknown counts, values of other types: admitted).
    if stats is None:
        return True
    for v in values:
        if v is None:
            if not stats.has_null_count or stats.null_count > 0:
                return True
            continue
        if not stats.has_min_max:
            return True
        try:
            lo, hi = stats.min, stats.max
            if isinstance(v, float) and v != v:
                return True
            if not (v < lo or v > hi):
                return True
        except Exception:  # noqa: BLE001 - a value the statistics cannot order: read the group
            return True
    return False


def _checked(table: pa.Table, key: str, schema: Sequence[ColumnSpec]) -> Updates:
    # an interval column is stored as its fields (colmz.column_types.STORED_INTERVAL)
    table = from_storage(table, {s.name: s.type for s in schema})
    names = [s.name for s in schema]
    if table.column_names != [*names, "time", "diff"]:
        raise CorruptPart(
            f"part {key!r} has columns {table.column_names}; expected {[*names, 'time', 'diff']}"
        )
    for s in schema:
        t = table.schema.field(s.name).type
        if t != s.type and not pa.types.is_null(t):
            raise CorruptPart(f"part {key!r} column {s.name!r} has type {t}, expected {s.type}")
    if table.schema.field("time").type != pa.uint64() or table.schema.field("diff").type != pa.int64():
        raise CorruptPart(f"part {key!r} has time/diff of types "
                          f"{table.schema.field('time').type}/{table.schema.field('diff').type}")
    try:
        u = Updates.from_arrow(table)
    except (TypeError, ValueError, OverflowError) as e:
        raise CorruptPart(f"part {key!r} holds invalid updates: {e}") from None
    if any(pa.types.is_null(c.type) for c in u.schema) and any(
        not pa.types.is_null(s.type) for s in schema
    ):
        cols = {
            s.name: (pa.nulls(len(u), s.type) if pa.types.is_null(c.type) else u.column(s.name))
            for s, c in zip(schema, u.schema)
        }
        u = Updates(cols, u.time, u.diff, copy=False)  # colmz-owned arrays
    return u


def part_metadata(store: Blob, key: str) -> dict:
    """The ``colmz.arrangement`` metadata of a part (``{}`` when absent)."""
    data = store.get(key)
    if data is None:
        raise MissingPart(f"part {key!r} is missing from the blob store")
    try:
        md = pq.read_metadata(pa.BufferReader(data)).metadata or {}
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptPart(f"part {key!r} is not a readable Parquet file: {e}") from None
    raw = md.get(PART_METADATA_KEY)
    return json.loads(raw) if raw else {}


def part_kind(store: Blob, key: str) -> str | None:
    """The ``kind`` a part's own metadata gives (``unsealed``, ``trace``, ``run``), read from
    its footer alone; None when it names none or cannot be read."""
    f = open_input(store, key)
    if f is None:
        return None
    with f:
        try:
            md = pq.read_metadata(f).metadata or {}
            raw = md.get(PART_METADATA_KEY)
            return json.loads(raw).get("kind") if raw else None
        except (pa.ArrowException, OSError, ValueError, AttributeError):
            return None
