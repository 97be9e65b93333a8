"""``Updates``: an immutable columnar batch of ``(data, time, diff)``.

Design
------
An update says "the multiplicity of row ``data`` changes by ``diff`` at ``time``". A batch of
them is held as a structure of arrays: the data columns as Arrow arrays (any number, nullable,
of the types in ``colmz.order``), ``time`` as ``numpy.uint64`` and ``diff`` as
``numpy.int64``. Nothing here sorts or consolidates: an ``Updates`` is whatever the caller
gave, validated. ``colmz.consolidate`` puts it in normal form.

Invariants checked on construction (each violation names the column and the problem):
``time`` and ``diff`` exist, are integers without NULLs, ``time`` is non-negative and fits
``uint64``, ``diff`` fits ``int64``, every data column has a supported type, all columns have
one length, and no data column is called ``time``/``diff`` twice.

Ownership
---------
An ``Updates`` owns what it holds, so that nothing the caller does later can change it -- or
the structures it was inserted into, which keep its arrays (a ``Correction`` stages them until
its next flush). Arrow inputs are immutable by contract and are wrapped as they are: Arrow
``uint64`` time and ``int64`` diff without NULLs become read-only numpy views of the Arrow
buffers, and Arrow data columns stay the arrays they came as. Mutable caller memory -- numpy
arrays, pandas columns (pandas hands out views of the frame's blocks) and anything else with
``__array__`` -- is copied on construction by default. Loading data by refilling one buffer
per batch is common; with copying it is also safe.

``copy=False`` is the zero-copy path for callers that give their arrays up: it is a promise
not to mutate them while the ``Updates`` (or any structure it went into) is alive. The arrays
are then kept as *read-only* views, so colmz itself can never write through them; the caller's
own handle stays writable, which is why the promise is needed. Conversions that must build a
new array anyway (a dtype change, Python lists, strings) cost the same either way, and
internal constructions -- decoding, ``slice``, ``negated``, ``colmz.concat``, consolidation --
never copy: they wrap arrays colmz made itself. An ``Updates`` costs its raw column bytes plus
a few hundred bytes.

Input never guesses
-------------------
Python lists go through Arrow's strict type inference: mixed types (``["1", 1]``,
``[True, 2]``) raise ``TypeError``, the same error as the column through ``from_pandas``,
where numpy would have converted values. A column with no values and no type (an empty list,
an empty ``object`` column) raises unless the caller gives its type (``schema=``): numpy's
guess (``double``) or Arrow's (``null``) would disagree with the batches that have values.
``from_pandas`` keeps a named index as data (what ``groupby`` leaves is the key), drops an
unnamed ``RangeIndex`` and refuses any other unnamed index (``preserve_index`` decides
explicitly).

Batches of one collection combine (``colmz.concat``, structures) when their columns have the
same names and types, where an all-NULL column (Arrow type ``null``, as an all-``None`` column
gives) takes the type of the other side, and numeric types of one family widen losslessly
(``int32`` with ``int64`` is ``int64``, ``float32`` with ``float64`` is ``float64``; see
:func:`widen`). Lossy mixes (``int64`` with ``uint64`` or ``double``) raise ``SchemaError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

import numpy as np
import pyarrow as pa

from colmz.order import (
    ColumnSpec,
    Layout,
    array_from_numpy,
    decode_columns,
    encode_columns,
    kind_of,
    pad_keys,
    raw_words,
    unify_layouts,
)

__all__ = ["Encoded", "SchemaError", "Updates", "cached_encoding", "check_negatable", "check_typed",
           "held_columns", "negated_diff", "unify_schemas", "widen"]

_MAX_DATA_COLUMNS = 64
_I64_MIN = np.iinfo(np.int64).min


class SchemaError(TypeError):
    """Two batches of one collection have different columns or column types."""


def unify_schemas(a: tuple[ColumnSpec, ...], b: tuple[ColumnSpec, ...]) -> tuple[ColumnSpec, ...]:
    """The common schema of two batches, resolving all-NULL (``null``) columns.

    A column of Arrow type ``null`` takes the other side's type, and numeric types of one
    family widen (:func:`widen`); anything else raises :class:`SchemaError`.

    >>> s1 = (ColumnSpec("k", pa.int64()),)
    >>> s2 = (ColumnSpec("k", pa.null()),)
    >>> unify_schemas(s1, s2) == s1
    True
    >>> unify_schemas((ColumnSpec("k", pa.int32()),), s1) == s1
    True
    """
    if a == b:
        return a
    if [c.name for c in a] != [c.name for c in b]:
        raise SchemaError(
            f"data columns differ: {[c.name for c in a]} vs {[c.name for c in b]}"
        )
    out = []
    for x, y in zip(a, b):
        if x.type == y.type or pa.types.is_null(y.type):
            out.append(x)
        elif pa.types.is_null(x.type):
            out.append(y)
        elif (wide := widen(x.type, y.type)) is not None:
            out.append(ColumnSpec(x.name, wide))
        else:
            raise SchemaError(
                f"data column {x.name!r} has type {x.type} in one batch and {y.type} in another "
                "(only lossless widening within signed ints, unsigned ints or floats combines)"
            )
    return tuple(out)


def widen(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The wider of two numeric types of one family (signed, unsigned, float), else ``None``.

    Within a family colmz's encoding of a value does not depend on the width
    (``colmz.order``), so batches of both combine without re-encoding, and the wider type
    holds every value of the narrower exactly. Across families (``uint64`` and ``int64``,
    ints and floats) a value can change or equality can differ: no widening.

    >>> widen(pa.int32(), pa.int64()), widen(pa.float64(), pa.float32()), widen(pa.int64(), pa.uint8())
    (DataType(int64), DataType(double), None)
    """
    for family in (pa.types.is_signed_integer, pa.types.is_unsigned_integer, pa.types.is_floating):
        if family(a) and family(b):
            return a if a.bit_width >= b.bit_width else b
    return None


