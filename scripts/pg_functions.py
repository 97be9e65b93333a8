"""Regenerate ``colmz/sql/pg_functions.txt``: PostgreSQL's function names and the argument
counts each accepts, read from a PostgreSQL 15 server's ``pg_proc``.

Each line is ``name lo hi``: one overload (or several with one range) accepts ``lo`` to ``hi``
arguments (``lo`` is its count less its defaulted arguments; ``hi`` is ``*`` for a variadic
one). Functions PostgreSQL keeps for itself (support functions of types, index methods,
triggers, ...: those taking or returning ``internal``, the trigger and handler
pseudo-types) are left out: a user cannot call them. Lines are sorted and unique.

Run: ``CI=1 .venv/bin/python scripts/pg_functions.py`` (starts the test server of
``tests/storage_servers.py``).
"""

from __future__ import annotations

import pathlib
import sys

QUERY = """
SELECT DISTINCT p.proname,
       p.pronargs - p.pronargdefaults,
       CASE WHEN p.provariadic <> 0 THEN -1 ELSE p.pronargs END
FROM pg_proc p
WHERE p.prorettype NOT IN ('internal'::regtype, 'trigger'::regtype, 'event_trigger'::regtype,
                           'language_handler'::regtype, 'fdw_handler'::regtype,
                           'index_am_handler'::regtype, 'table_am_handler'::regtype,
                           'tsm_handler'::regtype)
  AND NOT 'internal'::regtype = ANY (p.proargtypes::oid[])
"""

OUT = pathlib.Path(__file__).resolve().parent.parent / "colmz" / "sql" / "pg_functions.txt"


def main() -> None:
    root = OUT.parent.parent.parent
    sys.path[:0] = [str(root), str(root / "tests")]
    import psycopg
    import storage_servers

    with psycopg.connect(storage_servers.postgres_url()) as conn:
        rows = conn.execute(QUERY).fetchall()
    lines = sorted({f"{name} {lo} {'*' if hi < 0 else hi}" for name, lo, hi in rows})
    OUT.write_text("".join(line + "\n" for line in lines))
    print(f"{len(lines)} lines, {len({line.split()[0] for line in lines})} names -> {OUT}")


if __name__ == "__main__":
    main()
