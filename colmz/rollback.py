"""One idiom for undoing a failed call: declared fields, one copier, a context manager.

Design
------
A structure whose calls must leave it exactly as it was when they raise (``Correction``,
``Spine``, the correction buffer's ``Stage`` and ``BucketChain``) declares, as the class
attribute ``ROLLBACK_FIELDS``, every field such a call may change. Everything else on the
object is configuration set once by the constructor, or per-call scratch that no later call
reads; the tests tie the declaration to ``vars()`` / ``__slots__`` so a new field cannot be
forgotten silently.

:func:`save` copies the declared fields into a :class:`Saved` value and :func:`roll_back`
puts them back; :func:`undone_on_error` is the context manager a call wraps its work in.
The copier is :func:`saved_value`, one rule for every field:

* a structure that declares ``ROLLBACK_FIELDS`` itself (the stage inside a correction
  buffer) is saved field by field and rolled back *in place*, so whoever shares it keeps
  a valid reference;
* a container (``list``, ``dict``, ``deque``) is copied shallowly -- its elements are
  immutable batches and frontiers, shared -- except that elements which declare
  ``ROLLBACK_FIELDS`` (a Spine merge in progress) are saved too, in place;
* a numpy array is copied, and written back into the same array (a merge's cursor is
  shared with the merge that advances it);
* anything else (ints, ``None``, immutable batches) is kept by reference.

A :class:`Saved` value stays valid after a roll back, so one saved state can be rolled back
to more than once.

Vocabulary. colmz keeps one meaning per word: *snapshot* is a collection's contents as of a
time (``Arrangement.snapshot``), *restore* is upstream's restoring of the bucket chain's
well-formedness (``BucketChain.restore``), *checkpoint* is Spark's. Undoing a failed call is
*save* / *roll back*, and only this module implements it.

Invariant: ``roll_back(obj, save(obj))`` leaves every declared field equal (by identity for
shared values, by contents for copied ones) to what it was at the :func:`save`.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["Saved", "declared_fields", "roll_back", "save", "saved_value", "undone_on_error"]


def declared_fields(obj: Any) -> tuple[str, ...]:
    """The fields ``obj``'s class declares for rollback (``ROLLBACK_FIELDS``).

    >>> from colmz.stage import Stage
    >>> declared_fields(Stage())
    ('parts', 'count')
    """
    fields = getattr(type(obj), "ROLLBACK_FIELDS", None)
    if fields is None:
        raise TypeError(f"{type(obj).__name__} declares no ROLLBACK_FIELDS")
    return fields


def _declares(value: Any) -> bool:
    return getattr(type(value), "ROLLBACK_FIELDS", None) is not None


class _InPlace:
    """A structure saved field by field, rolled back into the same object."""

    __slots__ = ("target", "saved")

    def __init__(self, target: Any) -> None:
        self.target = target
        self.saved = save(target)

    def put_back(self) -> Any:
        roll_back(self.target, self.saved)
        return self.target


class _Container:
    """A shallow copy of a container, with its rollback-declaring elements saved."""

    __slots__ = ("items", "kind", "inner")

    def __init__(self, value: list | dict | deque) -> None:
        self.kind = type(value)
        self.items = self.kind(value)
        elems = value.values() if isinstance(value, dict) else value
        self.inner = [_InPlace(e) for e in elems if _declares(e)]

    def put_back(self) -> Any:
        for s in self.inner:
            s.put_back()
        return self.kind(self.items)


class _Array:
    """A copy of a numpy array, written back into the array it was taken from."""

    __slots__ = ("target", "copy")

    def __init__(self, target: np.ndarray) -> None:
        self.target = target
        self.copy = target.copy()

    def put_back(self) -> np.ndarray:
        if self.target.shape == self.copy.shape:
            self.target[...] = self.copy
            return self.target
        return self.copy.copy()


def saved_value(value: Any) -> Any:
    """How a rollback keeps one field's value (see the module docstring for the rule)."""
    if _declares(value):
        return _InPlace(value)
    if isinstance(value, (list, dict, deque)):
        return _Container(value)
    if isinstance(value, np.ndarray):
        return _Array(value)
    return value


def _put_back(saved: Any) -> Any:
    if isinstance(saved, (_InPlace, _Container, _Array)):
        return saved.put_back()
    return saved


class Saved:
    """The declared fields of one object as :func:`save` found them."""

    __slots__ = ("owner", "values")

    def __init__(self, owner: type, values: tuple) -> None:
        self.owner = owner
        self.values = values

    def __repr__(self) -> str:
        return f"<Saved state of a {self.owner.__name__}: {len(self.values)} fields>"


def save(obj: Any) -> Saved:
    """Copy ``obj``'s declared fields, for :func:`roll_back` after a failed call.

    >>> from colmz.stage import Stage
    >>> import colmz
    >>> s = Stage(); saved = save(s)
    >>> s.push(colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode())
    >>> roll_back(s, saved); len(s)
    0
    """
    return Saved(type(obj), tuple(saved_value(getattr(obj, f)) for f in declared_fields(obj)))


def roll_back(obj: Any, saved: Saved) -> None:
    """Return ``obj``'s declared fields to what :func:`save` found (``saved`` stays usable)."""
    if saved.owner is not type(obj):
        raise TypeError(f"a saved {saved.owner.__name__} cannot roll back a {type(obj).__name__}")
    for f, value in zip(declared_fields(obj), saved.values):
        setattr(obj, f, _put_back(value))


@contextlib.contextmanager
def undone_on_error(obj: Any) -> Iterator[Saved]:
    """Run the ``with`` body; if it raises, roll ``obj`` back to how it was before, re-raise.

    >>> from colmz.stage import Stage
    >>> import colmz
    >>> s = Stage()
    >>> try:
    ...     with undone_on_error(s):
    ...         s.push(colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode())
    ...         raise ValueError("fails after changing the stage")
    ... except ValueError:
    ...     pass
    >>> len(s)
    0
    """
    saved = save(obj)
    try:
        yield saved
    except BaseException:
        roll_back(obj, saved)
        raise
