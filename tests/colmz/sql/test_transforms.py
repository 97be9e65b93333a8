"""``colmz.sql.transforms``: the table of call transforms, applied on DuckDB's parse tree."""

from __future__ import annotations

import pytest

from colmz.sql import SQLError, UnsupportedSQL, connect, parse_tree, translate
from colmz.sql.tokens import tokenize
from colmz.sql.transforms import Call, apply_transforms, may_transform


@pytest.fixture(scope="module")
def con():
    return connect()


def test_a_quoted_call_name_gets_postgresqls_meaning(con):
    # "lpad"(...) is the same function as lpad(...) in PostgreSQL: padded with spaces, and
    # "btrim" is DuckDB's trim (the call is matched on the tree, not on a bare word).
    got = con.sql(translate("SELECT \"lpad\"('ab', 4), \"btrim\"('xyx', 'x'), \"every\"(b) "
                            "FROM (VALUES (true), (false)) v(b)")).fetchall()
    assert got == [("  ab", "y", False)]


def test_calls_nest_and_sit_under_operators(con):
    # A node starting at a call's name is that call only when its own name is the call's
    # (f(x) * 2 is a multiplication node starting there); nested calls are rewritten inside
    # out, in one reading.
    rows = con.sql(translate("SELECT generate_series(1, 3) * 2 AS g ORDER BY g")).fetchall()
    assert rows == [(2,), (4,), (6,)]
    assert con.sql(translate("SELECT rpad(lpad(btrim(' a '), 2), 3) || '|'")).fetchall() == [(" a |",)]
    assert con.sql(translate("SELECT (SELECT lpad('x', 2)) WHERE EXISTS (SELECT every(true))")).fetchall() \
        == [(" x",)]


def test_a_predicate_is_read_as_one_expression(con):
    # translate() also rewrites bare expressions (continual tasks' predicates).
    assert translate("k > 1 AND lpad(s, 2) = ' a'") == "k > 1 AND lpad(s, 2, ' ') = ' a'"


def test_set_returning_calls_in_conditionals_are_refused_on_the_tree():
    for sql, inside in [("SELECT greatest(generate_series(1, 2), 0)", "greatest()"),
                        ("SELECT coalesce(1, CASE WHEN true THEN generate_series(1, 2) END)", "CASE")]:
        with pytest.raises(UnsupportedSQL, match=rf"generate_series\(\) inside {inside}"):
            translate(sql)
    # its own subquery is not inside the CASE around it
    assert "unnest(generate_series(1, 2))" in translate(
        "SELECT CASE WHEN true THEN (SELECT max(g) FROM (SELECT generate_series(1, 2) AS g) s) END")


def test_the_tree_is_read_only_for_texts_calling_a_name_of_the_table():
    # The cost of a text without such a call is a scan of its tokens: no parse by DuckDB.
    before = parse_tree.cache_info()
    sql = ("SELECT a, max(b), t1.x::date FROM t, t1 WHERE \"rounded\" > 1 AND pad IS NULL "
           "AND (a) = 2 GROUP BY a")
    assert not may_transform(sql, tokenize(sql)) and apply_transforms(sql, tokenize(sql)) == sql
    after = parse_tree.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)
    assert all(may_transform(s, tokenize(s)) for s in ("SELECT ROUND (x)", 'SELECT "lpad"(x, 2)', "SELECT 1.5",
                                          "SELECT a LIKE b", "SELECT (a, b) = (1, 2)", "SELECT x::numeric",
                                          "SELECT x::int", "SELECT CAST(x AS text)"))


def test_row_comparisons_give_postgresqls_answers(con):
    # Field by field: the first unequal or NULL pair decides; IN is the OR of the rows'
    # equalities; a row IS NULL when every field is. The NOT of a NOT IN and its IN are one
    # node's span in the tree, rewritten once.
    got = con.sql(translate(
        "SELECT (1, NULL) = (1, 2), (1, NULL) <> (2, 2), (1, 2) < (1, 3), (1, NULL) < (2, 0), "
        "(1, 2) NOT IN ((1, 2), (3, 4)), ROW(NULL, NULL) IS NULL, (1, NULL) IS NOT NULL, "
        "(lpad('a', 2), 1) = (' a', 1)")).fetchall()
    assert got == [(None, True, True, True, False, True, False, True)]
    with pytest.raises(UnsupportedSQL, match="with a subquery"):
        translate("SELECT (1, 2) = (SELECT 1, 2)")
    with pytest.raises(UnsupportedSQL, match="nested rows"):
        translate("SELECT (1, (2, 3)) = (1, (2, 3))")


