"""One idiom for undoing a failed call: declared fields, one copier, a context manager.

Design
------
A structure whose calls must leave it exactly as it was when they raise (``Correction``,
``Spine``, the correction buffer's ``Stage`` and ``BucketChain``; ``MemoryCollection``,
``RowCounts``, ``SinkState`` and ``ContinualTask``; the catalog's ``Engine`` and its
objects) declares, as the class attribute ``ROLLBACK_FIELDS``, every field such a call may
change. Everything else on the object is configuration set once by the constructor, or
per-call scratch that no later call reads; the tests tie the declaration to ``vars()`` /
``__slots__`` so a new field cannot be forgotten silently.

:func:`save` copies the declared fields into a :class:`Saved` value and :func:`roll_back`
puts them back; :func:`undone_on_error` is the context manager a call wraps its work in.
The copier is :func:`saved_value`, one rule for every field:

* a structure that declares ``ROLLBACK_FIELDS`` itself (the stage inside a correction
  buffer) is saved field by field and rolled back *in place*, so whoever shares it keeps
  a valid reference;
* a list the class also names in ``ROLLBACK_APPEND_ONLY`` (a history) is saved as the list
  and its length -- no element is copied -- and rolled back by truncating it to that length;
* any other container (``list``, ``dict``, ``deque``, ``set``) is copied shallowly -- its
  elements are immutable batches, frontiers and times, shared -- except that elements which
  declare ``ROLLBACK_FIELDS`` (a Spine merge in progress, a catalog's objects) are saved too,
  in place;
* a numpy array is copied, and written back into the same array (a merge's cursor is
  shared with the merge that advances it);
* anything else (ints, ``None``, immutable batches) is kept by reference.

Append-only fields. A save must not cost the history a structure holds (a collection's
list of batches, one per time written): a field declared in ``ROLLBACK_APPEND_ONLY`` costs
O(1) to save. The declaring class promises that between a save and its roll back the list
*object* only grows at its end (``append``/``extend``); any other change (compaction
rewriting a prefix, a lazily loaded base inserted in front, merging the last runs) assigns a
*new* list to the field and leaves the old one as it was. Rolling back then puts the saved
list object back, cut to its saved length: appends made to it are dropped, a replacement is
undone. The last saved element is checked to be the same object, so a class that breaks its
promise gets ``RuntimeError`` instead of a silently wrong state. ``Saved.copied`` counts the
elements a save copied (a work counter: the tests check it does not grow with history).

A :class:`Saved` value stays valid after a roll back, so one saved state can be rolled back
to more than once. Truncating in place drops what a *later* save of the same list holds;
``roll_back(obj, saved, copy=True)`` puts copies of the saved prefixes back instead
(O(their length)), leaving the lists intact for that later save -- the catalog's undo of the
commit at ``now`` (to join it) does this, and its own failure then rolls back to the later
save.

Covered calls. A caller that has saved a structure *and everything reachable from it* (the
catalog's engine saves itself, its objects, their collections and views' operators) and rolls
all of it back when a call fails runs nested calls inside :func:`covered`: their own
:func:`undone_on_error` then neither saves nor rolls back (the caller's roll back restores
the same fields to the same values), so a commit pays one save of its state instead of one
per nested structure. Only the roll back on error is skipped; an exception still propagates
to the caller, which must roll back before anything reads the structures again.

Saved on touch. A structure holding many others of which a call changes few (the catalog's
engine: its objects, most of which a statement does not touch) names, in
``ROLLBACK_ON_TOUCH``, the declared fields a save keeps *by reference* -- O(1), whatever they
hold. The declaring class promises two things between a save and its roll back: such a
field's value is never changed in place (a change assigns a new container: copy-on-write),
and every structure declaring ``ROLLBACK_FIELDS`` that is reachable through it (the field's
value itself, or an element) is passed to :meth:`Saved.keep` before anything changes it.
``keep`` saves it, in place, the first time only (later changes are undone by that save);
:func:`roll_back` puts the kept structures back, the latest kept first, after the fields. A
save then costs what the call touches, not what the structure holds: ``Saved.copied``
counts the elements the save and its keeps copied, ``Saved.kept`` the structures kept.

Vocabulary. colmz keeps one meaning per word: *snapshot* is a collection's contents as of a
time (``Arrangement.snapshot``), *restore* is upstream's restoring of the bucket chain's
well-formedness (``BucketChain.restore``), *checkpoint* is Spark's. Undoing a failed call is
*save* / *roll back*, and only this module implements it.

Invariant: ``roll_back(obj, save(obj))`` leaves every declared field equal (by identity for
shared values, by contents for copied ones) to what it was at the :func:`save`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["Saved", "append_only_fields", "covered", "declared_fields", "is_covered", "on_touch_fields", "roll_back",
           "save", "saved_value", "undone_on_error"]

#: Whether the running call is inside :func:`covered` (a caller's save holds its state).
_COVERED: contextvars.ContextVar[bool] = contextvars.ContextVar("colmz_rollback_covered", default=False)

#: Per class: ``(declared fields, append-only fields, fields saved on touch)``, checked once (``save`` is called per
#: structure per commit: the checks must not be repeated each time).
_FIELDS: dict[type, tuple[tuple[str, ...], frozenset, frozenset]] = {}


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


def append_only_fields(obj: Any) -> tuple[str, ...]:
    """The declared fields of ``obj`` that are append-only lists (``ROLLBACK_APPEND_ONLY``).

    >>> from colmz.collection import MemoryCollection
    >>> append_only_fields(MemoryCollection({"k": "bigint"}))
    ('_times', '_batches')
    """
    fields = getattr(type(obj), "ROLLBACK_APPEND_ONLY", ())
    extra = set(fields) - set(declared_fields(obj))
    if extra:
        raise TypeError(f"{type(obj).__name__}: ROLLBACK_APPEND_ONLY names undeclared fields {sorted(extra)}")
    return fields


def on_touch_fields(obj: Any) -> tuple[str, ...]:
    """The declared fields of ``obj`` saved by reference, their structures kept on touch
    (``ROLLBACK_ON_TOUCH``, module docstring).

    >>> from colmz.stage import Stage
    >>> on_touch_fields(Stage())
    ()
    """
    fields = getattr(type(obj), "ROLLBACK_ON_TOUCH", ())
    extra = set(fields) - set(declared_fields(obj))
    if extra:
        raise TypeError(f"{type(obj).__name__}: ROLLBACK_ON_TOUCH names undeclared fields {sorted(extra)}")
    if set(fields) & set(append_only_fields(obj)):
        raise TypeError(f"{type(obj).__name__}: a field cannot be both append-only and saved on touch")
    return fields


def _declares(value: Any) -> bool:
    return getattr(type(value), "ROLLBACK_FIELDS", None) is not None


class _InPlace:
    """A structure saved field by field, rolled back into the same object."""

    __slots__ = ("target", "saved", "copied")

    def __init__(self, target: Any) -> None:
        self.target = target
        self.saved = save(target)
        self.copied = self.saved.copied

    def put_back(self, copy: bool) -> Any:
        roll_back(self.target, self.saved, copy=copy)
        return self.target


class _Appended:
    """An append-only list saved as itself and its length: rolled back by truncation."""

    __slots__ = ("target", "n", "last", "field")

    copied = 0

    def __init__(self, target: list, field: str) -> None:
        if type(target) is not list:
            raise TypeError(f"append-only field {field!r} must be a list, got {type(target).__name__}")
        self.target = target
        self.n = len(target)
        self.last = target[-1] if target else None
        self.field = field

    def put_back(self, copy: bool) -> list:
        t, n = self.target, self.n
        if len(t) < n or (n and t[n - 1] is not self.last):
            raise RuntimeError(
                f"append-only field {self.field!r} was changed in place other than at its end "
                f"(length {len(t)}, saved {n}): a rewrite must assign a new list"
            )
        if copy:
            return t[:n]
        del t[n:]
        return t


class _Container:
    """A shallow copy of a container, with its rollback-declaring elements saved."""

    __slots__ = ("items", "kind", "inner", "copied")

    def __init__(self, value: list | dict | deque | set) -> None:
        self.kind = type(value)
        self.items = self.kind(value)
        elems = value.values() if isinstance(value, dict) else value
        # Most containers hold only immutable batches and ints: find the types present in
        # one C-speed pass and look at the elements one by one only when one of those types
        # declares ROLLBACK_FIELDS.
        if value and any(getattr(t, "ROLLBACK_FIELDS", None) is not None for t in set(map(type, elems))):
            self.inner = [_InPlace(e) for e in elems if _declares(e)]
        else:
            self.inner = []
        self.copied = len(self.items) + sum(s.copied for s in self.inner)

    def put_back(self, copy: bool) -> Any:
        for s in self.inner:
            s.put_back(copy)
        return self.kind(self.items)


class _Array:
    """A copy of a numpy array, written back into the array it was taken from."""

    __slots__ = ("target", "copy", "copied")

    def __init__(self, target: np.ndarray) -> None:
        self.target = target
        self.copy = target.copy()
        self.copied = target.size

    def put_back(self, copy: bool) -> np.ndarray:
        if self.target.shape == self.copy.shape:
            self.target[...] = self.copy
            return self.target
        return self.copy.copy()


#: Types kept by reference without a look at their class (the most frequent field values: a
#: save is taken per touched structure per call, so its constant counts).
_PLAIN = frozenset({int, float, str, bool, type(None), tuple, frozenset, bytes})


#: Per type of field value, how :func:`saved_value` keeps it: ``None`` (by reference) or the
#: saver class. A type's rule never changes (it depends on the class alone), so each type is
#: classified once instead of at every save of every field.
_SAVER: dict[type, Any] = dict.fromkeys(_PLAIN)


def _saver_of(cls: type) -> Any:
    if getattr(cls, "ROLLBACK_FIELDS", None) is not None:
        saver = _InPlace
    elif issubclass(cls, (list, dict, deque, set)):
        saver = _Container
    elif issubclass(cls, np.ndarray):
        saver = _Array
    else:
        saver = None
    _SAVER[cls] = saver
    return saver


def saved_value(value: Any) -> Any:
    """How a rollback keeps one field's value (see the module docstring for the rule)."""
    cls = type(value)
    saver = _SAVER[cls] if cls in _SAVER else _saver_of(cls)
    return value if saver is None else saver(value)


