"""``AccumulableReduce.partials`` / ``step_partials``: the partials of the parts of a delta,
summed, change the output exactly as a step of the whole delta (grouped and global reduces,
NULL values, retractions, a group leaving and coming back)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import colmz
from colmz.dataflow import AccumulableReduce, Avg, BoolAnd, Count, Sum, VarSamp
from colmz.errors import NegativeMultiplicity

SCHEMA = {"k": pa.int64(), "v": pa.int64(), "b": pa.bool_()}


def aggregates():
    return {"c": Count(), "n": Count("v"), "s": Sum("v"), "a": Avg("v"), "vs": VarSamp("v"), "ba": BoolAnd("b")}


@pytest.mark.parametrize("group_by", [["k"], []])
@pytest.mark.parametrize("seed", range(4))
def test_summed_partials_of_a_split_delta_step_as_the_whole_delta(group_by, seed):
    rng = random.Random(seed)
    whole = AccumulableReduce(SCHEMA, group_by, aggregates())
    split = AccumulableReduce(SCHEMA, group_by, aggregates())
    held = []
    for t in range(8):
        rows, diffs = [], []
        for _ in range(rng.randint(0, 12)):
            if held and rng.random() < 0.4:
                rows.append(held.pop(rng.randrange(len(held))))
                diffs.append(-1)
            else:
                r = (rng.choice([1, 2, 3, None]), rng.choice([None, -4, 0, 7, 2**20]), rng.choice([True, False, None]))
                held.append(r)
                rows.append(r)
                diffs.append(1)
        delta = colmz.Updates({n: pa.array([r[i] for r in rows], typ) for i, (n, typ) in enumerate(SCHEMA.items())},
                              time=[t] * len(rows), diff=diffs)
        # the delta cut in three parts, each part's partials alone (a part may retract more
        # than it inserts: a partial is a sum, not a collection)
        cut = sorted(rng.sample(range(len(rows) + 1), 2)) if rows else [0, 0]
        parts = [delta.slice(0, cut[0]), delta.slice(cut[0], cut[1]), delta.slice(cut[1], len(rows))]
        partials = [split.partials(p) for p in parts if len(p)]
        assert all(len(p) <= len({r[0] for r in rows}) for p in partials)
        ps = colmz.concat(partials) if partials else colmz.Updates.empty(split.partial_schema)
        assert split.step_partials(t, ps).to_pylist() == whole.step(t, delta).to_pylist(), t
    with pytest.raises(NegativeMultiplicity):
        split.step_partials(9, split.partials(colmz.Updates(
            {"k": [5], "v": [1], "b": [True]}, time=[9], diff=[-1000])))


def test_partials_take_one_time_and_the_input_columns():
    r = AccumulableReduce(SCHEMA, ["k"], {"c": Count()})
    with pytest.raises(ValueError, match="partials take one time"):
        r.partials(colmz.Updates({"k": [1, 2], "v": [1, 1], "b": [True, True]}, time=[1, 2], diff=[1, 1]))
    with pytest.raises(Exception, match="columns"):
        r.partials(colmz.Updates({"k": [1]}, time=[1], diff=[1]))
    assert [c.name for c in r.partial_schema] == ["g0", "a0"]
    # a slot's partial held in int64, as the accumulators' exported state is: Σv² of 2**40 is not
    v = AccumulableReduce(SCHEMA, [], {"vs": VarSamp("v")})
    with pytest.raises(OverflowError, match="slot a3 leaves int64"):
        v.partials(colmz.Updates({"k": [1], "v": [2**40], "b": [True]}, time=[1], diff=[1]))