def test_row_comparisons_that_would_repeat_a_volatile_call_are_refused(con):
    # (random(), 1) < (0.5, 2) compares field by field in a CASE that names each field up to
    # three times: random() would be drawn again each time, where PostgreSQL draws it once.
    for sql in ["SELECT (random(), 1) < (0.5, 2)", "SELECT (random(), 1) IN ((0.5, 1), (0.7, 1))"]:
        with pytest.raises(UnsupportedSQL, match=r"volatile call \(random\(\)\)"):
            translate(sql)
    # = and a one-row IN name each field once
    assert con.sql(translate("SELECT (random() < 2, 1) = (true, 1), (random() < 2, 1) IN ((true, 1))")).fetchall() \
        == [(True, True)]


def test_array_slices_are_postgresqls(con):
    # One-based and inclusive in both; a bound outside the array is clamped to it in
    # PostgreSQL, where DuckDB counts a negative one from the end. A bound left out is the
    # array's end.
    got = con.sql(translate(
        "SELECT (ARRAY[1, 2, 3])[2:], (ARRAY[1, 2, 3])[:2], (ARRAY[1, 2, 3])[:], (ARRAY[1, 2, 3])[-1:2], "
        "(ARRAY[1, 2, 3])[2:-1], ('{1,2,3}'::int[])[:-1], (ARRAY[1, 2, 3])[NULL:]")).fetchall()
    assert got == [([2, 3], [1, 2], [1, 2, 3], [1, 2], [], [], None)]
    got = con.sql(translate("SELECT k, (ARRAY[1, 2, 3])[k:k + 1], (ARRAY[1, 2, 3])[:k] "
                            "FROM (VALUES (-2), (2), (NULL)) v(k) ORDER BY k")).fetchall()
    assert got == [(-2, [], []), (2, [2, 3], [1, 2]), (None, None, None)]
    for sql, match in [("SELECT name[2:] FROM t", "cannot see is an array"), ("SELECT (ARRAY[1])[1:2:1]", "step"),
                       ("SELECT (ARRAY[[1]])[1][1:]", "subscripted array"),
                       ("SELECT (ARRAY[1])[1:][1]", "subscript of an array slice"),
                       ("SELECT (ARRAY[1])[:random() * 2]", "volatile call")]:
        with pytest.raises(UnsupportedSQL, match=match):
            translate(sql)
    with pytest.raises(SQLError, match=r'syntax error at or near "\["'):  # PostgreSQL's words
        translate("SELECT (ARRAY[1])[[]:1]")


def test_float_and_bytea_types_are_read_off_the_tree(con):
    # float is float8 wherever the tree has it as a type, a typed literal too (DuckDB's FLOAT
    # is 4 bytes: float '1.1' would not equal 1.1::float8); float(p) is real up to p = 24.
    # CAST(... AS bytea) of a string reads PostgreSQL's hex input as '...'::bytea does.
    got = con.sql(translate(r"SELECT float '1.1' = 1.1::float8, CAST(1.1 AS float) = 1.1::float8, "
                            r"CAST('\x0aff' AS bytea), 'ab'::bytea")).fetchall()
    assert got == [(True, True, b"\n\xff", b"ab")]
    assert translate("SELECT x AS float FROM t") == "SELECT x AS float FROM t"
    inner = translate("SELECT z::float(24) AS a, CAST(z AS float(25)) AS b FROM (SELECT 1.5 AS z)")
    assert con.sql(f"SELECT typeof(a), typeof(b) FROM ({inner})").fetchall() == [("FLOAT", "DOUBLE")]
    with pytest.raises(UnsupportedSQL, match="cast to bytea of anything but a string literal"):
        translate("SELECT CAST(b AS bytea) FROM t")


# ----------------------------------------------------------------------------- PostgreSQL's answers
# Each of these was a different answer than PostgreSQL 15's before (the dialect corpus's
# KNOWN_WRONG entries): the answers below are PostgreSQL's.


def _cat():
    import colmz

    cat = colmz.Catalog()
    cat.execute("CREATE TABLE p (id INT, name TEXT, joined DATE, t TEXT)")
    cat.execute("INSERT INTO p VALUES (1, 'Alice', DATE '2020-01-15', '1e400'), (2, 'Bob', DATE '2021-03-02', '2.5')")
    return cat


def test_null_numeric_takes_the_scale_of_the_values_beside_it():
    # NULL::numeric was DECIMAL(38,0), so coalesce(NULL::numeric, 100.005) gave 100
    got = _cat().sql("SELECT coalesce(NULL::numeric, 100.005) AS a, greatest(100.005, NULL::numeric) AS b")
    assert [str(v) for v in got.to_pylist()[0].values()] == ["100.005", "100.005"]


