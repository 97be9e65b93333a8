"""``KeyedArrangement``: lookups against a multiset model, geometric runs, work counters."""

from __future__ import annotations

from collections import Counter

import dataflow_model as dm
import numpy as np
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.dataflow import KeyedArrangement
from colmz.dataflow.fueled import level_of
from colmz.dataflow.keyed import KeyedMerge, consolidate_words
from colmz.dataflow.state import OperatorState
from colmz.rollback import roll_back, save

SCHEMA = {"k": pa.string(), "j": pa.int64(), "v": pa.float64()}
POOL = [(k, j, v) for k in (None, "", "a", "a" * 15, "b\x00") for j in (None, 1, -(2**63))
        for v in (None, 0.0, float("nan"), 1.5)]


def model_lookup(held: Counter, keys: list[tuple]) -> Counter:
    out: Counter = Counter()
    for qi, key in enumerate(keys):
        for row, d in held.items():
            if row[:2] == key:
                out[(qi, row)] += d
    return Counter({k: v for k, v in out.items() if v})


@settings(max_examples=us.examples(60))
@given(dm.change_steps(POOL, max_steps=8, valid=False), st.lists(st.sampled_from(POOL), max_size=5))
def test_lookup_and_counts_match_the_model(steps, queries):
    a = KeyedArrangement(SCHEMA, key=["k", "j"])
    held: Counter = Counter()
    for t, step in enumerate(steps):
        a.insert(t, dm.batch(SCHEMA, [r for r, _ in step], [d for _, d in step], t))
        for r, d in step:
            held[us.canon_rows(dm.batch(SCHEMA, [r], [1], 0))[0]] += d
        held = Counter({k: v for k, v in held.items() if v})
        keys = [q[:2] for q in queries]
        cols = [pa.array([q[0] for q in queries], pa.string()), pa.array([q[1] for q in queries], pa.int64())]
        found = a.lookup(cols)
        got: Counter = Counter()
        for qi, row, d in zip(found.query.tolist(), us.canon_rows(found.rows), found.rows.diff.tolist()):
            got[(qi, row)] += d
        assert Counter({k: v for k, v in got.items() if v}) == model_lookup(held, keys)
        expect = [sum(d for row, d in held.items() if row[:2] == key) for key in keys]
        assert a.counts(cols).tolist() == expect
        assert dm.counter_of(a.snapshot()) == held
        # Layered runs (colmz.dataflow.fueled): at most two per layer, O(log n) layers.
        assert a.runs <= 2 * len(a.layers) <= 2 * (level_of(a.rows_inserted) + 2)


