"""StateLog: versioned JSON state as diffs with rollups, against a plain model.

The model is the last committed dict, round-tripped through JSON. Hypothesis drives random
sequences of states derived from each other by the edits a durable structure makes (append
to a list, drop a prefix, replace a field, add/remove fields) plus unrelated jumps.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.storage import (
    CommitConflict,
    CorruptState,
    Determinate,
    Indeterminate,
    MemConsensus,
    StateLog,
    VersionedData,
)

# -- strategies ----------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.integers(-(2**63), 2**64), st.booleans(), st.text(max_size=5))
items = st.dictionaries(st.sampled_from(["k", "lo", "hi", "keys"]), st.one_of(scalars, st.lists(st.integers(), max_size=3)), max_size=4)
leaves = st.one_of(scalars, st.lists(items, max_size=6))
# Nested dicts (the arrangement nests its metadata) are diffed recursively.
values = st.recursive(leaves, lambda inner: st.dictionaries(st.sampled_from(["seal", "batches", "m", ""]), inner, max_size=3), max_leaves=8)
states = st.dictionaries(st.sampled_from(["seal", "since", "unsealed", "trace", "x", "y"]), values, max_size=6)


@st.composite
def edit(draw, state: dict) -> dict:
    """A new state derived from ``state`` by one of the typical edits."""
    new = json.loads(json.dumps(state))
    kind = draw(st.sampled_from(["append", "drop_prefix", "replace_elem", "set", "del", "jump", "same", "nested"]))
    lists = [k for k, v in new.items() if isinstance(v, list)]
    if kind == "append" and lists:
        f = draw(st.sampled_from(lists))
        new[f] = new[f] + draw(st.lists(items, min_size=1, max_size=3))
    elif kind == "drop_prefix" and lists:
        f = draw(st.sampled_from(lists))
        new[f] = new[f][draw(st.integers(0, len(new[f]))):]
    elif kind == "replace_elem" and lists:
        f = draw(st.sampled_from(lists))
        if new[f]:
            i = draw(st.integers(0, len(new[f]) - 1))
            new[f][i] = draw(items)
    elif kind == "set":
        new[draw(st.sampled_from(["seal", "since", "unsealed", "trace", "x", "y"]))] = draw(values)
    elif kind == "del" and new:
        new.pop(draw(st.sampled_from(sorted(new))))
    elif kind == "nested":
        dicts = [k for k, v in new.items() if isinstance(v, dict)]
        if dicts:
            f = draw(st.sampled_from(dicts))
            new[f] = draw(edit(new[f]))
    elif kind == "jump":
        new = draw(states)
    return new


def roundtrip(state: dict) -> dict:
    return json.loads(json.dumps(state))


# -- properties ----------------------------------------------------------------------------


@settings(max_examples=60)
@given(st.data(), st.integers(1, 6))
def test_random_sequences_match_the_model(data, rollup_every):
    cons = MemConsensus()
    log = StateLog(cons, "meta", rollup_every=rollup_every)
    state = data.draw(states)
    seqno = None
    for _ in range(data.draw(st.integers(1, 25))):
        seqno = log.commit(seqno, state)
        model = roundtrip(state)
        assert log.load() == (seqno, model)
        # A fresh log (another process) reads the same; so does one reading right after
        # committing without loading first.
        assert StateLog(cons, "meta").load() == (seqno, model)
        live = cons.scan("meta")
        assert json.loads(live[0].data)["rollup"] is not None  # the oldest live is a rollup
        assert [v.seqno for v in live] == list(range(live[0].seqno, seqno + 1))
        assert len(live) <= rollup_every
        state = data.draw(edit(state))


@settings(max_examples=30)
@given(st.data())
def test_commit_without_load_and_interleaved_writers(data):
    """Two logs on one record: each commits only what it has seen; the loser conflicts and
    wrote nothing; after a reload it continues from the winner's state."""
    cons = MemConsensus()
    a, b = StateLog(cons, "k", rollup_every=3), StateLog(cons, "k", rollup_every=5)
    model: dict | None = None
    seqno = None
    for _ in range(data.draw(st.integers(1, 15))):
        writer = data.draw(st.sampled_from([a, b]))
        new = data.draw(edit(model or {}))
        if writer.seqno != seqno:
            with pytest.raises(CommitConflict) as e:
                writer.commit(writer.seqno, new)
            assert e.value.expected == writer.seqno and e.value.found == seqno
            assert cons.head("k").seqno == seqno
            assert writer.load() == (seqno, model)
        seqno = writer.commit(seqno, new)
        model = roundtrip(new)
        assert a.load() == b.load() == (seqno, model)