def test_float_casts_of_text_past_the_range_raise():
    from colmz.sql import SQLError

    cat = _cat()
    for sql, msg in [("SELECT CAST('1e400' AS double precision)", '"1e400" is out of range for type double precision'),
                     ("SELECT CAST('-1e40' AS real)", '"-1e40" is out of range for type real'),
                     ("SELECT t::float8 FROM p", '"1e400" is out of range for type double precision')]:
        with pytest.raises(SQLError, match=msg):
            cat.sql(sql)
    got = cat.sql("SELECT CAST('Infinity' AS float8) AS a, t::float8 AS b FROM p WHERE id = 2").to_pylist()
    assert got == [{"a": float("inf"), "b": 2.5}]


def test_varchar_n_truncates_and_float_p_is_real():
    import pyarrow as pa

    got = _cat().sql("SELECT 'abcd'::varchar(2) AS a, CAST(name AS character varying(3)) AS b, "
                     "1.5::float(24) AS c, 1.5::float(25) AS d FROM p WHERE id = 1")
    assert got.to_pylist() == [{"a": "ab", "b": "Ali", "c": 1.5, "d": 1.5}]
    assert [f.type for f in got.schema][2:] == [pa.float32(), pa.float64()]
    assert _cat().sql("SELECT 1::float(3)").column_names == ["float4"]


def test_date_trunc_of_a_date_is_a_timestamptz():
    import pyarrow as pa

    got = _cat().sql("SELECT date_trunc('month', DATE '2024-02-15') AS d, date_trunc('year', joined) AS j, "
                     "date_trunc('day', TIMESTAMP '2024-01-02 03:04') AS t FROM p WHERE id = 1")
    assert [f.type for f in got.schema] == [pa.timestamp("us", tz="UTC")] * 2 + [pa.timestamp("us")]


def test_regular_expression_dot_matches_a_newline():
    got = _cat().sql("SELECT E'a\\nb' ~ 'a.b' AS a, E'a\\nb' ~* 'A.B' AS b, E'a\\nb' !~ 'a.b' AS c, "
                     "'ab' !~* 'X' AS d").to_pylist()
    assert got == [{"a": True, "b": True, "c": False, "d": True}]


def test_jsonb_text_and_concatenation_are_postgresqls():
    from colmz.sql.transforms import jsonb_concat, jsonb_text

    assert jsonb_text('{"b":1,"a":2, "a": 3, "cc": [1e2, -0, 1.50]}') == '{"a": 3, "b": 1, "cc": [100, 0, 1.50]}'
    assert jsonb_concat('{"a": 1, "b": 2}', '{"b": 3}') == '{"a": 1, "b": 3}'
    assert jsonb_concat('[1]', '2') == '[1, 2]' and jsonb_concat('{"a": 1}', '[2]') == '[{"a": 1}, 2]'
    cat = _cat()
    got = cat.sql("""SELECT '{"b":1,"a":2}'::jsonb::text AS a, '{"a": null}'::jsonb || '{"z": 1}' AS b,
                     'x' || '[1]' AS c""").to_pylist()
    assert got == [{"a": '{"a": 2, "b": 1}', "b": '{"a": null, "z": 1}', "c": "x[1]"}]
    # a text column beside a JSON literal is appended to (the catalog knows name is text)
    assert cat.sql("""SELECT name || '{"z": 1}' AS n FROM p ORDER BY id""").column("n").to_pylist() == [
        'Alice{"z": 1}', 'Bob{"z": 1}']
    # ... through a subquery's column too (its kind follows the column it passes on)
    assert cat.sql("""SELECT x || '{"z": 1}' AS n FROM (SELECT id, name AS x FROM p) s ORDER BY id""").column(
        "n").to_pylist() == ['Alice{"z": 1}', 'Bob{"z": 1}']
    # ... and through a value typed text (coalesce of text columns: colmz.sql.typing_pass)
    assert cat.sql("""SELECT x || '{"z": 1}' AS n FROM (SELECT id, coalesce(name, name) AS x FROM p) s ORDER BY id"""
                   ).column("n").to_pylist() == ['Alice{"z": 1}', 'Bob{"z": 1}']
    with pytest.raises(UnsupportedSQL, match=r"\|\| of jsonb"):  # x might be jsonb: merged, or text: appended
        cat.sql("""SELECT x || '{"z": 1}' FROM (SELECT name || '' AS x FROM p) s""")


def test_derived_columns_are_named_as_postgresql_names_them():
    cat = _cat()
    assert cat.sql("SELECT * FROM (SELECT 1) s").column_names == ["?column?"]
    assert cat.sql("SELECT * FROM p, LATERAL (SELECT p.id * 2) x WHERE p.id = 1").column_names[-1] == "?column?"
    assert cat.sql("WITH w AS (SELECT upper(name), id::text FROM p) SELECT * FROM w").column_names \
        == ["upper", "id"]


