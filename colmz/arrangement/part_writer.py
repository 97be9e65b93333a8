"""Writing parts: :class:`PartWriter` cuts sorted, consolidated updates into bounded parts.

Layer
-----
Part of the *parts* layer of ``colmz.arrangement`` (``docs/arrangement.md``): it writes and
deletes blobs and never touches the state or the consensus. Follows persist-client's batch
writing (``src/persist-client/src/batch.rs``); the part format is :mod:`colmz.arrangement.parts`'s.

Design
------
A write (:meth:`PartWriter.write` with ``rows``) gathers its sorted rows a row group at a time
on helper threads (:data:`GATHER_AHEAD` groups ahead, :func:`colmz.arrangement.gather.take_rows`)
while the previous group is encoded; a batch of :data:`PARALLEL_WRITE_BYTES` or more is cut
into parts encoded side by side (:data:`ENCODE_THREADS`), and a local part is encoded straight
into its temporary file (``LocalBlob.set_streamed``) -- except a small one (up to
:data:`SMALL_PART_BYTES` of Arrow data: a commit's one-row change), encoded in memory,
digested there and stored by one ``set`` (the same write, fsync, rename and directory fsync,
without the streaming machinery and the read back for the digest). A write's parts are uncompressed by
default (``colmz.arrangement.parts.WRITE_COMPRESSION``), merges compress. Time and diff are
dictionary-encoded (:data:`DICTIONARY_FIELDS`), and statistics are kept for every column but
the string columns after the first. Each part is digested as it is written and recorded with
its row count and diff sum (``colmz.arrangement.part_ref.PartCheck``).

Invariants: parts are recorded (``keys``, ``checks``) in the order they hold the run, only
once written whole; a write that fails deletes what it wrote (:meth:`PartWriter.abort`, best
effort: ``gc`` collects the rest).
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from colmz.arrangement import part_ref
from colmz.arrangement.errors import MissingPart
from colmz.arrangement.gather import take_rows
from colmz.arrangement.part_ref import (
    PART_METADATA_KEY,
    PartCheck,
    PartRef,
    add_wrapped,
    diff_sum,
    part_digest,
    part_refs,
    writes_page_checksums,
)
from colmz.arrangement.parts import (
    DEFAULT_PART_BYTES,
    DEFAULT_PART_ROWS,
    concurrent_calls,
    open_part,
)
from colmz.column_types import storage_table
from colmz.order import ColumnSpec
from colmz.storage.base import Blob
from colmz.storage.local import LocalBlob
from colmz.threads import shared_pool
from colmz.updates import Encoded, Updates, concat_encoded

__all__ = [
    "DATA_PAGE_BYTES",
    "DICTIONARY_FIELDS",
    "ENCODE_THREADS",
    "GATHER_AHEAD",
    "PARALLEL_WRITE_BYTES",
    "ROW_GROUP_ROWS",
    "PartWriter",
    "repeats",
]

#: Rows per Parquet row group of a part.
ROW_GROUP_ROWS = 1 << 16
#: Columns besides repeating strings that a part stores with dictionary pages. A diff column
#: of ones then takes a few bytes per row group instead of 8 bytes per row.
DICTIONARY_FIELDS = ("time", "diff")
#: Parquet data page size of a part: large enough that a row group's column is one page or
#: a few (each page costs a header and its own statistics to write), and a row group is
#: what a reader holds anyway.
DATA_PAGE_BYTES = 4 << 20
#: Row groups a write gathers ahead of the one being encoded, each on a helper thread of its
#: own: a gather of rows in sorted order reads the batch at random, waiting on memory rather
#: than computing, so two run side by side in about the time of one.
GATHER_AHEAD = 2
#: A batch of at least this many bytes handed to a writer whole (:meth:`PartWriter.write`:
#: an arrangement's write, ``write_run``) is cut into (at least) :data:`ENCODE_THREADS` parts
#: encoded side by side, one Parquet writer each (a Parquet file is written by one thread,
#: and its encoding is half a large write's CPU). Smaller batches stay one part: each part
#: is a file, a footer and a key in the state.
PARALLEL_WRITE_BYTES = 16 << 20
#: Parts of one sorted write encoded at once.
ENCODE_THREADS = 2
#: A part of at most this many bytes of Arrow data is encoded in memory and stored with one
#: ``set`` even in a local store: streaming it into its file (a writeback helper, the part
#: read back for its digest) costs more than the copy it saves (about 0.3 ms of a 0.8 ms
#: one-row part).
SMALL_PART_BYTES = 1 << 20


class PartWriter:
    """Cut a stream of sorted, consolidated encoded chunks into bounded Parquet parts.

    ``new_key()`` names each part; ``info`` is written into each part's metadata with the
    part's ``index``. ``keys``, ``rows`` and ``size_bytes`` report what was written;
    ``abort()`` deletes it (best effort), for a call that fails midway.
    """

    def __init__(self, store: Blob, schema: Sequence[ColumnSpec], new_key: Callable[[], str],
                 info: dict, *, part_rows: int = DEFAULT_PART_ROWS,
                 part_bytes: int = DEFAULT_PART_BYTES, compression: str = "snappy"):
        self.store = store
        self.schema = tuple(schema)
        self.new_key = new_key
        self.info = info
        self.part_rows = max(1, int(part_rows))
        self.part_bytes = max(1, int(part_bytes))
        self.compression = compression
        self.keys: list[str] = []
        self.checks: list[PartCheck] = []  # per key: what a read checks (PartCheck)
        self.rows = 0
        self.size_bytes = 0
        self._pending: list[Encoded] = []
        self._pending_rows = 0
        self._pending_bytes = 0

    def add(self, enc: Encoded) -> None:
        if not len(enc):
            return
        self._pending.append(enc)
        self._pending_rows += len(enc)
        self._pending_bytes += enc.nbytes
        while self._pending_rows >= self.part_rows or self._pending_bytes >= self.part_bytes:
            if not self._flush(final=False):
                break

    def add_updates(self, u: Updates, rows: np.ndarray | None = None) -> None:
        """Add an already sorted, consolidated batch (cut by row slices, never re-encoded),
        or with ``rows``, ``u``'s rows in the order those positions give.

        With ``rows`` the rows are gathered a row group at a time (:func:`take_rows`), each
        group by a helper thread while the previous one is encoded (the gathers and the
        Parquet encoder run without the GIL), so the gathered batch never exists whole. A
        batch of :data:`PARALLEL_WRITE_BYTES` or more is cut into at least
        :data:`ENCODE_THREADS` parts, encoded that many at a time (on stores whose calls may
        run in threads, :func:`concurrent_calls`).
        """
        while self._pending_rows:
            self._flush(final=True)
        n = len(u) if rows is None else len(rows)
        if not n:
            return
        per_row = max(u.nbytes / max(len(u), 1), 1e-9)
        step = max(1, min(self.part_rows, int(self.part_bytes / per_row)))
        if n > 1 and n * per_row >= PARALLEL_WRITE_BYTES:
            parts = max(-(-n // step), ENCODE_THREADS)
            step = -(-n // parts)
        # one job a part: its rows and what encodes it under a key (a part's table is made
        # by its job, so a batch held encoded is decoded a part at a time)
        jobs: list[tuple[int, Callable[[str, dict], tuple[PartCheck, int]]]] = []
        if rows is None:
            for start in range(0, n, step):
                part = u.slice(start, min(n, start + step))
                jobs.append((len(part), lambda key, info, part=part: self._encode_updates(key, info, part)))
        else:
            table = u.to_arrow()
            # time and diff are often one value throughout (a write at one time, diffs of
            # 1): then any rows of them are a slice, with nothing to gather
            constant = [name for name, a in (("time", u.time), ("diff", u.diff))
                        if len(a) and a.min() == a.max()]
            gather = shared_pool("gather", GATHER_AHEAD)
            for start in range(0, n, step):
                part = rows[start:min(n, start + step)]
                jobs.append((len(part), lambda key, info, part=part: self._encode_part(
                    key, info, table, len(part),
                    lambda a, b: take_rows(table, part[a:b], constant), u, gather)))
        if len(jobs) == 1 or not concurrent_calls(self.store):
            for m, encode in jobs:
                key, info = self._name_part(len(self.keys))
                check, size = encode(key, info)
                self._record(key, check, m, size)
            return
        # Keys and indexes are given in part order before any part is encoded; each part
        # is recorded once written, in that order, so abort() finds every written one.
        named = [self._name_part(len(self.keys) + i) for i in range(len(jobs))]
        pool = shared_pool("encode", ENCODE_THREADS)
        futures = [pool.submit(encode, key, info) for (key, info), (_, encode) in zip(named, jobs)]
        failed = None
        for (key, _info), (m, _), f in zip(named, jobs, futures):
            try:
                check, size = f.result()
            except BaseException as e:  # the others are still waited for, then recorded
                failed = failed or e
                continue
            self._record(key, check, m, size)
        if failed is not None:
            raise failed

    def write(self, u: Updates, rows: np.ndarray | None = None) -> list[str]:
        """Write a sorted, consolidated batch (with ``rows``: see :meth:`add_updates`) as
        parts and finish; on any failure delete what was written and re-raise. Returns the
        keys."""
        try:
            self.add_updates(u, rows)
            return self.finish()
        except BaseException:
            self.abort()
            raise

    @property
    def parts(self) -> tuple[PartRef, ...]:
        """The parts written so far, each with the check its reads verify."""
        return part_refs(self.keys, self.checks)

    def finish(self) -> list[str]:
        while self._pending_rows:
            self._flush(final=True)
        return self.keys

    def abort(self) -> None:
        for k in self.keys:
            with contextlib.suppress(Exception):  # best effort; gc collects the rest
                self.store.delete(k)
        self.keys = []
        self.checks = []

    def _flush(self, final: bool) -> bool:
        enc = self._pending[0] if len(self._pending) == 1 else concat_encoded(self._pending)
        n = len(enc)
        take = min(n, self.part_rows)
        if enc.nbytes > self.part_bytes and n > 1:
            per_row = enc.nbytes / n
            take = min(take, max(1, int(self.part_bytes / per_row)))
        if take < n:
            head = Encoded(enc.keys[:take], enc.time[:take], enc.diff[:take], enc.layout)
            rest = Encoded(enc.keys[take:], enc.time[take:], enc.diff[take:], enc.layout)
            self._pending = [rest]
        else:
            head = enc
            self._pending = []
        self._pending_rows = n - take
        self._pending_bytes = sum(p.nbytes for p in self._pending)
        self._write(head)
        return True

    def _write(self, enc: Encoded) -> None:
        self._write_updates(Updates.decode(enc, self.schema))

    def _write_updates(self, u: Updates) -> None:
        key, info = self._name_part(len(self.keys))
        check, size = self._encode_updates(key, info, u)
        self._record(key, check, len(u), size)

    def _encode_updates(self, key: str, info: dict, u: Updates) -> tuple[PartCheck, int]:
        table = u.to_arrow()
        return self._encode_part(key, info, table, len(u), lambda a, b: table.slice(a, b - a), u,
                                 None)

    def _name_part(self, index: int) -> tuple[str, dict]:
        key = self.new_key()
        # The key in the part's own metadata: a part copied or renamed over another key is
        # recognised when read (check_footer).
        return key, dict(self.info, index=index, key=key)

    def _record(self, key: str, check: PartCheck, n: int, size: int) -> None:
        self.keys.append(key)
        self.checks.append(check)
        self.rows += n
        self.size_bytes += size

    def _encode_part(self, key: str, info: dict, table: pa.Table, n: int,
                     rows_of: Callable[[int, int], pa.Table], values: Updates,
                     pool: ThreadPoolExecutor | None) -> tuple[PartCheck, int]:
        # One part of ``n`` rows stored under ``key``; ``rows_of(a, b)`` is its rows [a, b)
        # as a table like ``table``; ``values`` holds the part's values (in any order: they
        # only decide the encoding). With ``pool``, row groups are fetched there
        # GATHER_AHEAD ahead. Changes nothing of ``self`` (parts may be encoded side by side).
        crc = part_ref.PAGE_CHECKSUMS and writes_page_checksums(self.store)
        info = dict(info, page_checksums=crc)
        if any(s.kind == "interval" for s in self.schema):
            # Parquet has no interval type: each interval column as its fields (a struct)
            table = storage_table(table)
            rows_of = (lambda rows: lambda a, b: storage_table(rows(a, b)))(rows_of)
        schema = table.schema.with_metadata({PART_METADATA_KEY: json.dumps(info).encode()})
        # Dictionary pages pay off for time and diff (few distinct values: one time and
        # diff 1 in a typical write, constant times after compaction) and for strings that
        # repeat; for high-cardinality values they cost 2-3x the write time (the writer
        # hashes a page's worth before it gives up).
        dict_cols = [s.name for s in self.schema
                     if s.kind == "bytes" and repeats(values.column(s.name))] + list(DICTIONARY_FIELDS)
        # Row groups bound what a merge reading this part holds at once (iter_part).
        group = max(min(n, ROW_GROUP_ROWS), 1)
        bounds = [(a, min(n, a + group)) for a in range(0, max(n, 1), group)]
        # Min/max statistics let readers skip row groups; they matter on the first column
        # (the order of the rows), times and numbers, while on other strings they cost a
        # string comparison per value and prune little.
        # (an array column's statistics would be its elements': of no use to a reader)
        # (nor an interval's, its fields' statistics)
        stats = [s.name for i, s in enumerate(self.schema)
                 if (i == 0 and s.kind not in ("list", "interval")) or s.kind not in ("bytes", "list", "interval")]
        stats = True if len(stats) == len(self.schema) else stats + ["time", "diff"]
        # an array column keeps Arrow's element name ("item"; Parquet's compliant "element"
        # would read back as another Arrow type than the schema's)
        options = dict(compression=self.compression, use_dictionary=dict_cols,
                       write_statistics=stats, data_page_size=DATA_PAGE_BYTES,
                       write_page_checksum=crc, use_compliant_nested_type=False)
        sums = [0]

        def fetch(a: int, b: int) -> tuple[pa.Table, int]:
            # a row group and its diffs' sum, both made on the helper thread: the encoding
            # thread then only adds integers, and never waits there for the GIL to come back
            # from a gathering thread (which under load cost a 50 MiB write 30 ms)
            t = rows_of(a, b)
            s = 0
            for c in t.column("diff").chunks:
                s = add_wrapped(s, diff_sum(c.to_numpy()))
            return t, s

        def counted(got: tuple[pa.Table, int]) -> pa.Table:
            sums[0] = add_wrapped(sums[0], got[1])
            return got[0]

        def groups() -> Iterator[pa.Table]:
            if pool is None:
                for a, b in bounds:
                    yield counted(fetch(a, b))
                return
            ahead = deque(pool.submit(fetch, *b) for b in bounds[:GATHER_AHEAD])
            try:
                for i in range(len(bounds)):
                    got = ahead.popleft().result()
                    if i + GATHER_AHEAD < len(bounds):
                        ahead.append(pool.submit(fetch, *bounds[i + GATHER_AHEAD]))
                    yield counted(got)
            finally:
                for f in ahead:
                    f.cancel()

        if type(self.store) is LocalBlob and table.nbytes > SMALL_PART_BYTES:  # the type: a fault wrapper must see a plain set
            # Straight into the part's temporary file, row group by row group, the disk
            # writing each while the next is encoded (no copy of the whole part in memory).
            def fill(out, writeback) -> None:
                with pq.ParquetWriter(out, schema, **options) as w:
                    for i, t in enumerate(groups()):
                        if i:  # the last group is left to the final fsync
                            writeback()
                        w.write_table(t, row_group_size=group)

            size = self.store.set_streamed(key, fill)
            digest = None
            if part_ref.PART_DIGESTS:  # read back memory-mapped, from the page cache the write filled
                written = open_part(self.store, key)
                if written is None:
                    raise MissingPart(f"part {key!r} vanished as it was written")
                with written:
                    digest = part_digest(written.read_buffer())
        else:
            sink = pa.BufferOutputStream()
            with pq.ParquetWriter(sink, schema, **options) as w:
                for t in groups():
                    w.write_table(t, row_group_size=group)
            buf = sink.getvalue()
            digest = part_digest(buf) if part_ref.PART_DIGESTS else None
            self.store.set(key, buf)
            size = buf.size
        return PartCheck(n, sums[0], digest), size


def repeats(col: pa.Array, sample: int = 2048) -> bool:
    """Whether values of ``col`` repeat enough for a Parquet dictionary to pay: fewer than
    half of ``sample`` evenly spaced rows are distinct.

    >>> repeats(pa.array(["a", "b"] * 5000)), repeats(pa.array([str(i) for i in range(10000)]))
    (True, False)
    """
    n = len(col)
    if n <= sample:
        picked = col
    else:
        picked = col.take(pa.array(np.linspace(0, n - 1, sample).astype(np.int64)))
    return pc.count_distinct(picked, mode="all").as_py() * 2 < max(len(picked), 1)