_SAVED_KINDS = (_InPlace, _Appended, _Container, _Array)
_SAVED_TYPES = frozenset(_SAVED_KINDS)


def _put_back(saved: Any, copy: bool) -> Any:
    if type(saved) in _SAVED_TYPES:
        return saved.put_back(copy)
    return saved


class Saved:
    """The declared fields of one object as :func:`save` found them.

    ``fields`` names them (the declared ones, less any excluded); ``copied`` is how many
    elements the save copied, nested structures included (a work counter).
    """

    __slots__ = ("owner", "fields", "values", "copied", "touched")

    def __init__(self, owner: type, fields: tuple[str, ...], values: tuple,
                 touched: dict[int, _InPlace] | None = None, *, copied: int | None = None) -> None:
        self.owner = owner
        self.fields = fields
        self.values = values
        #: the structures kept on touch, by ``id`` (each ``_InPlace`` holds its structure alive)
        self.touched: dict[int, _InPlace] = {} if touched is None else touched
        if copied is None:  # (``save`` counts what it copies as it goes)
            copied = 0
            for v in values:
                if type(v) in _SAVED_TYPES:
                    copied += v.copied
        for s in self.touched.values():
            copied += s.copied
        self.copied = copied

    @property
    def kept(self) -> int:
        """How many structures :meth:`keep` saved (a work counter)."""
        return len(self.touched)

    @property
    def structures(self) -> list:
        """The structures :meth:`keep` saved, in the order kept."""
        return [s.target for s in self.touched.values()]

    def keep(self, target: Any) -> None:
        """Save ``target`` -- a structure declaring ``ROLLBACK_FIELDS``, reachable through a
        field the owner saves on touch -- as it is now, unless kept already (its first save
        undoes every later change): :func:`roll_back` puts it back in place.

        >>> from colmz.stage import Stage
        >>> import colmz
        >>> s = Stage(); saved = Saved(object, (), ())
        >>> saved.keep(s)
        >>> s.push(colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode())
        >>> saved.keep(s)       # kept already: the first save stands
        >>> saved.put_back_kept(); len(s), saved.kept
        (0, 1)
        """
        if id(target) not in self.touched:
            s = self.touched[id(target)] = _InPlace(target)
            self.copied += s.copied

    def put_back_kept(self, copy: bool = False) -> None:
        """Put every kept structure back in place, the latest kept first (an earlier keep of
        a structure that a later one holds too then has the last word)."""
        for s in reversed(list(self.touched.values())):
            s.put_back(copy)

    def without(self, *names: str) -> Saved:
        """The same saved state less the fields ``names`` (neither kept nor rolled back); the
        values are shared, so both stay valid. The structures kept so far are kept by both;
        those kept later by this one only."""
        keep = [i for i, f in enumerate(self.fields) if f not in names]
        return Saved(self.owner, tuple(self.fields[i] for i in keep), tuple(self.values[i] for i in keep),
                     dict(self.touched))

    def __repr__(self) -> str:
        return (f"<Saved state of a {self.owner.__name__}: {len(self.values)} fields, {self.kept} kept on touch, "
                f"{self.copied} elements copied>")


