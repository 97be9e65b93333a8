"""Intervals compared exactly with PostgreSQL's: written form and value.

psycopg reads an interval as a ``timedelta`` (a month 30 days), which hides the written
form (``'1 mon'`` and ``'30 days'`` read alike). These helpers read PostgreSQL's intervals
in ``intervalstyle = iso_8601`` (each field with its own sign) as ``(months, days,
microseconds)``, the three fields PostgreSQL keeps, and colmz's Arrow ``MonthDayNano`` the
same way, so tests compare what was written; :func:`value` is PostgreSQL's comparison value
(``interval_cmp_value``: a month 30 days, a day 24 hours), for answers where PostgreSQL
itself may show either of two equal written forms (a group's key, a min among ties).
"""

from __future__ import annotations

import re
from decimal import Decimal

import pyarrow as pa

DAY_US = 86_400_000_000

_ISO = re.compile(r"^P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)W)?(?:(-?\d+)D)?"
                  r"(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?\d+(?:\.\d+)?)S)?)?$")


def iso_fields(text: str) -> tuple[int, int, int]:
    """``(months, days, microseconds)`` of PostgreSQL's ISO 8601 text of an interval.

    >>> iso_fields("P1Y-2M3DT-4H5M6.5S")
    (10, 3, -14093500000)
    """
    m = _ISO.match(text)
    if m is None:
        raise ValueError(f"not an ISO 8601 interval: {text!r}")
    y, mo, w, d, h, mi, s = m.groups()
    months = 12 * int(y or 0) + int(mo or 0)
    days = 7 * int(w or 0) + int(d or 0)
    us = (int(h or 0) * 3600 + int(mi or 0) * 60) * 10**6 + int(Decimal(s or 0) * 10**6)
    return months, days, us


def arrow_fields(v) -> tuple[int, int, int]:
    """``(months, days, microseconds)`` of colmz's interval (``pa.MonthDayNano``)."""
    if v.nanoseconds % 1000:
        raise ValueError(f"an interval of colmz holds nanoseconds beyond PostgreSQL's microseconds: {v}")
    return v.months, v.days, v.nanoseconds // 1000


def value(fields: tuple[int, int, int]) -> int:
    """PostgreSQL's comparison value of an interval's fields, in microseconds."""
    months, days, us = fields
    return (months * 30 + days) * DAY_US + us


def as_fields(v):
    """A result cell with an interval as its fields, else as it is."""
    return arrow_fields(v) if isinstance(v, pa.MonthDayNano) else v


def pg_rows(conn, query: str) -> tuple[list[str], list[tuple]]:
    """The names and rows of ``query`` in PostgreSQL, intervals as their fields."""
    import psycopg

    conn.execute("SET intervalstyle = 'iso_8601'")
    cur = conn.cursor()
    cur.adapters.register_loader("interval", psycopg.types.string.TextLoader)
    try:
        cur.execute(query)
        names = [d.name for d in cur.description]
        kinds = [d.type_code == 1186 for d in cur.description]  # 1186: interval's oid
        rows = [tuple(iso_fields(v) if k and v is not None else v for v, k in zip(r, kinds))
                for r in cur.fetchall()]
    finally:
        conn.execute("SET intervalstyle = 'postgres'")
    return names, rows


def colmz_rows(cat, query: str) -> tuple[list[str], list[tuple]]:
    """The names and rows of ``query`` in a colmz catalog, intervals as their fields."""
    t = cat.sql(query)
    return t.column_names, [tuple(as_fields(v) for v in r) for r in zip(*(c.to_pylist() for c in t.columns))]
