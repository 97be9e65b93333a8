"""``colmz.storage.frozen``: a frozen value equals the value, encodes as it, and refuses
every change in place at any depth (Hypothesis over JSON-like values)."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from colmz.storage.frozen import FrozenDict, FrozenList, frozen, is_frozen
from colmz.storage.state import Encoded

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.floats(allow_nan=False, allow_infinity=False)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=4), max_leaves=20)


def _containers(v):
    if isinstance(v, (dict, list, tuple)):
        if not isinstance(v, tuple):
            yield v
        for x in (v.values() if isinstance(v, dict) else v):
            yield from _containers(x)


@given(values)
def test_frozen_equals_encodes_and_copies_as_the_value(v):
    f = frozen(v)
    assert f == v
    assert isinstance(f, tuple) or (frozen(f) is f and is_frozen(f))
    assert json.dumps(f, sort_keys=True) == json.dumps(v, sort_keys=True)
    assert Encoded(f).text == Encoded(v).text
    assert copy.deepcopy(f) == f and pickle.loads(pickle.dumps(f)) == f


@given(values)
def test_every_container_in_a_frozen_value_refuses_changes(v):
    for c in _containers(frozen({"v": v})):
        assert isinstance(c, (FrozenDict, FrozenList))
        changes = ([("__setitem__", "k", 1), ("update", {"k": 1}), ("pop", "k", None), ("setdefault", "k", 1),
                    ("clear",), ("popitem",)]
                   if isinstance(c, dict) else
                   [("append", 1), ("extend", [1]), ("insert", 0, 1), ("clear",), ("sort",), ("reverse",),
                    ("__setitem__", 0, 1)])
        before = copy.deepcopy(dict(c) if isinstance(c, dict) else list(c))
        for name, *args in changes:
            with pytest.raises(TypeError, match="cannot be changed in place"):
                getattr(c, name)(*args)
        assert c == before


def test_a_value_not_json_like_is_refused_naming_where():
    with pytest.raises(TypeError, match="value at 'x' is a set"):
        frozen({"x": {1}})
    with pytest.raises(TypeError, match="keys are str"):
        frozen({1: 2})