def test_a_row_value_as_a_result_column_is_refused():
    for sql in ["SELECT ARRAY[1], ROW(1, 2)", "SELECT id, (id, name) FROM p"]:
        with pytest.raises(UnsupportedSQL, match="a row value"):
            _cat().sql(sql)
    assert _cat().sql("SELECT (1, 2) = (1, 2) AS a").to_pylist() == [{"a": True}]


def test_regexp_replace_dot_matches_a_newline_and_recursive_ctes_are_named():
    cat = _cat()
    got = cat.sql("SELECT regexp_replace(E'a\\nb', 'a.b', 'X') AS a, regexp_replace('aAa', 'a', 'x', 'gi') AS b")
    assert got.to_pylist() == [{"a": "X", "b": "xxx"}]
    assert cat.sql("WITH RECURSIVE r AS (SELECT 1 UNION ALL SELECT 1 WHERE false) SELECT * FROM r").column_names \
        == ["?column?"]


def test_float_arithmetic_past_the_range_raises_as_postgresql():
    from colmz.sql import SQLError

    cat = _cat()
    cat.execute("CREATE TABLE n (f DOUBLE PRECISION, i INT)")
    cat.execute("INSERT INTO n VALUES (1e300, 2), ('Infinity', 3), (0.5, 4)")
    for sql in ["SELECT 1e300::float8 * 1e300::float8", "SELECT 1.7e308::float8 + 1.7e308::float8",
                "SELECT f::float8 * f FROM n", "SELECT (f * f::float8) * 0 FROM n WHERE i = 2",
                "SELECT f / 1e-300 FROM n", "SELECT sqrt(f) * f * f FROM n WHERE i = 2"]:
        with pytest.raises(SQLError, match="value out of range: overflow"):
            cat.sql(sql)
    for sql in ["SELECT 1e-300::float8 * 1e-300::float8", "SELECT f::float8 / 1e300 / 1e300 FROM n WHERE i = 4"]:
        with pytest.raises(SQLError, match="value out of range: underflow"):
            cat.sql(sql)
    assert cat.sql("SELECT 0::float8 * 1e-300 AS a, 1e-300::float8 - 1e-300 AS b").to_pylist() == [{"a": 0, "b": 0}]
    # an infinity operand is no overflow; integers, intervals and dates are not checked
    got = cat.sql("SELECT f::float8 * 2 AS a, i * 2 + 1 AS b, INTERVAL '1 day' * 2 AS c, DATE '2024-01-01' + i AS d "
                  "FROM n WHERE i > 2 ORDER BY i").to_pylist()
    assert [(r["a"], r["b"]) for r in got] == [(float("inf"), 7), (1.0, 9)]
    assert cat.sql("SELECT i + 1 AS k, count(*) AS c FROM n GROUP BY i + 1 ORDER BY 1").num_rows == 3
    assert cat.sql("SELECT i * 1e0::float8 AS k, count(*) AS c FROM n GROUP BY i * 1e0::float8").num_rows == 3


def test_the_tree_is_read_only_where_a_rule_may_apply():
    # Reading the tree costs more than the rest of translate: plain arithmetic and stars over
    # plain subqueries do not read it; a cast to text, boolean or an integer type and the
    # operands of || are rules of the table (PostgreSQL's text of values).
    for sql in ["SELECT id + 1, name FROM people", "SELECT * FROM (SELECT id, p.name AS n FROM people p) s",
                "SELECT count(*) FROM people"]:
        assert not may_transform(sql, tokenize(sql)), sql
    for sql in ["SELECT * FROM (SELECT 1) s", "SELECT f::float8 * 2 FROM n", "SELECT name::varchar(2) FROM p",
                "SELECT name::varchar FROM people", "SELECT id::int8 FROM people",
                "SELECT body || '{\"a\": 1}' FROM d", "SELECT 'a' ~ 'b'", "SELECT name || 'x' FROM people"]:
        assert may_transform(sql, tokenize(sql)), sql


def test_text_of_a_choice_among_numeric_scales_is_refused():
    # Found by the generated campaign: least(1.5, 100.005)::text is '1.5' in PostgreSQL (a
    # numeric keeps its own scale) and was '1.500' in colmz (DuckDB's widest DECIMAL).
    cat = _cat()
    for sql in ["SELECT (least(1.5, 100.005))::text FROM p", "SELECT coalesce(NULL, 1.5, 2.25)::text",
                "SELECT CAST(CASE WHEN id > 1 THEN 1.5 ELSE 2 END AS varchar) FROM p"]:
        with pytest.raises(UnsupportedSQL, match="different scales"):
            cat.sql(sql)
    assert cat.sql("SELECT least(1.5, 2.5)::text AS a").to_pylist() == [{"a": "1.5"}]


