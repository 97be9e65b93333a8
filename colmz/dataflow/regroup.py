"""What the per-group operators share: finding a delta's affected groups and reading back
the rows an arrangement holds for them, consolidated.

Design
------
``MinMaxReduce`` and ``TopK`` recompute each group a delta touches from the input arranged by
the group key (Materialize's basic plans re-reduce the affected keys the same way): work is
proportional to the affected groups' rows, never to the input. The rows of a group may sit in
several runs of the arrangement with diffs that cancel; :func:`group_rows` consolidates them
with ``colmz.consolidate`` (sorted by group, then by colmz's total order on rows) and refuses
a negative multiplicity -- an input that retracted rows it never held.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from colmz.dataflow.accumulable import sort_groups
from colmz.dataflow.keyed import Matches
from colmz.errors import NegativeMultiplicity
from colmz.ops import consolidate
from colmz.order import Layout, array_from_numpy, encode_columns, kind_of
from colmz.updates import Updates

__all__ = ["affected_groups", "check_orderable", "fresh_name", "group_rows"]


def affected_groups(delta: Updates, group_by, n_or_global: bool) -> tuple[np.ndarray, Layout]:
    """The distinct group keys of ``delta`` as sorted key words (one empty key for a global
    group, when ``n_or_global`` asks for it even with no rows)."""
    kw, kl = encode_columns([delta.column(g) for g in group_by], n=len(delta))
    keys, starts, _ = sort_groups(kw)
    if not len(keys) and n_or_global and not group_by:
        return np.zeros((1, 0), np.uint64), kl
    return np.ascontiguousarray(keys[starts]), kl


def fresh_name(taken) -> str:
    """A column name not in ``taken``."""
    taken = set(taken)
    name = "group"
    while name in taken:
        name = "_" + name
    return name


def group_rows(found: Matches, columns) -> Updates:
    """The rows a lookup found (``columns`` of them), consolidated: a leading ``int64``
    column (named by :func:`fresh_name`) is the key's position in the lookup; sorted by it,
    then by row (colmz's order); every diff positive."""
    name = fresh_name(found.rows.column_names)
    data = {name: array_from_numpy(np.asarray(found.query, np.int64))}
    for c in columns:
        data[c] = found.rows.column(c)
    out = consolidate(Updates(data, found.rows.time, found.rows.diff, copy=False), order="data")
    if len(out) and out.diff.min() < 0:
        i = int(np.argmin(out.diff))
        row = {c: out.column(c)[i].as_py() for c in columns}
        raise NegativeMultiplicity(f"the input retracts rows it does not hold: row {row} would have "
                                   f"multiplicity {int(out.diff[i])}")
    return out


def check_orderable(t: pa.DataType, column: str, what: str) -> None:
    """Refuse ordering a text column natively: its order is the collation's (SQL's business);
    an array column too: colmz's order of arrays (``colmz.order_bytes``) is not PostgreSQL's."""
    kind = kind_of(t, column)
    if kind == "list":
        raise TypeError(f"{what} orders array column {column!r}: PostgreSQL's array order needs SQL "
                        "(colmz's encoding orders arrays otherwise)")
    if kind == "bytes" and "binary" not in str(t):
        raise TypeError(f"{what} orders text column {column!r}: text order depends on the collation "
                        "and needs SQL (absent from native operators)")
