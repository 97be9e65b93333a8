"""Kernels of merged reads (``colmz.kernels.read_merge``) against their references, and the
order words against colmz's order on the values they stand for."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.read_merge import (
    co_rank,
    co_rank_ref,
    consolidate_merged,
    consolidate_merged_ref,
    lead_plan,
    merge_pair,
    merge_word_rows,
    merge_word_rows_ref,
    pack_lead,
    pack_lead_ref,
    string_words,
    string_words_ref,
)
from colmz.order import encode_columns

# bytes from a small alphabet with 0 and 255, so prefixes, embedded zeros and ties are common
BYTES = st.lists(st.sampled_from([0, 97, 98, 255]), max_size=20).map(bytes)


def _words(values, skip, nwords, exact):
    arr = pa.array(values, pa.binary())
    offsets = np.frombuffer(arr.buffers()[1], np.int32, count=len(arr) + 1)
    data = (np.frombuffer(arr.buffers()[2], np.uint8) if arr.buffers()[2] is not None
            else np.zeros(0, np.uint8))
    valid = (np.array([v is not None for v in values], np.uint8) if arr.null_count
             else np.empty(0, np.uint8))
    out = np.zeros((len(values), nwords + 1), np.uint64)
    string_words(offsets, data, valid, np.int64(skip), np.int64(nwords), exact, out, 1)
    return out[:, 1:]


@settings(max_examples=200)
@given(st.lists(BYTES | st.none(), max_size=30), st.integers(1, 3), st.booleans(), st.integers(0, 3))
def test_string_words_match_reference(values, nwords, exact, skip):
    skip = min(skip, min((len(v) for v in values if v is not None), default=0))
    got = _words(values, skip, nwords, exact)
    want = string_words_ref(values, skip, nwords, exact)
    assert got.tolist() == [list(w) for w in want]


@settings(max_examples=200)
@given(st.lists(BYTES, min_size=2, max_size=30), st.integers(1, 3))
def test_words_order_values_as_colmz_does(values, nwords):
    # Prefix words are monotone in colmz's order (encode_columns); exact words, where every
    # value fits, are strictly monotone: equal words are equal values.
    enc = [tuple(int(x) for x in r) for r in encode_columns([pa.array(values, pa.binary())])[0]]
    fits = max(len(v) for v in values) <= 8 * nwords - 1
    for exact in ([True, False] if fits else [False]):
        w = [tuple(int(x) for x in r) for r in _words(values, 0, nwords, exact)]
        for i in range(len(values)):
            for j in range(len(values)):
                if w[i] < w[j]:
                    assert enc[i] < enc[j]
                if exact:
                    assert (w[i] == w[j]) == (enc[i] == enc[j])


@st.composite
def word_runs(draw):
    w = draw(st.integers(1, 3))
    k = draw(st.integers(1, 6))
    value = st.sampled_from([0, 1, 2, 2**63, 2**64 - 1])
    runs = [sorted(tuple(draw(value) for _ in range(w)) for _ in range(draw(st.integers(0, 12))))
            for _ in range(k)]
    lengths = [len(r) for r in runs]
    words = np.array([row for r in runs for row in r], np.uint64).reshape(sum(lengths), w)
    ends = np.cumsum(lengths).astype(np.int64)
    return words, ends - np.array(lengths, np.int64), ends


def _lead_rest(words):
    # The kernels' view of word rows: the lead words (moved by the merge) and the rest, by row.
    return words[:, 0].copy(), words[:, 1:].copy()


#: Row numbers as colmz.arrangement.read's merge carries them: int32 when they fit.
ROW_TYPES = st.sampled_from([np.int32, np.int64])


@settings(max_examples=200)
@given(word_runs(), ROW_TYPES)
def test_merge_word_rows_matches_reference(case, idt):
    words, starts, ends = case
    n = len(words)
    idx = np.arange(n, dtype=idt)
    lead, rest = _lead_rest(words)
    tl, ti = np.empty(n, np.uint64), np.empty(n, idt)
    i = idx.copy()
    if merge_word_rows(lead, i, rest, starts, ends, tl, ti):
        lead, i = tl, ti
    rw, ri = merge_word_rows_ref(words, idx, starts, ends)
    assert i.tolist() == ri.tolist() and lead.tolist() == rw[:, 0].tolist()


@settings(max_examples=200)
@given(word_runs(), st.data(), ROW_TYPES)
def test_co_rank_cuts_a_pairwise_merge_into_two(case, data, idt):
    words, starts, ends = case
    if len(starts) < 2:
        return
    a0, a1, b0, b1 = int(starts[0]), int(ends[0]), int(starts[1]), int(ends[1])
    c = data.draw(st.integers(0, (a1 - a0) + (b1 - b0)))
    n = len(words)
    idx = np.arange(n, dtype=idt)
    lead, rest = _lead_rest(words)
    i = int(co_rank(lead, idx, rest, a0, a1, b0, b1, c))
    assert i == co_rank_ref(words, a0, a1, b0, b1, c)
    # the two halves merged independently equal the whole merge
    whole_l, whole_i = np.zeros(n, np.uint64), np.zeros(n, idt)
    merge_pair(lead, idx, rest, a0, a1, b0, b1, whole_l, whole_i, a0)
    cut_l, cut_i = np.zeros(n, np.uint64), np.zeros(n, idt)
    merge_pair(lead, idx, rest, a0, a0 + i, b0, b0 + c - i, cut_l, cut_i, a0)
    merge_pair(lead, idx, rest, a0 + i, a1, b0 + c - i, b1, cut_l, cut_i, a0 + c)
    assert cut_l.tolist() == whole_l.tolist() and cut_i.tolist() == whole_i.tolist()


@settings(max_examples=200)
@given(word_runs(), st.booleans(), st.data(), ROW_TYPES)
def test_consolidate_merged_matches_reference(case, exact, data, idt):
    words, starts, ends = case
    n = len(words)
    merged, perm = merge_word_rows_ref(words, np.arange(n), starts, ends)
    perm = perm.astype(idt)
    diff = np.array(data.draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n)), np.int64)
    rows, diffs = np.empty(n, np.int64), np.empty(n, np.int64)
    g_lo, g_hi, g_at = (np.empty(n // 2 + 1, np.int64) for _ in range(3))
    _, rest = _lead_rest(words)
    lead = np.ascontiguousarray(merged[:, 0])
    k, g = consolidate_merged(lead, perm, rest, diff, exact, rows, diffs, g_lo, g_hi, g_at)
    r_rows, r_diffs, r_groups = consolidate_merged_ref(merged, perm, diff, exact)
    assert rows[:k].tolist() == r_rows and diffs[:k].tolist() == r_diffs
    assert list(zip(g_lo[:g].tolist(), g_hi[:g].tolist(), g_at[:g].tolist())) == r_groups


def test_consolidate_merged_raises_on_int64_overflow():
    words = np.zeros((2, 1), np.uint64)
    diff = np.array([2**62, 2**62], np.int64)
    rows, diffs = np.empty(2, np.int64), np.empty(2, np.int64)
    g = np.empty(2, np.int64)
    with pytest.raises(OverflowError):
        consolidate_merged(words[:, 0].copy(), np.arange(2), words[:, 1:], diff, True, rows,
                           diffs, g, g, g)
    with pytest.raises(OverflowError):
        consolidate_merged_ref(words, np.arange(2), diff, True)


@settings(max_examples=200)
@given(st.integers(1, 4).flatmap(lambda w: st.lists(
    st.tuples(*[st.sampled_from([0, 1, 3, 2**20, 2**40 + 5, 2**63, 2**64 - 1])] * w),
    min_size=1, max_size=25)))
def test_pack_lead_matches_reference_and_orders_rows(rows):
    words = np.array(rows, np.uint64)
    lows, highs = words.min(axis=0), words.max(axis=0)
    lo, bits, take = lead_plan(lows, highs)
    out = np.empty(len(words), np.uint64)
    pack_lead(words, np.array(lo, np.uint64), np.array(bits, np.int64), np.array(take, np.int64),
              out)
    assert out.tolist() == pack_lead_ref(words, lows, highs)
    # order-preserving: rows sorted by (lead, the columns after the first) are sorted rows
    full = [tuple(r) for r in rows]
    by_lead = sorted(range(len(rows)), key=lambda i: (int(out[i]), full[i][1:]))
    assert [full[i] for i in by_lead] == sorted(full)
