"""Texts that cost colmz's SQL front end more than their length: deep nesting
is refused before any rewrite, long ``||`` chains bind in linear work, intervals are
refused by name, SQL text is a ``str``."""

from __future__ import annotations

import importlib
import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import colmz
from colmz.sql import UnsupportedSQL, parse, translate
from colmz.sql.tokens import MAX_NESTING, nesting_depth, tokenize
from colmz.sql.tree import parse_tree

translate_mod = importlib.import_module("colmz.sql.translate")  # colmz.sql.translate is the function


@pytest.fixture
def rewrites(monkeypatch):
    """Counts of the rewrites translate runs: the table of transforms on the tree (which
    folds constants)."""
    calls = {"fold": 0}
    fold = translate_mod.apply_transforms

    def counted_fold(*a, **k):
        calls["fold"] += 1
        return fold(*a, **k)

    monkeypatch.setattr(translate_mod, "apply_transforms", counted_fold)
    translate.cache_clear()
    return calls


@pytest.mark.parametrize("text", [
    "SELECT " + "CAST(" * 3000 + "1" + " AS numeric)" * 3000,   # 45 KB, the issue's: 197 s before
    "SELECT " + "CAST(" * 3000 + "1" + " AS text)" * 3000,
    "SELECT 1" + "::numeric" * 3000,
    "SELECT " + "round(" * 200 + "1" + ")" * 200,                # was Python's RecursionError
])
def test_deep_nesting_is_refused_before_any_rewrite(rewrites, text):
    with pytest.raises(UnsupportedSQL, match=rf"nested \d+ deep .* at most {MAX_NESTING}"):
        translate(text)
    assert rewrites == {"fold": 0}
    with pytest.raises(UnsupportedSQL, match="at most 64"):
        parse(text)  # a script is measured before its statements are read


def test_nesting_up_to_the_limit_still_translates(rewrites):
    for text in ("SELECT " + "CAST(" * MAX_NESTING + "1" + " AS numeric)" * MAX_NESTING,
                 "SELECT 1" + "::numeric" * MAX_NESTING, "SELECT " + " + ".join(["a::int"] * 500)):
        translate(text)
    assert rewrites["fold"] == 3


def test_nesting_depth_counts_parentheses_brackets_and_cast_chains():
    depth = lambda s: nesting_depth(tokenize(s))  # noqa: E731
    assert depth("x") == 0 and depth("f(a, (b))") == 2 and depth("a[1]") == 1
    assert depth("x::numeric(10, 2)::text") == 2 and depth("x::t::numeric(10, (2))") == 4  # chain + parentheses
    assert depth("x::double precision::text AS y, z::int") == 2  # AS and ',' end a chain
    assert depth("x::timestamp with time zone::text") == 2
    assert depth("(x::int)::text") == 2 and depth("a::int + b::int + c::int") == 1


def _concat_depth(expr) -> int:
    # The depth of nested || calls in DuckDB's parse of the translated text: what DuckDB's
    # binder walks per operand.
    best, stack = 0, [(expr, 0)]
    while stack:
        e, d = stack.pop()
        d += e.cls == "FUNCTION" and e.name == ("||",)
        best = max(best, d)
        stack.extend((c, d) for c in e.children)
    return best


def test_a_long_concatenation_binds_as_a_balanced_tree():
    n = 900  # the issue's: 80 s before, DuckDB binding a chain 899 deep
    out = translate("SELECT " + " || ".join(["s"] * n) + " AS x FROM t")
    assert out.count("__colmz_text(s)") == n
    q, = parse_tree(out)
    assert _concat_depth(q.items[0]) == math.ceil(math.log2(n))  # before: n - 1
    # a short chain stays as written
    assert translate("SELECT a || b || c FROM t") == "SELECT __colmz_text(a) || __colmz_text(b) || __colmz_text(c) FROM t"


def test_a_regrouped_concatenation_gives_postgresqls_answer():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (s TEXT, i INT)")
    cat.execute("INSERT INTO t VALUES ('a', 1), (NULL, 2), ('b', NULL)")
    terms = ["s", "i::text", "'-'", "upper(s)"] * 10
    got = cat.sql("SELECT i, " + " || ".join(terms) + " AS x FROM t").to_pylist()
    by_i = {r["i"]: r["x"] for r in got}
    assert by_i == {1: "a1-A" * 10, 2: None, None: None}
    assert cat.sql("SELECT 'x' = " + " || ".join(["'x'"] + ["''"] * 20) + " AS e").to_pylist() == [{"e": True}]
    # not regrouped where an operand is not text; after jsonb's -> (as tight as ||:
    # PostgreSQL reads (a -> s) || s ..., a merge or a concatenation by the types) refused
    with pytest.raises(UnsupportedSQL, match=r"\|\| after jsonb's ->"):
        translate("SELECT a -> " + " || ".join(["s"] * 20) + " FROM t")
    assert "((" not in translate("SELECT " + " || ".join(["ARRAY[1]"] * 20))


@pytest.mark.parametrize(("operand", "value"), [
    ("i + 1", "2"), ("CASE WHEN i > 0 THEN s END", "a"), ("DATE '2020-01-02'", "2020-01-02"),
    ("(s || 'b')", "ab"), ("-i", "-1"), ("i * 2.5", "2.5"), ("(i = 1)", "true"),
])
def test_a_long_concatenation_of_any_text_operand_is_regrouped(operand, value):
    # the chain's operands are the grammar's (any kind, each printed as its type's text by the
    # table of transforms): the text DuckDB runs nests log2(n) deep and answers as written
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (s TEXT, i INT)")
    cat.execute("INSERT INTO t VALUES ('a', 1)")
    n = 100
    sql = "SELECT 'x' || " + " || ".join([operand] * n) + " AS x FROM t"
    q, = parse_tree(translate(sql))
    assert _concat_depth(q.items[0]) == math.ceil(math.log2(n + 1)) + operand.count("||")
    assert cat.sql(sql).to_pylist() == [{"x": "x" + value * n}]


