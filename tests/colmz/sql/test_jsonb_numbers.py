"""jsonb numbers compared as PostgreSQL 15 compares them: by value (``1.0`` is ``1``, ``10 >
9``), printed as written.

``colmz.sql.jsonb.jsonb_key`` orders jsonb values as PostgreSQL's ``compareJsonbContainers``
(``src/backend/utils/adt/jsonb_util.c``) does: checked against a transcription of that
function here (Hypothesis, values holding numbers written several ways), and against
PostgreSQL's own ``<`` and ``=`` over every pair of a list of values. The query path's rules
(``colmz.sql.jsonbcols``) and the maintained views' (``colmz.dataflow.plan``) are checked in
``tests/sql_corpus.py``'s ``jnum_*`` queries and below: a view comparing, joining, grouping
jsonb through subqueries and CTEs equals the recompute path and PostgreSQL after writes of
the same numbers in other forms.
"""

from __future__ import annotations

import decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.sql import UnsupportedSQL
from colmz.sql.jsonb import jsonb_dump, jsonb_key, jsonb_load, jsonb_plain

# ---------------------------------------------------------------------------- the reference

_NULL, _STRING, _NUMERIC, _BOOL, _ARRAY, _OBJECT = 0, 1, 2, 3, 0x10, 0x11  # jbvType


def _type(v) -> int:
    if v is None:
        return _NULL
    if isinstance(v, bool):
        return _BOOL
    if isinstance(v, str):
        return _STRING
    if isinstance(v, dict):
        return _OBJECT
    if isinstance(v, list):
        return _ARRAY
    return _NUMERIC


def _tokens(v, top: bool = True):
    """JsonbIteratorNext's tokens (skipNested false): (token, type, value)."""
    if isinstance(v, dict):
        yield "BEGIN_OBJECT", _OBJECT, (len(v), False)
        for k in sorted(v, key=lambda k: (len(k.encode()), k.encode())):
            yield "KEY", _STRING, k
            if isinstance(v[k], (dict, list)):
                yield from _tokens(v[k], False)
            else:
                yield "VALUE", _type(v[k]), v[k]
        yield "END_OBJECT", None, None
    elif isinstance(v, list) or top:
        raw = not isinstance(v, list)
        items = [v] if raw else v
        yield "BEGIN_ARRAY", _ARRAY, (len(items), raw)
        for x in items:
            if isinstance(x, (dict, list)):
                yield from _tokens(x, False)
            else:
                yield "ELEM", _type(x), x
        yield "END_ARRAY", None, None


def _scalar_cmp(t: int, a, b) -> int:
    if t == _NULL:
        return 0
    if t == _STRING:
        a, b = a.encode(), b.encode()  # the C collation
    return (a > b) - (a < b)


def compare_jsonb(a, b) -> int:
    """compareJsonbContainers, transcribed: <0, 0 or >0."""
    ita, itb = _tokens(a), _tokens(b)
    while True:
        ra, ta, va = next(ita, ("DONE", None, None))
        rb, tb, vb = next(itb, ("DONE", None, None))
        if ra == rb:
            if ra == "DONE":
                return 0
            if ra in ("END_ARRAY", "END_OBJECT"):
                continue
            if ta == tb:
                if ta == _ARRAY:
                    res = 0
                    if va[1] != vb[1]:  # rawScalar
                        res = -1 if va[1] else 1
                    if va[0] != vb[0]:  # nElems (set after rawScalar: it wins)
                        res = 1 if va[0] > vb[0] else -1
                elif ta == _OBJECT:
                    res = 0 if va[0] == vb[0] else (1 if va[0] > vb[0] else -1)
                else:
                    res = _scalar_cmp(ta, va, vb)
            else:
                res = 1 if ta > tb else -1
        else:
            res = 1 if ta > tb else -1
        if res:
            return res


# ---------------------------------------------------------------------------- values

_numbers = st.sampled_from(["0", "-0", "0.0", "1", "1.0", "1.00", "-1", "-1.5", "-1.50", "2.5", "10", "9",
                            "1e2", "100", "100.0", "0.001", "1e-3", "12345678901234567890", "-12345678901234567890.5"])
_scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(["", "a", "b", "ab", "é", "1"]),
                     _numbers.map(lambda t: jsonb_load(t)))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "aa", "c"]), inner, max_size=3)),
    max_leaves=8)


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


@settings(max_examples=400, deadline=None)
@given(_values, _values)
def test_jsonb_key_orders_as_compare_jsonb_containers(a, b):
    ka, kb = jsonb_key(jsonb_dump(a)), jsonb_key(jsonb_dump(b))
    assert _sign((ka > kb) - (ka < kb)) == _sign(compare_jsonb(a, b)), (jsonb_dump(a), jsonb_dump(b))