class Encoded(tuple):
    """Updates with their data encoded as order-preserving key words (see ``colmz.order``).

    The internal currency of colmz's structures: ``keys`` ``(n, W)`` ``uint64``, ``time``
    ``uint64``, ``diff`` ``int64`` and the keys' ``layout``. Immutable (a tuple of those four,
    made in well under a microsecond: a sink builds a few per tick); ``len`` is the number of
    updates, not of fields.

    >>> e = Encoded(np.zeros((2, 1), np.uint64), np.array([1, 2], np.uint64), np.array([1, -1]), (1, 0))
    >>> len(e), e.layout, e.time.tolist()
    (2, (1, 0), [1, 2])
    """

    __slots__ = ()

    def __new__(cls, keys: np.ndarray, time: np.ndarray, diff: np.ndarray, layout: Layout) -> Encoded:
        return tuple.__new__(cls, (keys, time, diff, layout))

    keys = property(itemgetter(0), doc="``(n, W)`` ``uint64`` key words")
    time = property(itemgetter(1), doc="``uint64`` times")
    diff = property(itemgetter(2), doc="``int64`` diffs")
    layout = property(itemgetter(3), doc="the keys' layout (``colmz.order``)")

    def __getnewargs__(self):
        return tuple(self)

    def __len__(self) -> int:
        return len(self[1])

    def __repr__(self) -> str:
        return f"Encoded({len(self)} updates, layout {self.layout})"

    def padded(self, target: Layout) -> Encoded:
        if target == self.layout:
            return self
        return Encoded(pad_keys(self.keys, self.layout, target), self.time, self.diff, target)

    def negated(self) -> Encoded:
        """The same run with every diff negated (new diff array; keys and times are shared).

        The one place colmz negates diffs: ``-2**63`` has no negation within ``int64``, so a
        run holding it raises ``OverflowError`` instead of wrapping around.

        >>> e = Encoded(np.zeros((1, 1), np.uint64), np.zeros(1, np.uint64), np.array([3]), (1, 0))
        >>> e.negated().diff.tolist()
        [-3]
        """
        return Encoded(self.keys, self.time, negated_diff(self.diff), self.layout)

    def slice(self, start: int, stop: int) -> Encoded:
        """Rows ``[start, stop)`` as views (no copy)."""
        return Encoded(self.keys[start:stop], self.time[start:stop], self.diff[start:stop], self.layout)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.time.nbytes + self.diff.nbytes


def _exact_ints(col) -> np.ndarray:
    # numpy turns a list mixing small ints and 2**64-1 into float64, losing the value:
    # keep Python sequences of ints exact by taking them as objects.
    if isinstance(col, np.ndarray):
        return col
    if not hasattr(col, "__array__"):
        col = list(col)
        if not col:
            return np.empty(0, np.int64)  # not numpy's float64 for an empty list
        if all(isinstance(v, int) and not isinstance(v, bool) for v in col):
            if all(-(2**63) <= v < 2**63 for v in col):
                return np.array(col, np.int64)
            return np.array(col, dtype=object)
    return np.asarray(col)


def _borrowed(col) -> bool:
    """Whether ``col`` is caller memory numpy may wrap without copying (not Arrow, not a list).

    Arrow memory is immutable; Python sequences are always converted into a new array.
    """
    return not isinstance(col, pa.Array | pa.ChunkedArray | list | tuple | range)


def _owned(arr: np.ndarray, source, copy: bool) -> np.ndarray:
    """``arr`` made safe to keep: a copy of caller memory, or a read-only view of it.

    ``arr`` is the converted column and ``source`` what the caller passed; a conversion that
    changed the dtype already made a new array, which is kept as it is.
    """
    if not _borrowed(source) or not np.may_share_memory(arr, np.asarray(source)):
        return arr
    if copy:
        return arr.copy()
    v = arr.view()
    v.flags.writeable = False
    return v