def test_one_key_lookup_touches_log_n_rows_of_100k():
    n = 100_000
    a = KeyedArrangement({"k": pa.int64(), "v": pa.int64()}, key=["k"])
    rng = np.random.default_rng(1)
    a.insert(0, colmz.Updates({"k": rng.integers(0, n // 10, n), "v": np.arange(n)}, time=np.zeros(n, np.uint64),
                              diff=np.ones(n, np.int64)))
    for t in range(1, 40):  # small inserts: runs stay O(log n)
        a.insert(t, colmz.Updates({"k": [t], "v": [-t]}, time=[t], diff=[1]))
    assert a.runs <= 2 + int(np.log2(n))
    merged, searched, found = a.rows_merged, a.keys_searched, a.rows_found
    m = a.lookup([pa.array([7])])
    assert a.keys_searched - searched == a.runs  # one key searched in each run
    assert a.rows_found - found == len(m.rows) <= 40  # the key's ~10 rows (plus its insert)
    a.insert(40, colmz.Updates({"k": [7], "v": [0]}, time=[40], diff=[1]))
    # One-row insert: amortised merging, but never the 100 k run (it is far more than twice).
    assert a.rows_merged - merged < 200


def test_consolidate_words_sums_and_drops_zeros():
    w = np.array([[3, 1], [1, 2], [3, 1], [1, 2]], np.uint64)
    k, d = consolidate_words(w, np.array([1, 2, 1, -2]))
    assert k.tolist() == [[3, 1]] and d.tolist() == [2]
    k, d = consolidate_words(np.zeros((3, 0), np.uint64), np.array([1, -1, 4]))
    assert k.shape == (1, 0) and d.tolist() == [4]


def test_empty_key_arranges_every_row_under_one_key():
    a = KeyedArrangement({"v": pa.int64()}, key=[])
    a.insert(0, colmz.Updates({"v": [1, 2, 2]}, time=[0, 0, 0], diff=[1, 1, 1]))
    m = a.lookup_words(np.zeros((2, 0), np.uint64), (0,))
    assert sorted(zip(m.query.tolist(), m.rows.column("v").to_pylist(), m.rows.diff.tolist())) == [
        (0, 1, 1), (0, 2, 2), (1, 1, 1), (1, 2, 2)]


def test_bad_input_raises_and_changes_nothing():
    a = KeyedArrangement({"k": pa.int64()}, key=["k"])
    a.insert(5, colmz.Updates({"k": [1]}, time=[5], diff=[1]))
    with pytest.raises(ValueError, match="before the arrangement's since 5"):
        a.insert(4, colmz.Updates({"k": [2]}, time=[4], diff=[1]))
    with pytest.raises(colmz.SchemaError, match="columns"):
        a.insert(6, colmz.Updates({"x": [2]}, time=[6], diff=[1]))
    with pytest.raises(ValueError, match="not among the columns"):
        KeyedArrangement({"k": pa.int64()}, key=["nope"])
    with pytest.raises(ValueError, match="twice"):
        KeyedArrangement({"k": pa.int64()}, key=["k", "k"])
    assert a.since == 5 and a.counts([pa.array([1, 2])]).tolist() == [1, 0]


def test_rollback_restores_runs():
    a = KeyedArrangement({"k": pa.int64()}, key=["k"])
    for t in range(5):
        a.insert(t, colmz.Updates({"k": [t]}, time=[t], diff=[1]))
    saved = save(a)
    before = dm.counter_of(a.snapshot())
    a.insert(9, colmz.Updates({"k": [0, 9]}, time=[9, 9], diff=[-1, 1]))
    roll_back(a, saved)
    assert dm.counter_of(a.snapshot()) == before and a.since == 4


def test_counts_read_the_keys_rows_only():
    n = 100_000
    a = KeyedArrangement({"k": pa.int64()}, key=["k"])
    a.insert(0, colmz.Updates({"k": np.arange(n) % 1000}, time=np.zeros(n, np.uint64), diff=np.ones(n, np.int64)))
    a.insert(1, colmz.Updates({"k": [5]}, time=[1], diff=[-1]))
    found = a.rows_found
    assert a.counts([pa.array([5, 1001])]).tolist() == [99, 0]
    assert a.rows_found - found == 2  # one consolidated row per run holding key 5


def test_consolidate_words_of_a_few_rows_matches_a_reference():
    # A few rows (at most SMALL_ROWS) are sorted and summed in numpy, more by the kernels:
    # both give the rows sorted lexicographically, equal rows' diffs summed, zeros dropped.
    from collections import Counter

    from colmz.dataflow.keyed import SMALL_ROWS, consolidate_words

    rng = np.random.default_rng(7)
    for n in (2, 3, 5, 17, SMALL_ROWS, SMALL_ROWS + 1, 200):
        for width in (1, 2, 3):
            words = rng.integers(0, 3, (n, width)).astype(np.uint64)
            diff = rng.integers(-2, 3, n)
            want = Counter()
            for w, d in zip(map(tuple, words.tolist()), diff.tolist()):
                want[w] += d
            w, d = consolidate_words(words, diff)
            assert [tuple(r) for r in w.tolist()] == sorted(k for k, v in want.items() if v)
            assert d.tolist() == [want[k] for k in sorted(k for k, v in want.items() if v)]
            assert d.dtype == np.int64


def _kernel_consolidate(words, diff):
    """The kernels' consolidation of rows of words (what ``consolidate_words`` did for every
    row count above ``SMALL_ROWS`` before rows that pack into one word were sorted as such)."""
    from colmz.ops import consolidate
    from colmz.order import ColumnSpec
    from colmz.updates import Encoded, Updates

    n, width = words.shape
    schema = tuple(ColumnSpec(f"w{i}", pa.uint64()) for i in range(width))
    enc = Encoded(np.ascontiguousarray(words), np.zeros(n, np.uint64), np.asarray(diff, np.int64), (1,) * width + (0,))
    out = consolidate(Updates.decode(enc, schema), order="data").encode()
    return out.keys, out.diff


_SPANS = st.sampled_from([1, 2, 3, 1000, 2**20, 2**31, 2**32, 2**40, 2**63, 2**64])


@settings(max_examples=us.examples(80))
@given(st.integers(2, 300), st.lists(st.tuples(st.integers(0, 2**64 - 1), _SPANS), min_size=1, max_size=4),
       st.integers(0, 2**32), st.sampled_from([1, 3, 2**40, 2**62]))
def test_packed_consolidation_equals_the_kernels(n, columns, seed, big):
    # Rows whose columns' spans fit in 64 bits together are sorted as one packed word
    # (pack_words); the answer must be the kernels' exactly -- order, sums, zeros dropped --
    # for every span up to a whole 64-bit column, and the kernels decide when sums could
    # leave int64.
    from colmz.dataflow.keyed import pack_words, packed_consolidate

    rng = np.random.default_rng(seed)
    cols = []
    for base, span in columns:
        off = rng.integers(0, span, n, dtype=np.uint64, endpoint=False) if span < 2**64 else \
            rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
        cols.append(np.uint64(base) + off if span < 2**64 else off)  # wraps: spans stay within 64 bits
    words = np.stack(cols, axis=1)
    words[rng.random(n) < 0.3] = words[0]  # equal rows to sum
    diff = rng.integers(-2, 3, n) * np.where(rng.random(n) < 0.05, big, 1)
    try:
        kw, kd = _kernel_consolidate(words, diff)
    except OverflowError:
        with pytest.raises(OverflowError):
            consolidate_words(words, diff)
    else:
        w, d = consolidate_words(words, diff)
        assert w.tolist() == kw.tolist() and d.tolist() == kd.tolist()
    packed = pack_words(words)
    if packed is not None:
        order = np.argsort(packed[0], kind="stable")
        assert [tuple(r) for r in words[order].tolist()] == sorted(map(tuple, words.tolist()))
    if max(abs(int(x)) for x in diff) * n >= 2**63:
        assert packed_consolidate(words, diff) is None  # the kernels sum exactly (or raise)


def test_packed_consolidation_declines_what_does_not_pack():
    from colmz.dataflow.keyed import pack_words, packed_consolidate

    wide = np.array([[0, 0], [2**40, 2**30]], np.uint64)  # 41 + 31 bits
    assert pack_words(wide) is None and packed_consolidate(wide, np.array([1, 1])) is None
    tight = np.array([[5, 2**63], [5, 0], [6, 2**63]], np.uint64)  # 1 + 64 bits: does not pack
    assert pack_words(tight) is None
    whole = np.array([[7, 2**64 - 1], [7, 0], [7, 2**64 - 1]], np.uint64)  # 0 + 64 bits: packs
    p, bits = pack_words(whole)
    assert bits == 64 and p.tolist() == [2**64 - 1, 0, 2**64 - 1]
    w, d = packed_consolidate(whole, np.array([1, 4, -1]))
    assert w.tolist() == [[7, 0]] and d.tolist() == [4]


# ----------------------------------------------------------------------------- key indexes


def _arranged(n_keys: int, per_key: int) -> KeyedArrangement:
    a = KeyedArrangement({"k": pa.int64(), "v": pa.int64()}, key=["k"])
    n = n_keys * per_key
    a.insert(0, colmz.Updates({"k": np.arange(n) // per_key, "v": np.arange(n)}, time=np.zeros(n, np.uint64),
                              diff=np.ones(n, np.int64)))
    return a


def test_a_bulk_lookup_indexes_each_run_once_and_searches_its_distinct_keys():
    a = _arranged(1000, 10)
    assert a.runs == 1 and a.rows_indexed == 0
    q = pa.array(np.arange(0, 2000, 10))  # 200 keys, 100 of them held: worth an index of 10 k rows
    probes = a.search_probes
    m = a.lookup([q])
    assert a.rows_indexed == 10_000 and a.index_nbytes == 1000 * 8 + 1001 * 8
    # one search per key over the 1 000 distinct keys (not two over the 10 k rows)
    assert a.search_probes - probes == 200 * (1001).bit_length()
    assert sorted(m.rows.column("k").to_pylist()) == sorted(k for k in range(0, 1000, 10) for _ in range(10))
    a.lookup([q])
    assert a.rows_indexed == 10_000  # the run is indexed once


def test_a_run_of_distinct_keys_is_its_own_index():
    # one row per key (a distinct's arrangement): the index would copy the run's keys and add
    # a start per row; the run's keys are the index instead, and it holds no bytes of its own
    a = _arranged(10_000, 1)
    q = pa.array(np.arange(-50, 20_000, 7))  # 2 865 keys, 1 429 of them held
    probes = a.search_probes
    m = a.lookup([q])
    assert a.rows_indexed == 10_000 and a.index_nbytes == 0
    assert a.search_probes - probes == len(q) * (10_001).bit_length()  # one search per key
    held = [k for k in range(-50, 20_000, 7) if 0 <= k < 10_000]
    assert sorted(m.rows.column("k").to_pylist()) == held
    assert a.counts([q]).tolist() == [1 if 0 <= k < 10_000 else 0 for k in range(-50, 20_000, 7)]


def test_bulk_lookup_probes_do_not_grow_with_the_rows_per_key():
    q = pa.array(np.arange(1000))
    probes = []
    for per_key in (10, 60):
        a = _arranged(1000, per_key)
        before = a.search_probes
        a.lookup([q])
        probes.append(a.search_probes - before)
    assert probes[0] == probes[1] == 1000 * (1001).bit_length()


def test_a_few_keys_never_index_a_run():
    a = _arranged(1000, 10)
    a.lookup([pa.array([7])])
    assert a.rows_indexed == 0 and a.index_nbytes == 0
    assert a.search_probes == 2 * (10_001).bit_length()  # two binary searches over the rows
    small = _arranged(4, 2)  # 8 rows: 31 keys are still too few to pay for an index
    small.lookup([pa.array(np.arange(31))])
    assert small.rows_indexed == 0


def test_an_index_of_a_run_no_longer_held_is_dropped():
    a = _arranged(100, 10)
    a.lookup([pa.array(np.arange(100))])
    assert a.index_nbytes > 0
    a.insert(1, colmz.Updates({"k": np.arange(100), "v": np.zeros(100, np.int64)}, time=np.ones(100, np.uint64),
                              diff=np.ones(100, np.int64)))
    runs = a.state_runs()
    a.lookup([pa.array(np.arange(100))])
    assert sorted(a._key_index) == sorted(r.serial for r in runs)


def _with_ratio(ratio, f):
    import colmz.dataflow.keyed as keyed

    old = keyed.INDEX_RATIO, keyed.INDEX_MIN_QUERIES
    keyed.INDEX_RATIO, keyed.INDEX_MIN_QUERIES = ratio, 1
    try:
        return f()
    finally:
        keyed.INDEX_RATIO, keyed.INDEX_MIN_QUERIES = old


@settings(max_examples=us.examples(40))
@given(dm.change_steps(POOL, max_steps=6, valid=False), st.lists(st.sampled_from(POOL), min_size=1, max_size=5))
def test_indexed_and_searched_lookups_agree(steps, queries):
    indexed, searched = KeyedArrangement(SCHEMA, key=["k", "j"]), KeyedArrangement(SCHEMA, key=["k", "j"])
    cols = [pa.array([q[0] for q in queries], pa.string()), pa.array([q[1] for q in queries], pa.int64())]
    for t, step in enumerate(steps):
        b = dm.batch(SCHEMA, [r for r, _ in step], [d for _, d in step], t)
        indexed.insert(t, b)
        searched.insert(t, b)
        got, c1 = _with_ratio(10**9, lambda: (indexed.lookup(cols), indexed.counts(cols)))  # every run indexed
        want, c2 = _with_ratio(0, lambda: (searched.lookup(cols), searched.counts(cols)))  # none
        assert got.query.tolist() == want.query.tolist()
        assert us.canon_rows(got.rows) == us.canon_rows(want.rows)
        assert c1.tolist() == c2.tolist()
    assert searched.rows_indexed == 0


def test_a_few_rows_summing_beyond_int64_raise():
    # int64's smallest diff: its np.abs wraps to itself, which once sent a few rows down the
    # numpy path (sums kept within 2**56) and summed them silently wrapped
    words = np.array([[1], [1]], np.uint64)
    with pytest.raises(OverflowError):
        consolidate_words(words, np.array([-(2**63), -3]))


def test_runs_store_diffs_in_the_narrowest_type_and_read_them_exactly():
    # A distinct's state: 1 000 keys with small counts take a key word and one byte a row
    # (not two words); diffs beyond int8, int16, int32 widen the runs that hold them, and
    # merges, counts, lookups and state exports read every diff exactly.
    n = 1_000
    a = KeyedArrangement({"k": pa.int64()}, key=["k"])
    a.insert(0, colmz.Updates({"k": np.arange(n)}, time=np.zeros(n, np.uint64), diff=np.full(n, 3, np.int64)))
    assert a.nbytes == n * (8 + 1)
    model = np.full(n, 3, object)
    rng = np.random.default_rng(5)
    for t, big in enumerate([127, 128, -(2**15), 2**31, -(2**40), 2**62, -(2**62), 1], 1):
        keys = rng.choice(n, 300, replace=False)
        d = np.where(rng.random(300) < 0.5, big, -big // 3)
        a.insert(t, colmz.Updates({"k": keys}, time=np.full(300, t, np.uint64), diff=d))
        for k, x in zip(keys.tolist(), d.tolist()):
            model[k] += x
        for r in a.state_runs():
            top = max(-int(r.diff.min()), int(r.diff.max()))
            assert top <= np.iinfo(r.diff.dtype).max  # (each diff and its negation fit)
            narrower = {np.int16: np.int8, np.int32: np.int16, np.int64: np.int32}.get(r.diff.dtype.type)
            assert narrower is None or top > np.iinfo(narrower).max or len(r.diff) <= 64  # (the narrowest)
        assert a.counts([pa.array(np.arange(n))]).tolist() == model.tolist()
    snap = a.snapshot()
    assert dict(zip(snap.column("k").to_pylist(), snap.diff.tolist())) == {k: int(x) for k, x in enumerate(model) if x}
    m = a.lookup([pa.array([0, 1, 2])])
    assert m.rows.diff.dtype == np.int64
    exported = OperatorState("s", a).delta((), 9)  # colmz.dataflow.state: the runs' rows as updates
    assert dict(zip(exported.column("c0").to_pylist(), exported.diff.tolist())) == {
        k: int(x) for k, x in enumerate(model) if x}


def test_a_merge_whose_rows_cancel_keeps_no_unused_output_uncounted():
    # A merge writes into arrays sized for both inputs; when half its rows cancel, a view of
    # them would hold twice the bytes nbytes counts: the result is a tight copy.
    n = 1_000
    runs = []
    for k, d in ((np.arange(n), np.ones(n, np.int64)), (np.arange(n // 2, n + n // 2), None)):
        a = KeyedArrangement({"k": pa.int64()}, key=["k"])
        a.insert(0, colmz.Updates({"k": k}, time=np.zeros(n, np.uint64), diff=np.where(k < n, -1, 1) if d is None else d))
        runs.append(a.state_runs()[0])
    merged, read = KeyedMerge(*runs).work(10 * n)
    run = merged.result
    assert merged.done and read == 2 * n and len(run.diff) == n
    held = run.keys if run.keys.base is None else run.keys.base
    assert held.nbytes <= run.keys.nbytes * 9 // 8, (held.shape, run.keys.shape)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**64 - 1), st.integers(-3, 3)), max_size=12),
       st.booleans())
@settings(max_examples=200, deadline=None)
def test_consolidate_words_of_a_few_rows_is_the_multiset_sum(rows, huge):
    # up to TINY_ROWS rows are summed as Python ints, more in numpy or the kernels: every
    # path gives the rows sorted, each once, no zero sum; a sum leaving int64 raises
    from collections import Counter

    from colmz.dataflow.keyed import consolidate_words

    if huge and rows:  # diffs near int64's edge: two of them overflow
        rows = [(a, b, max(-1, min(1, d)) * 2**62) for a, b, d in rows]
    want = Counter()
    for a, b, d in rows:
        want[(a, b)] += d
    words = np.array([(a, b) for a, b, _ in rows], np.uint64).reshape(len(rows), 2)
    diff = np.array([d for _, _, d in rows], np.int64)
    if any(not -(2**63) <= v < 2**63 for v in want.values()):
        with pytest.raises(OverflowError):
            consolidate_words(words, diff)
        return
    try:
        w, d = consolidate_words(words, diff)
    except OverflowError:  # a partial sum left int64 on the way (the kernels sum in order)
        assert huge
        return
    assert [tuple(r) for r in w.tolist()] == sorted(k for k, v in want.items() if v)
    assert d.tolist() == [want[k] for k in sorted(want) if want[k]]
    assert w.dtype == np.uint64 and d.dtype == np.int64