def save(obj: Any, exclude: tuple[str, ...] = ()) -> Saved:
    """Copy ``obj``'s declared fields, for :func:`roll_back` after a failed call.

    Fields named in ``exclude`` are neither saved nor rolled back (a field holding saved
    states itself, which a later save need not keep alive). Fields the class saves on touch
    (``ROLLBACK_ON_TOUCH``) are kept by reference; the caller passes what it is about to
    change through them to :meth:`Saved.keep`.

    >>> from colmz.stage import Stage
    >>> import colmz
    >>> s = Stage(); saved = save(s)
    >>> s.push(colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode())
    >>> roll_back(s, saved); len(s)
    0
    """
    cls = type(obj)
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = (declared_fields(obj), frozenset(append_only_fields(obj)),
                                frozenset(on_touch_fields(obj)))
    declared, appended, by_reference = known
    if exclude:
        unknown = set(exclude) - set(declared)
        if unknown:
            raise ValueError(f"exclude names fields {cls.__name__} does not declare: {sorted(unknown)}")
        fields = tuple(f for f in declared if f not in exclude)
    else:
        fields = declared
    values = []
    copied = 0
    savers = _SAVER
    for f in fields:
        v = getattr(obj, f)
        if f in appended:
            v = _Appended(v, f)
        elif f not in by_reference:
            t = type(v)
            saver = savers[t] if t in savers else _saver_of(t)
            if saver is not None:
                v = saver(v)
                copied += v.copied
        values.append(v)
    return Saved(cls, fields, tuple(values), copied=copied)