def test_diff_of_one_append_is_small_whatever_the_state_size():
    sizes = {}
    for n in (10, 1000):
        log = StateLog(MemConsensus(), "meta", rollup_every=10_000)
        batches = [{"seqnos": [i, i + 1], "ts_lower": i, "ts_upper": i, "keys": [f"part-{i:08d}"]} for i in range(n)]
        seqno = log.commit(None, {"seal": 0, "unsealed_batches": batches, "trace_batches": []})
        rollup_bytes = log.stats.last_commit_bytes
        batches = batches + [{"seqnos": [n, n + 1], "ts_lower": n, "ts_upper": n, "keys": ["part-new"]}]
        log.commit(seqno, {"seal": 0, "unsealed_batches": batches, "trace_batches": []})
        sizes[n] = (rollup_bytes, log.stats.last_commit_bytes)
    assert sizes[1000][0] > 50 * sizes[10][0]  # the rollup grows with the state ...
    # ... one append differs only by the digits of its seqnos, times and splice position.
    assert sizes[1000][1] - sizes[10][1] <= 12
    assert sizes[1000][1] < 300
    # A seal is a few dozen bytes too.
    log = StateLog(MemConsensus(), "meta", rollup_every=10_000)
    s = log.commit(None, {"seal": 0, "unsealed_batches": batches})
    log.commit(s, {"seal": 12345, "unsealed_batches": batches})
    assert log.stats.last_commit_bytes < 150


def test_nested_metadata_diffs_stay_small():
    """The arrangement's layout: {"format", "schema", "meta": {"seal", "unsealed_batches",
    "trace_batches"}}: an append or a seal inside "meta" is a small nested diff."""
    log = StateLog(MemConsensus(), "m", rollup_every=10_000)
    batches = [{"seqnos": [i, i + 1], "ts_lower": i, "ts_upper": i, "keys": [f"p/{i:032d}"]} for i in range(500)]
    doc = {"format": 1, "schema": [["k", "int64"]], "meta": {"seal": 7, "since": 0, "unsealed_batches": batches, "trace_batches": []}}
    s = log.commit(None, doc)
    assert log.stats.last_commit_bytes > 500 * 60
    doc["meta"]["unsealed_batches"] = batches + [{"seqnos": [500, 501], "ts_lower": 9, "ts_upper": 9, "keys": ["p/new"]}]
    s = log.commit(s, doc)
    assert log.stats.last_commit_bytes < 250
    doc["meta"]["seal"] = 10
    s = log.commit(s, doc)
    assert log.stats.last_commit_bytes < 130
    s = log.commit(s, doc)  # nothing changed: an empty diff
    assert b'"diff":{}' in log.consensus.head("m").data
    assert StateLog(log.consensus, "m").load() == (s, doc)


def test_drop_prefix_and_replace_middle_are_splices():
    log = StateLog(MemConsensus(), "m", rollup_every=100)
    big = [{"k": "x" * 50, "i": i} for i in range(100)]
    s = log.commit(None, {"l": big})
    s = log.commit(s, {"l": big[40:]})
    assert log.stats.last_commit_bytes < 150
    mid = big[40:]
    mid[30] = {"k": "y", "i": -1}
    s = log.commit(s, {"l": mid})
    assert log.stats.last_commit_bytes < 200
    assert StateLog(log.consensus, "m").load() == (s, {"l": mid})


