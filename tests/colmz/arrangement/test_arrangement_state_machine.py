"""A Hypothesis state machine drives ``colmz.Arrangement`` against a multiset model.

Operations: append (core) and write (durable API), seal and its revert, drain, evict, step,
allow_compaction, compaction by the upstream level rule and by the geometric policy,
maintain with and without fuel, gc, and reopen (``from_meta`` in the in-memory variant,
``Arrangement.open`` in the durable ones). After every step: the metadata invariants
(``validate``), the parts' contents (``validate_data``), and ``snapshot()`` equal to the model
with every time advanced to the since.

Backends are parametrized by :data:`BACKENDS` (a name -> function making a store URL);
further backends (PostgreSQL, S3) add an entry.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import colmz
from colmz.arrangement import Arrangement, SealRegression, TimeBeforeSeal
from colmz.storage import MemBlob

SCHEMA = {"k": pa.string(), "n": pa.int64()}
KEYS = ["a", "b", "", "a\x00", "x" * 20, None]
NS = [0, 1, -1, 2**63 - 1, None]
MAX = 2**64 - 1

_counter = itertools.count()


def _store(kind: str):
    from storage_servers import make_location

    return lambda: make_location(kind, _TMP)


_TMP = tempfile.mkdtemp(prefix="colmz-arr-sm-")

#: backend name -> a function returning a fresh store (a URL or an opened Location; None: an
#: in-memory core on MemBlob). Kinds needing a server skip when it is missing.
BACKENDS = {
    "core": None,
    "mem": lambda: f"mem://sm-{os.getpid()}-{next(_counter)}",
    "local": lambda: _TMP + f"/store-{next(_counter)}",
    "s3+postgres": _store("s3+postgres"),
}

row_st = st.tuples(st.sampled_from(KEYS), st.sampled_from(NS))
diff_st = st.sampled_from([1, 1, 2, -1, -3])


def updates_of(rows):
    return colmz.Updates(
        {"k": pa.array([r[0][0] for r in rows], pa.string()),
         "n": pa.array([r[0][1] for r in rows], pa.int64())},
        time=[r[1] for r in rows], diff=[r[2] for r in rows],
    )


def as_multiset(u: colmz.Updates) -> dict:
    out = Counter()
    for k, n, t, d in u.to_pylist():
        out[((k, n), t)] += d
    return {x: d for x, d in out.items() if d}


class ArrangementMachine(RuleBasedStateMachine):
    backend = "core"

    def __init__(self):
        super().__init__()
        self.model: Counter = Counter()
        make_url = BACKENDS[self.backend]
        # a fake wall clock: gc's lease is exercised by moving it, not by waiting
        self.now = [1_700_000_000.0]
        kw = {"part_rows": 3, "fan_in": 2, "clock": lambda: self.now[0], "lease_seconds": 60}
        if make_url is None:
            self.url = None
            self.a = Arrangement(MemBlob(), schema=SCHEMA, **kw)
        else:
            self.url = make_url()
            self.a = Arrangement.open(self.url, SCHEMA, **kw)
        self.kw = kw

    # ------------------------------------------------------------------ helpers

    def commit(self):
        if self.a.durable:
            self.a.commit()

    def times(self, draw_from, lo):
        return draw_from

    def expected(self) -> dict:
        since = self.a.since()
        out = Counter()
        for (row, t), d in self.model.items():
            out[(row, max(t, since))] += d
        return {x: d for x, d in out.items() if d}

    # ------------------------------------------------------------------ rules

    @rule(data=st.data(), n=st.integers(1, 6))
    def append(self, data, n):
        tu = self.a.trace_ts_upper()
        if tu is None:
            return
        ts = st.one_of(st.integers(tu, tu + 6), st.just(MAX))
        rows = [(data.draw(row_st), data.draw(ts), data.draw(diff_st)) for _ in range(n)]
        self.a.unsealed_append(updates_of(rows))
        self.commit()
        for r, t, d in rows:
            self.model[(r, t)] += d

    @rule(data=st.data(), n=st.integers(1, 6))
    def write(self, data, n):
        seal = self.a.get_seal()
        if seal is None:
            with pytest.raises(TimeBeforeSeal):
                self.a.write(updates_of([(("a", 1), 5, 1)]))
            return
        ts = st.one_of(st.integers(seal, seal + 6), st.just(MAX))
        rows = [(data.draw(row_st), data.draw(ts), data.draw(diff_st)) for _ in range(n)]
        self.a.write(updates_of(rows))
        for r, t, d in rows:
            self.model[(r, t)] += d
        if seal > 0:
            meta = self.a.meta()
            with pytest.raises(TimeBeforeSeal):
                self.a.write(updates_of([(("a", 1), seal - 1, 1)]))
            assert self.a.meta() == meta

    @rule(step=st.integers(0, 5), closed=st.booleans())
    def seal(self, step, closed):
        seal = self.a.get_seal()
        if seal is None:
            return
        target = None if closed and step == 5 else seal + step
        self.a.seal(target)
        assert self.a.get_seal() == target
        if target is not None and target > 0:
            meta = self.a.meta()
            with pytest.raises(SealRegression):
                self.a.seal(target - 1)
            assert self.a.meta() == meta

    @rule(data=st.data())
    def revert_seal(self, data):
        # update_seal is unchecked; a revert back to anything at or after the trace upper
        # keeps the invariants
        tu, seal = self.a.trace_ts_upper(), self.a.get_seal()
        if tu is None or seal is None:
            return
        self.a.update_seal(data.draw(st.integers(tu, seal)))
        self.commit()

    @rule()
    def drain(self):
        self.a.drain()
        self.commit()

    @rule()
    def evict(self):
        self.a.unsealed_evict()
        self.commit()

    @rule()
    def step(self):
        self.a.unsealed_step()
        self.commit()

    @rule(step=st.integers(0, 6))
    def allow_compaction(self, step):
        s = self.a.since() + step
        self.a.validate_allow_compaction(s)
        if self.a.durable:
            self.a.advance_since(s)
        else:
            self.a.allow_compaction(s)

    @rule()
    def compact_levels(self):
        self.a.compact()
        self.commit()

    @rule()
    def compact_geometric(self):
        req = self.a.geometric_compact_req()
        if req is not None:
            self.a.compact(req)
            self.commit()

    @rule(fuel=st.sampled_from([None, 0, 1, 4]), policy=st.sampled_from(["geometric", "levels"]))
    def maintain(self, fuel, policy):
        self.now[0] += 0.001
        self.a.maintain(fuel, policy=policy)

    @rule(data=st.data(), n=st.integers(1, 4), fuel=st.sampled_from([None, 1, 2, 5]))
    def trickle(self, data, n, fuel):
        # the sink's shape: write at the seal, seal past it, maintain within a budget
        seal = self.a.get_seal()
        if seal is None:
            return
        rows = [(data.draw(row_st), data.draw(st.integers(seal, seal + 2)), data.draw(diff_st))
                for _ in range(n)]
        self.a.write(updates_of(rows))
        for r, t, d in rows:
            self.model[(r, t)] += d
        self.a.seal(seal + 3)
        self.now[0] += 0.001
        self.a.maintain(fuel)

    @rule()
    def gc(self):
        self.commit()
        referenced = self.a.referenced_keys()
        self.now[0] += 121  # past the lease: every unreferenced part is collectable
        gone = self.a.gc()
        assert not referenced & set(gone)
        # a merge maintain() left half done now has parts older than half the lease: its
        # commit must refuse (and restart), never reference a collected part

    @rule()
    def reopen_from_meta(self):
        meta = self.a.meta()
        b = Arrangement.from_meta(meta, self.a.store, schema=SCHEMA, **self.kw)
        b.validate()
        assert b.meta() == meta
        assert as_multiset(b.snapshot()) == self.expected()
        if not self.a.durable:
            self.a = b

    @precondition(lambda self: self.url is not None)
    @rule()
    def reopen(self):
        self.a.commit()
        meta = self.a.meta()
        b = Arrangement.open(self.url, **self.kw)
        assert b.meta() == meta
        assert b.schema == self.a.schema
        self.a = b

    # ------------------------------------------------------------------ invariants

    @invariant()
    def invariants_hold(self):
        self.a.validate()
        self.a.validate_data()
        assert as_multiset(self.a.snapshot()) == self.expected()
        if self.a.durable:
            assert Arrangement.open(self.url).meta() == self.a.meta()


def _machine(backend: str):
    return type(f"ArrangementMachine_{backend}", (ArrangementMachine,), {"backend": backend})


TestCoreMachine = _machine("core").TestCase
TestCoreMachine.settings = settings(max_examples=20, stateful_step_count=25)
TestMemMachine = _machine("mem").TestCase
TestMemMachine.settings = settings(max_examples=12, stateful_step_count=20)
TestLocalMachine = _machine("local").TestCase
TestLocalMachine.settings = settings(max_examples=8, stateful_step_count=20)
TestS3PostgresMachine = _machine("s3+postgres").TestCase
TestS3PostgresMachine.settings = settings(max_examples=3, stateful_step_count=15)
