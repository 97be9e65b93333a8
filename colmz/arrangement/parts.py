"""Parts: the Parquet files an arrangement keeps its updates in, and the streaming merge.

Layer
-----
The *parts* layer of ``colmz.arrangement`` (``docs/arrangement.md``): it may touch the blob
store (writing, reading, listing parts) and never the state or the consensus. Follows
persist-client's part encoding and batch writing (``src/persist-client/src/internal/encoding.rs``,
``src/persist-client/src/batch.rs``).

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
store's record reached ``s`` (``colmz.arrangement.identity``, rolled-back metadata). Parts
written before seqnos were recorded, and runs written without one, carry none.

A write (:meth:`PartWriter.write` with ``rows``) gathers its sorted rows a row group at a time on
helper threads (:data:`GATHER_AHEAD` groups ahead) while the previous group is encoded; a
batch of :data:`PARALLEL_WRITE_BYTES` or more is cut into parts encoded side by side
(:data:`ENCODE_THREADS`), and a local part is encoded straight into its temporary file
(``LocalBlob.set_streamed``). A write's parts are uncompressed by default
(:data:`WRITE_COMPRESSION`), merges compress.
Time and diff are dictionary-encoded (:data:`DICTIONARY_FIELDS`), and statistics are kept
for every column but the string columns after the first.

The merge (:func:`stream_merge`) combines sorted runs read chunk by chunk -- drains of
several unsealed batches, compactions of trace batches -- holding about ``MERGE_ROWS`` input
rows in all (a run of parts, :class:`PartRun`, is read ``MERGE_ROWS // fan-in`` rows at a
time, so a drain of forty batches holds no more than a merge of two) plus one output part:
it repeatedly takes, from every input, the rows whose data sort strictly before
the smallest *last* data row loaded among the inputs that still have parts to read, merges
those with :func:`colmz.kernels.merge.merge_runs` (advancing times to ``since``) and hands
the result to a :class:`PartWriter`. Cutting strictly before that row matters: the next part
of an input may continue the same data at later times, and after times advance to ``since``
those must meet the rows already loaded to be consolidated with them.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from colmz.arrangement.errors import CorruptPart, MissingPart
from colmz.kernels.digest import xxh64
from colmz.kernels.gather import take_bytes, take_fixed, take_lengths
from colmz.kernels.merge import merge_runs
from colmz.ops import concat
from colmz.order import ColumnSpec, unify_layouts
from colmz.storage.base import Blob, open_input
from colmz.storage.local import LocalBlob
from colmz.storage.s3 import S3Blob
from colmz.threads import shared_pool
from colmz.updates import Encoded, Updates, concat_encoded

__all__ = [
    "DEFAULT_PART_BYTES",
    "DEFAULT_PART_ROWS",
    "DATA_PAGE_BYTES",
    "DICTIONARY_FIELDS",
    "ENCODE_THREADS",
    "GATHER_AHEAD",
    "PART_METADATA_KEY",
    "PARALLEL_WRITE_BYTES",
    "MERGE_ROWS",
    "PartRef",
    "PartRun",
    "PartWriter",
    "READ_THREADS",
    "WRITE_COMPRESSION",
    "PartCheck",
    "binary_buffers",
    "is_binary_type",
    "take_fixed_width",
    "take_rows",
    "concurrent_calls",
    "part_digest",
    "part_refs",
    "writes_page_checksums",
    "key_created_ms",
    "key_seqno",
    "iter_part",
    "make_key",
    "part_kind",
    "read_ahead",
    "read_part",
    "repeats",
    "read_parts",
    "run_contents",
    "iter_merge",
    "stream_merge",
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
#: Input rows a streaming merge holds in all, about: each of its ``k`` runs of parts is read
#: ``MERGE_ROWS // k`` rows at a time (at least ``MIN_CHUNK_ROWS``), so the memory of a merge
#: does not grow with its fan-in -- a drain of every unsealed batch at once included.
MERGE_ROWS = 1 << 16
#: Fewest rows a merge reads from one input at a time.
MIN_CHUNK_ROWS = 1 << 10
#: Bytes a merge input's Parquet reader buffers per column (pages are read through it).
PAGE_BUFFER = 1 << 16
#: The Parquet key-value metadata entry describing a part.
PART_METADATA_KEY = b"colmz.arrangement"
#: Parquet page CRC32s are verified on read wherever a part has them
#: (``page_checksum_verification``) and no digest was checked instead; they are written
#: into parts on stores read by ranges (:func:`writes_page_checksums`), so a flipped bit in
#: a page is a :class:`CorruptPart`, never a different answer.
PAGE_CHECKSUMS = True
#: Parts are digested as they are written (:func:`part_digest`, recorded in their
#: :class:`PartCheck`); with this and :data:`PAGE_CHECKSUMS` off, writes and reads skip both
#: -- only to measure what integrity costs (``bench_arrangement.Checksums``).
PART_DIGESTS = True

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


# ----------------------------------------------------------------------------- integrity


class PartCheck(tuple):
    """What a state records of one part, checked whenever the part is read: its row count,
    the sum of its diffs (int64, wrapping) and -- for parts written since digests -- the
    XXH64 digest of its bytes (:func:`part_digest`): ``(rows, diff_sum)`` or
    ``(rows, diff_sum, digest)``.

    >>> PartCheck(3, 3), PartCheck(3, 3, -5).digest
    ((3, 3), -5)
    """

    __slots__ = ()

    def __new__(cls, rows: int, diff_sum: int, digest: int | None = None):
        values = (int(rows), int(diff_sum)) if digest is None else (int(rows), int(diff_sum), int(digest))
        return super().__new__(cls, values)

    def __getnewargs__(self) -> tuple[int, ...]:  # pickling (a check sent to another process)
        return tuple(self)

    @property
    def rows(self) -> int:
        return self[0]

    @property
    def diff_sum(self) -> int:
        return self[1]

    @property
    def digest(self) -> int | None:
        return self[2] if len(self) > 2 else None


def part_digest(data) -> int:
    """The digest a state records of a part: XXH64 (``kernels/digest.py``, seed 0) of its
    bytes -- any buffer -- as a signed int64.

    >>> part_digest(b"") == 0xEF46DB3751D8E999 - 2**64
    True
    """
    value = int(xxh64(np.frombuffer(data, np.uint8), np.uint64(0)))
    return value - (1 << 64) if value >= 1 << 63 else value


def writes_page_checksums(store: Blob) -> bool:
    """Whether parts written to ``store`` carry Parquet page CRC32s besides their digest.

    Every read path of a local part sees the whole file (memory-mapped), so it checks the
    digest, at about three times the CRC's speed (``kernels/digest.py``). Other stores are
    read by ranges in streaming merges (:func:`iter_part` on S3), where only the pages read
    can be checked: their parts keep page checksums too.
    """
    return type(store) is not LocalBlob  # the type: a fault wrapper reads as another store


class DigestCheck:
    """The digest of a whole part (``f``: memory-mapped or in memory, at its start) beside
    the one its state recorded (``expect``). ``done`` says whether there was one to check:
    it then stands for the pages' CRCs. :meth:`raise_if_wrong` comes after the footer's own
    checks (:func:`_check_footer`), whose errors say more (a part substituted by another)."""

    def __init__(self, f, key: str, expect: PartCheck | None):
        self.key = key
        self.want = None if expect is None else expect.digest
        self.got = None
        if self.want is not None:
            self.got = part_digest(f.read_buffer())
            f.seek(0)

    @property
    def done(self) -> bool:
        return self.want is not None

    def raise_if_wrong(self) -> None:
        if self.got != self.want:
            raise CorruptPart(f"part {self.key!r} has digest {self.got % 2**64:016x}; its state "
                              f"recorded {self.want % 2**64:016x}")


def _whole_digest(store: Blob, key: str, expect: PartCheck) -> DigestCheck:
    # The digest check of the part under ``key``, opened whole (open_part) for it.
    whole = open_part(store, key)
    if whole is None:
        raise MissingPart(f"part {key!r} is missing from the blob store")
    with whole:
        return DigestCheck(whole, key, expect)


def _has_page_checksums(pf) -> bool:
    # What the part's own metadata says of its pages (parts from before it: checksummed).
    raw = (pf.metadata.metadata or {}).get(PART_METADATA_KEY)
    try:
        return bool(json.loads(raw).get("page_checksums", True)) if raw else True
    except (ValueError, AttributeError):
        return True


def diff_sum(diff: np.ndarray) -> int:
    """The int64 sum of ``diff``, wrapping as int64 arithmetic does (a checksum, not a count).

    >>> diff_sum(np.array([2**62, 2**62], np.int64)) == -2**63
    True
    """
    with np.errstate(over="ignore"):
        return int(np.add.reduce(np.asarray(diff, np.int64), dtype=np.int64)) if len(diff) else 0


def _add_wrapped(a: int, b: int) -> int:
    # a + b as int64 arithmetic wraps
    return (a + b + 2**63) % 2**64 - 2**63


class PartRef(tuple):
    """One part as a state or a :class:`~colmz.arrangement.runs.WrittenRun` names it: its
    ``key`` and what a read of it verifies, ``check`` (a :class:`PartCheck`, or None for a
    part named by a state from before checks were recorded). What persist carries in a
    ``HollowBatchPart`` (``src/persist-client/src/internal/state.rs``): every read path
    takes one, so a part is checked against its own record wherever it is read -- in any
    process, a Spark executor's included -- and nothing is remembered between reads.

    >>> r = PartRef("p/1.parquet", PartCheck(3, 3, -5))
    >>> r.key, r.check.rows, PartRef.of("p/2.parquet").check is None
    ('p/1.parquet', 3, True)
    """

    __slots__ = ()

    def __new__(cls, key: str, check: PartCheck | Sequence[int] | None = None):
        if not isinstance(key, str):
            raise TypeError(f"a part's key must be a str, got {type(key).__name__}")
        if check is not None and not isinstance(check, PartCheck):
            check = PartCheck(*check)
        return super().__new__(cls, (key, check))

    def __getnewargs__(self) -> tuple[str, PartCheck | None]:
        return (self[0], self[1])

    @property
    def key(self) -> str:
        return self[0]

    @property
    def check(self) -> PartCheck | None:
        return self[1]

    @classmethod
    def of(cls, part: PartRef | str) -> PartRef:
        """``part`` as a reference: a bare key is a part with no recorded check (read with
        the checks that need no state: Parquet page checksums, the key in its metadata)."""
        return part if isinstance(part, PartRef) else cls(part)


def part_refs(keys: Sequence[str], checks: Sequence[Sequence[int]] | None) -> tuple[PartRef, ...]:
    """The references of a run's parts: ``keys`` with their ``checks`` (one per key, or None
    when the run records none).

    >>> part_refs(["a", "b"], [(1, 1), (2, 0, 7)])[1].check.digest, part_refs(["a"], None)[0].check
    (7, None)
    """
    if checks is None:
        return tuple(PartRef(k) for k in keys)
    if len(checks) != len(keys):
        raise ValueError(f"{len(checks)} checks for {len(keys)} keys")
    return tuple(PartRef(k, c) for k, c in zip(keys, checks))


def _check_footer(pf, key: str, expect: PartCheck | None) -> PartCheck | None:
    # The part's own metadata names the key it was written under (parts written before it
    # did are not checked for it), and its row count must be what the state recorded.
    md = pf.metadata
    raw = (md.metadata or {}).get(PART_METADATA_KEY)
    if raw:
        try:
            written_as = json.loads(raw).get("key")
        except (ValueError, AttributeError):
            raise CorruptPart(f"part {key!r} has unreadable {PART_METADATA_KEY.decode()} metadata") from None
        if written_as is not None and written_as != key:
            raise CorruptPart(f"part {key!r} holds the part written as {written_as!r}")
    if expect is not None and md.num_rows != expect.rows:
        raise CorruptPart(f"part {key!r} holds {md.num_rows} rows; its state recorded {expect.rows}")
    return expect


def _check_diffs(expect: PartCheck | None, key: str, got: int) -> None:
    if expect is not None and got != expect.diff_sum:
        raise CorruptPart(f"part {key!r} has diffs summing to {got}; its state recorded {expect.diff_sum}")


# ----------------------------------------------------------------------------- reading


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
            pf = pq.ParquetFile(f, page_checksum_verification=PAGE_CHECKSUMS and not digest.done)
            expect = _check_footer(pf, key, recorded)
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
        _check_diffs(expect, key, diff_sum(u.diff))
    return u


#: Most parts :func:`read_parts` reads at once.
READ_THREADS = 8


def concurrent_calls(store: Blob) -> bool:
    """Whether calls on ``store`` run in threads -- part reads (:func:`read_parts`,
    :func:`read_ahead`) and the parts of a large write encoded side by side
    (:class:`PartWriter`): local and S3 stores, not the in-memory one or wrappers such as the
    fault injector, whose calls must come in a repeatable order."""
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
    a local directory lack them, :func:`writes_page_checksums`)."""
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
                pf = pq.ParquetFile(f, page_checksum_verification=PAGE_CHECKSUMS and not verified)
            else:
                # No pre-buffering: a column chunk is read through PAGE_BUFFER bytes at a
                # time instead of whole, so an open input costs about a page per column.
                pf = pq.ParquetFile(f, pre_buffer=False, buffer_size=PAGE_BUFFER,
                                    page_checksum_verification=PAGE_CHECKSUMS and not verified)
            expect = _check_footer(pf, key, recorded)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise CorruptPart(f"part {key!r} is not a readable Parquet file: {e}") from None
        if digest is None and expect is not None and expect.digest is not None \
                and not _has_page_checksums(pf):
            digest = _whole_digest(store, key, expect)
        if digest is not None:
            digest.raise_if_wrong()
        if pf.metadata.num_row_groups == 0:
            yield _checked(pf.schema_arrow.empty_table(), key, schema)
            _check_diffs(expect, key, 0)
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
                    _check_diffs(expect, key, total)
                    return
                except (pa.ArrowException, OSError, ValueError) as e:
                    raise CorruptPart(f"part {key!r} is not readable: {e}") from None
                u = _checked(pa.Table.from_batches([b]), key, schema)
                total = _add_wrapped(total, diff_sum(u.diff))
                yield u
        for i in range(pf.metadata.num_row_groups):
            try:
                table = pf.read_row_group(i)
            except (pa.ArrowException, OSError, ValueError) as e:
                raise CorruptPart(f"part {key!r} row group {i} is not readable: {e}") from None
            u = _checked(table, key, schema)
            total = _add_wrapped(total, diff_sum(u.diff))
            yield u
        _check_diffs(expect, key, total)


