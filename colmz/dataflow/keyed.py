"""``KeyedArrangement``: a collection arranged by key columns, for lookups by key.

Design
------
The state of a delta join, a min/max reduce, a top-k and distinct: updates ``(row, diff)``
indexed by some of their columns (the *key*) so that the rows of a few keys are found in time
proportional to those keys and rows, not to the collection (Materialize's arrangements,
``src/compute/src/render/``; colmz's ``RowCounts`` generalised to a key and a payload).

A row is held as two matrices of order-preserving ``uint64`` words (``colmz.order``): its key
columns' words and its other (*payload*) columns' words, each with its own layout. The
collection is a set of *runs*; each run is sorted by ``(key words, payload words)``,
consolidated (each row once, no zero diff) and holds its diffs. An insert is a new run; runs
are held in the layers of a :class:`~colmz.dataflow.fueled.FueledRuns` -- differential's
fueled spine discipline -- and merged a little per insert (:class:`KeyedMerge`: chunks of
both runs up to a common row, padded to a common layout and consolidated by
``colmz.consolidate``, the Numba kernels), so an insert of ``n`` rows reads ``O(n)`` rows per
merge in progress, never a large merge at once, there are ``O(log n)`` runs and a row is
merged ``O(log n)`` times, amortised. A lookup encodes the keys asked for and binary-searches
every run (both inputs of a merge in progress) for each key's range
(``colmz.order.search_rows``; a query key is narrowed to each run's key layout, and one that
cannot occur there is skipped). A key with no columns arranges every row under one key (a
cross join, a global aggregate).

Times. An arrangement holds its contents as of ``since``, the time of the last insert: each
insert at ``time >= since`` folds its updates to that time (compaction with ``since = now``),
which is all an operator stepping forward in time reads. Different rows of one key may sit in
different runs, and one row may sit in several runs with diffs that sum to zero until a merge
cancels them; :meth:`lookup` returns what the runs hold, :meth:`counts` the sums.

Work counters (cumulative, never rolled back): ``rows_inserted``, ``merges`` and
``rows_merged`` (rows merges read), ``max_step_merged`` (the most rows merges read in one
insert), ``keys_searched`` (query keys times runs searched), ``rows_found`` (rows returned
by lookups), ``search_probes`` (binary-search probes: ``log2`` of the rows, or distinct keys,
searched, per query key and search) and ``rows_indexed`` (rows of runs given a key index).
Complexity is tested by counting these.

Key indexes. A run searched for many keys at once (a bulk step's affected keys) gets a
:class:`KeyIndex` -- its distinct keys and where each starts -- made once (a run never
changes) and kept, by the run's serial, while the run is held: such lookups then cost one
binary search per key over the distinct keys instead of two over the rows. The index is
derived from the runs, so rolling the arrangement back leaves it right (an index of a run no
longer held is dropped at the next lookup).

Diffs. A run stores its diffs in the narrowest signed integer type that holds each and its
negation (:func:`narrow_diff`: ``int8`` for the small multiplicities of a distinct's counts
or a join's input, one byte per row instead of eight beside the row's key words); merges,
sums and lookups read them as ``int64``.

Invariants: every run is sorted, consolidated and non-empty; its key and payload matrices
are C-contiguous (a lookup's binary search reads single rows, never copying a run); a run is
never changed once made (a merge writes a new one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from colmz.dataflow.fueled import FueledHolder, FueledRuns, Merge, next_serial
from colmz.dataflow.step import as_schema, check_columns
from colmz.frontier import check_time
from colmz.kernels.fueled import new_cursor, run_merge
from colmz.ops import consolidate
from colmz.order import (
    ColumnSpec,
    Layout,
    decode_columns,
    encode_columns,
    narrow_rows,
    pad_keys,
    search_range,
    search_rows,
    unify_layouts,
)
from colmz.rows import cast_to
from colmz.updates import Encoded, SchemaError, Updates

__all__ = ["FoundWords", "KeyIndex", "KeyedArrangement", "KeyedMerge", "Matches", "Run", "consolidate_packed", "consolidate_words",
           "encode_key", "expand_ranges", "first_row", "narrow_diff", "pack_columns", "worth_indexing"]


class Run(NamedTuple):
    """One sorted, consolidated run: key words, payload words, their layouts, diffs (a
    signed integer type, :func:`narrow_diff`), and its serial number
    (``colmz.dataflow.fueled.next_serial``)."""

    keys: np.ndarray
    key_layout: Layout
    vals: np.ndarray
    val_layout: Layout
    diff: np.ndarray
    serial: int = 0


class Matches(NamedTuple):
    """What a lookup found: for each row, the position of its query key, the row
    (``Updates`` of the arrangement's columns, at the arrangement's ``since``) and its diff
    (``rows.diff``)."""

    query: np.ndarray
    rows: Updates


class FoundWords(NamedTuple):
    """What a lookup found, still encoded: per row the position of its query key, its key and
    payload words (laid out as ``key_layout``, ``val_layout``: the runs' layouts unified) and
    its diff. Not consolidated: a row may sit in several runs with diffs that cancel."""

    query: np.ndarray
    keys: np.ndarray
    key_layout: Layout
    vals: np.ndarray
    val_layout: Layout
    diff: np.ndarray


def encode_key(columns: Sequence[pa.Array], n: int) -> tuple[np.ndarray, Layout]:
    """Key words of ``columns`` (``n`` rows; no columns: ``n`` empty keys)."""
    return encode_columns(list(columns), n=n)


#: Up to this many rows :func:`consolidate_words` sorts in numpy (no kernel set-up).
SMALL_ROWS = 64

#: The signed integer types a run's diffs may be stored in, narrowest first (:func:`narrow_diff`).
DIFF_TYPES = (np.int8, np.int16, np.int32)


def narrow_diff(diff: np.ndarray) -> np.ndarray:
    """A run's diffs in the narrowest signed integer type holding each and its negation
    (``int8`` for the small counts of a distinct or a join input: a row's key word and one
    byte, not two words); runs of at most :data:`SMALL_ROWS` rows stay ``int64`` (nothing
    worth a pass). Readers sum and gather them as ``int64``.

    >>> narrow_diff(np.array([3, -127] * 40)).dtype, narrow_diff(np.array([1, -128] * 40)).dtype
    (dtype('int8'), dtype('int16'))
    """
    if len(diff) <= SMALL_ROWS or diff.dtype != np.int64:
        return diff
    lo, hi = int(diff.min()), int(diff.max())
    for t in DIFF_TYPES:
        top = int(np.iinfo(t).max)
        if -top <= lo and hi <= top:
            return diff.astype(t)
    return diff


#: Up to this many rows :func:`consolidate_words` sorts and sums them as Python values:
#: below it numpy's per-call costs (a lexsort, a gather, a reduceat) are most of the work.
TINY_ROWS = 8


def consolidate_words(words: np.ndarray, diff: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``uint64`` words sorted lexicographically, equal rows' diffs summed, zero sums
    dropped -- by one integer sort when the rows pack into one word each
    (:func:`packed_consolidate`), else through ``colmz.consolidate`` (each word a ``uint64``
    column, whose encoding is the word itself, so the kernel sorts the words as they are).

    >>> w = np.array([[2, 1], [1, 9], [2, 1]], np.uint64)
    >>> k, d = consolidate_words(w, np.array([1, 1, -1]))
    >>> k.tolist(), d.tolist()
    ([[1, 9]], [1])
    """
    n, width = words.shape
    diff = np.asarray(diff, np.int64)
    if n <= 1:  # one row is consolidated (a one-row step's insert skips the kernels' set-up)
        keep = diff != 0
        return words[keep], diff[keep]
    if n <= TINY_ROWS and width:
        # a handful of rows (a one-row change's, or its run coalesced with the newest small
        # run): sorted and summed as Python ints -- exact, so a sum leaving int64 is seen
        # and left to the kernels, which raise naming it
        rows, ds = words.tolist(), diff.tolist()
        idx: list[int] = []
        sums: list[int] = []
        for i in sorted(range(n), key=rows.__getitem__):
            if idx and rows[idx[-1]] == rows[i]:
                sums[-1] += ds[i]
            else:
                idx.append(i)
                sums.append(ds[i])
        if all(-(2**63) <= d < 2**63 for d in sums):
            kept = [j for j, d in enumerate(sums) if d]
            return words[[idx[j] for j in kept]], np.array([sums[j] for j in kept], np.int64)
    if n <= SMALL_ROWS and width and max(int(diff.max()), -int(diff.min())) < 2**56:
        # (not np.abs: the absolute value of int64's smallest wraps to itself)
        # a few rows (a one-row change's update): sorted and summed in numpy, without the
        # kernels' encoding and decoding of uint64 columns; sums of fewer than 2**7 diffs
        # below 2**56 stay in int64
        order = np.lexsort(words.T[::-1])
        w, d = words[order], diff[order]
        starts = np.flatnonzero(np.concatenate(([True], (w[1:] != w[:-1]).any(axis=1))))
        if len(starts) < n:
            w, d = w[starts], np.add.reduceat(d, starts)
        keep = d != 0
        return (w, d) if keep.all() else (w[keep], d[keep])
    if width == 0:
        total = int(np.sum(diff, dtype=object))
        if not -(2**63) <= total < 2**63:
            raise OverflowError(f"diff overflow: the diffs of one row sum to {total}, outside int64")
        return (words[:1], np.array([total], np.int64)) if total else (words[:0], np.zeros(0, np.int64))
    packed = packed_consolidate(words, diff)
    if packed is not None:
        return packed
    schema = tuple(ColumnSpec(f"w{i}", pa.uint64()) for i in range(width))
    enc = Encoded(np.ascontiguousarray(words), np.zeros(n, np.uint64), np.asarray(diff, np.int64),
                  (1,) * width + (0,))
    out = consolidate(Updates.decode(enc, schema), order="data").encode()
    return out.keys, out.diff


def pack_words(words: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Rows of ``uint64`` words as one ``uint64`` each, in the same order: each column's
    offset from its smallest value in a bit field just wide enough for the column's span,
    the first column's field the most significant -- so comparing two packed rows compares
    the rows lexicographically, and equal rows pack equal. ``(packed, bits used)``, or
    ``None`` when the spans need more than 64 bits together.

    >>> p, bits = pack_words(np.array([[7, 1], [5, 9], [7, 0]], np.uint64))
    >>> bits, np.argsort(p).tolist()
    (6, [1, 2, 0])
    """
    n, width = words.shape
    if not n:
        return np.zeros(0, np.uint64), 0
    got = pack_columns(list(np.ascontiguousarray(words.T)))  # a column's passes read contiguous memory
    return None if got is None else (got[0], sum(got[1]))


def pack_columns(cols) -> tuple[np.ndarray, list[int], list[int]] | None:
    """:func:`pack_words` of the rows whose words are the columns ``cols`` (1-D ``uint64``
    arrays of one length, at least one): ``(packed, bits of each column's field, each
    column's smallest value)`` -- column ``j``'s value is ``lo[j] + (packed >> (bits of the
    fields after it)) & mask`` -- or ``None`` beyond 64 bits. A constant column takes no bits.

    >>> p, bits, lo = pack_columns([np.array([7, 5, 7], np.uint64), np.array([1, 9, 0], np.uint64)])
    >>> p.tolist(), bits, lo
    ([33, 9, 32], [2, 4], [5, 0])
    """
    n = len(cols[0])
    if not n:
        return np.zeros(0, np.uint64), [0] * len(cols), [0] * len(cols)
    lo = [int(c.min()) for c in cols]
    hi = [int(c.max()) for c in cols]
    bits = [(h - m).bit_length() for m, h in zip(lo, hi)]
    if sum(bits) > 64:
        return None
    packed = None
    for c, b, m in zip(cols, bits, lo):
        if not b:  # a constant column orders nothing
            continue
        if packed is None:
            packed = np.subtract(c, np.uint64(m), dtype=np.uint64)
        else:  # (a shift by 64 is undefined; a 64-bit field is the only one, and first)
            # in place (one array for all fields: fresh pages are slow to touch here); the
            # field's low bits are zero after the shift and c - m fits them, so adding c then
            # subtracting m is exact modulo 2**64 whatever wraps in between
            packed <<= np.uint64(b)
            packed += c
            if m:
                packed -= np.uint64(m)
    if packed is None:
        packed = np.zeros(n, np.uint64)
    return packed, bits, lo


def consolidate_packed(packed: np.ndarray, bits: int, diff: np.ndarray, *,
                       presorted: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Rows packed one ``uint64`` each in ``bits`` bits (:func:`pack_columns`) sorted, equal
    rows' diffs summed, zero sums dropped: ``(packed rows sorted, for each the position of
    one of its input rows, summed diffs)``; ``None`` when the diffs could sum beyond ``int64``
    (the kernels then sum them exactly, or raise). ``presorted``: the rows come as a few
    ascending stretches (reads of sorted runs, one after the other): sorted by numpy's stable
    sort, which merges such stretches in about linear time (its default sort would not notice
    them); the answer is the same either way.

    >>> p, at, d = consolidate_packed(np.array([5, 2, 5, 7], np.uint64), 3, np.array([1, 1, -1, 2]))
    >>> p.tolist(), at.tolist(), d.tolist()
    ([2, 7], [1, 3], [1, 2])
    """
    diff = np.asarray(diff, np.int64)
    n = len(diff)
    if n and max(int(diff.max()), -int(diff.min())) * n >= 2**63:
        return None  # a sum of these diffs might leave int64: the kernels check it exactly
    index_bits = max(int(n - 1).bit_length(), 1)
    if bits + index_bits <= 64:
        # the row's index in the low bits: one sort of plain integers (no argsort) gives the
        # order and the permutation; the index bits only order equal rows among themselves
        # (in place where numpy allows: each large temporary touches fresh pages)
        both = packed << np.uint64(index_bits)
        both |= np.arange(n, dtype=np.uint64)
        both.sort(kind="stable" if presorted else None)
        perm = both & np.uint64((1 << index_bits) - 1)
        perm = perm.view(np.int64)  # indexes below 2**63
        both >>= np.uint64(index_bits)
        packed = both
    else:
        perm = np.argsort(packed, kind="stable" if presorted else None)
        packed = packed[perm]
    d = diff[perm]
    if n > 1:
        starts = np.flatnonzero(np.concatenate(([True], packed[1:] != packed[:-1])))
        if len(starts) < n:
            # each run of equal rows' sum, as differences of running sums (no overflow: the
            # diffs' magnitudes times their count are below 2**63, checked above)
            ends = np.cumsum(d)[np.r_[starts[1:] - 1, n - 1]]
            perm, d, packed = perm[starts], np.diff(ends, prepend=np.int64(0)), packed[starts]
    keep = np.flatnonzero(d)
    if len(keep) < len(d):
        perm, d, packed = perm[keep], d[keep], packed[keep]
    return packed, perm, d


def packed_consolidate(words: np.ndarray, diff: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`consolidate_words` by one ``uint64`` sort (:func:`pack_words`: rows whose
    columns' spans fit in 64 bits together, as a step's rows of small keys and values do),
    or ``None`` when the rows do not pack or their diffs could sum beyond ``int64`` (the
    kernels then sum them exactly, or raise). Same answer as the kernels: rows in
    lexicographic order of their words, each once, no zero diff.

    >>> w, d = packed_consolidate(np.array([[2, 1], [1, 9], [2, 1], [1, 3]], np.uint64), np.array([1, 1, 1, 2]))
    >>> w.tolist(), d.tolist()
    ([[1, 3], [1, 9], [2, 1]], [2, 1, 2])
    """
    diff = np.asarray(diff, np.int64)
    n = len(diff)
    if n and max(int(diff.max()), -int(diff.min())) * n >= 2**63:
        return None
    got = pack_words(words)
    if got is None:
        return None
    _, perm, d = consolidate_packed(*got, diff)
    return words[perm], d


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``[lo[i], hi[i])`` of every query ``i``, concatenated: ``(query, rows)``, the
    query's position and the row's, one entry per row found.

    >>> q, rows = expand_ranges(np.array([2, 5, 9]), np.array([4, 5, 10]))
    >>> q.tolist(), rows.tolist()
    ([0, 0, 2], [2, 3, 9])
    """
    if len(lo) == 1:  # one query (a one-row commit's): its range, without the cumulative sums
        a, b = int(lo[0]), int(hi[0])
        return np.zeros(max(b - a, 0), np.int64), np.arange(a, max(a, b), dtype=np.int64)
    cnt = hi - lo
    ends = np.cumsum(cnt)
    rows = np.repeat(lo - (ends - cnt), cnt) + np.arange(int(ends[-1]) if len(ends) else 0)
    return np.repeat(np.arange(len(lo)), cnt), rows

#: A run is indexed (:class:`KeyIndex`) when searched for at least one key per this many of
#: its rows, and for at least :data:`INDEX_MIN_QUERIES` keys: the index costs one pass over
#: the run's keys, made once; a few keys searched (a one-row commit's, whose new small runs
#: would each pay numpy's fixed costs for it) never pay for it.
INDEX_RATIO = 64
INDEX_MIN_QUERIES = 32


def worth_indexing(queries: int, rows: int) -> bool:
    """Whether a run of ``rows`` rows searched for ``queries`` keys is worth a :class:`KeyIndex`."""
    return queries >= max(INDEX_MIN_QUERIES, 1) and queries * INDEX_RATIO >= rows


class KeyIndex(NamedTuple):
    """A sorted run's distinct keys (``keys``, words) and where each key's rows start
    (``starts``, one more entry than keys: the run's length). Searching it finds a key's
    rows ``[starts[i], starts[i + 1])`` by one binary search over the distinct keys. A run
    whose keys are all distinct (a distinct's or a keyed-by-everything arrangement's) is its
    own index: ``keys`` is the run's array itself and ``starts`` is ``None`` (key ``i`` is
    row ``i``), so the index holds no bytes of its own.

    >>> ix = KeyIndex.of(np.array([[1], [1], [4], [9], [9], [9]], np.uint64))
    >>> ix.keys.ravel().tolist(), ix.starts.tolist()
    ([1, 4, 9], [0, 2, 3, 6])
    >>> [a.tolist() for a in ix.ranges(np.array([[4], [5], [9]], np.uint64))]
    [[2, 3, 3], [3, 3, 6]]
    >>> own = KeyIndex.of(np.array([[1], [4], [9]], np.uint64))
    >>> own.starts, own.nbytes, [a.tolist() for a in own.ranges(np.array([[4], [5], [9]], np.uint64))]
    (None, 0, [[1, 2, 2], [2, 2, 3]])
    """

    keys: np.ndarray
    starts: np.ndarray | None

    @classmethod
    def of(cls, keys: np.ndarray) -> KeyIndex:
        """The index of ``keys``, a run's sorted key words."""
        n, width = keys.shape
        if not width:  # one key: every row
            return cls(keys[:1], np.array([0, n], np.int64))
        if width == 1:
            col = keys[:, 0]
            new = col[1:] != col[:-1]
        else:
            new = (keys[1:] != keys[:-1]).any(axis=1)
        starts = np.flatnonzero(np.concatenate(([True], new))).astype(np.int64)
        if len(starts) == n:  # every key distinct: the run is its own index (nothing copied)
            return cls(keys, None)
        return cls(np.ascontiguousarray(keys[starts]), np.append(starts, np.int64(n)))

    def ranges(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``: the rows of each query key (``q``, words in the run's layout);
        ``lo == hi`` where absent."""
        i = search_rows(self.keys, q, "left")
        d = len(self.keys)
        at = np.minimum(i, max(d - 1, 0))
        if self.keys.shape[1] == 1:
            hit = (i < d) & (self.keys[at, 0] == q[:, 0])
        else:
            hit = (i < d) & (self.keys[at] == q).all(axis=1)
        if self.starts is None:  # key i is row i
            lo = i.astype(np.int64, copy=False)
            return lo, np.where(hit, lo + 1, lo)
        lo = self.starts[i]
        return lo, np.where(hit, self.starts[np.minimum(i + 1, d)], lo)

    @property
    def nbytes(self) -> int:
        """Bytes the index holds beyond its run (none when it is the run's own keys)."""
        return 0 if self.starts is None else self.keys.nbytes + self.starts.nbytes


class KeyedArrangement(FueledHolder):
    """Updates arranged by key columns: inserts at forward times, lookups of keys.

    Parameters
    ----------
    schema : mapping of column name to Arrow type (or SQL type name), or ``ColumnSpec`` s
        The arranged collection's columns.
    key : sequence of str
        The key columns (any of ``schema``'s, in the order lookups give them; may be empty).
    effort, min_fuel : int, optional
        How much merging each insert pays for (``colmz.dataflow.fueled.FueledRuns``).

    Examples
    --------
    >>> import colmz
    >>> a = KeyedArrangement({"k": pa.int64(), "v": pa.string()}, key=["k"])
    >>> a.insert(1, colmz.Updates({"k": [1, 2, 1], "v": ["x", "y", "z"]}, time=[1, 1, 1], diff=[1, 1, 2]))
    >>> m = a.lookup([pa.array([1, 3])])
    >>> m.query.tolist(), m.rows.to_pylist()
    ([0, 0], [(1, 'x', 1, 1), (1, 'z', 1, 2)])
    >>> a.counts([pa.array([1, 2, 3])]).tolist()
    [3, 1, 0]
    """

    #: What an insert changes, for ``colmz.rollback`` (the layers of runs: a tuple each insert replaces).
    ROLLBACK_FIELDS = ("_fueled", "_since")

    def __init__(self, schema, key: Sequence[str], *, effort: int = 1, min_fuel: int = 1024):
        self.schema: tuple[ColumnSpec, ...] = as_schema(schema, "schema")
        self.key: tuple[str, ...] = check_columns(key, self.schema, "key")
        by_name = {c.name: i for i, c in enumerate(self.schema)}
        self._key_pos = [by_name[n] for n in self.key]
        self._val_pos = [i for i in range(len(self.schema)) if i not in self._key_pos]
        self._key_specs = tuple(self.schema[i] for i in self._key_pos)
        self._val_specs = tuple(self.schema[i] for i in self._val_pos)
        self._key_kinds = [s.kind for s in self._key_specs]
        self._val_kinds = [s.kind for s in self._val_specs]
        self._fueled = FueledRuns(_run_size, KeyedMerge, effort, min_fuel, _run_serial, combine_runs)
        self._since: int | None = None
        self.rows_inserted = 0
        self.keys_searched = 0
        self.rows_found = 0
        self.search_probes = 0
        self.rows_indexed = 0
        # per run serial (a run never changes): its KeyIndex, once made; derived from the
        # runs, so never rolled back (an entry of a run no longer held is dropped unread)
        self._key_index: dict[int, KeyIndex] = {}

    # ------------------------------------------------------------------ properties

    @property
    def since(self) -> int | None:
        """The time the contents are as of (the last insert's), ``None`` before any."""
        return self._since

    @property
    def run_sizes(self) -> list[int]:
        """Rows per run, oldest first."""
        return [len(r.diff) for r in self._fueled.runs()]

    def __len__(self) -> int:
        """Rows held over all runs (a row in two runs counts twice)."""
        return sum(len(r.diff) for r in self._fueled.runs())

    @property
    def nbytes(self) -> int:
        """Bytes of the runs' arrays (encoded keys, values and diffs)."""
        return sum(a.nbytes for r in self._fueled.runs() for a in (r.keys, r.vals, r.diff))

    def __repr__(self) -> str:
        return (f"KeyedArrangement(key={list(self.key)}, {len(self)} rows in {self.runs} runs, "
                f"since {self._since})")

    # ------------------------------------------------------------------ inserting

    def insert(self, time, updates: Updates) -> None:
        """Add ``updates`` (any times; folded to ``time``, which must not be before
        :attr:`since`)."""
        time = check_time(time, "time")
        if self._since is not None and time < self._since:
            raise ValueError(f"time {time} is before the arrangement's since {self._since}")
        if not isinstance(updates, Updates):
            raise TypeError(f"updates must be colmz.Updates, got {type(updates).__name__}")
        if len(updates) and updates.column_names != [c.name for c in self.schema]:
            raise SchemaError(f"updates have columns {updates.column_names}, the arrangement "
                              f"{[c.name for c in self.schema]}")
        if len(updates):
            self.insert_checked(time, cast_to(updates, self.schema))
        else:
            self._since = time

    def insert_checked(self, time: int, updates: Updates) -> None:
        """:meth:`insert` of values an operator has checked already (its own state)."""
        n = len(updates)
        if n:
            cols = [updates.column(c.name) for c in self.schema]
            kw, kl = encode_columns([cols[i] for i in self._key_pos], self._key_kinds, n=n)
            vw, vl = encode_columns([cols[i] for i in self._val_pos], self._val_kinds, n=n)
            self.rows_inserted += n
            run = _run(kw, kl, vw, vl, np.asarray(updates.diff, np.int64))
            if len(run.diff):
                self._fueled.insert(run)
        self._since = time

    def insert_words(self, time: int, keys: np.ndarray, key_layout: Layout, vals: np.ndarray,
                     val_layout: Layout, diff: np.ndarray, *, consolidated: bool = False) -> None:
        """:meth:`insert_checked` of rows already encoded as the arrangement encodes them
        (``colmz.order``: the key columns' words laid out as ``key_layout``, the payload
        columns' -- the others, in schema order -- as ``val_layout``). ``consolidated`` says
        the rows are sorted by (key, payload) words, each once, no zero diff (what
        :func:`consolidate_words` gives for their concatenation): the run is made of them
        without sorting them again."""
        n = len(diff)
        if n:
            self.rows_inserted += n
            diff = np.asarray(diff, np.int64)
            if consolidated:
                run = Run(np.ascontiguousarray(keys), key_layout, np.ascontiguousarray(vals), val_layout,
                          narrow_diff(diff), next_serial())
            else:
                run = _run(keys, key_layout, vals, val_layout, diff)
            if len(run.diff):
                self._fueled.insert(run)
        self._since = time

    # ------------------------------------------------------------------ reading

    def _ranges(self, columns: Sequence[pa.Array]):
        """Per run: ``(run, lo, hi)`` ranges of each query key (``hi - lo`` = 0 if absent)."""
        if len(columns) != len(self.key):
            raise ValueError(f"a lookup gives {len(columns)} key columns, the key is {list(self.key)}")
        n = len(columns[0]) if columns else None
        if n is None:
            raise ValueError("a lookup of an empty key needs the number of queries: use lookup_all")
        q, ql = encode_columns(list(columns), n=n)
        return self.ranges_words(q, ql)

    def ranges_words(self, q: np.ndarray, ql: Layout) -> list:
        """Per run the arrangement holds (both inputs of a merge in progress): ``(run, lo,
        hi)``, the rows of each encoded query key (``hi - lo`` = 0 where absent; a key that
        cannot occur in a run's layout is skipped). Counts ``keys_searched``.

        A run searched for many keys at once (:func:`worth_indexing`) is searched through
        its :class:`KeyIndex` -- its distinct keys and where each starts, made once per run
        (runs never change) and kept while the run is held: one search per query key over
        the distinct keys instead of two over the rows (``search_probes`` counts the
        probes of every search: a query key's ``log2`` of the rows it is searched in)."""
        out = []
        runs = self._fueled.runs()
        if self._key_index:
            held = {r.serial for r in runs}
            self._key_index = {s: x for s, x in self._key_index.items() if s in held}
        for run in runs:
            # a run of the query's own layout (the common case) takes the query as it is
            mine, present = (q, None) if run.key_layout == ql else narrow_rows(q, ql, run.key_layout)
            m = len(mine)
            index = self._key_index.get(run.serial) if run.serial else None
            if index is None and run.serial and worth_indexing(m, len(run.diff)):
                index = self._key_index[run.serial] = KeyIndex.of(run.keys)
                self.rows_indexed += len(run.diff)
            if index is not None:
                lo, hi = index.ranges(mine)
                self.search_probes += m * (len(index.keys) + 1).bit_length()
            else:
                lo, hi = search_range(run.keys, mine)
                self.search_probes += 2 * m * (len(run.diff) + 1).bit_length()
            self.keys_searched += len(q)
            out.append((run, lo, hi if present is None else np.where(present, hi, lo)))
        return out

    @property
    def index_nbytes(self) -> int:
        """Bytes of the runs' key indexes (:class:`KeyIndex`) made so far (not in :attr:`nbytes`:
        they depend on the lookups made, not on the contents, and are never rolled back).
        Memory all the same: EXPLAIN reports an arrangement's bytes as both."""
        return sum(x.nbytes for x in self._key_index.values())

    def lookup(self, columns: Sequence[pa.Array]) -> Matches:
        """The rows whose key equals each query key (``columns``: the key's columns, in
        :attr:`key` order; equality with NULL = NULL, NaN = NaN). Cost: queries times
        ``log`` of each run, plus the rows found."""
        return self._gather(self._ranges(columns))

    def lookup_words(self, q: np.ndarray, layout: Layout) -> Matches:
        """:meth:`lookup` of keys already encoded (``colmz.order``); for an empty key, ``q`` is
        ``(m, 0)`` and every query matches every row."""
        return self._gather(self.ranges_words(q, layout))

    def counts(self, columns: Sequence[pa.Array]) -> np.ndarray:
        """The summed diffs of the rows of each query key (its multiplicity, for a key of all
        columns). Cost: queries times ``log`` of each run, plus the diffs of the rows found
        (counted in ``rows_found``; the rows themselves are not decoded)."""
        return self._sums(self._ranges(columns), len(columns[0]) if columns else 0)

    def counts_words(self, q: np.ndarray, layout: Layout) -> np.ndarray:
        """:meth:`counts` of keys already encoded."""
        return self._sums(self.ranges_words(q, layout), len(q))

    def _sums(self, ranges, n: int) -> np.ndarray:
        out = np.zeros(n, np.int64)
        for run, lo, hi in ranges:
            q, rows = expand_ranges(lo, hi)
            if not len(rows):
                continue
            self.rows_found += len(rows)
            # A key's rows (distinct payloads, several runs) may sum beyond int64 only when the
            # collection's multiplicities do: summed exactly when that is possible at all.
            d = run.diff[rows]
            if np.abs(d.astype(np.float64)).sum() >= 2.0**62:
                acc = np.zeros(n, object)
                np.add.at(acc, q, d.astype(object))
                acc = acc + out.astype(object)
                if any(not -(2**63) <= int(x) < 2**63 for x in acc):
                    raise OverflowError("diff overflow: the multiplicity of a key leaves int64")
                out = acc.astype(np.int64)
            else:
                np.add.at(out, q, d)
        return out

    def lookup_encoded(self, q: np.ndarray, layout: Layout, *, keys: bool = True) -> FoundWords:
        """:meth:`lookup_words` without decoding: the rows found as words (:class:`FoundWords`);
        :meth:`decode_words` decodes them. ``keys=False`` leaves the key words out (no
        columns): a caller that knows each row's key by its query position."""
        return self._collect(self.ranges_words(q, layout), keys)

    def gather_encoded(self, ranges, *, keys: bool = True) -> FoundWords:
        """:meth:`lookup_encoded` of ranges :meth:`ranges_words` gave: a caller that looked at
        the ranges first (say to reduce them in place) gathers their rows without searching
        again."""
        return self._collect(ranges, keys)

    def decode_words(self, keys: np.ndarray, key_layout: Layout, vals: np.ndarray, val_layout: Layout,
                     diff: np.ndarray) -> Updates:
        """Rows of key and payload words (as :meth:`lookup_encoded` gives them) as ``Updates``
        of the arrangement's columns, at :attr:`since`."""
        return self._decode(keys, key_layout, vals, val_layout, diff)

    def _gather(self, ranges) -> Matches:
        found = self._collect(ranges)
        if not len(found.diff):
            return Matches(found.query, Updates.empty(self.schema))
        return Matches(found.query, self._decode(found.keys, found.key_layout, found.vals, found.val_layout,
                                                 found.diff))

    def _collect(self, ranges, with_keys: bool = True) -> FoundWords:
        qs, keys, vals, diffs, kls, vls = [], [], [], [], [], []
        for run, lo, hi in ranges:
            q, rows = expand_ranges(lo, hi)
            if not len(rows):
                continue
            qs.append(q)
            # (np.take: a row gather without fancy indexing's general machinery)
            keys.append(np.take(run.keys, rows, axis=0) if with_keys else np.zeros((len(rows), 0), np.uint64))
            vals.append(np.take(run.vals, rows, axis=0))
            diffs.append(np.take(run.diff, rows))
            kls.append(run.key_layout if with_keys else (0,) * (len(self._key_specs) + 1))
            vls.append(run.val_layout)
        if not qs:
            empty = (0,) * (len(self._key_specs) + 1), (0,) * (len(self._val_specs) + 1)
            return FoundWords(np.zeros(0, np.int64), np.zeros((0, 0), np.uint64), empty[0], np.zeros((0, 0), np.uint64),
                         empty[1], np.zeros(0, np.int64))
        kl, vl = unify_layouts(*kls), unify_layouts(*vls)
        kw = np.concatenate([pad_keys(k, a, kl) for k, a in zip(keys, kls)])
        vw = np.concatenate([pad_keys(v, a, vl) for v, a in zip(vals, vls)])
        diff = np.concatenate(diffs).astype(np.int64, copy=False)  # (runs store narrowed diffs)
        self.rows_found += len(diff)
        return FoundWords(np.concatenate(qs), kw, kl, vw, vl, diff)

    def _decode(self, kw, kl, vw, vl, diff) -> Updates:
        if not len(kw) == len(vw) == len(diff):
            raise ValueError(f"key words of {len(kw)} rows, payload words of {len(vw)} and {len(diff)} diffs: "
                             "one length is needed")
        kc = decode_columns(kw, kl, self._key_specs)
        vc = decode_columns(vw, vl, self._val_specs)
        cols: list = [None] * len(self.schema)
        for i, c in zip(self._key_pos, kc):
            cols[i] = c
        for i, c in zip(self._val_pos, vc):
            cols[i] = c
        time = np.full(len(diff), self._since or 0, np.uint64)
        # decoded here in the arrangement's types, one length: nothing for Updates to check
        return Updates.from_checked({s.name: c for s, c in zip(self.schema, cols)}, time,
                                    np.asarray(diff, np.int64))

    # -- durable state (colmz.dataflow.state) -------------------------------------------

    def unread_merges(self, added, gone):
        """``FueledRuns.unread_merges``: for ``colmz.dataflow.state``'s deltas."""
        return self._fueled.unread_merges(added, gone)

    def state_runs(self) -> tuple[Run, ...]:
        """The runs holding the contents, oldest first. A run is never changed once made (a
        merge makes a new one), so ``colmz.dataflow.state`` diffs two of these tuples by
        identity."""
        return tuple(self._fueled.runs())

    # ------------------------------------------------------------------------------------

    def snapshot(self) -> Updates:
        """Every row with its multiplicity (consolidated), at :attr:`since`: reads every run,
        for tests and inspection."""
        runs = self._fueled.runs()
        if not runs:
            return Updates.empty(self.schema)
        rows = self._gather([(r, np.zeros(1, np.int64), np.array([len(r.diff)])) for r in runs]).rows
        return consolidate(rows)


def _run(kw: np.ndarray, kl: Layout, vw: np.ndarray, vl: Layout, diff: np.ndarray) -> Run:
    """A run of the rows ``(kw | vw)``: sorted, consolidated, split back into key and payload."""
    width = kw.shape[1]
    words, diff = consolidate_words(np.hstack([kw, vw]) if vw.shape[1] else kw, diff)
    keys = np.ascontiguousarray(words[:, :width])
    vals = np.ascontiguousarray(words[:, width:])
    return Run(keys, kl, vals, vl, narrow_diff(diff), next_serial())



def combine_runs(older: Run, newer: Run) -> Run | None:
    """Two runs merged at once (a small merge: :class:`KeyedMerge`'s result without its
    chunks), ``None`` when every row cancels."""
    kl = unify_layouts(older.key_layout, newer.key_layout)
    vl = unify_layouts(older.val_layout, newer.val_layout)
    kw = np.concatenate([pad_keys(older.keys, older.key_layout, kl), pad_keys(newer.keys, newer.key_layout, kl)])
    vw = np.concatenate([pad_keys(older.vals, older.val_layout, vl), pad_keys(newer.vals, newer.val_layout, vl)])
    run = _run(kw, kl, vw, vl, np.concatenate([older.diff, newer.diff]))
    return run if len(run.diff) else None


def _run_size(run: Run) -> int:
    return len(run.diff)


def _run_serial(run: Run) -> int:
    return run.serial


def first_row(rows: Sequence[np.ndarray]) -> np.ndarray:
    """The lexicographically smallest of some rows of words (one row each)."""
    best = rows[0]
    for r in rows[1:]:
        neq = np.flatnonzero(r != best)
        if len(neq) and r[neq[0]] < best[neq[0]]:
            best = r
    return best


def chunk_ends(a_rows: np.ndarray, a_more: bool, b_rows: np.ndarray, b_more: bool) -> tuple[int, int]:
    """How many of the next rows of two sorted runs (``a_rows``, ``b_rows``: the next chunk of
    each, padded to one layout; ``*_more``: the run goes on past it) a merge may take now:
    every row up to the smaller of the chunks' last rows where a run goes on, so that no
    row equal to one taken is left behind."""
    ends = [r[-1] for r, more in ((a_rows, a_more), (b_rows, b_more)) if more and len(r)]
    if not ends:
        return len(a_rows), len(b_rows)
    bound = first_row(ends)[None, :]
    return int(search_rows(a_rows, bound, "right")[0]), int(search_rows(b_rows, bound, "right")[0])


def merge_chunks(wa: np.ndarray, da: np.ndarray, wb: np.ndarray, db: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two sorted, consolidated runs of words (one layout) merged and consolidated by the
    fueled merge kernel (``colmz.kernels.fueled.run_merge``, run to completion): equal rows'
    diffs summed exactly (``OverflowError`` beyond ``int64``), zero sums dropped.

    >>> w, d = merge_chunks(np.array([[1], [3]], np.uint64), np.array([1, 1]),
    ...                     np.array([[2], [3]], np.uint64), np.array([5, -1]))
    >>> w.ravel().tolist(), d.tolist()
    ([1, 2], [1, 5])
    """
    if not len(wb):
        return wa, np.asarray(da, np.int64)
    if not len(wa):
        return wb, np.asarray(db, np.int64)
    n = len(wa) + len(wb)
    width = wa.shape[1]
    out = (np.empty((n, width), np.uint64), np.empty(n, np.uint64), np.empty(n, np.int64))
    if width == 0:  # every row equal: one sum
        return consolidate_words(np.zeros((n, 0), np.uint64), np.concatenate([da, db]))
    cursor = new_cursor()
    zeros = np.zeros(n, np.uint64)
    m = run_merge((np.ascontiguousarray(wa), zeros[:len(wa)], np.asarray(da, np.int64)),
                  (np.ascontiguousarray(wb), zeros[:len(wb)], np.asarray(db, np.int64)), 0, cursor, out, n)
    return out[0][:m], out[2][:m]


class KeyedMerge(Merge):
    """A merge in progress of two runs of a :class:`KeyedArrangement` (``older``, ``newer``):
    chunk by chunk into preallocated output arrays (``colmz.dataflow.fueled``)."""

    def __init__(self, older: Run, newer: Run):
        super().__init__(older, newer)
        self.kl = unify_layouts(older.key_layout, newer.key_layout)
        self.vl = unify_layouts(older.val_layout, newer.val_layout)
        self.kw = sum(self.kl)
        cap = len(older.diff) + len(newer.diff)
        self.out = (np.empty((cap, self.kw), np.uint64), np.empty((cap, sum(self.vl)), np.uint64),
                    np.empty(cap, np.int64))
        self.i = self.j = self.o = 0

    def _words(self, run: Run, lo: int, hi: int) -> np.ndarray:
        k = pad_keys(run.keys[lo:hi], run.key_layout, self.kl)
        v = pad_keys(run.vals[lo:hi], run.val_layout, self.vl)
        return np.hstack([k, v]) if v.shape[1] else k

    def step(self, fuel: int) -> int:
        a, b = self.a, self.b
        na, nb = len(a.diff), len(b.diff)
        half = max(1, fuel // 2)
        ha, hb = min(self.i + half, na), min(self.j + half, nb)
        wa, wb = self._words(a, self.i, ha), self._words(b, self.j, hb)
        ca, cb = chunk_ends(wa, ha < na, wb, hb < nb)
        words, diff = merge_chunks(wa[:ca], a.diff[self.i:self.i + ca], wb[:cb], b.diff[self.j:self.j + cb])
        ok, ov, od = self.out
        o, m = self.o, len(diff)
        ok[o:o + m] = words[:, :self.kw]
        ov[o:o + m] = words[:, self.kw:]
        od[o:o + m] = diff
        self.i += ca
        self.j += cb
        self.o = o + m
        if self.i == na and self.j == nb:
            self.done = True
            n = self.o
            if 8 * (len(od) - n) > len(od):
                # rows cancelled: more than an eighth of the output arrays would sit unused
                # under a view of them (and uncounted by nbytes): keep a tight copy instead
                ok, ov = ok[:n].copy(), ov[:n].copy()
            self.result = Run(ok[:n], self.kl, ov[:n], self.vl, narrow_diff(od[:n]), next_serial()) if n else None
        return ca + cb