def roll_back(obj: Any, saved: Saved, *, copy: bool = False) -> None:
    """Return ``obj``'s declared fields to what :func:`save` found (``saved`` stays usable).

    ``copy=True`` puts append-only fields back as copies of their saved prefix instead of
    truncating the lists in place, so a later save of the same lists stays valid. The
    structures kept on touch (:meth:`Saved.keep`) are put back after the fields.
    """
    if saved.owner is not type(obj):
        raise TypeError(f"a saved {saved.owner.__name__} cannot roll back a {type(obj).__name__}")
    for f, value in zip(saved.fields, saved.values):
        setattr(obj, f, _put_back(value, copy))
    saved.put_back_kept(copy)


@contextlib.contextmanager
def undone_on_error(obj: Any) -> Iterator[Saved | None]:
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

    Inside :func:`covered`, the body runs unsaved (and ``None`` is yielded): the caller that
    opened it rolls back.
    """
    if _COVERED.get():
        yield None
        return
    saved = save(obj)
    try:
        yield saved
    except BaseException:
        roll_back(obj, saved)
        raise


def is_covered() -> bool:
    """Whether the running call is inside :func:`covered`."""
    return _COVERED.get()


@contextlib.contextmanager
def covered() -> Iterator[None]:
    """Run the ``with`` body with every nested :func:`undone_on_error` unsaved: the caller has
    saved all the body can change and rolls it back if the body raises (module docstring).

    >>> from colmz.stage import Stage
    >>> import colmz
    >>> s = Stage(); saved = save(s)
    >>> try:
    ...     with covered(), undone_on_error(s):
    ...         s.push(colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode())
    ...         raise ValueError("fails after changing the stage")
    ... except ValueError:
    ...     roll_back(s, saved)     # the caller's own save covers the stage
    >>> len(s)
    0
    """
    token = _COVERED.set(True)
    try:
        yield
    finally:
        _COVERED.reset(token)
