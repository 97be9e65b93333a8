"""Reference models shared by tests in ``tests/colmz/dataflow/``: the row order of a group, and
the catalog pair that runs a change script.

Import it as ``reference_models``: pytest puts this folder on ``sys.path`` for the test modules
beside it (no ``__init__.py``; module names stay unique across ``tests/``).

* Ordering: an ORDER BY as PostgreSQL compares (NULLs where ``nulls_first`` says, by default
  last ascending and first descending; NaN above every number; ``descending`` reverses), then,
  among peers, colmz's total order on rows (``updates_strategies.ref_key``): the order
  ``TopK`` keeps and ``row_number`` numbers rows in. :func:`peer_order` alone decides ``rank``
  and ``dense_rank``.
* Change scripts: :func:`catalogs` makes an incremental catalog and its oracle, a recompute
  catalog, with the same views; :func:`check_script` and :func:`check_random_scripts` run
  statements on both and compare every view after each.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable

import updates_strategies as us
from test_maintained import TABLES, check_equal, run

import colmz
from colmz.dataflow import OrderBy

Compare = Callable[[tuple, tuple], int]

# ---------------------------------------------------------------------------- ordering


def compare_value(a, b, o: OrderBy) -> int:
    """-1, 0 or 1: ``a`` against ``b`` in the order ``o`` of their column."""
    if a is None or b is None:
        if a is None and b is None:
            return 0
        first = -1 if o.nulls_first else 1
        return first if a is None else -first
    ka, kb = ((1, 0.0) if a is us.NAN else (0, a)), ((1, 0.0) if b is us.NAN else (0, b))
    c = (ka > kb) - (ka < kb)
    return -c if o.descending else c


def peer_order(columns: list[str], order: list[OrderBy]) -> Compare:
    """Rows compared by the ORDER BY columns only (0 for peers)."""
    at = [columns.index(o.column) for o in order]

    def compare(a: tuple, b: tuple) -> int:
        for i, o in zip(at, order):
            c = compare_value(a[i], b[i], o)
            if c:
                return c
        return 0

    return compare


def row_order(columns: list[str], kinds: list[str], order: list[OrderBy]) -> Compare:
    """Rows compared by the ORDER BY columns, then peers by colmz's total order on rows."""
    peer = peer_order(columns, order)

    def compare(a: tuple, b: tuple) -> int:
        c = peer(a, b)
        if c:
            return c
        ka, kb = us.ref_key(kinds, a), us.ref_key(kinds, b)
        return (ka > kb) - (ka < kb)

    return compare


def sorted_groups(held: Counter, key: list[int], compare: Compare) -> list[list[tuple]]:
    """The rows of ``held`` (each repeated by its count) grouped by the columns at ``key``,
    each group sorted by ``compare``."""
    groups: dict = {}
    for row, c in held.items():
        groups.setdefault(tuple(row[i] for i in key), []).extend([row] * c)
    for rows in groups.values():
        rows.sort(key=functools.cmp_to_key(compare))
    return list(groups.values())


# ---------------------------------------------------------------------------- change scripts


def catalogs(bodies: list[str]) -> list[colmz.Catalog]:
    """An incremental catalog and a recompute one, each with ``test_maintained.TABLES`` and
    the views ``v0, v1, ...`` of ``bodies``; every view planned without a Fallback."""
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        # one call for all the views: each call saves the whole engine for its rollback
        cat.execute(";\n".join(f"CREATE MATERIALIZED VIEW v{i} AS {b}" for i, b in enumerate(bodies)))
    for i, b in enumerate(bodies):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and mv.plan is not None and not mv.plan.fallbacks(), (b, mv.reasons)
    return cats


def check_script(cats: list[colmz.Catalog], script: list[str]) -> None:
    """Each statement succeeds in both catalogs, and their views are equal before and after it."""
    check_equal(cats, "creation")
    for text in script:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)


def check_random_scripts(cats: list[colmz.Catalog], scripts: list[str]) -> None:
    """Each of ``test_maintained.script``'s scripts has the same outcome in both catalogs and
    leaves their views equal (the view ``late`` a script may create is dropped after it)."""
    for text in scripts:
        a, b = run(cats, text)
        assert a == b, text
        check_equal(cats, text)
        for cat in cats:  # a later script may create it again
            if "late" in cat.names:
                cat.execute("DROP MATERIALIZED VIEW late CASCADE")


def check_durable_resume(url: str, bodies: list[str], script: list[str], before: int) -> None:
    """A durable catalog holding the views of ``bodies`` runs ``script[:before]``, is reopened
    without initialising a view or reading an input row, and then equals a recompute catalog
    after every statement of the rest."""
    from colmz.catalog.durable import Catalog

    cats = [Catalog(url), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        for i, b in enumerate(bodies):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
    for text in script[:before]:
        assert run(cats, text) == [None, None]
    again = Catalog(url)
    assert again.view_work["initialized"] == 0 and again.view_work["input_rows_read"] == 0
    cats = [again, cats[1]]
    check_equal(cats, "reopen")
    for text in script[before:]:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)
