"""A catalog's objects and how they are named and stored: :class:`CatalogObject`, the
:data:`Key` of an object, its stored definition, and the checks a definition passes.

Design
------
Names are Materialize's (``src/sql/src/names.rs`` upstream, :mod:`colmz.sql.names`): an
object is ``item``, ``schema.item`` or ``db.schema.item`` and an unqualified name is in
``materialize.public``. A catalog keys an object by :data:`Key`: a default-schema object by
its name (a ``str``), any other by its :class:`colmz.sql.QualifiedName`, so a catalog
written before schemas existed (every definition without ``database``/``schema``) opens
with its names public ones.

A durable catalog's record holds one *definition* (a JSON dict) per object -- its name,
kind, since, storage key (its arrangement's name) and the statement that created it --
and, only when they are not Materialize's defaults, one :data:`NAMESPACES` entry with its
databases and schemas.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from colmz.continual import ContinualTask, MemoryCollection
from colmz.ops import consolidate
from colmz.order import ColumnSpec
from colmz.sql import (
    DEFAULT_DATABASE,
    DEFAULT_SCHEMA,
    RESERVED_PREFIX,
    QualifiedName,
    SQLError,
    UnsupportedSQL,
    catalog_key,
    resolve_item,
)
from colmz.storage.frozen import frozen
from colmz.updates import SchemaError, Updates

__all__ = ["NAMESPACES", "RESERVED_COLUMNS", "CatalogObject", "Key", "changes_at", "check_case_distinct",
           "check_columns", "check_namespace_name", "copy_schemas", "definition_key", "key_of", "load_collection",
           "namespaces_entry", "relation_of", "storage_key"]

#: A catalog's key for an object: the item name (a ``str``) of an object of the default
#: schema ``materialize.public``, the full :class:`colmz.sql.QualifiedName` of any other
#: (:func:`colmz.sql.catalog_key`).
Key = str | QualifiedName

#: The record entry holding a catalog's databases and schemas (written only when they are not
#: Materialize's defaults, so a catalog without schemas writes the record it always wrote).
NAMESPACES = "namespaces"

#: Column names colmz keeps for itself: every update's ``time`` and ``diff`` (``colmz.Updates``),
#: and the ``__colmz_`` prefix of the columns its own queries add.
RESERVED_COLUMNS = ("time", "diff")


@dataclass
class CatalogObject:
    """One named object: its kind, storage, and the objects it reads (all by :data:`Key`)."""

    #: What a failing catalog call may change (``colmz.rollback``): the collection's and the
    #: task's state, both rolled back in place (they are shared: a task writes the
    #: collection, views and tasks read it), a view's contents, errors and its operators'
    #: state. The rest is its definition.
    ROLLBACK_FIELDS = ("collection", "task", "contents", "maintained", "errors")

    name: Key
    kind: str  # "table", "materialized view", "continual task"
    collection: object
    deps: set[str] = field(default_factory=set)
    query: str | None = None  # a materialized view's translated query
    uses_now: bool = False
    task: ContinualTask | None = None
    contents: Updates | None = None  # a materialized view's contents at now (views="recompute")
    maintained: object = None  # a materialized view's operators (colmz.dataflow.maintained.MaintainedView)
    #: a materialized view's errors over time, ``(time, message or None)`` where they change
    #: (views="recompute": its query raising; a maintained view keeps its own, ``error_at``)
    errors: tuple = ()
    #: An empty batch of its columns, made once, for the commits that only move its upper
    #: (``Engine._empty``; an immutable value, not state)
    empty: Updates | None = field(default=None, repr=False, compare=False)

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        return tuple(self.collection.schema)


def key_of(name) -> Key:
    """The catalog key of ``name``: a ``str`` is an item of the default schema, exactly as
    given; a tuple the parts of a qualified name (a :class:`colmz.sql.QualifiedName` too).

    >>> key_of("a.b"), str(key_of(("x", "t")))
    ('a.b', 'materialize.x.t')
    """
    if isinstance(name, str):
        return name
    if isinstance(name, tuple):
        if not all(isinstance(p, str) for p in name):
            raise TypeError(f"a qualified name is a tuple of str, got {name!r}")
        return catalog_key(resolve_item(name))
    raise TypeError(f"an object name is a str or a tuple of its parts, got {type(name).__name__}")


def relation_of(key: Key) -> str | tuple[str, ...]:
    """``key`` as :func:`colmz.sql.select_where` names a relation (the parts of a qualified one)."""
    return key if isinstance(key, str) else tuple(key)


def definition_key(d: dict) -> Key:
    """The key of a stored definition (without ``database``/``schema``: a public object).

    >>> definition_key({"name": "t"}), str(definition_key({"name": "t", "schema": "x"}))
    ('t', 'materialize.x.t')
    """
    if "schema" in d:
        return catalog_key(QualifiedName(d.get("database", DEFAULT_DATABASE), d["schema"], d["name"]))
    return d["name"]


def copy_schemas(schemas: dict[str, list[str]]) -> dict[str, list[str]]:
    """A copy of a catalog's databases and their schemas (the lists copied too)."""
    return {db: list(scs) for db, scs in schemas.items()}


