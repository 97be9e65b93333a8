"""Names: Materialize's three-level namespace, ``database.schema.item``.

Materialize resolves an object name the way ``src/sql/src/names.rs`` upstream does:

* ``item`` is looked up in the session's default schema of its default database --
  :data:`DEFAULT_DATABASE` ``materialize`` and :data:`DEFAULT_SCHEMA` ``public`` (colmz has
  no ``SET database`` / ``search_path``, so these never change);
* ``schema.item`` names a schema of the default database;
* ``database.schema.item`` is the full name;
* more parts are an error ("qualified name did not have between 1 and 3 components").

Resolution is syntactic: it needs no catalog, only the defaults, so the same text resolves
the same way when a durable catalog is reopened. The object an unqualified name in a view's
or task's query refers to is the one in the default schema, wherever the view or task itself
lives (Materialize resolves against the session, not the object's schema).

:class:`QualifiedName` is the resolved name. colmz keys the objects of its catalog by
:func:`catalog_key`: the item name itself (a ``str``) for an object of the default schema --
so every name a catalog written before namespaces holds is a public one, unchanged -- and the
:class:`QualifiedName` for any other. :func:`as_qualified` turns such a key back into a full
name; :func:`sql_name` writes a name as SQL, each part through
:func:`colmz.sql.identifier`, the one quoting function.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from colmz.sql.build import identifier
from colmz.sql.errors import SQLError

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_SCHEMA",
    "QualifiedName",
    "as_qualified",
    "catalog_key",
    "display_name",
    "reading_names",
    "relation_word",
    "resolve_item",
    "resolve_schema",
    "sql_name",
]

#: The database unqualified and schema-qualified names resolve in (Materialize's default).
DEFAULT_DATABASE = "materialize"
#: The schema unqualified names resolve in (Materialize's default ``search_path``).
DEFAULT_SCHEMA = "public"

_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")


class QualifiedName(NamedTuple):
    """A fully qualified object name: ``database``, ``schema``, ``item``.

    >>> q = QualifiedName("materialize", "x", "Ct")
    >>> str(q), q.is_default_schema
    ('materialize.x."Ct"', False)
    """

    database: str
    schema: str
    item: str

    def __str__(self) -> str:
        return sql_name(self)

    @property
    def is_default_schema(self) -> bool:
        """Whether the object lives in ``materialize.public`` (a bare name reaches it)."""
        return self.database == DEFAULT_DATABASE and self.schema == DEFAULT_SCHEMA


def sql_name(parts: Sequence[str] | str) -> str:
    """``parts`` written as a SQL name: each part quoted unless PostgreSQL would read it bare
    as itself (lower case letters, digits, ``_``).

    >>> sql_name(["y", "z", "a.b"]), sql_name("T")
    ('y.z."a.b"', '"T"')
    """
    if isinstance(parts, str):
        parts = (parts,)
    return ".".join(p if _PLAIN.fullmatch(p) else identifier(p) for p in parts)


def _qualified(parts: Sequence[str] | str, defaults: tuple[str, ...]) -> tuple[str, ...]:
    # ``parts`` completed by the leading ``defaults`` it leaves out (1 to len(defaults) + 1 parts)
    parts = (parts,) if isinstance(parts, str) else tuple(parts)
    if not 1 <= len(parts) <= len(defaults) + 1:
        raise SQLError(f"qualified name did not have between 1 and {len(defaults) + 1} components: "
                       f"{sql_name(parts)}")
    return defaults[: len(defaults) + 1 - len(parts)] + parts


def resolve_item(parts: Sequence[str] | str) -> QualifiedName:
    """The full name ``parts`` (1 to 3 identifiers, already unquoted) refers to.

    >>> resolve_item(["ct"]), resolve_item(["x", "ct"]).schema, resolve_item(["y", "z", "ct"]).database
    (QualifiedName(database='materialize', schema='public', item='ct'), 'x', 'y')
    """
    return QualifiedName(*_qualified(parts, (DEFAULT_DATABASE, DEFAULT_SCHEMA)))


def resolve_schema(parts: Sequence[str] | str) -> tuple[str, str]:
    """``(database, schema)`` of a schema name of 1 or 2 parts (``schema``, ``db.schema``).

    >>> resolve_schema(["x"]), resolve_schema(["y", "z"])
    (('materialize', 'x'), ('y', 'z'))
    """
    return _qualified(parts, (DEFAULT_DATABASE,))


def catalog_key(name: QualifiedName) -> str | QualifiedName:
    """How a catalog keys the object ``name``: its item for the default schema, else itself.

    >>> catalog_key(resolve_item("t")), catalog_key(resolve_item(["x", "t"]))
    ('t', QualifiedName(database='materialize', schema='x', item='t'))
    """
    return name.item if name.is_default_schema else name


def as_qualified(key: str | QualifiedName) -> QualifiedName:
    """The full name of a catalog key (a ``str`` is an item of the default schema).

    >>> as_qualified("a.b")
    QualifiedName(database='materialize', schema='public', item='a.b')
    """
    return key if isinstance(key, QualifiedName) else resolve_item(key)


def reading_names(name: QualifiedName) -> list[str]:
    """Every name a statement may read ``name`` by, lower case: its full name; in the default
    database ``schema.item`` too; in the default schema its item too.

    >>> reading_names(resolve_item("o")), reading_names(QualifiedName("materialize", "y", "T"))
    (['materialize.public.o', 'public.o', 'o'], ['materialize.y.t', 'y.t'])
    """
    names = [f"{name.database}.{name.schema}.{name.item}"]
    if name.database == DEFAULT_DATABASE:
        names.append(f"{name.schema}.{name.item}")
        if name.schema == DEFAULT_SCHEMA:
            names.append(name.item)
    return [n.lower() for n in names]


def relation_word(name: str | Sequence[str]) -> str:
    """The word a statement names a collection by: its name, or a qualified name's last part
    (how a query names a relation it reads unqualified: ``ct.k`` of ``FROM x.ct``).

    >>> relation_word("a.b"), relation_word(QualifiedName("y", "z", "ct"))
    ('a.b', 'ct')
    """
    return name if isinstance(name, str) else name[-1]


def display_name(key: str | QualifiedName) -> str:
    """A key as messages show it: a default-schema item as itself, any other as SQL.

    >>> display_name("a.b"), display_name(resolve_item(["y", "z", "ct"]))
    ('a.b', 'y.z.ct')
    """
    return key if isinstance(key, str) else sql_name(key)