def _time_array(col, name: str) -> np.ndarray:
    """Validate and convert a time column to ``uint64`` (zero-copy when already ``uint64``)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(col, pa.Array):
        if col.null_count:
            raise ValueError(f"time column {name!r} has {col.null_count} null time(s)")
        t = col.type
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            col = col.to_numpy(zero_copy_only=False)
        elif pa.types.is_timestamp(t) or pa.types.is_date(t):
            raise TypeError(
                f"time column {name!r} has type {t}; colmz times are integers (uint64) -- "
                "convert, e.g. to epoch milliseconds, first"
            )
        else:
            raise TypeError(f"time column {name!r} has non-integer type {t}")
    arr = _exact_ints(col)
    if arr.dtype == np.uint64:
        return arr
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise ValueError(f"time column {name!r} has null (NaN) time(s)")
        if (arr != np.floor(arr)).any() or np.isinf(arr).any():
            bad = arr[(arr != np.floor(arr)) | np.isinf(arr)][0]
            raise ValueError(f"time column {name!r} has fractional or infinite time {bad!r}")
        if (arr < 0).any():
            raise ValueError(f"time column {name!r} has negative time {arr[arr < 0][0]!r}")
        if (arr >= 2.0**64).any():
            raise ValueError(f"time column {name!r} has a time beyond 2**64-1")
        return arr.astype(np.uint64)
    if arr.dtype.kind == "i":
        if len(arr) and arr.min() < 0:
            raise ValueError(f"time column {name!r} has negative time {int(arr.min())}")
        return arr.astype(np.uint64)
    if arr.dtype.kind == "u":
        return arr.astype(np.uint64)
    if arr.dtype == object:
        if any(v is None for v in arr):
            raise ValueError(f"time column {name!r} has null time(s)")
        try:
            vals = [int(v) for v in arr]
        except (TypeError, ValueError):
            raise TypeError(f"time column {name!r} has non-integer values") from None
        if any(v != x for v, x in zip(vals, arr)):
            raise ValueError(f"time column {name!r} has fractional time(s)")
        if any(v < 0 for v in vals):
            raise ValueError(f"time column {name!r} has negative time {min(vals)}")
        if any(v > 2**64 - 1 for v in vals):
            raise ValueError(f"time column {name!r} has a time beyond 2**64-1")
        return np.array(vals, np.uint64)
    raise TypeError(f"time column {name!r} has non-integer dtype {arr.dtype}")


def _diff_array(col, name: str) -> np.ndarray:
    """Validate and convert a diff column to ``int64`` (zero-copy when already ``int64``)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(col, pa.Array):
        if col.null_count:
            raise ValueError(f"diff column {name!r} has {col.null_count} null diff(s)")
        if not pa.types.is_integer(col.type):
            raise TypeError(f"diff column {name!r} has non-integer type {col.type}")
        col = col.to_numpy(zero_copy_only=False)
    arr = _exact_ints(col)
    if arr.dtype == np.int64:
        return arr
    if arr.dtype.kind == "i":
        return arr.astype(np.int64)
    if arr.dtype.kind == "u":
        if len(arr) and arr.max() > 2**63 - 1:
            raise OverflowError(f"diff column {name!r} has a diff beyond int64")
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise ValueError(f"diff column {name!r} has null (NaN) diff(s)")
        raise TypeError(f"diff column {name!r} has non-integer dtype {arr.dtype}")
    if arr.dtype == object:
        if any(v is None for v in arr):
            raise ValueError(f"diff column {name!r} has null diff(s)")
        try:
            vals = [int(v) for v in arr]
        except (TypeError, ValueError):
            raise TypeError(f"diff column {name!r} has non-integer values") from None
        if any(not -(2**63) <= v < 2**63 for v in vals):
            raise OverflowError(f"diff column {name!r} has a diff beyond int64")
        return np.array(vals, np.int64)
    raise TypeError(f"diff column {name!r} has non-integer dtype {arr.dtype}")


_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


def _data_array(col, name: str, copy: bool = True, type: pa.DataType | None = None) -> pa.Array:
    arrow = isinstance(col, pa.Array | pa.ChunkedArray)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else (col.chunk(0) if col.num_chunks else pa.array([], col.type))
    if isinstance(col, list | tuple | range):
        col = _array_from_sequence(list(col), name, type)
    elif not arrow:
        arr = np.asarray(col)
        if arr.dtype.kind in "biuf" and arr.ndim == 1:
            # The Arrow array wraps the numpy memory: own it (bools are packed anew anyway).
            if arr.dtype.kind != "b":
                arr = _owned(np.ascontiguousarray(arr), col, copy)
            col = array_from_numpy(arr)
        elif arr.dtype.kind == "U":
            col = pa.array(arr.tolist(), pa.string())
        elif arr.dtype.kind == "S":
            col = pa.array(arr.tolist(), pa.binary())
        else:
            try:
                col = pa.array(arr)
            except _ARROW_ERRORS as e:
                raise TypeError(f"data column {name!r} cannot be converted to Arrow: {e}") from None
            check_typed(col, name, type)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if type is not None and col.type != type:
        kind_of(type, name)
        try:
            col = col.cast(type)  # a safe cast: values that do not fit raise
        except _ARROW_ERRORS as e:
            raise TypeError(
                f"data column {name!r} of type {col.type} does not convert to the schema's type "
                f"{type}: {e}"
            ) from None
    kind_of(col.type, name)
    return col


def check_typed(col: pa.Array, name: str, type: pa.DataType | None) -> None:
    """Refuse an empty column whose values gave no type, unless the caller gives ``type``.

    Python sequences and object arrays carry their type in their values; with no values there
    is nothing to go by, and a guess (numpy says ``double``, Arrow ``null``) would make the
    batch disagree with the ones that have values.
    """
    if type is None and len(col) == 0 and pa.types.is_null(col.type):
        raise TypeError(
            f"data column {name!r} is empty and its values give no type: pass "
            f"schema={{{name!r}: <Arrow type>}} or a typed (Arrow or numpy) array"
        )