@settings(max_examples=200, deadline=None)
@given(_values)
def test_a_value_and_its_numbers_in_other_forms_have_one_key(a):
    def other(v):  # each number with two more trailing zeros
        if isinstance(v, dict):
            return {k: other(x) for k, x in v.items()}
        if isinstance(v, list):
            return [other(x) for x in v]
        if isinstance(v, decimal.Decimal):
            return v.quantize(decimal.Decimal(1).scaleb(min(v.as_tuple().exponent, 0) - 2)) if v.is_finite() else v
        return v

    text, written = jsonb_dump(a), jsonb_dump(other(a))
    assert jsonb_key(text) == jsonb_key(written)
    if text != written:  # a number's other form is not plain (its text is not its value's only one)
        with pytest.raises(ValueError, match="is not supported by colmz"):
            jsonb_plain(written)


def test_doc_examples_of_postgresql_order():
    # PostgreSQL's documented order: Object > Array > Boolean > Number > String > Null, an
    # object of more pairs above, an array of more elements above, an empty array below null
    docs = ['{"a": 1, "b": 1}', '{"b": 1}', '[1, 2]', '[3]', "true", "false", "10", "9.5", '"b"', '"ab"', "null",
            "[]"]
    assert sorted(docs, key=jsonb_key) == list(reversed(docs))


# ---------------------------------------------------------------------------- PostgreSQL 15

VALUES = ["1", "1.0", "1.00", "10", "9", "-0", "0.0", "-1.5", "-1.25", "1e2", "100.000", '"1"', '"a"', '"ab"', '"b"',
          '"é"', "null", "true", "false", "[]", "[1]", "[1.0]", "[1, 2]", "[2]", "[[1]]", '[{"a": 1}]', "{}",
          '{"a": 1}', '{"a": 1.0}', '{"b": 1}', '{"aa": 1}', '{"a": 1, "b": 2}', '{"a": [1, 2.50]}',
          '{"a": [1, 2.5]}', '{"a": null}', '{"a": {"b": 1}}']


@pytest.fixture(scope="module")
def pg():
    from sql_oracle import jsonb_text_connection

    conn = jsonb_text_connection()
    yield conn
    conn.close()


def test_jsonb_key_is_postgresqls_order_and_equality(pg):
    pg.execute("CREATE TABLE v (i INT, j JSONB)")
    with pg.cursor() as cur:
        cur.executemany("INSERT INTO v VALUES (%s, %s)", list(enumerate(VALUES)))
    rows = pg.execute("SELECT a.i, b.i, a.j < b.j, a.j = b.j FROM v a, v b").fetchall()
    assert len(rows) == len(VALUES) ** 2
    keys = [jsonb_key(jsonb_dump(jsonb_load(t))) for t in VALUES]
    for i, k, less, equal in rows:
        assert (keys[i] < keys[k], keys[i] == keys[k]) == (less, equal), (VALUES[i], VALUES[k])
    # ... and colmz's query path compares, orders and prints as PostgreSQL does
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE v (i INT, j JSONB)")
    cat.execute("INSERT INTO v VALUES " + ", ".join(f"({i}, '{t}')" for i, t in enumerate(VALUES)))
    for q in ("SELECT a.i, b.i AS k, a.j < b.j AS l, a.j = b.j AS e, a.j >= b.j AS g FROM v a, v b ORDER BY 1, 2",
              "SELECT i, j, j::text AS t FROM v ORDER BY j, i", "SELECT i FROM v ORDER BY j DESC, i"):
        assert [tuple(r.values()) for r in cat.sql(q).to_pylist()] == [tuple(r) for r in pg.execute(q).fetchall()], q


def test_grouping_a_number_in_two_forms_is_answered_or_refused_by_name():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE v (i INT, j JSONB)")
    cat.execute("INSERT INTO v VALUES (1, '1'), (2, '[1, 2.5]'), (3, '1')")
    assert cat.sql("SELECT j, count(*) AS n FROM v GROUP BY j ORDER BY j").to_pylist() == [
        {"j": "1", "n": 2}, {"j": "[1, 2.5]", "n": 1}]
    cat.execute("INSERT INTO v VALUES (4, '[1.0, 2.50]')")
    for q in ("SELECT j, count(*) AS n FROM v GROUP BY j", "SELECT DISTINCT j FROM v",
              "SELECT j FROM v UNION SELECT j FROM v"):
        with pytest.raises(UnsupportedSQL, match="number written with trailing zeros"):
            cat.sql(q)
    # counted or grouped without being shown, and compared, it is one value with [1, 2.5]
    # (PostgreSQL's answers)
    assert cat.sql("SELECT count(DISTINCT j) AS n FROM v").to_pylist() == [{"n": 2}]
    assert cat.sql("SELECT count(*) AS n, min(i) AS m FROM v GROUP BY j ORDER BY m").to_pylist() == [
        {"n": 2, "m": 1}, {"n": 2, "m": 2}]
    assert cat.sql("SELECT i, count(*) OVER (PARTITION BY j) AS n FROM v ORDER BY i").to_pylist() == [
        {"i": i, "n": 2} for i in (1, 2, 3, 4)]
    assert cat.sql("SELECT a.i, b.i AS k FROM v a JOIN v b ON a.j = b.j AND a.i < b.i ORDER BY 1, 2").to_pylist() == [
        {"i": 1, "k": 3}, {"i": 2, "k": 4}]