class PartRun:
    """One sorted run stored as parts (``keys``: their :class:`PartRef` s, or bare keys, in
    order), read as encoded chunks with the
    times in ``[lower, upper)``; iterable, and re-iterable from the start.

    ``chunk_rows`` is how many rows each read takes (None: a Parquet row group).
    :func:`iter_merge` sets it from its fan-in (:meth:`with_chunk_rows`), so that a merge
    of many runs holds about ``MERGE_ROWS`` input rows in all, not a row group per run.
    """

    __slots__ = ("store", "keys", "schema", "lower", "upper", "chunk_rows")

    def __init__(self, store: Blob, keys: Sequence[PartRef | str], schema: Sequence[ColumnSpec],
                 lower: int = 0, upper: int | None = None, chunk_rows: int | None = None):
        self.store = store
        self.keys = tuple(PartRef.of(k) for k in keys)
        self.schema = tuple(schema)
        self.lower = lower
        self.upper = upper
        self.chunk_rows = chunk_rows

    def with_chunk_rows(self, rows: int | None) -> PartRun:
        return PartRun(self.store, self.keys, self.schema, self.lower, self.upper, rows)

    def updates(self) -> Iterator[Updates]:
        for k in self.keys:
            yield from iter_part(self.store, k, self.schema, self.chunk_rows)

    def __iter__(self) -> Iterator[Encoded]:
        return chunks_filtered(self.updates(), self.lower, self.upper)