def _catalog(*setup):
    import colmz

    cat = colmz.Catalog()
    for stmt in setup:
        cat.execute(stmt)
    return cat


def test_a_repeated_column_name_of_a_subquery_is_kept_under_a_star():
    # DuckDB renames a subquery's or CTE's repeated column name (?column?_1, a_1; compared
    # without case); PostgreSQL keeps each: the repeat is marked and its name given back.
    cat = _catalog("CREATE TABLE t (a INT, b TEXT)", "INSERT INTO t VALUES (1, 'x')")
    assert cat.sql("SELECT * FROM (SELECT 1, 2) s").column_names == ["?column?", "?column?"]
    assert cat.sql("SELECT * FROM (SELECT 1 AS a, 2 AS a, 3 AS a_1) s").column_names == ["a", "a", "a_1"]
    assert cat.sql('SELECT * FROM (SELECT 1 AS "A", 2 AS a) s').column_names == ["A", "a"]
    got = cat.sql("WITH s AS (SELECT a, b AS a, upper(b), lower(b) AS upper FROM t) SELECT * FROM s")
    assert got.column_names == ["a", "a", "upper", "upper"]
    assert [c.to_pylist() for c in got.columns] == [[1], ["x"], ["X"], ["x"]]
    assert cat.sql("SELECT * FROM (SELECT * FROM (SELECT a, a FROM t) x) y").column_names == ["a", "a"]


def test_jsonb_arrow_gives_postgresqls_jsonb_text_and_binds_as_postgresql_reads_it():
    # DuckDB's -> is a lambda arrow (looser than =, IS NULL, AND) giving compact JSON text;
    # PostgreSQL's binds tighter and prints jsonb with spaces and its key order.
    cat = _catalog("CREATE TABLE d (id INT, j JSONB)",
                   """INSERT INTO d VALUES (1, '{"a": 1, "b": {"c": "x", "bb": [1, 2]}}'), (2, '{"a": null}')""")
    q = ("SELECT id, j -> 'b' AS b, (j -> 'b')::text AS t, j -> 'b' = '{\"bb\": [1,2], \"c\": \"x\"}'::jsonb AS e, "
         "j -> 'a' IS NULL AS n, j -> 'b' -> 'bb' ->> 1 AS v FROM d ORDER BY id")
    assert cat.sql(q).to_pylist() == [
        {"id": 1, "b": '{"c": "x", "bb": [1, 2]}', "t": '{"c": "x", "bb": [1, 2]}', "e": True, "n": False, "v": "2"},
        {"id": 2, "b": None, "t": None, "e": None, "n": False, "v": None},
    ]
    assert cat.sql("SELECT '{\"a\": {\"b\": 2}}'::jsonb -> 'a' AS b").to_pylist() == [{"b": '{"b": 2}'}]
    assert cat.sql("SELECT id FROM d WHERE j -> 'a' = '1'::jsonb AND id > 0 ORDER BY id").to_pylist() == [{"id": 1}]
    with pytest.raises(UnsupportedSQL, match=r"\|\| after jsonb's ->"):
        cat.sql("SELECT j -> 'a' || 'x' FROM d")
    # numbers as numeric keeps them (DuckDB's JSON functions print 1.50 as 1.5), an index from
    # the end, a field of an array is NULL
    q = ("SELECT '{\"a\": [1.50, 12345678901234567890123]}'::jsonb -> 'a' AS a, "
         "'{\"a\": 1.50}'::jsonb ->> 'a' AS b, '[1, 2, 3]'::jsonb -> -1 AS c, '[1]'::jsonb -> 'a' AS d")
    assert cat.sql(q).to_pylist() == [{"a": "[1.50, 12345678901234567890123]", "b": "1.50", "c": "3", "d": None}]
    # json (not jsonb) keeps its text as written
    assert cat.sql("SELECT '{\"a\": {\"b\":  2}}'::json -> 'a' AS a").to_pylist() == [{"a": '{"b":  2}'}]


@pytest.mark.parametrize("call", ["lag('a') OVER ()", "lead(NULL, 2) OVER ()", "first_value('x') OVER ()",
                                  "array_agg('a')"])
def test_a_polymorphic_function_of_an_untyped_literal_raises_as_in_postgresql(call):
    from colmz.sql import SQLError

    cat = _catalog()
    with pytest.raises(SQLError, match="polymorphic type because input has type unknown|is not unique"):
        cat.sql(f"SELECT {call}")
    assert cat.sql("SELECT lag('a'::text) OVER () AS l, first_value(1) OVER () AS f").to_pylist() == [
        {"l": None, "f": 1}]


