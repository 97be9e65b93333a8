"""Sort kernels (``colmz.kernels.sort``) against their pure-Python references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.consolidate import read_only
from colmz.kernels.sort import (
    RADIX_MSD_MIN,
    argsort_words,
    argsort_words_ref,
    counted_digits,
    field_ranges,
    field_ranges_ref,
    pack,
    pack_one_with_diff,
    pack_one_with_diff_ref,
    pack_ref,
    plan_packing,
    radix_digits,
    radix_scatter_top,
    radix_sort_buckets,
    radix_sort_pairs,
    radix_sort_pairs_ref,
    radix_sort_words,
    radix_sort_words_ref,
    radix_work_shape,
    unpack,
    unpack_ref,
)

MAX = 2**64 - 1
EXAMPLES = 80


def u64(draw_values) -> np.ndarray:
    return np.array(draw_values, np.uint64)


@st.composite
def words_in_range(draw, max_bits=None):
    """A uint64 value strategy: small, huge, or within a random bit span above a base."""
    bits = draw(st.integers(0, 64)) if max_bits is None else draw(st.integers(0, max_bits))
    base = draw(st.sampled_from([0, 1, 2**63, MAX - (2**bits - 1)]))
    base = min(base, MAX - (2**bits - 1))
    edges = [base, base + 2**bits - 1]
    return st.sampled_from(edges) | st.integers(base, base + 2**bits - 1)


@st.composite
def key_arrays(draw, max_rows=40, max_width=3):
    """``(keys (n, w), time (n,), diff (n,))`` with per-field value spans of any width."""
    n = draw(st.integers(0, max_rows))
    w = draw(st.integers(0, max_width))
    cols = []
    for _ in range(w + 1):
        values = draw(words_in_range())
        pool = draw(st.lists(values, min_size=1, max_size=6))
        cols.append(draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)))
    keys = np.array(cols[:w], np.uint64).T.reshape(n, w).copy()
    time = u64(cols[w])
    diff = np.array(
        draw(
            st.lists(
                st.integers(-3, 3) | st.sampled_from([-(2**63), 2**63 - 1, 2**40]),
                min_size=n,
                max_size=n,
            )
        ),
        np.int64,
    )
    return keys, time, diff


# ----------------------------------------------------------------------------- ranges


def zero_flips(w):
    return np.zeros(w, np.uint64)


@settings(max_examples=EXAMPLES)
@given(key_arrays(), st.booleans())
def test_field_ranges_matches_reference(arrays, flipped):
    keys, time, diff = arrays
    flips = np.array([2**63, 1, MAX][:keys.shape[1]], np.uint64) if flipped else zero_flips(keys.shape[1])
    mins, maxs, dmin, dmax = field_ranges(keys, time, diff, flips)
    rmins, rmaxs, rdmin, rdmax = field_ranges_ref(keys, time, diff, flips)
    np.testing.assert_array_equal(mins, rmins)
    np.testing.assert_array_equal(maxs, rmaxs)
    assert (int(dmin), int(dmax)) == (rdmin, rdmax)


def test_field_ranges_empty():
    mins, maxs, dmin, dmax = field_ranges(
        np.empty((0, 2), np.uint64), np.empty(0, np.uint64), np.empty(0, np.int64), zero_flips(2)
    )
    assert (mins > maxs).all() and (int(dmin), int(dmax)) == (0, 0)


# ----------------------------------------------------------------------------- packing


def _plan(keys, time, diff, since, significance):
    w = keys.shape[1]
    mins, maxs, _, _ = field_ranges(keys, time, diff, zero_flips(w))
    mins[w] = max(int(mins[w]), since)
    maxs[w] = max(int(maxs[w]), since)
    return plan_packing(mins, maxs, significance)


@settings(max_examples=EXAMPLES)
@given(key_arrays(), st.sampled_from([0, 1, 2**40, MAX]), st.randoms(use_true_random=False))
def test_pack_unpack_match_references_and_preserve_order(arrays, since, rnd):
    keys, time, diff = arrays
    n, w = keys.shape
    sig = list(range(w + 1))
    rnd.shuffle(sig)
    since = min(since, int(time.max())) if n and rnd.random() < 0.5 else since
    plan = _plan(keys, time, diff, since, sig)
    # layout: fields in significance order, none straddles a word, widths cover the spans
    assert list(plan.src) == [f for f in sig if f in set(plan.src.tolist())]
    for sh, mk in zip(plan.shift.tolist(), plan.mask.tolist()):
        assert sh + mk.bit_length() <= 64
    out = np.empty((n, plan.n_words), np.uint64)
    pack(keys, time, np.uint64(since), plan.src, plan.mins, plan.word, plan.shift, out)
    np.testing.assert_array_equal(out, pack_ref(keys, time, since, plan))
    k2 = np.empty_like(keys)
    t2 = np.empty_like(time)
    unpack(out, plan.src, plan.mins, plan.word, plan.shift, plan.mask, plan.const_src, plan.const_val, k2, t2)
    np.testing.assert_array_equal(k2, keys)
    np.testing.assert_array_equal(t2, np.maximum(time, np.uint64(since)))
    rk, rt = unpack_ref(out, plan, w)
    np.testing.assert_array_equal(rk, keys)
    np.testing.assert_array_equal(rt, t2)
    # the packed words' lexicographic order is the fields' order in significance order
    fields = [[int(x) for x in keys[i]] + [int(t2[i])] for i in range(n)]
    ref = [tuple(row[f] for f in sig) for row in fields]
    packed = [tuple(int(x) for x in r) for r in out]
    for i in range(n):
        for j in range(n):
            assert (packed[i] < packed[j]) == (ref[i] < ref[j])
            assert (packed[i] == packed[j]) == (ref[i] == ref[j])


def test_plan_packing_examples():
    # constant fields take no bits; an empty input (min > max) is constant 0
    p = plan_packing(np.array([5, 5], np.uint64), np.array([5, 5], np.uint64), [1, 0])
    assert p.n_words == 0 and p.const_src.tolist() == [1, 0] and p.const_val.tolist() == [5, 5]
    p = plan_packing(np.array([MAX, MAX], np.uint64), np.array([0, 0], np.uint64), [0, 1])
    assert p.n_words == 0 and p.const_val.tolist() == [0, 0]
    # a 64-bit field fills a word; the next field starts a new word
    p = plan_packing(np.array([0, 0, 0], np.uint64), np.array([MAX, 1, 2**63], np.uint64), [0, 1, 2])
    assert p.n_words == 3 and p.word.tolist() == [0, 1, 2]
    # fields that fit share a word, most significant in the high bits
    p = plan_packing(np.array([0, 0], np.uint64), np.array([255, 15], np.uint64), [1, 0])
    assert p.n_words == 1 and p.src.tolist() == [1, 0] and p.shift.tolist() == [8, 0]
    assert "PackPlan(words=1" in repr(p)


# ----------------------------------------------------------------------------- radix sorts


@settings(max_examples=EXAMPLES)
@given(st.data())
def test_radix_sort_pairs_matches_reference(data):
    values = data.draw(words_in_range())
    keys = u64(data.draw(st.lists(values, max_size=300)))
    n = len(keys)
    vals = np.arange(n, dtype=np.int64)  # payload = original position: checks stability
    ek, ev = radix_sort_pairs_ref(keys.copy(), vals.copy())
    k, v = keys.copy(), vals.copy()
    tk, tv = np.empty_like(k), np.empty_like(v)
    in_tmp = radix_sort_pairs(k, v, tk, tv)
    rk, rv = (tk, tv) if in_tmp else (k, v)
    np.testing.assert_array_equal(rk, ek)
    np.testing.assert_array_equal(rv, ev)


@pytest.mark.parametrize("msd_min", [RADIX_MSD_MIN, 8], ids=["lsd", "msd-first"])
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_pack_one_with_diff_and_radix_sort_words(msd_min, data):
    """The radix sort's top-digit-first path off (inputs here are small) and on."""
    n = data.draw(st.integers(0, 200))
    span = data.draw(st.integers(0, 40))
    flip = data.draw(st.sampled_from([0, 2**63]))
    keys = u64(data.draw(st.lists(st.integers(0, 2**span - 1), min_size=n, max_size=n))).reshape(n, 1)
    keys ^= np.uint64(flip)
    flips = np.array([flip], np.uint64)
    time = u64(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)))
    diff = np.array(data.draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n)), np.int64)
    since = data.draw(st.integers(0, 6))
    w = 1
    mins, maxs, _, _ = field_ranges(keys, time, diff, flips)
    mins[w] = max(int(mins[w]), since)
    maxs[w] = max(int(maxs[w]), since)
    plan = plan_packing(mins, maxs, [1, 0])
    key_bits = sum(int(x).bit_length() for x in plan.mask)
    dmin = int(diff.min()) if n else 0
    diff_bits = ((int(diff.max()) - dmin) if n else 0).bit_length()
    if plan.n_words != 1:
        return  # the caller only takes this path for one packed word
    digits, digit_bits = data.draw(st.sampled_from([radix_digits(key_bits), radix_digits(key_bits, 8),
                                                    radix_digits(key_bits, 3)]))
    words = np.empty(n, np.uint64)
    hist = np.zeros((digits, 1 << digit_bits), np.int64)
    # Read-only inputs, as sort_consolidate and merge_runs pass them: the signature the
    # warm-up compiled, not a second, writable one.
    keys, time, diff = read_only(keys), read_only(time), read_only(diff)
    pack_one_with_diff(
        keys, time, diff, np.uint64(since), plan.src, plan.mins, plan.shift, flips, np.int64(dmin),
        diff_bits, words, hist, np.int64(msd_min),
    )
    ref_words, ref_hist = pack_one_with_diff_ref(keys, time, diff, since, plan, flips, dmin, diff_bits,
                                                 digits, digit_bits)
    np.testing.assert_array_equal(words, ref_words)
    # The digits the sort reads are counted (all of them, or the top one when it goes top
    # digit first); the others stay zero.
    first = counted_digits(n, digits, msd_min)
    assert first == (digits - 1 if n >= msd_min and digits >= 2 else 0)
    np.testing.assert_array_equal(hist[first:], ref_hist[first:])
    assert not hist[:first].any()
    tmp = np.empty_like(words)
    out = tmp if radix_sort_words(words, tmp, diff_bits, hist, msd_min) else words
    # stable by the bits at and above diff_bits
    np.testing.assert_array_equal(out, radix_sort_words_ref(ref_words, diff_bits))