def _checked(table: pa.Table, key: str, schema: Sequence[ColumnSpec]) -> Updates:
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


# ----------------------------------------------------------------------------- writing


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
        # recognised when read (_check_footer).
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
        crc = PAGE_CHECKSUMS and writes_page_checksums(self.store)
        info = dict(info, page_checksums=crc)
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
        stats = [s.name for i, s in enumerate(self.schema) if i == 0 or s.kind != "bytes"]
        stats = True if len(stats) == len(self.schema) else stats + ["time", "diff"]
        options = dict(compression=self.compression, use_dictionary=dict_cols,
                       write_statistics=stats, data_page_size=DATA_PAGE_BYTES,
                       write_page_checksum=crc)
        sums = [0]

        def fetch(a: int, b: int) -> tuple[pa.Table, int]:
            # a row group and its diffs' sum, both made on the helper thread: the encoding
            # thread then only adds integers, and never waits there for the GIL to come back
            # from a gathering thread (which under load cost a 50 MiB write 30 ms)
            t = rows_of(a, b)
            s = 0
            for c in t.column("diff").chunks:
                s = _add_wrapped(s, diff_sum(c.to_numpy()))
            return t, s

        def counted(got: tuple[pa.Table, int]) -> pa.Table:
            sums[0] = _add_wrapped(sums[0], got[1])
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

        if type(self.store) is LocalBlob:  # the type: a fault wrapper must see a plain set
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
            if PART_DIGESTS:  # read back memory-mapped, from the page cache the write filled
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
            digest = part_digest(buf) if PART_DIGESTS else None
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