def namespaces_entry(schemas: dict[str, list[str]]) -> list[dict]:
    """The record's :data:`NAMESPACES` entry for ``schemas`` (none for Materialize's defaults).

    >>> namespaces_entry({"materialize": ["public"]})
    []
    """
    if schemas == {DEFAULT_DATABASE: [DEFAULT_SCHEMA]}:
        return []
    return [frozen({"kind": NAMESPACES, "databases": [[db, list(scs)] for db, scs in schemas.items()]})]


def check_namespace_name(what: str, name: str) -> None:
    """Refuse an empty database or schema name, or one in colmz's reserved prefix."""
    if not name or name.lower().startswith(RESERVED_PREFIX):
        raise SQLError(f"{what} name {name!r} is empty or starts with {RESERVED_PREFIX!r}, which colmz reserves")


def storage_key(name: str) -> str:
    """A new object's storage key (its arrangement's name): its name made safe, and unique."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)[:40]
    return f"{safe}-{uuid.uuid4().hex[:12]}"


def load_collection(dur, start: int) -> MemoryCollection:
    """An in-memory collection holding ``dur``'s changes after ``start`` (``dur`` an
    ``ArrangementCollection``), and its contents as of ``start`` loaded only when a read
    needs them (a task reading only new input never does); until then a count of some rows
    in them (a table's retraction check, ``MemoryCollection.counts``) is a point lookup in
    ``dur`` (``ArrangementCollection.counts``), reading the row groups that may hold them and
    that no lookup read before (the arrangement keeps those it read indexed until the
    contents are fetched)."""
    up = dur.upper
    if up is not None and up > 0:
        start = min(start, up - 1)

    def base():
        got = dur.read_unmerged(start)
        # fetched whole: the lookups' index goes (a later count before the contents load,
        # after a read of their rows only, builds it again from the groups it needs)
        dur.forget_lookups()
        return got

    mem = MemoryCollection(dur.schema, since=start, upper=start + 1, base=base, base_consolidated=True,
                           base_counts=lambda rows: dur.counts(rows, start))
    later = dur.updates(start + 1, up)
    mem.compare_and_append(later, start + 1, up)
    return mem


def check_columns(what: str, name: str, schema: Mapping[str, pa.DataType]) -> None:
    """Refuse a definition colmz could not store, before anything changes: an empty table
    or column name, a reserved column name (:data:`RESERVED_COLUMNS`, any case: DuckDB
    compares names without case, or the :data:`RESERVED_PREFIX`), or more columns than
    ``colmz.Updates`` holds. ``SQLError``/``SchemaError`` name the object and column.

    >>> check_columns("CREATE TABLE", "t", {"k": pa.int64(), "Time": pa.int64()})
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: CREATE TABLE t: column 'Time' is reserved: colmz keeps each update's time and diff under the names ('time', 'diff'); rename the column
    """
    if not name:
        raise SQLError(f"{what}: the name is empty; give the object a name")
    check_case_distinct(what, name, list(schema))
    for i, col in enumerate(schema):
        if not col:
            raise SQLError(f"{what} {name}: column {i + 1} has an empty name")
        if col.lower() in RESERVED_COLUMNS:
            raise SQLError(
                f"{what} {name}: column {col!r} is reserved: colmz keeps each update's time and diff "
                f"under the names {RESERVED_COLUMNS}; rename the column"
            )
        if col.lower().startswith(RESERVED_PREFIX):
            raise SQLError(f"{what} {name}: column {col!r} starts with {RESERVED_PREFIX!r}, which colmz reserves")
    try:
        # colmz.Updates is the one place that knows how many data columns fit in an update.
        Updates({c: pa.array([], t) for c, t in schema.items()}, time=[], diff=[])
    except ValueError as e:
        raise SchemaError(f"{what} {name}: {e}") from None


def check_case_distinct(what: str, name: str, columns: list[str]) -> None:
    """Refuse columns whose names differ only in case (``s`` and ``"S"``): PostgreSQL keeps
    them apart, but DuckDB, which runs colmz's queries over the object, matches names without
    case, so a reference to either would read the same column.

    >>> check_case_distinct("CREATE TABLE", "t", ["s", "S"])
    Traceback (most recent call last):
    ...
    colmz.sql.UnsupportedSQL: CREATE TABLE t: columns 's' and 'S' differ only in case, which colmz does not support (DuckDB matches column names without case); rename one
    """
    seen: dict[str, str] = {}
    for col in columns:
        first = seen.setdefault(col.lower(), col)
        if first != col:
            raise UnsupportedSQL(
                f"{what} {name}: columns {first!r} and {col!r} differ only in case, which colmz does "
                "not support (DuckDB matches column names without case); rename one"
            )


def changes_at(coll, t: int) -> list:
    """The consolidated changes of ``coll`` at time ``t``, as sorted rows (comparable)."""
    return sorted(consolidate(coll.updates(t, t + 1)).to_pylist(), key=repr)
