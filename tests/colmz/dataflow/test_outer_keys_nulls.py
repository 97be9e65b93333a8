"""A NULL outer key of a subquery decorrelated on the distinct outer keys
(``SubqueryLowering.keyed_subquery``): the keys are the outer columns' distinct non-NULL
values, so a row whose key is NULL joins none and takes the subquery's answer over no rows
(``EXISTS`` false, ``NOT EXISTS`` true, ``x IN`` false, ``x NOT IN`` true, ``count`` 0, other
aggregates NULL), as PostgreSQL answers a comparison with NULL matching no inner row. Each
body -- ``[NOT] EXISTS``, ``IN`` in ``WHERE`` and as a value, scalar aggregates, correlated by
``<>``/``>``/``<`` (with an ``=`` too) -- is planned without a Fallback and equals the
recompute path and PostgreSQL 15 after commits that insert rows with NULL keys, update a key
to NULL and back, and delete the last row of a key."""

from __future__ import annotations

import pytest
from reference_models import catalogs, check_script
from sql_oracle import views_equal_postgres

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT k, v FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k > t.k)",
    "SELECT k, v FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k <> t.k)",
    "SELECT k, s FROM t WHERE v IN (SELECT u.k FROM u WHERE u.k <> t.k)",
    "SELECT k, s FROM t WHERE EXISTS (SELECT 1 FROM r WHERE r.k = t.v AND r.x > t.k)",
    "SELECT k, v, (SELECT count(*) FROM u WHERE u.k < t.k) AS n FROM t",
    "SELECT k, (SELECT max(w) FROM u WHERE u.k > t.k) AS m, (SELECT sum(x) FROM r WHERE r.k <> t.k) AS x FROM t",
    "SELECT k, v FROM t WHERE v >= (SELECT count(*) FROM u WHERE u.k > t.k)",
    "SELECT k, v FROM t WHERE (SELECT count(*) FROM u WHERE u.k > t.k AND u.k < t.v) = 0",
    "SELECT k, v FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k > t.k AND u.k < t.v)",  # two keys, either NULL
    "SELECT u.k, u.w FROM u WHERE EXISTS (SELECT 1 FROM t WHERE t.k = u.k AND t.v > "
    "(SELECT min(r.k) FROM r WHERE r.k <> u.k))",
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'a'), (NULL, 2, 'b'), (NULL, NULL, NULL), (3, 1, 'c'), (NULL, 2, 'b')",
    "INSERT INTO u VALUES (2, 'x'), (NULL, 'y'), (4, NULL), (1, 'z')",
    "INSERT INTO r VALUES (2, true, 0.5), (1, NULL, 3.0), (NULL, false, 9.0)",
    "UPDATE t SET k = NULL WHERE k = 1",  # the key's last row: the key goes, the row goes NULL
    "UPDATE t SET k = 2 WHERE k IS NULL AND s = 'b'",  # NULL keys become a new key
    "UPDATE u SET k = NULL WHERE k = 2; INSERT INTO t VALUES (NULL, 4, 'd')",
    "UPDATE t SET k = 5, v = NULL WHERE s IS NULL",
    "UPDATE u SET k = 3 WHERE k IS NULL",
    "DELETE FROM t WHERE k IS NOT NULL",  # only NULL keys left: no key at all
    "DELETE FROM u; INSERT INTO t VALUES (NULL, 1, 'e'), (0, 0, 'f')",
    "DELETE FROM t WHERE k IS NULL",
]


def test_null_outer_keys_plan_and_equal_the_recompute():
    cats = catalogs(BODIES)
    for i, b in enumerate(BODIES):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), (b, [f.reason for f in mv.plan.fallbacks()])
    check_script(cats, SCRIPT)


def test_null_outer_keys_equal_postgres(pg):
    from test_maintained import TABLES

    assert views_equal_postgres(pg, TABLES, BODIES, SCRIPT) == len(BODIES) * (len(SCRIPT) + 1)