# ----------------------------------------------------------------------------- merging


def _row_bytes(keys: np.ndarray) -> np.ndarray:
    # Rows of big-endian words compare as byte strings exactly as the rows of words compare
    # (all rows of one layout have one width, so numpy's trailing-NUL rule cannot bite).
    n, w = keys.shape
    if w == 0:
        return np.zeros(n, "S1")
    be = np.ascontiguousarray(keys, dtype=">u8")
    return be.view(f"S{8 * w}").reshape(n)


class _Input:
    __slots__ = ("chunks", "enc", "rb", "done", "rows")

    def __init__(self, chunks: Iterator[Encoded]):
        self.chunks = chunks
        self.enc: Encoded | None = None
        self.rb: np.ndarray | None = None
        self.done = False
        self.rows = 0

    def load(self) -> bool:
        """Append the next non-empty chunk to the buffer; False when the run is exhausted."""
        for enc in self.chunks:
            if not len(enc):
                continue
            self.rows += len(enc)
            if self.enc is None or not len(self.enc):
                self.enc = enc
            else:
                self.enc = concat_encoded([self.enc, enc])
            self.rb = None
            return True
        self.done = True
        return False

    def pad(self, layout) -> None:
        if self.enc is not None and self.enc.layout != layout:
            self.enc = self.enc.padded(layout)
            self.rb = None

    def row_bytes(self) -> np.ndarray:
        if self.rb is None:
            self.rb = _row_bytes(self.enc.keys)
        return self.rb

    def take(self, stop: int) -> Encoded:
        e = self.enc
        out = Encoded(e.keys[:stop], e.time[:stop], e.diff[:stop], e.layout)
        self.enc = Encoded(e.keys[stop:], e.time[stop:], e.diff[stop:], e.layout)
        if self.rb is not None:
            self.rb = self.rb[stop:]
        return out

    def empty(self) -> bool:
        return self.enc is None or not len(self.enc)