def test_a_concatenation_with_an_array_or_json_operand_stays_as_written():
    # || of an array or jsonb is not text's concatenation: not regrouped (an operand naming
    # an array or JSON anywhere in it), whatever the chain's length; a chain in a text the
    # grammar does not know is left as written too
    for operand in ("array_agg(s)", "s::text[]", "a[1]", "'{1}'", "E' [1]'", "s::jsonb", "ARRAY[s]"):
        chain = " || ".join(["s"] * 10 + [operand] + ["s"] * 10)
        assert translate_mod.concat_chains(f"SELECT {chain} FROM t", 16)[0][10][2] is False
        assert "((" not in translate_mod._balance_concat_chains(f"SELECT {chain} FROM t")
    chain = " || ".join(["s"] * 20)
    assert translate_mod._balance_concat_chains(f"SELECT {chain} FROM t QUALIFY s > 1").count("(") == 0
    # an expression alone (a predicate colmz translates) is regrouped as a query's item is
    assert "((s || s) || (s || s))" in translate_mod._balance_concat_chains(f"{chain} = s")


def test_a_long_concatenation_holding_another_gives_postgresqls_answer():
    # the outer chain is regrouped with the inner one as one operand (the inner chain was
    # regrouped first and its text then copied twice before)
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (s TEXT)")
    cat.execute("INSERT INTO t VALUES ('a')")
    inner = " || ".join(["s"] * 20)
    sql = "SELECT 'x' || " + " || ".join([f"upper({inner})"] + ["s"] * 20) + " AS x FROM t"
    assert cat.sql(sql).to_pylist() == [{"x": "x" + "A" * 20 + "a" * 20}]
    q, = parse_tree(translate(sql))
    assert _concat_depth(q.items[0]) <= 2 * math.ceil(math.log2(22))


#: Plain operands of ||, with their values over the row of ``chain_catalog``.
_OPERANDS = {"s": "a", "t.s": "a", "upper(s)": "A", "'-'": "-", "i::text": "1", '"s"': "a",
             "upper(" + " || ".join(["s"] * 20) + ")": "A" * 20}


@pytest.fixture(scope="module")
def chain_catalog():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (s TEXT, i INT)")
    cat.execute("INSERT INTO t VALUES ('a', 1)")
    return cat


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(sorted(_OPERANDS)), min_size=1, max_size=70),
       st.sampled_from([("{}", str), ("upper({})", str.upper), ("'x' < {}", lambda v: v > "x")]))
def test_a_concatenation_answers_as_written_regrouped_or_not(chain_catalog, ops, shape):
    # any chain of plain operands, long ones regrouped (a chain inside an operand too): the
    # value is the operands' texts concatenated, and the tree of the text DuckDB runs is shallow
    form, expect = shape
    sql = "SELECT " + form.format(" || ".join(ops)) + " AS x FROM t"
    assert chain_catalog.sql(sql).to_pylist() == [{"x": expect("".join(_OPERANDS[o] for o in ops))}]
    q, = parse_tree(translate(sql))
    # (a chain of at most 16 operands stays as written: 15 deep, with a regrouped chain of 20
    # (5 deep) inside one of its operands; a longer chain is log2 of its length deep)
    assert _concat_depth(q.items[0]) <= 15 + 5


def test_interval_columns_with_fields_are_refused_by_name():
    # (INTERVAL columns are kept: tests/colmz/catalog/test_interval_columns.py)
    cat = colmz.Catalog()
    for stmt in ("CREATE TABLE t (k INTERVAL DAY)", "CREATE TABLE t (k INTERVAL(3))",
                 "CREATE TABLE s (k INT); CREATE CONTINUAL TASK c (i INTERVAL SECOND) ON INPUT s AS "
                 "(INSERT INTO c SELECT INTERVAL '1 day' * k FROM s)"):
        with pytest.raises(UnsupportedSQL, match=r"(?i)column type INTERVAL.* not supported by colmz"):
            cat.execute(stmt)
    cat.execute("CREATE TABLE t (k INT); CREATE TABLE s (k INT)")  # none was made
    # a query may still compute with intervals and return them
    got = cat.sql("SELECT (DATE '2020-01-01' + INTERVAL '1 day')::date AS d").to_pylist()
    assert str(got[0]["d"]) == "2020-01-02"


@pytest.mark.parametrize("bad", [b"SELECT 1", None, 7])
def test_sql_text_must_be_a_str(bad):
    cat = colmz.Catalog()
    name = type(bad).__name__
    with pytest.raises(TypeError, match=f"sql must be a str of SQL text, got {name}"):
        cat.execute(bad)
    with pytest.raises(TypeError, match=f"query must be a str of SQL text, got {name}"):
        cat.sql(bad)
    with pytest.raises(TypeError, match=f"text must be a str of SQL text, got {name}"):
        translate(bad)
    from colmz.continual import ContinualTask, Delete, Insert, MemoryCollection

    src = MemoryCollection({"k": pa.int64()})
    for stmt in (Insert(bad), Delete(bad)) if bad is not None else (Insert(bad),):
        with pytest.raises((TypeError, ValueError), match=f"got {name}|needs a query"):
            ContinualTask("o", {"src": src}, [stmt], columns={"k": pa.int64()})