def test_items_beside_a_star_get_postgresqls_names():
    # output_names leaves DuckDB's names when the list holds a *: DuckDB names an item by its
    # text (1, upper(t), (k + 1)); the item gets PostgreSQL's name as its alias.
    cat = _catalog("CREATE TABLE t (k INT, s TEXT)", "INSERT INTO t VALUES (1, 'x')")
    assert cat.sql("SELECT *, 1, upper(s), k FROM t").column_names == ["k", "s", "?column?", "upper", "k"]
    assert cat.sql("SELECT k + 1, t.* FROM t").column_names == ["?column?", "k", "s"]
    assert cat.sql("SELECT *, lower(s) FROM t UNION ALL SELECT 2, 'y', 'z'").column_names == ["k", "s", "lower"]
    assert cat.sql("SELECT *, 1 FROM t ORDER BY \"?column?\", k").to_pylist() == [{"k": 1, "s": "x", "?column?": 1}]


def test_the_smallest_integers_are_one_constant_of_their_type():
    # PostgreSQL folds -2147483648 into an int4 constant (-9223372036854775808 an int8);
    # DuckDB negates the int8 2147483648, so abs() of it answered where PostgreSQL raises.
    from colmz.sql import SQLError

    cat = _catalog()
    got = cat.sql("SELECT -2147483648 AS a, -(2147483648) AS b, -9223372036854775808 AS c, -2147483649 AS d")
    assert got.to_pylist() == [{"a": -2147483648, "b": -2147483648, "c": -9223372036854775808, "d": -2147483649}]
    assert [str(t) for t in got.schema.types] == ["int32", "int32", "int64", "int64"]
    for sql in ["SELECT abs(-2147483648)", "SELECT -2147483648 * 2", "SELECT abs(-9223372036854775808)"]:
        with pytest.raises(SQLError, match="Overflow|integer out of range"):
            cat.sql(sql)


def test_a_quoted_function_name_with_capitals_does_not_exist():
    # PostgreSQL matches a quoted name as written and its functions are lower case; DuckDB
    # matches function names without case, so "Sum"(x) answered.
    from colmz.sql import SQLError

    cat = _catalog("CREATE TABLE t (k INT)", "INSERT INTO t VALUES (1)")
    for sql in ['SELECT "Sum"(k) FROM t', 'SELECT "UPPER"(\'a\')', 'SELECT "Count"(*) OVER () FROM t']:
        with pytest.raises(SQLError, match="does not exist"):
            cat.sql(sql)
    assert cat.sql('SELECT "sum"(k) AS s FROM t').to_pylist() == [{"s": 1}]
    assert cat.sql('SELECT * FROM (SELECT 1) AS "T"(a)').column_names == ["a"]


def test_a_reference_to_a_repeated_name_of_a_subquery_is_ambiguous():
    # PostgreSQL keeps both columns of one name and raises on a reference to it; DuckDB
    # renamed the second (a_1) and read the first.
    from colmz.sql import SQLError

    cat = _catalog("CREATE TABLE t (a INT, b INT)", "INSERT INTO t VALUES (1, 2)")
    for sql in ["SELECT a FROM (SELECT 1 AS a, 2 AS a) s", "SELECT s.a FROM (SELECT a, b AS a FROM t) s",
                "SELECT * FROM (SELECT a, a FROM t) s WHERE a > 0"]:
        with pytest.raises(SQLError, match='column reference "a" is ambiguous'):
            cat.sql(sql)
    # "A" and a are two names in PostgreSQL, one in DuckDB: a reference to either is refused
    for sql in ['SELECT "A" FROM (SELECT 1 AS "A", 2 AS a) s', 'SELECT a FROM (SELECT 1 AS "A", 2 AS a) s']:
        with pytest.raises(UnsupportedSQL, match="differ only in case"):
            cat.sql(sql)
    assert cat.sql("SELECT x FROM (SELECT a, a FROM t) s(x, y)").to_pylist() == [{"x": 1}]
    assert cat.sql("SELECT count(*) AS n FROM (SELECT a, a FROM t) s").to_pylist() == [{"n": 1}]


def test_a_real_with_an_integer_or_numeric_is_computed_as_a_double():
    # PostgreSQL's float48 operators: the real widened to a double, the result a double
    # (DuckDB computed in single precision: 1::real / 3 was 0.3333333432674408).
    cat = _catalog("CREATE TABLE r (x REAL, i INT)", "INSERT INTO r VALUES (0.1, 3)")
    got = cat.sql("SELECT 1::real / 3 AS a, 0.1::real * 3::smallint AS b, 0.1::real = 0.1 AS c, "
                  "0.1::real + 0.2::real AS d, -(0.1::real) * 3 AS e, 2::real / i AS f FROM r")
    assert got.to_pylist() == [{"a": 1 / 3, "b": 0.30000000447034836, "c": False, "d": 0.30000001192092896,
                                "e": -0.30000000447034836, "f": 2 / 3}]
    assert [str(t) for t in got.schema.types] == ["double", "double", "bool", "float", "double", "double"]
    for sql, what in [("SELECT sum(0.1::real) FROM r", "sum"), ("SELECT pg_typeof(1) FROM r", "pg_typeof")]:
        with pytest.raises(UnsupportedSQL, match=what):
            cat.sql(sql)


