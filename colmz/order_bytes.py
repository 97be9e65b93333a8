"""Order bytes: array values as byte strings whose order and equality are colmz's.

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
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from colmz.order import ColumnSpec, decode_columns, encode_columns, kind_of

__all__ = ["is_list_type", "list_to_order_bytes", "order_bytes_to_list"]

_END, _NULL, _VALUE = b"\x00", b"\x01", b"\x02"
_STRING_END = b"\x00\x01"


def is_list_type(t: pa.DataType) -> bool:
    """Whether ``t`` is an array type colmz keeps as order bytes (``list``, ``large_list``).

    >>> is_list_type(pa.list_(pa.int64())), is_list_type(pa.string())
    (True, False)
    """
    return pa.types.is_list(t) or pa.types.is_large_list(t)


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
    size = 1 if kind == "bool" else 8
    nulls = np.array([p is None for p in payloads], bool)
    raw = b"".join(b"\x00" * size if p is None else p for p in payloads)
    words = np.frombuffer(raw, np.uint8 if size == 1 else ">u8").astype(np.uint64)
    keys = np.stack([words, nulls.astype(np.uint64)], axis=1) if n else np.zeros((0, 2), np.uint64)
    return decode_columns(keys, (1, 1), [ColumnSpec("element", t)])[0]