def _array_from_sequence(values: list, name: str, type: pa.DataType | None) -> pa.Array:
    # Arrow's inference is strict -- ["1", 1] and [True, 2] raise, as in from_pandas -- where
    # numpy would silently turn 1 into "1" or True into 1.
    try:
        col = pa.array(values, type)
    except OverflowError:
        # Integers beyond int64: exact as uint64 when none is negative (numpy does the same).
        try:
            col = pa.array(values, pa.uint64() if type is None else type)
        except (OverflowError, *_ARROW_ERRORS):
            raise TypeError(f"data column {name!r} has integers that fit neither int64 nor uint64") from None
    except _ARROW_ERRORS as e:
        raise TypeError(f"data column {name!r} cannot be converted to Arrow: {e}") from None
    check_typed(col, name, type)
    return col


class Updates:
    """An immutable batch of updates ``(data..., time, diff)`` in columnar form.

    Parameters
    ----------
    data : mapping of column name to array-like (Arrow or numpy), in column order
    time : array-like of non-negative integer times (stored as ``uint64``)
    diff : array-like of integer multiplicity changes (stored as ``int64``)
    schema : mapping of column name to Arrow type (or ``ColumnSpec`` sequence), optional
        Types for some or all data columns: each named column is converted to its type (a
        cast that would change a value raises ``TypeError``). Needed for an empty column given
        as a Python list, whose values give no type.
    copy : bool, default True
        Copy numpy (and other mutable, non-Arrow) inputs so that later changes to them do not
        reach the batch. ``False`` keeps read-only views instead -- zero-copy, on the caller's
        promise not to mutate the arrays while the batch or any structure holding it is in
        use. Arrow inputs are immutable and are never copied.

    Python lists are converted by Arrow's type inference, which refuses mixed types
    (``["1", 1]`` raises ``TypeError``, as the same column through :meth:`from_pandas` does)
    instead of converting values the way numpy would.

    Examples
    --------
    >>> import numpy as np
    >>> u = Updates({"k": np.array([1, 2, 1])}, time=[0, 0, 1], diff=[1, 1, -1])
    >>> len(u), u.column_names
    (3, ['k'])
    >>> u.to_pandas()
       k  time  diff
    0  1     0     1
    1  2     0     1
    2  1     1    -1

    Later changes to the caller's arrays do not reach the batch:

    >>> d = np.array([1, 1, 1])
    >>> u = Updates({"k": np.array([1, 2, 1])}, time=[0, 0, 1], diff=d)
    >>> d[:] = 0
    >>> u.diff.tolist()
    [1, 1, 1]
    >>> v = Updates({"k": np.array([1, 2, 1])}, time=[0, 0, 1], diff=d, copy=False)
    >>> np.shares_memory(v.diff, d), v.diff.flags.writeable
    (True, False)
    """

    # ``_cols`` is ``None`` while a batch built from its encoding (what structures hand out)
    # has not been asked for its columns: ``_columns`` decodes them on first use. ``_cons``:
    # the order the batch is known to be consolidated in (``"time"``/``"data"``, what
    # ``colmz.consolidate`` gave or a caller promised, :attr:`consolidated_order`), or None.
    __slots__ = ("_cols", "_schema", "_time", "_diff", "_enc", "_cons")

    def __init__(
        self,
        data: Mapping[str, object],
        time,
        diff,
        *,
        schema: Mapping[str, pa.DataType] | Sequence[ColumnSpec] | None = None,
        copy: bool = True,
        _trusted: bool = False,
    ):
        self._enc = None
        self._cons = None
        if _trusted:
            self._cols = tuple(data.values())
            self._schema = tuple(ColumnSpec(n, c.type) for n, c in zip(data, self._cols))
            self._time = time
            self._diff = diff
            return
        if len(data) > _MAX_DATA_COLUMNS:
            raise ValueError(f"data has {len(data)} columns; colmz supports at most {_MAX_DATA_COLUMNS}")
        names = list(data)
        for reserved in ("time", "diff"):
            if reserved in names:
                raise ValueError(f"data column named {reserved!r} clashes with the {reserved} column")
        if not isinstance(copy, bool):
            raise TypeError(f"copy must be a bool, got {copy!r}")
        types = _schema_types(schema, names)
        cols = tuple(_data_array(data[n], n, copy, types.get(n)) for n in names)
        t = _owned(_time_array(time, "time"), time, copy)
        d = _owned(_diff_array(diff, "diff"), diff, copy)
        n = len(t)
        if len(d) != n:
            raise ValueError(f"diff has {len(d)} values but time has {n}")
        for name, c in zip(names, cols):
            if len(c) != n:
                raise ValueError(f"data column {name!r} has {len(c)} values but time has {n}")
        self._cols = cols
        self._schema = tuple(ColumnSpec(n, c.type) for n, c in zip(names, cols))
        self._time = t
        self._diff = d

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_checked(cls, data: Mapping[str, pa.Array], time: np.ndarray, diff: np.ndarray) -> Updates:
        """A batch of Arrow arrays colmz made itself, taken as they are: no checks, no copies.

        For colmz's own operators, whose columns are already of their types and of one
        length, with ``time`` ``uint64`` and ``diff`` ``int64`` arrays of that length.

        >>> import pyarrow as pa
        >>> Updates.from_checked({"k": pa.array([1])}, np.array([0], np.uint64), np.array([1])).to_pylist()
        [(1, 0, 1)]
        """
        return cls(data, time, diff, _trusted=True)

    @classmethod
    def _from_parts(cls, columns: Sequence[pa.Array], schema: tuple[ColumnSpec, ...], time: np.ndarray,
                    diff: np.ndarray, enc: Encoded | None = None) -> Updates:
        """A batch of arrays colmz made itself (no checks, no copies).

        ``columns`` may be ``None`` when ``enc`` is given: the columns are then decoded from
        the encoding when first asked for, so a batch that is only fed back into a structure
        (a sink's read) is never decoded.
        """
        out = cls.__new__(cls)
        out._cols = None if columns is None else tuple(columns)
        out._schema = schema
        out._time = time
        out._diff = diff
        out._enc = enc
        out._cons = None
        return out

    @classmethod
    def from_encoded(cls, enc: Encoded, schema: Sequence[ColumnSpec]) -> Updates:
        """The batch of ``enc`` (an encoding colmz made of a batch of ``schema``), decoded lazily.

        Like :meth:`decode`, but the columns are decoded only when first asked for: a batch a
        structure hands out that is only fed back into a structure (a sink's read, ``concat``
        of such reads) is never decoded, and :func:`cached_encoding` gives ``enc`` back. No
        checks: ``enc`` must be of ``schema``.

        >>> u = Updates({"k": [2, 1]}, time=[0, 3], diff=[1, -1])
        >>> lazy = Updates.from_encoded(u.encode(), u.schema)
        >>> cached_encoding(lazy) is not None, lazy.to_pylist()
        (True, [(2, 0, 1), (1, 3, -1)])
        """
        return cls._from_parts(None, tuple(schema), enc.time, enc.diff, enc)

    @property
    def _columns(self) -> tuple[pa.Array, ...]:
        cols = self._cols
        if cols is None:
            enc = self._enc
            cols = self._cols = tuple(decode_columns(enc.keys, enc.layout, self._schema))
        return cols

    @classmethod
    def from_arrow(cls, table: pa.Table | pa.RecordBatch, *, time: str = "time", diff: str = "diff") -> Updates:
        """From an Arrow table or record batch; all columns but ``time`` and ``diff`` are data.

        >>> t = pa.table({"k": ["a", "b"], "time": [3, 4], "diff": [1, -1]})
        >>> Updates.from_arrow(t).to_pylist()
        [('a', 3, 1), ('b', 4, -1)]
        """
        names = table.schema.names
        for role, col in (("time", time), ("diff", diff)):
            if col not in names:
                raise KeyError(f"{role} column {col!r} is missing; columns are {names}")
        data = {n: table.column(n) for n in names if n not in (time, diff)}
        return cls(data, table.column(time), table.column(diff))

    @classmethod
    def from_pandas(
        cls,
        df,
        *,
        time: str = "time",
        diff: str = "diff",
        preserve_index: bool | None = None,
        schema: Mapping[str, pa.DataType] | Sequence[ColumnSpec] | None = None,
        copy: bool = True,
    ) -> Updates:
        """From a pandas DataFrame; all columns but ``time`` and ``diff`` are data.

        The index is data when it says so, as with ``pyarrow.Table.from_pandas``: with
        ``preserve_index=None`` (the default) a named index -- what ``groupby`` leaves, the
        key -- becomes leading data columns (one per level, as ``df.reset_index()`` would
        put them), an unnamed ``RangeIndex`` (row numbers) is dropped, and any other unnamed
        index raises ``ValueError`` rather than be guessed at. ``True`` keeps every level
        (unnamed ones as ``__index_level_<i>__``), ``False`` drops the index. ``time`` and
        ``diff`` may be index levels that are kept.

        ``schema`` gives types as for the constructor; an empty ``object`` column (no values,
        so no type) needs one. pandas columns are views of the frame's memory, so they are
        copied unless ``copy=False`` (see the class's ``copy``).

        >>> import pandas as pd
        >>> df = pd.DataFrame({"k": [1.5, float("nan")], "time": [0, 1], "diff": [1, 1]})
        >>> Updates.from_pandas(df).to_pylist()
        [(1.5, 0, 1), (nan, 1, 1)]
        >>> events = pd.DataFrame({"k": ["a", "b", "a"], "time": [0, 0, 0], "diff": [1, 1, 1]})
        >>> Updates.from_pandas(events.groupby(["k", "time"]).sum()).to_pylist()
        [('a', 0, 2), ('b', 0, 1)]
        """
        if preserve_index is not None and not isinstance(preserve_index, bool):
            raise TypeError(f"preserve_index must be None or a bool, got {preserve_index!r}")
        df = _index_as_columns(df, preserve_index)
        for role, col in (("time", time), ("diff", diff)):
            if col not in df.columns:
                raise KeyError(f"{role} column {col!r} is missing; columns are {list(df.columns)}")
        types = _schema_types(schema, [str(n) for n in df.columns if n not in (time, diff)])
        data = {}
        for name in df.columns:
            if name in (time, diff):
                continue
            s = df[name]
            if copy and s.dtype != object:
                # pa.array wraps numeric pandas memory without copying; object columns are
                # converted value by value into new buffers anyway.
                s = s.copy(deep=True)
            try:
                # from_pandas maps None/NaN in object columns to NULL, keeps float NaN as NaN.
                col = pa.array(s, from_pandas=bool(s.dtype == object))
            except _ARROW_ERRORS as e:
                raise TypeError(f"data column {name!r} cannot be converted to Arrow: {e}") from None
            check_typed(col, str(name), types.get(str(name)))
            data[str(name)] = col
        return cls(data, df[time].to_numpy(), df[diff].to_numpy(), schema=schema, copy=copy)

    @classmethod
    def empty(cls, schema: Sequence[ColumnSpec] | Mapping[str, pa.DataType] = ()) -> Updates:
        """An empty batch with the given data columns.

        >>> len(Updates.empty({"k": pa.int64()}))
        0
        """
        specs = _specs(schema)
        return cls(
            {s.name: _empty_array(s.type) for s in specs},
            np.empty(0, np.uint64),
            np.empty(0, np.int64),
            _trusted=True,
        )

    # ------------------------------------------------------------------ accessors

    @property
    def time(self) -> np.ndarray:
        """The times (``uint64``, read-only view)."""
        v = self._time.view()
        v.flags.writeable = False
        return v

    @property
    def diff(self) -> np.ndarray:
        """The diffs (``int64``, read-only view)."""
        v = self._diff.view()
        v.flags.writeable = False
        return v

    @property
    def column_names(self) -> list[str]:
        return [s.name for s in self._schema]

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        """The data columns' names and Arrow types."""
        return self._schema

    def column(self, name: str) -> pa.Array:
        """A data column as an Arrow array."""
        for s, c in zip(self._schema, self._columns):
            if s.name == name:
                return c
        raise KeyError(f"no data column {name!r}; data columns are {self.column_names}")

    @property
    def nbytes(self) -> int:
        """Bytes held by the columns (Arrow buffers plus time and diff)."""
        return sum(c.nbytes for c in self._columns) + self._time.nbytes + self._diff.nbytes

    def __len__(self) -> int:
        return len(self._time)

    # ------------------------------------------------------------------ conversions

    def to_arrow(self) -> pa.Table:
        """An Arrow table: data columns, then ``time`` (uint64) and ``diff`` (int64)."""
        arrays = [*self._columns, pa.array(self._time), pa.array(self._diff)]
        return pa.Table.from_arrays(arrays, names=[*self.column_names, "time", "diff"])

    def to_pandas(self):
        """A pandas DataFrame: data columns, then ``time`` and ``diff``."""
        return self.to_arrow().to_pandas()

    def to_pylist(self) -> list[tuple]:
        """Rows as tuples ``(data..., time, diff)`` of Python values."""
        cols = [c.to_pylist() for c in self._columns]
        return [(*vals, int(t), int(d)) for *vals, t, d in zip(*cols, self._time.tolist(), self._diff.tolist())]

    def slice(self, start: int, stop: int) -> Updates:
        """Rows ``[start, stop)`` as a zero-copy batch (consolidated when this one is)."""
        out = Updates(
            {s.name: c.slice(start, max(stop - start, 0)) for s, c in zip(self._schema, self._columns)},
            self._time[start:stop],
            self._diff[start:stop],
            _trusted=True,
        )
        out._cons = self._cons
        return out

    @property
    def consolidated_order(self) -> str | None:
        """The order this batch is known to be consolidated in -- ``"time"`` (sorted by
        ``(time, data)``) or ``"data"``, each ``(data, time)`` once, no zero diff: what
        ``colmz.consolidate`` returned, or a caller declared (:meth:`assume_consolidated`) --
        or ``None`` when not known (it may still be). ``colmz.consolidate`` returns such a
        batch as it is, so consolidating twice costs nothing the second time.

        >>> import colmz
        >>> u = colmz.consolidate(Updates({"k": [2, 1]}, time=[0, 0], diff=[1, 1]))
        >>> u.consolidated_order, colmz.consolidate(u) is u
        ('time', True)
        """
        return self._cons

    def assume_consolidated(self, order: str = "time") -> Updates:
        """This batch, declared consolidated in ``order`` (:attr:`consolidated_order`) on the
        caller's word: for a structure whose output is consolidated by construction (a
        correction buffer's read). A wrong declaration gives wrong answers downstream."""
        if order not in ("time", "data"):
            raise ValueError(f"order must be 'time' or 'data', got {order!r}")
        self._cons = order
        return self

    def rename(self, names: Sequence[str]) -> Updates:
        """The same updates with the data columns called ``names`` (in order; zero-copy,
        keeping what is known of the batch: its encoding, its consolidation).

        >>> Updates({"k": [1]}, time=[0], diff=[1]).rename(["key"]).column_names
        ['key']
        """
        names = list(names)
        if len(names) != len(self._schema):
            raise ValueError(f"rename gives {len(names)} names for {len(self._schema)} columns")
        if len(set(names)) != len(names) or any(n in ("time", "diff") for n in names):
            raise ValueError(f"rename gives a repeated or reserved name: {names}")
        schema = tuple(ColumnSpec(n, s.type) for n, s in zip(names, self._schema))
        out = Updates._from_parts(self._cols, schema, self._time, self._diff, self._enc)
        out._cons = self._cons
        return out

    def take(self, rows) -> Updates:
        """The rows at positions ``rows`` (integers, in the order given; repeats allowed).

        >>> u = Updates({"k": ["a", "b", "c"]}, time=[1, 2, 3], diff=[1, 1, -1])
        >>> u.take([2, 0]).to_pylist()
        [('c', 3, -1), ('a', 1, 1)]
        """
        idx = np.asarray(rows)
        if idx.dtype.kind not in "iu" and not (idx.size == 0 and idx.dtype.kind == "f"):
            raise TypeError(f"rows must be integer positions, got an array of {idx.dtype}")
        idx = idx.astype(np.int64, copy=False).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            bad = idx[(idx < 0) | (idx >= len(self))][0]
            raise IndexError(f"rows holds position {int(bad)}, outside a batch of {len(self)} updates")
        arrow = pa.array(idx)
        return Updates._from_parts([c.take(arrow) for c in self._columns], self._schema, self._time[idx],
                                   self._diff[idx])

    def negated(self) -> Updates:
        """The same updates with every diff negated (``OverflowError`` for ``-2**63``)."""
        if self._enc is not None:
            enc = self._enc.negated()
            out = Updates._from_parts(self._cols, self._schema, self._time, enc.diff, enc)
        else:
            out = Updates._from_parts(self._columns, self._schema, self._time, negated_diff(self._diff))
        out._cons = self._cons  # the same rows in the same order, no diff zero
        return out

    # ------------------------------------------------------------------ encoding

    def encode(self) -> Encoded:
        """The batch with its data encoded as order-preserving key words.

        Batches that colmz decoded from its own encoding (what structures hand out) keep that
        encoding, so feeding them back -- the sink's ``insert_negated`` -- does not re-encode.
        """
        enc = self._enc
        if enc is None:
            cols = self._columns
            keys = plain_int_words(cols)
            if keys is None:
                keys, layout = encode_columns(cols, _kinds(self._schema), n=len(self._time))
            else:
                layout = (1, 0)
            # Not kept: a caller holding a large batch would hold its encoding twice over.
            enc = Encoded(keys, self._time, self._diff, layout)
        return enc

    @classmethod
    def decode(cls, enc: Encoded, schema: Sequence[ColumnSpec]) -> Updates:
        """Inverse of :meth:`encode` for a batch of the given schema."""
        cols = decode_columns(enc.keys, enc.layout, schema)
        return cls._from_parts(cols, tuple(schema), enc.time, enc.diff, enc)

    # ------------------------------------------------------------------ display

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Updates):
            return NotImplemented
        return (
            [s.name for s in self._schema] == [s.name for s in other._schema]
            and np.array_equal(self._time, other._time)
            and np.array_equal(self._diff, other._diff)
            and all(_same_values(a, b) for a, b in zip(self._columns, other._columns))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        n = len(self)
        cols = ", ".join(f"{s.name}: {s.type}" for s in self._schema)
        head = f"Updates({n} update{'s' if n != 1 else ''}; {cols}{', ' if cols else ''}time: uint64, diff: int64)"
        if n == 0:
            return head
        rows = self.slice(0, 5).to_pylist()
        lines = [head] + [f"  {r}" for r in rows]
        if n > 5:
            lines.append(f"  ... {n - 5} more")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from colmz.display import updates_html

        return updates_html(self)


def _same_values(a: pa.Array, b: pa.Array) -> bool:
    # colmz's equality: same type, and equal values with NULL = NULL, NaN = NaN, -0.0 = 0.0
    # (Arrow's ``equals`` says NaN != NaN; ``to_pylist`` equality says 1 == 1.0 across types).
    if a.type != b.type:
        return False
    if a.equals(b):
        return True
    ka, la = encode_columns([a])
    kb, lb = encode_columns([b])
    target = unify_layouts(la, lb)
    return np.array_equal(pad_keys(ka, la, target), pad_keys(kb, lb, target))


def _index_as_columns(df, preserve_index: bool | None):
    """``df`` with the index levels that are data moved into leading columns."""
    import pandas as pd

    index = df.index
    names = list(index.names)
    if preserve_index is False:
        return df
    if preserve_index is None:
        if isinstance(index, pd.RangeIndex) and index.name is None:
            return df  # row numbers, not data
        if any(n is None for n in names):
            raise ValueError(
                f"the DataFrame's index ({type(index).__name__}, levels {names}) is not a plain "
                "RangeIndex and has unnamed levels: colmz does not guess whether it is data. "
                "Pass preserve_index=False to drop it, preserve_index=True to keep it as data "
                "columns, or name it (df.rename_axis(...))"
            )
    labels = [f"__index_level_{i}__" if n is None else n for i, n in enumerate(names)]
    clash = [n for n in labels if n in df.columns]
    if clash:
        raise ValueError(f"index level(s) {clash} have the same name as a column of the DataFrame")
    return df.rename_axis(labels).reset_index()


def _schema_types(schema, names: Sequence[str]) -> dict[str, pa.DataType]:
    """The caller's ``schema`` as ``{column: type}``, checked against the data columns."""
    if schema is None:
        return {}
    specs = _specs(schema)
    types = {}
    for spec in specs:
        if not isinstance(spec, ColumnSpec):
            raise TypeError(f"schema must map column names to Arrow types, got {spec!r}")
        if not isinstance(spec.type, pa.DataType):
            raise TypeError(f"schema gives column {spec.name!r} the type {spec.type!r}, not an Arrow type")
        if spec.name not in names:
            raise ValueError(f"schema names column {spec.name!r}, which is not a data column; data columns are {list(names)}")
        kind_of(spec.type, spec.name)
        types[spec.name] = spec.type
    return types


#: An empty Arrow array per type (immutable, so shared): :meth:`Updates.empty` is made at
#: every step that changes nothing, and ``pa.array([], type)`` costs microseconds each time.
_EMPTY_ARRAYS: dict[pa.DataType, pa.Array] = {}


def _empty_array(t: pa.DataType) -> pa.Array:
    a = _EMPTY_ARRAYS.get(t)
    if a is None:
        a = pa.array([], t)
        if len(_EMPTY_ARRAYS) < 1024:  # bounded: types made at run time (decimals, timestamps) are many
            _EMPTY_ARRAYS[t] = a
    return a


def _specs(schema) -> tuple[ColumnSpec, ...]:
    if isinstance(schema, Mapping):
        return tuple(ColumnSpec(n, t) for n, t in schema.items())
    return tuple(schema)


# Kinds per schema: ``ColumnSpec.kind`` classifies the Arrow type on every call, and a
# structure encodes many batches of one schema.
_KINDS: dict[tuple[ColumnSpec, ...], list[str]] = {}


def _kinds(schema: tuple[ColumnSpec, ...]) -> list[str]:
    kinds = _KINDS.get(schema)
    if kinds is None:
        kinds = [s.kind for s in schema]
        if len(_KINDS) < 1024:
            _KINDS[schema] = kinds
    return kinds


def held_columns(updates: Updates) -> tuple[pa.Array, ...]:
    """The data columns ``updates`` holds, as they are (no copies; a batch a structure handed
    out is decoded now if it was not yet).

    With :attr:`Updates.time`, :attr:`Updates.diff`, :func:`cached_encoding`,
    :meth:`Updates.from_checked` and :meth:`Updates.from_encoded`, the one door through which
    colmz's own modules (``colmz.ops``) take a batch apart and build one, so none of them
    reads the batch's fields.

    >>> held_columns(Updates({"k": [1, 2]}, time=[0, 0], diff=[1, 1]))[0].to_pylist()
    [1, 2]
    """
    return updates._columns


def cached_encoding(updates: Updates) -> Encoded | None:
    """The encoding a batch was built from (what structures hand out), else ``None``.

    Unlike :meth:`Updates.encode`, never encodes.

    >>> u = Updates({"k": [1]}, time=[5], diff=[2])
    >>> cached_encoding(u) is None, cached_encoding(Updates.decode(u.encode(), u.schema)) is None
    (True, False)
    """
    return updates._enc


def negated_diff(diff: np.ndarray) -> np.ndarray:
    """``-diff`` as a new array; ``OverflowError`` when it holds ``-2**63``.

    The one place colmz negates diffs (:meth:`Encoded.negated`, :meth:`Updates.negated`): the
    negation of ``-2**63`` leaves ``int64`` and would wrap around silently.

    >>> negated_diff(np.array([1, -2])).tolist()
    [-1, 2]
    """
    check_negatable(diff)
    return -diff


def check_negatable(diff: np.ndarray) -> None:
    """``OverflowError`` when ``diff`` holds ``-2**63``, whose negation leaves ``int64``.

    >>> check_negatable(np.array([-(2**63)]))
    Traceback (most recent call last):
    ...
    OverflowError: diff -2**63 cannot be negated within int64
    """
    if len(diff) and diff.min() == _I64_MIN:
        raise OverflowError("diff -2**63 cannot be negated within int64")


def plain_int_words(columns: Sequence[pa.Array]) -> np.ndarray | None:
    """The key words of a lone 64-bit integer column without NULLs, else ``None``.

    The common key of a sink batch, encoded with two numpy calls over
    :func:`colmz.order.raw_words` (which knows the word of each value) instead of the general
    :func:`colmz.order.encode_columns`, whose per-call set-up dominates a batch of a few rows.
    The layout is ``(1, 0)``.
    """
    raw = raw_words(columns)
    if raw is None:
        return None
    words, flips = raw
    return np.bitwise_xor(words, flips)


def concat_encoded(parts: Iterable[Encoded]) -> Encoded:
    """One encoded batch from several (layouts harmonised by padding)."""
    parts = list(parts)
    target = parts[0].layout
    if any(p.layout != target for p in parts):
        target = unify_layouts(*(p.layout for p in parts))
        parts = [p.padded(target) for p in parts]
    return Encoded(
        np.concatenate([p.keys for p in parts]),
        np.concatenate([p.time for p in parts]),
        np.concatenate([p.diff for p in parts]),
        target,
    )