def test_float_columns_overflow_as_postgresql_raises():
    # f * f of two finite doubles past the range: PostgreSQL's "value out of range:
    # overflow", not DuckDB's infinity; an infinite operand keeps its infinity.
    from colmz.sql import SQLError

    cat = _catalog("CREATE TABLE n (k INT, f DOUBLE PRECISION)",
                   "INSERT INTO n VALUES (1, 1e300), (2, 'Infinity'), (3, 0.5)")
    with pytest.raises(SQLError, match="value out of range: overflow"):
        cat.sql("SELECT f * f FROM n WHERE k = 1")
    assert cat.sql("SELECT k, f * f AS a FROM n WHERE k > 1 ORDER BY k").to_pylist() == [
        {"k": 2, "a": float("inf")}, {"k": 3, "a": 0.25}]
    with pytest.raises(SQLError, match="zero raised to a negative power"):
        cat.sql("SELECT 0.0 ^ -1")


def test_a_repeated_column_name_of_a_cte_is_ambiguous():
    from colmz.sql import SQLError

    cat = _catalog()
    for sql in ["WITH c AS (SELECT 1 AS a, 2 AS a) SELECT a FROM c",
                "WITH c AS (SELECT 1 AS a, 2 AS a) SELECT c.a FROM c",
                "WITH c AS (SELECT 1 AS a, 2 AS a) SELECT 1 AS z FROM c ORDER BY a"]:
        with pytest.raises(SQLError, match='column reference "a" is ambiguous'):
            cat.sql(sql)
    assert cat.sql("WITH c AS (SELECT 1 AS a, 2 AS a) SELECT * FROM c").column_names == ["a", "a"]
    assert cat.sql("WITH c(x, y) AS (SELECT 1 AS a, 2 AS a) SELECT x, y FROM c").to_pylist() == [{"x": 1, "y": 2}]


def test_a_column_list_of_a_later_cte_names_its_columns():
    # A CTE after a comma (``WITH b AS (...), c(i, j) AS (...)``) with a column list names
    # its columns as the first CTE's list does: its * over a join, or its repeated names,
    # are renamed by the list, neither refused nor ambiguous.
    from colmz.sql import SQLError

    cat = _catalog("CREATE TABLE a (id INT, x INT)", "INSERT INTO a VALUES (1, 2)")
    got = cat.sql("WITH b AS (SELECT 1 AS q), c(i, j, k, l) AS (SELECT * FROM a JOIN a AS a2 ON true) "
                  "SELECT * FROM c")
    assert got.to_pylist() == [{"i": 1, "j": 2, "k": 1, "l": 2}]
    with pytest.raises(SQLError) as raised:  # PostgreSQL: column "a" does not exist
        cat.sql("WITH b AS (SELECT 1 AS q), c(x, y) AS (SELECT 1 AS a, 2 AS a) SELECT a FROM c")
    assert "ambiguous" not in str(raised.value)


def test_columns_of_a_star_over_a_join_in_a_subquery_are_refused():
    # DuckDB renames the repeated names of the star's expansion (id_1); PostgreSQL keeps them
    # (and a reference to one is ambiguous): without the tables' columns, colmz refuses.
    cat = _catalog("CREATE TABLE a (id INT, x INT)", "INSERT INTO a VALUES (1, 2)")
    for sql in ["SELECT * FROM (SELECT * FROM a, a AS b) s", "SELECT id FROM (SELECT * FROM a JOIN a AS b USING (x)) s",
                "WITH c AS (SELECT a.*, b.* FROM a, a AS b) SELECT c.x FROM c"]:
        with pytest.raises(UnsupportedSQL, match=r"\* expands over a join"):
            cat.sql(sql)
    assert cat.sql("SELECT count(*) AS n FROM (SELECT * FROM a, a AS b) s").to_pylist() == [{"n": 1}]
    assert cat.sql("SELECT * FROM (SELECT * FROM a, a AS b) s(p, q, r, t)").column_names == ["p", "q", "r", "t"]


