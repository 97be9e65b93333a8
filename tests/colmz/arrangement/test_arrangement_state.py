"""``colmz.arrangement.state``: the frozen state value and its pure transitions.

Upstream, persist-client's ``src/persist-client/src/internal/state.rs`` turns one state value
into the next; colmz's ``ArrangementState`` does the same for the fields of
``src/persist/src/indexed/arrangement.rs``. These tests check that no transition changes its
input (so a failed call has nothing to undo) and that a call that raises leaves the handle's
state -- the very same value -- and the storage as they were.
"""

from __future__ import annotations

import copy
import dataclasses

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.arrangement import SealRegression, SinceRegression, TimeBeforeSeal
from colmz.arrangement.errors import SeqNoMismatch, TimeBeforeTraceUpper
from colmz.arrangement.meta import (
    CompactTraceReq,
    CompactTraceRes,
    Description,
    DrainUnsealedRes,
    TraceBatchMeta,
    UnsealedBatchMeta,
)
from colmz.arrangement.state import ArrangementState
from colmz.storage import MemBlob
from colmz.storage.base import Determinate


def unsealed(start: int, lo: int, hi: int, key: str) -> UnsealedBatchMeta:
    return UnsealedBatchMeta((start, start + 1), lo, hi, (key,), 1, 10, None)


def trace(lower: int, upper: int, key: str, level: int = 0, since: int = 0) -> TraceBatchMeta:
    return TraceBatchMeta(Description(lower, upper, since), level, (key,), 1, 10, None)


def snapshot(s: ArrangementState):
    # every field, deep-copied out of the value (the read-only mapping as a dict)
    return (s.seal, s.since, copy.deepcopy(s.unsealed), copy.deepcopy(s.trace), s.schema,
            dict(s.properties))


# A transition as (name, function of a state and a drawn int); each may raise.
def _append(s, n):
    tu = s.trace_ts_upper() or 0
    return s.unsealed_append(unsealed(s.unsealed_seqno_upper(), tu + n % 3, tu + n % 3 + 2, f"u{n}"))


def _drain(s, n):
    tu = s.trace_ts_upper() or 0
    return s.handle_drain_response(DrainUnsealedRes(None, trace(tu, tu + 1 + n % 3, f"t{n}")))


def _compact(s, n):
    if len(s.trace) < 2:
        return s
    b0, b1 = s.trace[0], s.trace[1]
    merged = trace(b0.desc.lower, b1.desc.upper, f"m{n}", level=1, since=s.since)
    return s.handle_compact_response(CompactTraceRes(CompactTraceReq((b0, b1), s.since), merged))[0]


def _trim(s, n):
    old = s.unsealed[n % len(s.unsealed)] if s.unsealed else unsealed(0, 0, 0, "absent")
    new = dataclasses.replace(old, keys=(f"r{n}",))
    return s.unsealed_replace(old, new)


TRANSITIONS = {
    "append": _append,
    "append_bad_seqnos": lambda s, n: s.unsealed_append(unsealed(s.unsealed_seqno_upper() + 1 + n, 99, 99, "x")),
    "append_before_trace": lambda s, n: s.unsealed_append(unsealed(s.unsealed_seqno_upper(), 0, 0, "y"))
    if (s.trace_ts_upper() or 0) > 0 else s,
    "seal": lambda s, n: s.update_seal(s.seal + n if s.seal is not None else None),
    "close": lambda s, n: s.update_seal(None),
    "since": lambda s, n: s.allow_compaction(s.since + n),
    "bad_since": lambda s, n: s.allow_compaction(None),
    "evict": lambda s, n: s.unsealed_evict()[0],
    "drain": _drain,
    "compact": _compact,
    "trim": _trim,
    "properties": lambda s, n: s.with_properties({"n": n, "s": "x" * (n % 3)}),
    "schema": lambda s, n: s.with_schema((("k", pa.int64()),)),
}


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(sorted(TRANSITIONS)), st.integers(0, 5)), max_size=30))
def test_transitions_never_change_their_input(steps):
    s = ArrangementState()
    for name, n in steps:
        before = snapshot(s)
        try:
            out = TRANSITIONS[name](s, n)
        except (SeqNoMismatch, TimeBeforeTraceUpper, ValueError):
            out = s  # refused: the caller keeps the value it had
        assert snapshot(s) == before, f"{name} changed its input"
        assert isinstance(out, ArrangementState)
        with pytest.raises(dataclasses.FrozenInstanceError):
            out.seal = 5  # type: ignore[misc]
        with pytest.raises(TypeError):
            out.properties["n"] = 1  # type: ignore[index]
        s = out