# ---------------------------------------------------------------------------- maintained views

TABLE = "CREATE TABLE n (id INT, j JSONB)"
#: (name, body): each compares jsonb holding numbers, some through a subquery or CTE.
BODIES = [
    ("eq", "SELECT id FROM n WHERE j = '1'"),
    ("obj", """SELECT id, j = '{"a": 1, "b": [2.5]}' AS e FROM n"""),
    ("ordered", "SELECT id FROM n WHERE j > '5' AND j < '100'"),
    ("joined", "SELECT a.id AS a, b.id AS b FROM n a JOIN n b ON a.j = b.j AND a.id < b.id"),
    ("sub", "SELECT id FROM (SELECT id, j AS x FROM n) s WHERE x = '1'"),
    ("cte", "WITH c AS (SELECT id, j FROM n) SELECT id, j <> '[1]' AS d FROM c"),
    ("cte_join", "WITH c AS (SELECT id, j AS v FROM n) SELECT a.id AS a, b.id AS b FROM c a, c b WHERE a.v = b.v"),
    ("sub_arrow", "SELECT id FROM (SELECT id, j -> 'a' AS x FROM n) s WHERE x = '1'"),
    ("sub_concat", "SELECT id, x || x AS m FROM (SELECT id, j AS x FROM n) s"),
    ("contains", "SELECT id FROM n WHERE j @> '[1.0]'"),
]
SCRIPT = [
    """INSERT INTO n VALUES (1, '1'), (2, '1.0'), (3, '{"a": 1.0, "b": [2.50]}'), (4, '{"b": [2.5], "a": 1}'),
       (5, '[1.00]'), (6, '10'), (7, '9.0'), (8, NULL), (9, '"1"'), (10, '[1, 2]')""",
    "UPDATE n SET j = '1.000' WHERE id = 6",  # onto 1
    "DELETE FROM n WHERE id IN (1, 4)",
    """INSERT INTO n VALUES (11, '{"a": 1, "b": [2.5000]}'), (12, '99.99'), (13, '[1]')""",
    "UPDATE n SET j = '100' WHERE j = '1'",  # off it
]


def test_views_of_jsonb_numbers_equal_the_recompute_and_postgres(pg):
    pg.execute("DROP TABLE IF EXISTS n CASCADE")
    pg.execute(TABLE)
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLE)
    for name, body in BODIES:
        pg.execute(f"CREATE VIEW {name} AS {body}")
        for cat in cats:
            cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {body}")
        mv = cats[0].object(name).maintained
        assert mv.incremental and mv.plan is not None and not mv.plan.fallbacks(), (name, mv.reasons)
    for step in ["creation", *SCRIPT]:
        if step != "creation":
            pg.execute(step)
            for cat in cats:
                cat.execute(step)
        for name, _ in BODIES:
            want = sorted(map(repr, pg.execute(f"SELECT * FROM {name}").fetchall()))
            for cat in cats:
                got = sorted(repr(tuple(r.values())) for r in cat.sql(f"SELECT * FROM {name}").to_pylist())
                assert got == want, (name, step, cat)


def test_a_view_grouping_jsonb_refuses_a_number_in_another_form_as_the_query_does():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLE)
        cat.execute("INSERT INTO n VALUES (1, '1'), (2, '[1, 2.5]'), (3, '1')")
        cat.execute("CREATE MATERIALIZED VIEW g AS SELECT j, count(*) AS n FROM n GROUP BY j")
        cat.execute("CREATE MATERIALIZED VIEW d AS SELECT DISTINCT x FROM (SELECT j AS x FROM n) s")
    assert "Check [jsonb text of" in str(cats[0].explain("g"))
    for cat in cats:
        now = cat.now
        with pytest.raises(UnsupportedSQL, match="number written with trailing zeros"):
            cat.execute("INSERT INTO n VALUES (4, '[1.0, 2.5]')")
        assert cat.now == now
        cat.execute("INSERT INTO n VALUES (4, '[1, 2.5]')")
        assert sorted(map(repr, cat.sql("SELECT * FROM g").to_pylist())) == [
            "{'j': '1', 'n': 2}", "{'j': '[1, 2.5]', 'n': 2}"]
        assert len(cat.sql("SELECT * FROM d")) == 2