def test_a_cast_to_jsonb_of_a_column_is_jsonbs_text():
    cat = _catalog("CREATE TABLE j (v JSON, t TEXT)", """INSERT INTO j VALUES ('{"b": 1,  "a": [1, 2.50]}', 'x')""")
    assert cat.sql("SELECT v::jsonb AS a, v AS b FROM j").to_pylist() == [
        {"a": '{"a": [1, 2.50], "b": 1}', "b": '{"b": 1,  "a": [1, 2.50]}'}]
    with pytest.raises(Exception, match="invalid input syntax for type json"):
        cat.sql("SELECT t::jsonb FROM j")
    with pytest.raises(UnsupportedSQL, match=r"\|\| of integer\[\] and integer"):
        cat.sql("SELECT ARRAY[1, 2] || 3")


def test_a_float_literal_past_the_types_range_raises_as_in_postgresql():
    # Over the range or nonzero rounding to zero raises (a numeric literal's message prints
    # the numeric); the largest real is what strtof rounds 3.4028235e38 to.
    from colmz.sql import SQLError

    cat = _catalog()
    for sql, shown in [("SELECT '2e-324'::float8", '"2e-324"'), ("SELECT 1e-46::real", '"0.' + "0" * 45 + '1"'),
                       ("SELECT 1e39::real", '"1' + "0" * 39 + '"'), ("SELECT '-1e39'::real", '"-1e39"')]:
        with pytest.raises(SQLError, match=f"^{shown} is out of range for type"):
            cat.sql(sql)
    got = cat.sql("SELECT 3.4028235e38::real AS a, '3.4028235e38'::real AS b, '4.9e-324'::float8 AS c").to_pylist()
    assert got == [{"a": 3.4028234663852886e38, "b": 3.4028234663852886e38, "c": 5e-324}]


def test_a_visible_float_cast_to_numeric_keeps_postgresqls_significant_digits():
    # float8_numeric keeps 15 significant digits, float4_numeric 6: (0.1::float8 * 3)::numeric
    # is 0.300000000000000 in PostgreSQL (equal to 0.3), 1.2345678::real::numeric 1.23457.
    got = _catalog().sql("SELECT (0.1::float8 * 3)::numeric = 0.3 AS a, 1.2345678::real::numeric AS b, "
                         "16777217::real::numeric AS c")
    assert got.to_pylist() == [{"a": True, "b": 1.23457, "c": 16777200.0}]


@pytest.mark.parametrize(
    "text, arguments",
    [
        ("SELECT sum(x) FILTER (WHERE y > 1) FROM t", ["x"]),
        ("SELECT string_agg(a, ',' ORDER BY b) FROM t", ["a", "','"]),
        ("SELECT string_agg(a, ',' ORDER BY b) FILTER (WHERE a <> '') FROM t", ["a", "','"]),
        ("SELECT round(x, 2) FROM t", ["x", "2"]),
    ],
)
def test_a_calls_arguments_leave_out_its_filter_and_order_by(text, arguments):
    node = parse_tree(text)[0].items[0]
    call = Call(node.name[-1], node, text, lambda e: text[e.start:e.end], False, "")
    assert [text[e.start:e.end] for e in call.arguments] == arguments
    assert call.args == arguments


def test_the_rows_of_a_values_list_do_not_read_the_tree():
    # A VALUES list's rows are not select items (a query of VALUES alone selects * from
    # them): their parentheses after a comma are not a row value, and the tree is not read.
    # A row inside a row, or a select item after a comma, still may be one.
    for sql in ["VALUES (1, 'a'), (2, 'b')", "SELECT * FROM (VALUES (1, 2), (3, 4)) v(a, b)",
                "INSERT INTO t VALUES (1, 2), (3, 4)"]:
        assert not may_transform(sql, tokenize(sql)), sql
    for sql in ["VALUES (1, (2, 3)), (4, (5, 6))", "SELECT 1, (2, 3)", "SELECT (1, 2), (3, 4) FROM (VALUES (1, 2)) v"]:
        assert may_transform(sql, tokenize(sql)), sql
    with pytest.raises(UnsupportedSQL, match="a row value"):
        translate("SELECT a, (b, a) FROM (VALUES (1, 2), (3, 4)) v(a, b)")


def test_a_comment_inside_a_cast_leaves_its_meaning(con):
    # The kinds of rule a text may need are read off its tokens, where a comment is not a
    # token: ``x :: /* c */ text`` is the cast ``x::text`` (PostgreSQL's text of a double:
    # no ``.0``, an exponent from 1e15 on), not DuckDB's text of it.
    for sql in ("SELECT 2::float8 :: /* c */ text, 1e15::float8 :: /* c */ text",
                "SELECT CAST /* c */ (2::float8 AS text), CAST /* c */ (1e15::float8 AS text)"):
        assert con.sql(translate(sql)).fetchall() == [("2", "1e+15")]