def test_the_state_value_holds_no_mutable_container():
    s = ArrangementState(3, 1, [unsealed(0, 3, 4, "a")], [trace(0, 3, "b")], [("k", pa.int64())], {"p": 1})
    assert isinstance(s.unsealed, tuple) and isinstance(s.trace, tuple) and isinstance(s.schema, tuple)
    props = {"p": 1}
    t = s.with_properties(props)
    props["p"] = 2  # the caller's dict is copied, not held
    assert t.properties == {"p": 1} and s.properties == {"p": 1}
    assert ArrangementState.from_meta(s.meta(), s.schema) == s


# ------------------------------------------------------------- failing calls change nothing


class FailingBlob(MemBlob):
    """A MemBlob whose ``set`` fails (``Determinate``) while ``fail`` is set."""

    fail = False

    def set(self, key, value):
        if self.fail:
            raise Determinate(f"injected: set {key!r} failed")
        return super().set(key, value)


def ups(rows):
    return colmz.Updates({"k": [r[0] for r in rows]}, time=[r[1] for r in rows], diff=[r[2] for r in rows])


def _durable(tmp_path):
    a = colmz.Arrangement.open(str(tmp_path / "a"), schema={"k": pa.int64()})
    a.write(ups([(1, 0, 1), (2, 3, 1)]))
    a.seal(2)
    a.maintain()
    a.advance_since(1)
    return a


def _head(a):
    return a._log.consensus.head(a._log.key)


@pytest.mark.parametrize("call,exc,reloads", [
    (lambda a: a.seal(1), SealRegression, False),
    (lambda a: a.advance_since(0), SinceRegression, False),
    (lambda a: a.write(ups([(5, 1, 1)])), TimeBeforeSeal, False),
    (lambda a: a.seal(3, properties={"bad": 1.5}), TypeError, False),
    # a seal not the expected one reloads once first (the handle may be behind)
    (lambda a: a.append_runs([], seal=5, expect=0), colmz.arrangement.SealMismatch, True),
])
def test_a_raising_durable_call_keeps_the_same_state_value_and_storage(tmp_path, call, exc, reloads):
    a = _durable(tmp_path)
    state, head = a.state, _head(a)
    keys = sorted(a.store.list_keys())
    with pytest.raises(exc):
        call(a)
    if reloads:
        assert a.state == state  # the committed state, read again
    else:
        assert a.state is state  # the very value it started from: nothing to undo
    assert _head(a) == head and sorted(a.store.list_keys()) == keys


def test_a_write_whose_part_cannot_be_stored_keeps_the_state(tmp_path):
    blob = FailingBlob()
    a = colmz.Arrangement(blob, schema={"k": pa.int64()})
    a.unsealed_append(ups([(1, 0, 1)]))
    a.unsealed_append(ups([(3, 0, 1)]))  # two batches: a drain must write a merged part
    state, keys = a.state, sorted(blob.list_keys())
    blob.fail = True
    with pytest.raises(Determinate):
        a.write(ups([(2, 1, 1)]))
    with pytest.raises(Determinate):
        a.unsealed_append(ups([(2, 1, 1)]))
    a.update_seal(1)
    sealed = a.state
    with pytest.raises(Determinate):
        a.drain()
    assert a.state is sealed and state.seal == 0 and sealed.unsealed == state.unsealed
    assert sorted(blob.list_keys()) == keys
