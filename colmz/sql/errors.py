"""The two exceptions of colmz's SQL, importable from ``colmz.sql``."""

from __future__ import annotations

__all__ = ["SQLError", "UnsupportedSQL"]


class SQLError(ValueError):
    """A statement colmz cannot parse or run; the message names the construct."""


class UnsupportedSQL(SQLError):
    """A valid Materialize construct that colmz does not implement."""


# Shown (and pickled) under the package users import them from.
SQLError.__module__ = UnsupportedSQL.__module__ = "colmz.sql"
