"""Exact integer sums (``colmz.dataflow.exact``) against Python ints: a few values (bounded
as Python ints) and many (bounded in numpy) give the exact answer, near int64's edges too."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.dataflow.exact import exact_add, exact_group_sums, exact_products

edge = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-3, 3),
                 st.sampled_from([2**62, -(2**62), 2**63 - 1, -(2**63), 2**61 + 1]))


@given(st.lists(st.tuples(edge, edge), min_size=1, max_size=20))
@settings(max_examples=300, deadline=None)
def test_exact_operations_are_python_int_arithmetic(pairs):
    a = np.array([x for x, _ in pairs], np.int64)
    b = np.array([y for _, y in pairs], np.int64)
    assert [int(v) for v in exact_add(a, b).tolist()] == [x + y for x, y in pairs]
    assert [int(v) for v in exact_products(a, b).tolist()] == [x * y for x, y in pairs]
    starts = np.array(sorted({0, len(pairs) // 2}), np.int64)
    bounds = [*starts.tolist(), len(pairs)]
    want = [sum(x for x, _ in pairs[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    assert [int(v) for v in exact_group_sums(a, starts).tolist()] == want
