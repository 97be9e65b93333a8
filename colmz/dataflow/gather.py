"""Reading the rows some keys hold in a :class:`~colmz.dataflow.KeyedArrangement` as words.

Design
------
``KeyedArrangement.lookup_words`` decodes what it finds into Arrow columns. An operator that
only sorts, counts and compares the rows it reads (``TopK``'s per-group windows) does all of
that on the arrangement's own order-preserving words (``colmz.order``) and decodes just the
rows it outputs: :func:`gather_words` binary-searches every run the arrangement holds
for each query key's range (``KeyedArrangement.ranges_words``, the search the
arrangement's own lookup makes) and returns, per
row found, the position of its query key, its payload words padded to one layout and its
diff -- a row may sit in several runs with diffs that cancel: the caller consolidates.

:func:`subset`, :func:`concat_found` and :func:`difference` combine such reads with an
operator's own rows (a delta's, a ranking's) and find ``new − old`` of two of them, still as
words: sorted by (query position, payload words) and consolidated.

Work counters: the arrangement's ``keys_searched`` and ``rows_found`` count this read as they
count its own lookups.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from colmz.dataflow.keyed import KeyedArrangement, consolidate_words, expand_ranges
from colmz.order import Layout, pad_keys, unify_layouts

__all__ = ["Found", "concat_found", "difference", "gather_words", "subset"]


class Found(NamedTuple):
    """Rows a :func:`gather_words` read: the query key's position per row, the payload words
    (``vals``, laid out as ``val_layout``) and the diffs; not consolidated."""

    query: np.ndarray
    vals: np.ndarray
    val_layout: Layout
    diff: np.ndarray


def gather_words(arranged: KeyedArrangement, q: np.ndarray, layout: Layout, empty_layout: Layout) -> Found:
    """The rows of ``arranged`` under each key of ``q`` (encoded keys laid out as
    ``layout``), as words; ``empty_layout`` is the payload layout when nothing is found.

    >>> import colmz, pyarrow as pa
    >>> from colmz.order import encode_columns
    >>> a = KeyedArrangement({"k": pa.int64(), "v": pa.int64()}, ["k"])
    >>> a.insert(1, colmz.Updates({"k": [1, 2, 1], "v": [5, 6, 7]}, time=[1] * 3, diff=[1, 1, 2]))
    >>> q, ql = encode_columns([pa.array([1])])
    >>> f = gather_words(a, q, ql, (1, 0))
    >>> f.query.tolist(), f.diff.tolist()
    ([0, 0], [1, 2])
    """
    qs, vals, vls, diffs = [], [], [], []
    for run, lo, hi in arranged.ranges_words(q, layout):
        found, rows = expand_ranges(lo, hi)
        if not len(rows):
            continue
        qs.append(found)
        vals.append(run.vals[rows])
        vls.append(run.val_layout)
        diffs.append(run.diff[rows])
    if not qs:
        return Found(np.zeros(0, np.int64), np.zeros((0, sum(empty_layout)), np.uint64), empty_layout,
                     np.zeros(0, np.int64))
    vl = unify_layouts(*vls)
    out = np.concatenate([pad_keys(v, a, vl) for v, a in zip(vals, vls)])
    diff = np.concatenate(diffs).astype(np.int64, copy=False)  # (runs store narrowed diffs)
    arranged.rows_found += len(diff)
    return Found(np.concatenate(qs), out, vl, diff)


def subset(found: Found, rows) -> Found:
    """The rows ``rows`` (a mask or positions) of ``found``."""
    return Found(found.query[rows], found.vals[rows], found.val_layout, found.diff[rows])


def concat_found(parts) -> Found:
    """Several :class:`Found` (query positions of the same keys) as one, payloads padded to
    one layout (``parts`` non-empty)."""
    parts = list(parts)
    vl = unify_layouts(*(p.val_layout for p in parts))
    return Found(np.concatenate([p.query for p in parts]),
                 np.concatenate([pad_keys(p.vals, p.val_layout, vl) for p in parts]), vl,
                 np.concatenate([np.asarray(p.diff, np.int64) for p in parts]))


def difference(old: Found, new: Found) -> Found:
    """``new − old`` consolidated: rows sorted by (query position, payload words), each once,
    no zero diff.

    >>> a = Found(np.array([0, 1]), np.array([[5], [6]], np.uint64), (1, 0), np.array([1, 1]))
    >>> b = Found(np.array([1, 1]), np.array([[6], [7]], np.uint64), (1, 0), np.array([1, 2]))
    >>> d = difference(a, b)
    >>> d.query.tolist(), d.vals.ravel().tolist(), d.diff.tolist()
    ([0, 1], [5, 7], [-1, 2])
    """
    both = concat_found([old, new])
    diff = np.concatenate([-np.asarray(old.diff, np.int64), np.asarray(new.diff, np.int64)])
    words, diff = consolidate_words(np.hstack([both.query.astype(np.uint64)[:, None], both.vals]), diff)
    return Found(words[:, 0].astype(np.int64), np.ascontiguousarray(words[:, 1:]), both.val_layout, diff)
