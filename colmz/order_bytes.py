"""Order bytes: array and interval values as byte strings whose order and equality are colmz's.

Design
------
colmz's row encoding (:mod:`colmz.order`) keeps a string column as 7-byte blocks of its
bytes. An array column (Arrow ``list``/``large_list``, e.g. PostgreSQL's ``array_agg``) is
kept the same way: each array becomes one byte string (:func:`list_to_order_bytes`) and the
string is encoded as a binary column's is, so sorting, consolidating and looking arrays up
are the kernels strings already use. :func:`order_bytes_to_list` is the way back.

The byte string of an array is its elements in order, each a *tag* byte then (for a value)
the element's bytes, and an end tag:

==================  ==============================================================
tag                 meaning
==================  ==============================================================
``0x00``            end of the array
``0x01``            a NULL element (no bytes follow)
``0x02``            a value; its bytes follow
==================  ==============================================================

An element's bytes, by its type's encoding family (:func:`colmz.order.kind_of`): a
fixed-width value its row word, big-endian (8 bytes; a bool 1 byte); a string or binary
value its bytes with every ``0x00`` written ``0x00 0xFF`` and ended by ``0x00 0x01``; an
array its own byte string (nested arrays recurse). Every element's extent is known from its
type, so the string decodes without lengths.

Invariants: two arrays of one type have equal byte strings exactly when they hold equal
elements in the same order, NULL elements included (with colmz's equality of each element:
``NaN = NaN``, ``-0.0 = 0.0``); byte order is a total order on arrays -- element by element,
an array that is a prefix of another first (its end tag is below every other tag), a NULL
element before any value. It is colmz's order, not PostgreSQL's array order (which puts
NULL elements last): native operators never order arrays (ordering goes through SQL).
Encoding and decoding walk the values in Python (arrays are rare as keys; the fixed-width
elements are encoded vectorised).

An interval (Arrow ``month_day_nano_interval``: PostgreSQL's months, days and time apart) is
kept as 24 bytes, three big-endian words (:func:`interval_to_order_bytes`, vectorised):

1. ``Q`` (sign bit flipped) and 2. ``r``, PostgreSQL's comparison value
   ``(months * 30 + days) * DAY + time`` (``interval_cmp_value``) written ``Q * DAY + r``
   with ``0 <= r < DAY`` (``DAY`` = 86,400 s in nanoseconds), so the two words order as the
   value does without 128-bit arithmetic;
3. months then days (32 bits each, sign bits flipped): the written form, which the value
   alone does not determine (``'1 mon'``, ``'30 days'`` and ``'720:00:00'`` are one value).

Invariants: the byte order of intervals is PostgreSQL's order (``interval_cmp``), ties between
different written forms of one value broken by (months, days); the bytes decode to the
interval written (months, days and nanoseconds exactly). Equal bytes mean equal *written
forms*: colmz's keys (consolidation, joins, GROUP BY) tell ``'1 mon'`` from ``'30 days'``,
where PostgreSQL's equality does not; the first :data:`INTERVAL_VALUE_BYTES` bytes hold the
value alone.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from colmz.order import ColumnSpec, decode_columns, encode_columns, kind_of

__all__ = ["DAY_NS", "INTERVAL_BYTES", "INTERVAL_VALUE_BYTES", "interval_to_order_bytes",
           "is_interval_type", "is_list_type", "list_to_order_bytes", "order_bytes_to_interval",
           "order_bytes_to_list"]

_END, _NULL, _VALUE = b"\x00", b"\x01", b"\x02"
_STRING_END = b"\x00\x01"

#: A day in nanoseconds: PostgreSQL compares intervals as if a day were 24 hours and a month 30 days.
DAY_NS = 86_400 * 10**9
#: Bytes of an interval's order bytes, and of its value alone (the comparison value's two words).
INTERVAL_BYTES, INTERVAL_VALUE_BYTES = 24, 16
#: Arrow's month_day_nano_interval layout (little-endian, 16 bytes a value).
_MDN = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanoseconds", "<i8")])
_SIGN64 = np.uint64(1 << 63)
_SIGN32 = np.uint64(1 << 31)


def is_list_type(t: pa.DataType) -> bool:
    """Whether ``t`` is an array type colmz keeps as order bytes (``list``, ``large_list``).

    >>> is_list_type(pa.list_(pa.int64())), is_list_type(pa.string())
    (True, False)
    """
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def is_interval_type(t: pa.DataType) -> bool:
    """Whether ``t`` is the interval type colmz keeps (Arrow ``month_day_nano_interval``).

    >>> is_interval_type(pa.month_day_nano_interval()), is_interval_type(pa.duration("us"))
    (True, False)
    """
    return t == pa.month_day_nano_interval()


def check_element_type(t: pa.DataType, name: str) -> None:
    """Raise ``TypeError`` naming column ``name`` unless ``t``'s elements (at any depth) have an
    encoding family; ``t`` an array type."""
    e = t.value_type
    if is_list_type(e):
        check_element_type(e, name)
    else:
        kind_of(e, name)


def list_to_order_bytes(arr: pa.Array) -> pa.Array:
    """The order bytes of each array of ``arr`` (a ``list``/``large_list`` array) as a
    ``large_binary`` array, NULL where the array is NULL.

    >>> a = list_to_order_bytes(pa.array([[1, None], [], None], pa.list_(pa.int64())))
    >>> [None if v is None else v.hex() for v in a.to_pylist()]  # tag 02, the word of 1, tag 01 (NULL), end 00
    ['0280000000000000010100', '00', None]
    """
    payloads = _list_payloads(arr)
    return pa.array(payloads, pa.large_binary())


def order_bytes_to_list(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """The arrays of type ``t`` whose order bytes are ``arr`` (inverse of
    :func:`list_to_order_bytes`).

    >>> t = pa.list_(pa.string())
    >>> order_bytes_to_list(list_to_order_bytes(pa.array([["a\\x00", None], None], t)), t).to_pylist()
    [['a\\x00', None], None]
    """
    return _decode_lists(arr.to_pylist(), t)


def interval_to_order_bytes(arr: pa.Array) -> pa.Array:
    """The 24 order bytes of each interval of ``arr`` (a ``month_day_nano_interval`` array) as
    a ``large_binary`` array, NULL where the interval is NULL.

    >>> t = pa.month_day_nano_interval()
    >>> a = interval_to_order_bytes(pa.array([(1, 0, 0), (0, 30, 0), (0, 0, 30 * DAY_NS), None], t))
    >>> b = a.to_pylist()
    >>> len({v[:INTERVAL_VALUE_BYTES] for v in b[:3]}), b[3]  # '1 mon' = '30 days' = '720:00:00'
    (1, None)
    >>> b[0] > b[1] > b[2]  # one value: the tie broken by months, then days
    True
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    f = _interval_fields(arr)
    months, days, ns = (f["months"].astype(np.int64), f["days"].astype(np.int64),
                        f["nanoseconds"].astype(np.int64))
    carry, r = np.divmod(ns, DAY_NS)  # ns = carry * DAY + r, 0 <= r < DAY
    q = months * 30 + days + carry
    words = np.empty((n, 3), ">u8")
    words[:, 0] = q.view(np.uint64) ^ _SIGN64
    words[:, 1] = r.view(np.uint64)
    words[:, 2] = (((months.view(np.uint64) ^ _SIGN32) & np.uint64(0xFFFFFFFF)) << np.uint64(32)) \
        | ((days.view(np.uint64) ^ _SIGN32) & np.uint64(0xFFFFFFFF))
    offsets = np.arange(n + 1, dtype=np.int64) * INTERVAL_BYTES
    validity = arr.buffers()[0] if arr.null_count else None
    if validity is not None and arr.offset:
        validity = pa.py_buffer(np.packbits(_valid(arr), bitorder="little"))
    return pa.Array.from_buffers(pa.large_binary(), n, [validity, pa.py_buffer(offsets),
                                 pa.py_buffer(words.tobytes())], null_count=arr.null_count)


