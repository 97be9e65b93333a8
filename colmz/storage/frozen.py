"""Deeply immutable JSON values: :func:`frozen` dicts and lists that refuse every change.

Design
------
A value committed once and compared at every later commit (a catalog's definitions,
``colmz.catalog.store``) can be compared by identity -- ``new is old`` -- only when nothing
can change it in place after it was committed. :func:`frozen` gives such a value: a
:class:`FrozenDict` (a ``dict``) and a :class:`FrozenList` (a ``list``) whose every mutating
method raises ``TypeError``, built from frozen items all the way down (tuples are kept,
their items frozen). They are still a ``dict`` and a ``list``: reads, ``==`` with plain
values, ``json.dumps`` and :class:`colmz.storage.state.Encoded` take them as the plain
values they equal; a copy (``dict(d)``, ``list(x)``, ``{**d}``) is a plain, mutable value.

Invariants
----------
1. A frozen value and every value in it is a frozen container, a tuple of frozen values, or
   a scalar (``str``, ``int``, ``float``, ``bool``, ``None``): nothing in it can change.
   :func:`frozen` refuses anything else (``TypeError`` naming the path), so a frozen value
   is always JSON-able as the value it equals.
2. ``frozen(v) == v``, and ``frozen(f) is f`` for a value ``f`` already frozen (no copy).
3. ``copy.copy``/``copy.deepcopy`` of a frozen container and pickling round trips return
   an equal frozen value (the copies return the container itself: nothing can change it).
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList", "frozen", "is_frozen"]

_SCALARS = (str, int, float, bool, type(None))


def _refuse(self, *args, **kwargs) -> NoReturn:
    raise TypeError(f"a {type(self).__name__} cannot be changed in place (colmz.storage.frozen): "
                    "change a copy (dict(value) / list(value)) and freeze that")


class FrozenDict(dict):
    """A ``dict`` that refuses every change, its values frozen (:func:`frozen`).

    >>> d = FrozenDict({"a": [1, {"b": 2}]})
    >>> d == {"a": [1, {"b": 2}]}, type(d["a"]).__name__
    (True, 'FrozenList')
    >>> d["c"] = 3
    Traceback (most recent call last):
    ...
    TypeError: a FrozenDict cannot be changed in place (colmz.storage.frozen): change a copy (dict(value) / list(value)) and freeze that
    """

    __slots__ = ()

    def __init__(self, value: Any = (), /, **kwargs: Any) -> None:
        items = dict(value, **kwargs)
        for k in items:
            if not isinstance(k, str):
                raise TypeError(f"a FrozenDict's keys are str, got {k!r}")
        dict.__init__(self, ((k, _frozen(v, k)) for k, v in items.items()))

    __setitem__ = __delitem__ = update = pop = popitem = setdefault = clear = __ior__ = _refuse

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict) -> FrozenDict:
        return self

    def __reduce__(self):
        return FrozenDict, (dict(self),)

    __hash__ = None  # type: ignore[assignment] - as a dict's


class FrozenList(list):
    """A ``list`` that refuses every change, its items frozen (:func:`frozen`).

    >>> x = FrozenList([1, (2, [3])])
    >>> x == [1, (2, [3])], type(x[1][1]).__name__
    (True, 'FrozenList')
    >>> x[1][1].append(4)
    Traceback (most recent call last):
    ...
    TypeError: a FrozenList cannot be changed in place (colmz.storage.frozen): change a copy (dict(value) / list(value)) and freeze that
    """

    __slots__ = ()

    def __init__(self, value: Any = (), /) -> None:
        list.__init__(self, (_frozen(v, f"[{i}]") for i, v in enumerate(value)))

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict) -> FrozenList:
        return self

    def __reduce__(self):
        return FrozenList, (list(self),)

    __hash__ = None  # type: ignore[assignment] - as a list's


def is_frozen(value: Any) -> bool:
    """Whether ``value`` can never change: a frozen container, or a scalar.

    >>> is_frozen(frozen({"a": 1})), is_frozen({"a": 1}), is_frozen("x")
    (True, False, True)
    """
    return isinstance(value, (FrozenDict, FrozenList, *_SCALARS))


def frozen(value: Any) -> Any:
    """``value`` -- a JSON-like value of dicts (str keys), lists, tuples and scalars --
    deeply immutable: dicts as :class:`FrozenDict`, lists as :class:`FrozenList`, tuples
    kept with their items frozen; a value already frozen is returned as is.

    >>> d = frozen({"name": "t", "columns": [("k", "BIGINT")]})
    >>> d == {"name": "t", "columns": [("k", "BIGINT")]}, frozen(d) is d
    (True, True)
    >>> frozen({"x": {1, 2}})
    Traceback (most recent call last):
    ...
    TypeError: frozen: value at 'x' is a set, not a JSON-like value (dict, list, tuple, str, int, float, bool, None)
    """
    return _frozen(value, "value")


def _frozen(value: Any, path: str) -> Any:
    if isinstance(value, (FrozenDict, FrozenList, *_SCALARS)):
        return value
    if isinstance(value, dict):
        return FrozenDict(value)
    if isinstance(value, list):
        return FrozenList(value)
    if isinstance(value, tuple):
        return tuple(_frozen(v, f"{path}[{i}]") for i, v in enumerate(value))
    raise TypeError(f"frozen: value at {path!r} is a {type(value).__name__}, not a JSON-like value "
                    "(dict, list, tuple, str, int, float, bool, None)")
