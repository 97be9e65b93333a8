"""An integer literal cast to an integer type (``20::bigint``) in a ``SELECT`` without
``FROM`` is a Constant of that type (``colmz.dataflow.plan``): views equal to the recompute;
a value beyond the type is computed by a SQL segment over the constant row, raising
PostgreSQL's error when it runs, as the recompute path does."""

from __future__ import annotations

import pyarrow as pa
import pytest
from test_maintained import TABLES, check_equal, run

import colmz
from colmz.dataflow.plan import Constant, SqlMapFilter, plan
from colmz.sql import SQLError

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT v FROM t INTERSECT ALL SELECT 7::bigint",
    "SELECT k FROM t UNION ALL SELECT CAST(-3 AS int)",
    "SELECT v FROM t EXCEPT SELECT 0::int8",
]


def test_a_cast_integer_literal_is_a_typed_constant():
    p = plan("SELECT 20::bigint AS b, CAST(-3 AS int) AS i", {})
    assert isinstance(p.root, Constant) and p.root.rows == ((20, -3),)
    assert [c.type for c in p.root.schema] == [pa.int64(), pa.int32()]
    root = plan("SELECT 3000000000::int", {}).root
    assert isinstance(root, SqlMapFilter) and isinstance(root.input, Constant)
    for views in ("incremental", "recompute"):
        with pytest.raises(SQLError, match="out of range"):
            colmz.Catalog(views=views).execute("CREATE MATERIALIZED VIEW x AS SELECT 3000000000::int")


def test_cast_constants_in_set_operations_equal_the_recompute():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLES[0])
        for i, b in enumerate(BODIES):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
    for i, b in enumerate(BODIES):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), b
    check_equal(cats, "creation")
    for text in ["INSERT INTO t VALUES (1, 7, 'a'), (NULL, 7, 'b'), (-3, 0, NULL)", "DELETE FROM t WHERE k = 1",
                 "DELETE FROM t"]:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)