def order_bytes_to_interval(arr: pa.Array) -> pa.Array:
    """The intervals whose order bytes are ``arr`` (inverse of :func:`interval_to_order_bytes`).

    >>> t = pa.month_day_nano_interval()
    >>> a = pa.array([(1, -2, 3_000), (0, 0, -DAY_NS - 1), None], t)
    >>> order_bytes_to_interval(interval_to_order_bytes(a)).equals(a)
    True
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    valid = _valid(arr)
    raw = b"".join(b"\x00" * INTERVAL_BYTES if v is None else v for v in arr.to_pylist()) \
        if arr.null_count else _binary_data(arr)
    if len(raw) != n * INTERVAL_BYTES:
        raise ValueError(f"order bytes of intervals hold {len(raw)} bytes for {n} values; "
                         f"expected {INTERVAL_BYTES} each")
    words = np.frombuffer(raw, ">u8").reshape(n, 3).astype(np.uint64)
    q = (words[:, 0] ^ _SIGN64).view(np.int64)
    r = words[:, 1].view(np.int64)
    months = ((words[:, 2] >> np.uint64(32)) ^ _SIGN32).astype(np.uint32).view(np.int32)
    days = ((words[:, 2] & np.uint64(0xFFFFFFFF)) ^ _SIGN32).astype(np.uint32).view(np.int32)
    out = np.empty(n, _MDN)
    out["months"], out["days"] = months, days
    out["nanoseconds"] = (q - months.astype(np.int64) * 30 - days.astype(np.int64)) * DAY_NS + r
    out[~valid] = 0
    mask = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.month_day_nano_interval(), n, [mask, pa.py_buffer(out.tobytes())],
                                 null_count=int((~valid).sum()))


def _interval_fields(arr: pa.Array) -> np.ndarray:
    # arr's (months, days, nanoseconds) as a structured array, zero where NULL.
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(len(arr), _MDN)
    f = np.frombuffer(buf, _MDN, count=len(arr), offset=arr.offset * _MDN.itemsize)
    if arr.null_count:
        f = f.copy()
        f[~_valid(arr)] = 0
    return f


def _binary_data(arr: pa.Array) -> bytes:
    # The concatenated values of a binary array without NULLs.
    if not pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    data = arr.buffers()[2]
    return b"" if data is None else data.to_pybytes()[offsets[0]:offsets[-1]]


# ----------------------------------------------------------------------------- encoding


def _payloads(arr: pa.Array) -> list[bytes | None]:
    # One element's bytes per value of arr (None where NULL), by arr's type.
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = arr.type
    if is_list_type(t):
        return _list_payloads(arr)
    kind = kind_of(t)
    if kind == "bytes":
        return [None if v is None else _escape(v.encode() if isinstance(v, str) else v)
                for v in arr.to_pylist()]
    if kind == "interval":
        return interval_to_order_bytes(arr).to_pylist()
    n = len(arr)
    valid = _valid(arr)
    if kind == "null":
        return [None] * n
    words = encode_columns([arr], [kind], n=n)[0][:, 0]
    if kind == "bool":
        raw = words.astype(np.uint8).tobytes()
        return [raw[i:i + 1] if valid[i] else None for i in range(n)]
    raw = words.astype(">u8").tobytes()
    return [raw[8 * i:8 * i + 8] if valid[i] else None for i in range(n)]


def _list_payloads(arr: pa.Array) -> list[bytes | None]:
    # The order bytes of each array of arr (None where NULL): its elements' payloads tagged.
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    offsets = arr.offsets.to_numpy(zero_copy_only=False)
    values = arr.values
    first, last = int(offsets[0]), int(offsets[-1])
    # only the elements these arrays reach (a slice's child array holds others)
    child = _payloads(values.slice(first, last - first))
    tagged = [_NULL if p is None else _VALUE + p for p in child]
    valid = _valid(arr)
    out: list[bytes | None] = []
    for i in range(len(arr)):
        if not valid[i]:
            out.append(None)
            continue
        out.append(b"".join(tagged[offsets[i] - first:offsets[i + 1] - first]) + _END)
    return out


def _escape(b: bytes) -> bytes:
    return b.replace(b"\x00", b"\x00\xff") + _STRING_END


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)


# ----------------------------------------------------------------------------- decoding


def _extent(buf: bytes, pos: int, t: pa.DataType) -> int:
    # The end of the element of type t whose bytes start at pos.
    if is_list_type(t):
        e = t.value_type
        while True:
            tag = buf[pos]
            pos += 1
            if tag == 0:
                return pos
            if tag == 2:
                pos = _extent(buf, pos, e)
            elif tag != 1:
                raise ValueError(f"order bytes of an array hold the unknown tag {tag}")
    kind = kind_of(t)
    if kind == "bytes":
        while True:
            i = buf.index(0, pos)
            if buf[i + 1] == 1:
                return i + 2
            pos = i + 2
    if kind == "interval":
        return pos + INTERVAL_BYTES
    return pos + (1 if kind == "bool" else 8)


def _decode_lists(rows: list[bytes | None], t: pa.DataType) -> pa.Array:
    # The arrays of type t from their order bytes (None: a NULL array).
    e = t.value_type
    offsets = [0]
    child: list[bytes | None] = []
    for buf in rows:
        if buf is not None:
            pos = 0
            while True:
                tag = buf[pos]
                pos += 1
                if tag == 0:
                    break
                if tag == 1:
                    child.append(None)
                    continue
                end = _extent(buf, pos, e)
                child.append(buf[pos:end])
                pos = end
        offsets.append(len(child))
    values = _decode_values(child, e)
    mask = pa.array([r is None for r in rows], pa.bool_())
    cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    width = pa.int64() if pa.types.is_large_list(t) else pa.int32()
    return cls.from_arrays(pa.array(offsets, width), values, type=t, mask=mask if any(r is None for r in rows) else None)


def _decode_values(payloads: list[bytes | None], t: pa.DataType) -> pa.Array:
    # The elements of type t from their bytes (None: a NULL element).
    if is_list_type(t):
        return _decode_lists(payloads, t)
    kind = kind_of(t)
    n = len(payloads)
    if kind == "null":
        return pa.nulls(n, t)
    if kind == "bytes":
        values = [None if p is None else p[:-2].replace(b"\x00\xff", b"\x00") for p in payloads]
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return pa.array([None if v is None else v.decode() for v in values], t)
        return pa.array(values, t)
    if kind == "interval":
        return order_bytes_to_interval(pa.array(payloads, pa.large_binary()))
    size = 1 if kind == "bool" else 8
    nulls = np.array([p is None for p in payloads], bool)
    raw = b"".join(b"\x00" * size if p is None else p for p in payloads)
    words = np.frombuffer(raw, np.uint8 if size == 1 else ">u8").astype(np.uint64)
    keys = np.stack([words, nulls.astype(np.uint64)], axis=1) if n else np.zeros((0, 2), np.uint64)
    return decode_columns(keys, (1, 1), [ColumnSpec("element", t)])[0]