def stream_merge(runs: Iterable[Iterator[Encoded]], since: int | None,
                 emit: Callable[[Encoded], None], stats: dict | None = None) -> list[int]:
    """Merge sorted, consolidated runs (each an iterator of ``(data, time)``-sorted chunks)
    into ``emit``, advancing times to ``since``; return the rows read from each run.

    ``stats["merge_peak_rows"]`` is raised to the most input rows held at once (a work
    counter: about ``MERGE_ROWS`` when the runs are :class:`PartRun` objects, whatever their
    number and lengths).

    The chunks handed to ``emit`` are consolidated, in order, and no two of them hold the
    same data row, so together they are one sorted, consolidated run.
    """
    steps = iter_merge(runs, since, emit, stats)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def iter_merge(runs: Iterable[Iterator[Encoded]], since: int | None,
               emit: Callable[[Encoded], None], stats: dict | None = None):
    """:func:`stream_merge` as a generator that pauses after each emitted chunk, yielding
    the rows read so far; its return value is the rows read from each run. A caller with a
    work budget runs it a while, keeps it, and resumes it later."""
    runs = list(runs)
    per_input = max(MIN_CHUNK_ROWS, MERGE_ROWS // max(len(runs), 1))
    runs = [r.with_chunk_rows(per_input) if isinstance(r, PartRun) and r.chunk_rows is None
            else r for r in runs]
    inputs = [_Input(iter(r)) for r in runs]
    layout = None

    def refresh_layout():
        nonlocal layout
        layouts = [i.enc.layout for i in inputs if i.enc is not None]
        if not layouts:
            return
        new = unify_layouts(*layouts) if layout is None else unify_layouts(layout, *layouts)
        layout = new
        for i in inputs:
            i.pad(layout)

    for i in inputs:
        i.load()
    refresh_layout()
    while True:
        live = [i for i in inputs if not i.empty()]
        if not live:
            break
        if stats is not None:
            held = sum(len(i.enc) for i in live)
            stats["merge_peak_rows"] = max(stats.get("merge_peak_rows", 0), held)
        open_ = [i for i in live if not i.done]
        if not open_:
            # Every remaining row is loaded: merge it all.
            _emit_merged([i.take(len(i.enc)) for i in live], since, layout, emit)
            yield sum(i.rows for i in inputs)
            continue
        threshold = min(i.row_bytes()[-1] for i in open_)
        taken = []
        for i in live:
            stop = int(np.searchsorted(i.row_bytes(), threshold, side="left"))
            if stop:
                taken.append(i.take(stop))
        if taken:
            _emit_merged(taken, since, layout, emit)
            yield sum(i.rows for i in inputs)
            continue
        # Every loaded row is at or beyond the threshold row: read on in the inputs whose
        # loaded rows end at it (their next part may continue that data).
        for i in open_:
            if i.row_bytes()[-1] == threshold:
                i.load()
        for i in inputs:
            if not i.done and i.empty():
                i.load()
        refresh_layout()
        continue
    return [i.rows for i in inputs]


def _emit_merged(taken: list[Encoded], since, layout, emit) -> None:
    runs = [(e.keys, e.time, e.diff) for e in taken if len(e)]
    if not runs:
        return
    if len(runs) == 1 and (since is None or int(runs[0][1].min()) >= since):
        # one sorted, consolidated run with nothing to advance: already the result
        emit(Encoded(*runs[0], layout))
        return
    keys, time, diff = merge_runs(runs, "data", since)
    if len(time):
        emit(Encoded(keys, time, diff, layout))


def chunks_filtered(updates: Iterable[Updates], lower: int, upper) -> Iterator[Encoded]:
    """Encoded chunks of ``updates`` keeping only times in ``[lower, upper)``."""
    for u in updates:
        enc = u.encode()
        t = enc.time
        if upper is None:
            mask = t >= np.uint64(lower)
        else:
            mask = (t >= np.uint64(lower)) & (t < np.uint64(upper))
        if mask.all():
            yield enc
        elif mask.any():
            yield Encoded(enc.keys[mask], t[mask], enc.diff[mask], enc.layout)


def is_binary_type(typ: pa.DataType) -> bool:
    """Whether ``typ`` is a string or binary type of offsets and data (large or not): what
    :func:`binary_buffers` reads."""
    return (pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ)
            or pa.types.is_large_binary(typ))