def test_radix_sort_words_msd_first_large():
    """Top digit first, then each bucket: every bucket size (0, 1, many) and both parities
    of the remaining passes."""
    rng = np.random.default_rng(7)
    for bits, digit_bits, lo in [(33, 11, 2), (22, 11, 0), (30, 10, 5), (17, 9, 1)]:
        n = 20000
        keys = rng.integers(0, 2**bits, n, dtype=np.uint64) << np.uint64(lo)
        keys[:100] = keys[0]  # one crowded bucket
        digits = -(-bits // digit_bits)
        hist = np.zeros((digits, 1 << digit_bits), np.int64)
        for d in range(digits):
            np.add.at(hist[d], (keys >> np.uint64(lo + digit_bits * d)) & np.uint64((1 << digit_bits) - 1), 1)
        expected = keys[np.argsort(keys >> np.uint64(lo), kind="stable")]
        words, tmp = keys.copy(), np.empty_like(keys)
        out = tmp if radix_sort_words(words, tmp, lo, hist, 1000) else words
        np.testing.assert_array_equal(out, expected)


def test_radix_sort_buckets_in_two_ranges_is_the_whole_sort():
    """After the top digit's scatter, buckets [0, mid) and [mid, nb) sorted by separate
    calls, each with its own work space (what colmz.first_column does on two threads),
    give the whole sort, for every split point kind: empty, inside, at the end."""
    rng = np.random.default_rng(13)
    for bits, digit_bits, lo in [(33, 11, 2), (22, 11, 0), (30, 10, 5)]:
        n = 20000
        keys = rng.integers(0, 2**bits, n, dtype=np.uint64) << np.uint64(lo)
        digits = -(-bits // digit_bits)
        hist = np.zeros((digits, 1 << digit_bits), np.int64)
        np.add.at(hist[-1], keys >> np.uint64(lo + digit_bits * (digits - 1)), 1)
        expected = keys[np.argsort(keys >> np.uint64(lo), kind="stable")]
        nb = 1 << digit_bits
        for mid in (0, nb // 3, nb):
            words, tmp = keys.copy(), np.empty_like(keys)
            work = np.empty(radix_work_shape(digits, nb), np.int64)
            other = np.empty_like(work)
            radix_scatter_top(words, tmp, np.int64(lo), hist, work)
            radix_sort_buckets(words, tmp, np.int64(lo), hist, work[2], 0, mid, other)
            in_tmp = radix_sort_buckets(words, tmp, np.int64(lo), hist, work[2], mid, nb, work)
            assert in_tmp == (digits == 1)
            out = tmp if in_tmp else words
            np.testing.assert_array_equal(out, expected)


def test_radix_sort_words_msd_first_skips_digits_constant_within_a_bucket():
    """Buckets of the top digit whose keys share a lower digit skip its pass, with an odd and
    an even number of remaining digits; mixed with buckets that take every pass, tiny ones
    and empty ones."""
    rng = np.random.default_rng(11)
    for bits, digit_bits, lo in [(33, 11, 2), (22, 11, 0), (27, 9, 3)]:
        digits = -(-bits // digit_bits)
        n = 60000
        keys = rng.integers(0, 2**(bits - 3), n, dtype=np.uint64)  # top buckets of ~60 keys
        top = keys >> np.uint64(digit_bits * (digits - 1))
        low = np.uint64((1 << digit_bits) - 1)
        keys[top % 3 == 0] &= ~low  # digit 0 constant within these buckets
        keys[top % 3 == 1] |= low << np.uint64(digit_bits) if digits > 2 else low
        keys[:40] = keys[0] & ~low  # a crowded bucket constant in every lower digit
        keys[40:43] = np.uint64(1 << (bits - 1)) + np.arange(3, dtype=np.uint64)  # a tiny bucket
        keys <<= np.uint64(lo)
        keys |= rng.integers(0, 1 << lo, n, dtype=np.uint64) if lo else np.uint64(0)
        hist = np.zeros((digits, 1 << digit_bits), np.int64)
        np.add.at(hist[-1], (keys >> np.uint64(lo + digit_bits * (digits - 1))), 1)
        expected = keys[np.argsort(keys >> np.uint64(lo), kind="stable")]
        words, tmp = keys.copy(), np.empty_like(keys)
        out = tmp if radix_sort_words(words, tmp, lo, hist, 1000) else words
        np.testing.assert_array_equal(out, expected)


def test_radix_sort_words_msd_first_crowded_sub_buckets():
    """A bucket's second pass leaves sub-buckets of about one key for random keys; keys that
    share more top bits crowd a sub-bucket (33, 100, 5,000 keys differing only below the
    second digit, some of them equal), which is then sorted by the bits left, with digits
    sized to it -- beside buckets of random keys, with an odd and an even number of digits."""
    rng = np.random.default_rng(17)
    for bits, digit_bits, lo in [(33, 11, 2), (44, 11, 20), (27, 9, 0)]:
        digits = -(-bits // digit_bits)
        n = 40000
        keys = rng.integers(0, 2**bits, n, dtype=np.uint64)
        below = bits - digit_bits - 6  # bits under the top digit and a 6-bit second digit
        at = 0
        for size in (33, 100, 5000):
            head = rng.integers(0, 2**(bits - below), dtype=np.uint64) << np.uint64(below)
            tail = rng.integers(0, 2**below, size, dtype=np.uint64)
            tail[: size // 4] = tail[0]  # equal keys among them: the sort must keep row order
            keys[at:at + size] = head | tail
            at += size
        keys = keys << np.uint64(lo) | (np.arange(n, dtype=np.uint64) & np.uint64((1 << lo) - 1))
        hist = np.zeros((digits, 1 << digit_bits), np.int64)
        np.add.at(hist[-1], keys >> np.uint64(lo + digit_bits * (digits - 1)), 1)
        expected = keys[np.argsort(keys >> np.uint64(lo), kind="stable")]
        words, tmp = keys.copy(), np.empty_like(keys)
        out = tmp if radix_sort_words(words, tmp, lo, hist, 1000) else words
        np.testing.assert_array_equal(out, expected)


def test_radix_digits():
    for bits in range(0, 65):
        digits, width = radix_digits(bits)
        assert digits * width >= bits and width <= 11 and (digits == 0 or (digits - 1) * width < bits)


@settings(max_examples=EXAMPLES)
@given(st.data())
def test_argsort_words_matches_reference(data):
    m = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(0, 60))
    cols = []
    for _ in range(m):
        values = data.draw(words_in_range())
        pool = data.draw(st.lists(values, min_size=1, max_size=4))
        cols.append(data.draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)))
    words = np.array(cols, np.uint64).T.reshape(n, m).copy()
    perm = argsort_words(words)
    np.testing.assert_array_equal(perm, argsort_words_ref(words))


@pytest.mark.parametrize("n", [0, 1, 2])
def test_tiny_inputs(n):
    k = np.arange(n, dtype=np.uint64)[::-1].copy()
    v = np.arange(n, dtype=np.int64)
    assert radix_sort_pairs(k, v, np.empty_like(k), np.empty_like(v)) == (n == 2)
    assert argsort_words(k.reshape(n, 1)).tolist() == list(range(n))[::-1]


def test_radix_sort_extremes():
    keys = np.array([MAX, 0, 2**63, MAX, 1, 2**63 - 1, 0], np.uint64)
    vals = np.arange(7, dtype=np.int64)
    tk, tv = np.empty_like(keys), np.empty_like(vals)
    k, v = (tk, tv) if radix_sort_pairs(keys, vals, tk, tv) else (keys, vals)
    assert k.tolist() == [0, 0, 1, 2**63 - 1, 2**63, MAX, MAX]
    assert v.tolist() == [1, 6, 4, 5, 2, 0, 3]
