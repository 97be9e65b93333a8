"""colmz.rollback: the one idiom for undoing a failed call.

The declaration test walks every class in colmz that declares ``ROLLBACK_FIELDS`` and ties
the declaration to the instance's fields (``vars()`` or ``__slots__``): a field that is
neither declared nor listed here as configuration/scratch fails it, so a new field cannot be
left out of rollbacks silently.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import deque

import numpy as np
import pytest

import colmz
from colmz.buckets import BucketChain
from colmz.correction import Correction
from colmz.rollback import Saved, declared_fields, roll_back, save, undone_on_error
from colmz.spine import Spine
from colmz.stage import Stage

# Per class: the fields that are not rolled back, and why they need not be.
NOT_ROLLED_BACK = {
    # configuration and the cumulative work counters
    "Correction": {"chain_proportionality", "chunk_size", "stage_size", "restore_fuel", "work"},
    # configuration, the per-call work scratch, the mass bound grown only after success
    "Spine": {"_effort", "_exert_logic", "_exert_name", "_auto_physical", "_call_work", "_mass_bound"},
    # configuration
    "BucketChain": {"split", "domain_bits"},
    "Stage": set(),
    # set at construction and never changed: the merge's inputs, layout and output buffer
    "_Merge": {"a", "b", "runs", "adv", "lower", "upper", "since", "layout", "out"},
}


def _declaring_classes() -> dict[str, type]:
    found = {}
    for info in pkgutil.walk_packages(colmz.__path__, "colmz."):
        if info.name.startswith(("colmz.spark", "colmz.kernels")):
            continue
        try:
            mod = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod.__name__ and "ROLLBACK_FIELDS" in vars(cls):
                found[cls.__name__] = cls
    return found


def _instance_fields(obj) -> set[str]:
    if hasattr(obj, "__dict__"):
        return set(vars(obj))
    return {s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())}


def _example(name: str):
    if name == "_Merge":
        s = Spine(auto_physical=False)
        for t in range(4):
            s.insert(colmz.Updates({"k": [t, 100 + t]}, time=[t, t], diff=[1, 1]), t, t + 1)
        s.set_physical_compaction(4)
        merges = [st for st in s._layers if type(st).__name__ == "_Merge"]
        assert merges, "the example should hold a merge"
        return merges[0]
    return {"Correction": Correction, "Spine": Spine, "Stage": Stage,
            "BucketChain": lambda: BucketChain([1, 2], lambda b, mid: (b, b, 0), domain_bits=4)}[name]()


def test_every_declaring_class_is_known_here():
    assert set(_declaring_classes()) == set(NOT_ROLLED_BACK)


@pytest.mark.parametrize("name", sorted(NOT_ROLLED_BACK))
def test_declared_fields_cover_every_field(name):
    obj = _example(name)
    fields = _instance_fields(obj)
    declared = set(declared_fields(obj))
    assert declared <= fields, f"{name} declares fields it does not have: {declared - fields}"
    assert fields - NOT_ROLLED_BACK[name] == declared, (
        f"{name}: fields neither declared for rollback nor listed as configuration: "
        f"{fields - NOT_ROLLED_BACK[name] - declared}"
    )


class _Holder:
    ROLLBACK_FIELDS = ("items", "table", "queue", "arr", "inner", "n")

    def __init__(self):
        self.items = [1, 2]
        self.table = {"a": 1}
        self.queue = deque([3])
        self.arr = np.arange(4)
        self.inner = Stage()
        self.n = 0


def test_roll_back_copies_containers_and_keeps_shared_structures_in_place():
    h = _Holder()
    inner, arr = h.inner, h.arr
    saved = save(h)
    h.items.append(3)
    h.table["b"] = 2
    h.queue.popleft()
    h.arr[:] = 9
    h.inner.push(colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode())
    h.n = 5
    roll_back(h, saved)
    assert (h.items, h.table, list(h.queue), h.arr.tolist(), len(h.inner), h.n) == (
        [1, 2], {"a": 1}, [3], [0, 1, 2, 3], 0, 0)
    assert h.inner is inner and h.arr is arr  # whoever shares them sees the rollback
    h.items.append(7)
    roll_back(h, saved)  # a saved state can be rolled back to again
    assert h.items == [1, 2]


def test_undone_on_error_rolls_back_and_reraises_and_keeps_success():
    h = _Holder()
    with pytest.raises(KeyError), undone_on_error(h) as saved:
        assert isinstance(saved, Saved)
        h.items.append(3)
        raise KeyError("x")
    assert h.items == [1, 2]
    with undone_on_error(h):
        h.items.append(4)
    assert h.items == [1, 2, 4]


def test_errors_name_the_classes():
    with pytest.raises(TypeError, match="int declares no ROLLBACK_FIELDS"):
        save(3)
    with pytest.raises(TypeError, match="a saved Stage cannot roll back a _Holder"):
        roll_back(_Holder(), save(Stage()))


def test_a_failed_spine_call_leaves_merges_in_progress_as_they_were():
    s = Spine(auto_physical=False)
    for t in range(8):
        s.insert(colmz.Updates({"k": [t, 100 + t]}, time=[t, t], diff=[1, 1]), t, t + 1)
    s.set_physical_compaction(8)
    merges = [st for st in s._layers if type(st).__name__ == "_Merge" and st.cursor is not None]
    assert merges, "the example should hold a merge in progress"
    before = [(m.cursor.copy(), m.complete, m.result) for m in merges]
    saved = save(s)
    for _ in range(3):
        s.exert(4)
    roll_back(s, saved)
    after = [(m.cursor, m.complete, m.result) for m in merges]
    for (c0, done0, r0), (c1, done1, r1) in zip(before, after):
        assert c0.tolist() == c1.tolist() and done0 == done1 and r0 is r1
    assert s.check_invariants(deep=True) == []