def test_rollups_every_n_and_truncation():
    cons = MemConsensus()
    log = StateLog(cons, "m", rollup_every=4)
    seqno = None
    kinds = []
    for i in range(13):
        seqno = log.commit(seqno, {"n": i, "l": list(range(i))})
        kinds.append(log.history()[-1][2])
        live = cons.scan("m")
        assert live[0].seqno == 1 + 4 * ((seqno - 1) // 4)
    assert kinds == [True, False, False, False] * 3 + [True]
    assert log.stats.rollups == 4
    assert [s for s, _, _ in log.history()] == [13]
    log.commit(13, {"n": 13})
    assert [s for s, _, _ in log.history()] == [13, 14]
    assert all(t > 1.6e9 for _, t, _ in log.history())  # wall-clock seconds


def test_values_compare_by_json_identity():
    log = StateLog(MemConsensus(), "m")
    s = log.commit(None, {"a": 1, "l": [1, 2]})
    s = log.commit(s, {"a": True, "l": [1.0, 2]})
    assert StateLog(log.consensus, "m").load() == (s, {"a": True, "l": [1.0, 2]})
    assert type(StateLog(log.consensus, "m").load()[1]["l"][0]) is float


def test_caller_mutation_after_commit_does_not_leak():
    log = StateLog(MemConsensus(), "m")
    state = {"l": [{"a": 1}]}
    s = log.commit(None, state)
    state["l"][0]["a"] = 99  # the caller mutates its own dict after committing
    s = log.commit(s, {"l": [{"a": 1}, {"a": 2}]})
    assert log.load() == (s, {"l": [{"a": 1}, {"a": 2}]})
    loaded = log.load()[1]
    loaded["l"].clear()
    assert log.load()[1] == {"l": [{"a": 1}, {"a": 2}]}


# -- bad input -----------------------------------------------------------------------------


def test_bad_input_writes_nothing():
    cons = MemConsensus()
    log = StateLog(cons, "m")
    s = log.commit(None, {"a": 1})
    with pytest.raises(TypeError, match="state must be a dict"):
        log.commit(s, [1])
    with pytest.raises(TypeError, match="field 'b' is not JSON-able"):
        log.commit(s, {"b": object()})
    with pytest.raises(ValueError, match="field 'c' holds a non-finite"):
        log.commit(s, {"c": float("nan")})
    with pytest.raises(TypeError, match="field names must be str"):
        log.commit(s, {1: 2})
    with pytest.raises(TypeError, match=r"field 'm.x' has a non-str key 3"):
        log.commit(s, {"m": {"x": {3: 4}}})
    with pytest.raises(TypeError, match=r"field 'm.l\[1\]' is not JSON-able"):
        log.commit(s, {"m": {"l": [1, {2}]}})
    with pytest.raises(ValueError, match="expected must be None or an int"):
        log.commit(-1, {"a": 2})
    with pytest.raises(ValueError, match="rollup_every"):
        StateLog(cons, "m", rollup_every=0)
    with pytest.raises(ValueError, match="'../x'"):
        StateLog(cons, "../x")
    assert [v.seqno for v in cons.scan("m")] == [1]


def test_conflict_message_and_nothing_written():
    cons = MemConsensus()
    a, b = StateLog(cons, "m"), StateLog(cons, "m")
    a.commit(None, {"v": 1})
    with pytest.raises(CommitConflict, match=r"key 'm' expected head seqno None but found 1: another writer committed"):
        b.commit(None, {"v": 2})
    a.commit(1, {"v": 3})
    with pytest.raises(CommitConflict, match="expected head seqno 1 but found 2"):
        b.commit(1, {"v": 4})
    assert [v.seqno for v in cons.scan("m")] == [1, 2]


def test_corrupt_records():
    cons = MemConsensus()
    cons.compare_and_set("m", None, VersionedData(1, b"not json"))
    with pytest.raises(CorruptState, match="'m' version 1 is not JSON"):
        StateLog(cons, "m").load()
    cons2 = MemConsensus()
    cons2.compare_and_set("m", None, VersionedData(1, b'{"format":1,"id":"x","ms":0,"diff":{}}'))
    with pytest.raises(CorruptState, match="no rollup"):
        StateLog(cons2, "m").load()
    cons3 = MemConsensus()
    cons3.compare_and_set("m", None, VersionedData(1, b'{"format":1,"id":"x","ms":0,"rollup":{}}'))
    cons3.compare_and_set("m", 1, VersionedData(3, b'{"format":1,"id":"y","ms":0,"diff":{}}'))
    with pytest.raises(CorruptState, match="skips from version 1 to 3"):
        StateLog(cons3, "m").load()
    cons4 = MemConsensus()
    cons4.compare_and_set("m", None, VersionedData(1, b'{"format":1,"id":"x","ms":0,"rollup":{"l":3}}'))
    cons4.compare_and_set("m", 1, VersionedData(2, b'{"format":1,"id":"y","ms":0,"diff":{"splice":{"l":[0,0,[]]}}}'))
    with pytest.raises(CorruptState, match="splices field 'l'"):
        StateLog(cons4, "m").load()


# -- failures from the consensus -----------------------------------------------------------


class Flaky(MemConsensus):
    """MemConsensus whose next compare_and_set calls follow a script: "ok", "before"
    (Determinate, not applied), "after" (applied, then Indeterminate), "lost" (not applied,
    Indeterminate); and whose head() can fail a number of times."""

    def __init__(self) -> None:
        super().__init__()
        self.script: list[str] = []
        self.head_failures = 0
        self.cas_calls = 0
        self.hook = None

    def compare_and_set(self, key, expected, new):
        self.cas_calls += 1
        step = self.script.pop(0) if self.script else "ok"
        if self.hook is not None:
            self.hook()
        if step == "before":
            raise Determinate("injected: not applied")
        if step == "lost":
            raise Indeterminate("injected: timeout, not applied")
        ok = super().compare_and_set(key, expected, new)
        if step == "after":
            raise Indeterminate("injected: applied but reported a timeout")
        return ok

    def head(self, key):
        if self.head_failures:
            self.head_failures -= 1
            raise Indeterminate("injected: head timeout")
        return super().head(key)


def test_indeterminate_applied_is_resolved_as_landed_once():
    cons = Flaky()
    log = StateLog(cons, "m", rollup_every=1)
    cons.script = ["after"]
    assert log.commit(None, {"a": 1}) == 1
    cons.script = ["after"]
    cons.head_failures = 2  # the re-read itself times out twice before it works
    assert log.commit(1, {"a": 2}) == 2
    assert [v.seqno for v in cons.scan("m")] == [2]  # version 2 was a rollup: 1 truncated
    assert cons.cas_calls == 2  # never written twice
    assert log.stats.indeterminate_resolved == 2
    assert StateLog(cons, "m").load() == (2, {"a": 2})


def test_indeterminate_not_applied_is_retried():
    cons = Flaky()
    log = StateLog(cons, "m")
    cons.script = ["lost", "lost"]
    assert log.commit(None, {"a": 1}) == 1
    assert cons.cas_calls == 3
    assert StateLog(cons, "m").load() == (1, {"a": 1})
    cons.script = ["lost", "lost", "lost"]
    with pytest.raises(Indeterminate, match="3 attempts failed indeterminately"):
        log.commit(1, {"a": 2})
    assert cons.head("m").seqno == 1


def test_indeterminate_with_another_writer_in_between_is_a_conflict():
    cons = Flaky()
    log = StateLog(cons, "m")
    other = StateLog(MemConsensus(), "unused")
    s = log.commit(None, {"a": 1})

    def sneak():
        cons.hook = None
        other.consensus = cons
        other.key = "m"
        other.commit(s, {"a": "other"})

    cons.script = ["lost"]
    cons.hook = sneak
    with pytest.raises(CommitConflict, match="expected head seqno 1 but found 2"):
        log.commit(s, {"a": 2})
    assert StateLog(cons, "m").load() == (2, {"a": "other"})


def test_indeterminate_applied_then_overtaken_is_still_ours():
    """Our write landed, then another writer committed on top before we re-read: the commit
    is ours (version 2), and a reload shows the other writer's version 3."""
    cons = Flaky()
    log = StateLog(cons, "m", rollup_every=100)
    s = log.commit(None, {"a": 1})
    cons.script = ["after"]
    # Before the re-read runs, another writer commits version 3 on top of ours.
    original = cons.head

    def head(key):
        cons.head = original
        StateLog(cons, "m").commit(2, {"a": "third"})
        return original(key)

    cons.head = head
    assert log.commit(s, {"a": 2}) == 2
    assert StateLog(cons, "m").load() == (3, {"a": "third"})
    with pytest.raises(CommitConflict, match="expected head seqno 2 but found 3"):
        log.commit(2, {"a": 4})


def test_determinate_propagates_and_nothing_written():
    cons = Flaky()
    log = StateLog(cons, "m")
    s = log.commit(None, {"a": 1})
    cons.script = ["before"]
    with pytest.raises(Determinate, match="not applied"):
        log.commit(s, {"a": 2})
    assert log.load() == (1, {"a": 1})
    assert log.commit(1, {"a": 2}) == 2


def test_truncate_failure_keeps_state_readable():
    class NoTruncate(MemConsensus):
        def truncate(self, key, seqno):
            raise Determinate("injected")

    cons = NoTruncate()
    log = StateLog(cons, "m", rollup_every=2)
    s = None
    for i in range(7):
        s = log.commit(s, {"i": i})
    assert log.stats.truncate_failures == 3
    assert len(cons.scan("m")) == 7
    assert StateLog(cons, "m").load() == (7, {"i": 6})
