"""The two exceptions of colmz's SQL, importable from ``colmz.sql``.

They are defined in :mod:`colmz.errors` (a SQL column type name is read below the SQL
layer too, by :mod:`colmz.column_types`) and re-exported here; their ``__module__`` is
``colmz.sql``, where they are shown and pickled.
"""

from __future__ import annotations

from colmz.errors import SQLError, UnsupportedSQL

__all__ = ["SQLError", "UnsupportedSQL"]
