"""BucketChain against a plain list of times: peel returns exactly the times before the upper,
restore makes the chain well-formed, and the tick pattern costs O(1) splits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from colmz.buckets import BucketChain
from colmz.rollback import roll_back, save


def split(times, mid):
    lo = [t for t in times if t < mid]
    return lo, times[len(lo):], len(times)


BITS = 8


class ChainMachine(RuleBasedStateMachine):
    """Random inserts, peels and restores of an 8-bit domain against the list of held times."""

    @initialize()
    def setup(self):
        self.chain = BucketChain([], split, domain_bits=BITS)
        self.held: list[int] = []

    @precondition(lambda self: self.chain.lower is not None)
    @rule(t=st.integers(0, 2**BITS - 1))
    def insert(self, t):
        t = max(t, self.chain.lower)
        off, bits = self.chain.range_of(t)
        assert off <= t < off + (1 << bits)
        bucket = self.chain.find(t)
        self.chain.replace(off, sorted([*bucket, t]))
        self.held.append(t)

    @rule(upper=st.one_of(st.integers(0, 2**BITS), st.none()))
    def peel(self, upper):
        lower = self.chain.lower
        peeled = self.chain.peel(upper)
        got = [t for b in peeled for t in b]
        want = sorted(t for t in self.held if upper is None or t < upper)
        assert got == want
        self.held = [t for t in self.held if not (upper is None or t < upper)]
        if upper is None or upper >= 2**BITS:
            assert len(self.chain) == 0 and self.chain.lower is None
        elif lower is not None:
            assert self.chain.lower == max(lower, upper)

    @rule(fuel=st.sampled_from([1, 3, 1000]))
    def restore(self, fuel):
        left = self.chain.restore(fuel)
        if left > 0:
            assert self.chain.well_formed

    @invariant()
    def holds_everything_in_range(self):
        self.chain.check_invariants()
        got = []
        for off, bits, bucket in self.chain.items():
            assert all(off <= t < off + (1 << bits) for t in bucket)
            got += bucket
        assert got == sorted(self.held)


ChainMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
TestChainMachine = ChainMachine.TestCase


def test_restore_makes_a_narrow_front_and_few_buckets():
    chain = BucketChain([], split)
    assert chain.restore(10**6) > 0
    assert chain.well_formed
    widths = [bits for _, bits, _ in chain.items()]
    assert widths[0] == 0
    assert all(b <= a + 2 for a, b in zip(widths, widths[1:]))
    assert len(chain) <= 65  # O(domain bits)


@given(st.integers(0, 2**40))
@settings(max_examples=20, deadline=None)
def test_ticks_split_a_constant_number_of_buckets(start):
    calls = []

    def counting(times, mid):
        calls.append(mid)
        return split(times, mid)

    chain = BucketChain([], counting)
    chain.peel(start)
    chain.restore(10**6)
    calls.clear()
    for t in range(start, start + 200):
        assert chain.peel(t + 1) == [[]]
        chain.restore(10**6)
        assert chain.well_formed and chain.lower == t + 1
    assert len(calls) <= 3 * 200  # amortised O(1) splits per tick, however far out the chain reaches


def test_roll_back_to_a_saved_state():
    chain = BucketChain([1, 5, 9], split, domain_bits=4)
    state = save(chain)
    chain.peel(6)
    chain.restore(100)
    roll_back(chain, state)
    chain.check_invariants()
    assert [b for b in chain.buckets()] == [[1, 5, 9]]
    chain.peel(2)
    roll_back(chain, state)  # a saved state can be rolled back to again
    assert chain.peel(None) == [[1, 5, 9]]


def test_bad_arguments():
    with pytest.raises(ValueError, match="domain_bits"):
        BucketChain([], split, domain_bits=0)
    chain = BucketChain([], split, domain_bits=2)
    chain.peel(3)
    with pytest.raises(ValueError, match="width 1"):
        chain._split_at(0)
