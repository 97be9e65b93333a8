"""Errors shared across colmz's structure families.

A family's own errors live beside it (``colmz.arrangement.errors`` for the arrangement);
an error that several families raise, and that a caller catches across them, lives here, so
that no family imports another one for its exceptions (the durable arrangement does not
import the sink's correction buffer to share a regression error).

Each derives from the builtin family colmz uses for that kind of mistake, so ``except
ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = ["NegativeMultiplicity", "SQLError", "SinceRegression", "UnsupportedSQL"]


class SinceRegression(ValueError):
    """A compaction frontier (since) before the current one.

    ``Correction.advance_since`` raises it as it is; the arrangement raises its subclass
    ``colmz.arrangement.errors.SinceRegression``, so one ``except colmz.SinceRegression``
    catches the regressions of every colmz structure.

    >>> import colmz
    >>> c = colmz.Correction(); c.advance_since(5)
    >>> try:
    ...     c.advance_since(3)
    ... except colmz.SinceRegression as e:
    ...     print(type(e).__module__)
    colmz.errors
    """


class NegativeMultiplicity(ValueError):
    """A change that would leave some row with a negative multiplicity.

    Raised by a continual task's ``DELETE`` (``colmz.continual``), by a catalog write
    (``colmz.catalog``) and by reading such contents as rows (``colmz.rows.expand``).

    >>> import colmz, colmz.rows
    >>> try:
    ...     colmz.rows.expand(colmz.Updates({"k": [1]}, time=[0], diff=[-1]))
    ... except NegativeMultiplicity as e:
    ...     print(e)
    collection holds row {'k': 1} with multiplicity -1
    """


class SQLError(ValueError):
    """A statement colmz cannot parse or run; the message names the construct.

    Users import it from ``colmz.sql``; it is defined here because a SQL column type name
    is read below the SQL layer too (:mod:`colmz.column_types`).
    """


class UnsupportedSQL(SQLError):
    """A valid Materialize construct that colmz does not implement.

    >>> from colmz.column_types import arrow_type
    >>> try:
    ...     arrow_type("char(3)")
    ... except UnsupportedSQL as e:
    ...     print(type(e).__module__, type(e).__name__)
    colmz.sql UnsupportedSQL
    """


# Shown (and pickled) under the package users import them from.
SQLError.__module__ = UnsupportedSQL.__module__ = "colmz.sql"