def binary_buffers(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The Arrow offsets (``int32``, or ``int64`` for large types; ``len(col) + 1`` of them,
    from the array's own offset) and the data bytes of a string or binary array, as numpy
    views (an internal API of the arrangement: merged reads, write gathers)."""
    bufs = col.buffers()
    large = pa.types.is_large_string(col.type) or pa.types.is_large_binary(col.type)
    odt = np.int64 if large else np.int32
    offsets = np.frombuffer(bufs[1], odt, count=len(col) + 1, offset=col.offset * odt().itemsize)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def take_fixed_width(arr: pa.Array, rows: np.ndarray) -> pa.Array | None:
    """``arr.take(rows)`` by ``colmz.kernels.gather.take_fixed`` for a fixed-width array of
    whole bytes without NULLs (numbers, times, dates; not booleans or decimals), None for
    any other (an internal API of the arrangement: write gathers, merged reads). ``rows``
    are ``int64`` positions within ``arr``.

    >>> take_fixed_width(pa.array([10, 20, 30]), np.array([2, 2, 0])).to_pylist()
    [30, 30, 10]
    >>> take_fixed_width(pa.array([1, None]), np.array([0])) is None
    True
    """
    typ = arr.type
    if (arr.null_count or not pa.types.is_primitive(typ) or pa.types.is_boolean(typ)
            or typ.bit_width not in (8, 16, 32, 64)):
        return None
    width = typ.bit_width // 8
    word = np.dtype(f"u{width}")
    src = np.frombuffer(arr.buffers()[1], word, count=len(arr), offset=arr.offset * width)
    m = len(rows)
    buf = pa.allocate_buffer(m * width)
    take_fixed(rows, src if len(src) else np.zeros(1, word), 0, m, np.frombuffer(buf, word))
    return pa.Array.from_buffers(typ, m, [None, buf])


def take_rows(table: pa.Table, rows: np.ndarray, constant: Sequence[str] = ()) -> pa.Table:
    """``table``'s rows in the order ``rows`` gives: string and binary columns of one chunk
    without NULLs by ``colmz.kernels.gather.take_bytes`` (which prefetches the scattered
    values a sorted write reads: 819,200 40-byte values in row groups of 65,536, 74-78 ms
    of CPU by Arrow's ``take``, 24-32 ms), fixed-width columns of one chunk without NULLs
    by :func:`take_fixed_width`, the columns named in ``constant`` -- which the caller knows
    to hold one value throughout -- as a slice, the others by Arrow's ``take``.

    >>> t = pa.table({"s": ["a", "bc", "d"], "i": [1, 2, 3], "c": [7, 7, 7]})
    >>> take_rows(t, np.array([2, 0]), constant=["c"]).to_pylist()
    [{'s': 'd', 'i': 3, 'c': 7}, {'s': 'a', 'i': 1, 'c': 7}]
    """
    rows = np.ascontiguousarray(rows, np.int64)
    taken = None
    columns = []
    for name, col in zip(table.column_names, table.columns):
        if name in constant and len(rows) <= len(col):
            columns.append(col.slice(0, len(rows)))
            continue
        if is_binary_type(col.type) and col.num_chunks == 1 and not col.null_count:
            columns.append(_take_binary(col.chunk(0), rows))
            continue
        fixed = take_fixed_width(col.chunk(0), rows) if col.num_chunks == 1 else None
        if fixed is not None:
            columns.append(fixed)
            continue
        if taken is None:
            taken = pa.array(rows, pa.int64())
        columns.append(col.take(taken))
    return pa.Table.from_arrays(columns, schema=table.schema)


def _take_binary(arr: pa.Array, rows: np.ndarray) -> pa.Array:
    # The values' lengths summed in int64 first: taken values (rows may repeat) can exceed
    # what the array's 32-bit offsets hold, and Arrow's take then decides.
    offsets, data = binary_buffers(arr)
    m = len(rows)
    ends = np.empty(m + 1, np.int64)
    ends[0] = 0
    take_lengths(rows, offsets, 0, m, ends[1:])
    np.cumsum(ends[1:], out=ends[1:])
    odt = offsets.dtype
    if int(ends[-1]) > np.iinfo(odt).max:
        return arr.take(pa.array(rows, pa.int64()))
    offsets_buf = pa.allocate_buffer((m + 1) * odt.itemsize)
    out_offsets = np.frombuffer(offsets_buf, odt)
    out_offsets[:] = ends
    data_buf = pa.allocate_buffer(max(int(ends[-1]), 1))
    take_bytes(rows, offsets, data if len(data) else np.zeros(1, np.uint8), 0, m, out_offsets,
               np.frombuffer(data_buf, np.uint8))
    return pa.Array.from_buffers(arr.type, m, [None, offsets_buf, data_buf])
