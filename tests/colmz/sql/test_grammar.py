"""colmz's own reader of DuckDB's tokens (colmz.sql.grammar): DuckDB's tree or nothing.

Every text the reader does not give up on must get exactly the tree DuckDB's JSON gives
(``read_tree``: same nodes, names, children, spans, aliases, literals): over the SQL corpus,
the benchmark's queries, the texts colmz's translation parses for them, the SQL written in
this directory's tests, and generated expressions (Hypothesis).
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from colmz.sql import SQLError, UnsupportedSQL, clear_caches
from colmz.sql.grammar import MAX_DEPTH, read_query
from colmz.sql.tree import duckdb_parses, parse_tree, read_tree

pytest.importorskip("duckdb")

_HERE = pathlib.Path(__file__).resolve()
_ROOT = _HERE.parents[3]


def _coverage_script():
    sys.path.insert(0, str(_ROOT / "scripts"))
    try:
        import sql_snapshot
    finally:
        sys.path.remove(str(_ROOT / "scripts"))
    return sql_snapshot


def _test_texts() -> list[str]:
    # SQL written as string constants in this directory's tests
    out = []
    for path in sorted(_HERE.parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                head = node.value.lstrip()[:7].upper()
                if head.startswith(("SELECT", "WITH", "VALUES")):
                    out.append(node.value)
    return out


def _same_or_gave_up(text: str) -> bool:
    """Whether the reader read ``text``; fails when its tree is not DuckDB's."""
    mine = read_query(text)
    if mine is None:
        return False
    try:
        theirs = read_tree(text)
    except (SQLError, UnsupportedSQL) as e:  # pragma: no cover - a failure's report
        pytest.fail(f"read {text!r}, which DuckDB's path refuses: {e}")
    assert mine == theirs, text
    return True


def test_corpus_trees_are_duckdbs():
    # the corpus, the benchmark's queries, the planner tests' view bodies, what translating
    # the corpus parses (the texts colmz really reads) and this directory's SQL
    by = _coverage_script().grammar_texts()
    texts = list(dict.fromkeys([t for ts in by.values() for t in ts] + _test_texts()))
    read = sum(_same_or_gave_up(t) for t in texts)
    print(f"colmz.sql.grammar read {read} of {len(texts)} texts ({read / len(texts):.0%})")
    assert read >= len(texts) // 2  # the common subset is most of what colmz meets


def test_coverage_floor():
    # What the reader reads of the texts colmz meets (scripts/sql_snapshot.py coverage): no fewer
    # than the ladder of per-level methods it replaced read (1850 of 2097 texts)
    got = _coverage_script().grammar_coverage()
    print(got)
    assert got["bench"][0] == got["bench"][1]
    assert got["all"][0] >= 1850 and got["corpus"][0] >= 1290 and got["views"][0] >= 527


@pytest.mark.parametrize("text", [
    "SELECT e.id, u.name, e.payload::JSONB ->> 'kind' AS kind FROM events e JOIN users u ON e.user_id = u.id",
    "SELECT (k IN (SELECT k FROM events WHERE kind = 'gone') AND v < 100)",
    "VALUES (1, 'a;b', '2023-11-14 22:13:20+00'), (2, 'it''s', NULL)",
    "WITH r AS (SELECT 1 AS a) SELECT a FROM r UNION ALL SELECT 2 UNION ALL SELECT 3 ORDER BY 1 DESC LIMIT 2",
    "SELECT -(3), - - 3, -3::int, 1e5, .5, 1_000, E'a\\nb''', $q$it's$q$, 'é😀' || x FROM t",
    "SELECT CASE a WHEN 1 THEN 'x' END, CAST(b AS numeric(10,2)), c::int[], d IS NOT DISTINCT FROM e",
    "SELECT a FROM t, u LEFT JOIN v USING (id) CROSS JOIN w x WHERE NOT EXISTS (SELECT 1) GROUP BY a HAVING count(*) > 1",
    # INTERVAL with a unit: to_<unit>s of the value (truncated but for seconds, milliseconds)
    "SELECT ts + INTERVAL '2' HOURS > now(), INTERVAL '1' SECOND, INTERVAL '1.5' millisecond x, "
    "(INTERVAL '3' DAY)::text, INTERVAL '1' /* c */ MILLENNIA IS NULL FROM t",
    # SUBSTRING's SQL forms are substring(a, b[, c]); FOR alone starts at an unpositioned 1
    "SELECT substring(a FROM 2 FOR 3), SUBSTRING(a FOR b + 1), substring((a) FROM (2))::int, substring(a, 2) x FROM t",
    # ordered-set aggregates: DuckDB's quantile_cont/quantile_disc/mode, the sort key in order_by
    "SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY x) AS p, PERCENTILE_DISC(ARRAY[0.5, 0.9]) WITHIN GROUP "
    "(ORDER BY x DESC NULLS FIRST) FILTER (WHERE y > 0), mode() WITHIN GROUP (ORDER BY x + 1)::text FROM t GROUP BY g",
    # grouping sets: DuckDB's merged group expressions and its sets (ROLLUP's prefixes, CUBE's
    # subsets depth first, the cross product of the items)
    "SELECT a, b, sum(c) FROM t GROUP BY ROLLUP (a, b)", "SELECT 1 FROM t GROUP BY CUBE (b, c), a",
    "SELECT 1 FROM t GROUP BY a, GROUPING SETS ((b, a), a, (), ROLLUP (c, (d, e))), CUBE (t.a, d)",
    "SELECT 1 FROM t GROUP BY GROUPING SETS ((a), (a)), CUBE (a, a)",
    "SELECT a, b, count(*) FROM t GROUP BY 1, 2",  # positions: numbers of other values are other groups
    # slices: a bound left out is DuckDB's empty list_value() at no position
    "SELECT a[2:], a[:3], a[ : ], (ARRAY[1, 2])[x + 1:(y)]::text, a[1][2:3], a[1:2][3], a[1::int:-2] FROM t",
    # window frames: DuckDB's bounds by mode, offsets after the window's order, exclusions
    "SELECT sum(a) OVER (ROWS 1 PRECEDING), sum(a) FILTER (WHERE c) OVER (PARTITION BY c ORDER BY b RANGE BETWEEN "
    "x + 1 PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE TIES), lag(a, 2) OVER (ORDER BY b GROUPS BETWEEN CURRENT ROW "
    "AND 2 FOLLOWING EXCLUDE CURRENT ROW), count(*) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) FROM t",
])
def test_read_without_duckdb(text):
    # Read by colmz alone: no DuckDB parse (a work counter), and the tree is DuckDB's.
    clear_caches()
    before = duckdb_parses()
    got = parse_tree(text)
    assert duckdb_parses() == before
    assert got == read_tree(text)


@pytest.mark.parametrize("text", [
    "SELECT a FROM t QUALIFY a > 1", "SELECT a FROM t WINDOW w AS ()",
    "SELECT a BETWEEN a AND a ~ a", "SELECT a ~ a BETWEEN a AND a", "SELECT - -a", "SELECT a IN (a) + a",
    "SELECT a IS NULL BETWEEN a AND a", "SELECT a IN (EXISTS (SELECT a))", "SELECT x -> 'k'", "SELECT 'open",
    "SELECT 'a' 'b'", "SELECT a < b < c", "SELECT a IS NULL IS NULL", "SELECT x::int[3]",
    "SELECT a FROM t AS u(b) TABLESAMPLE 10", "SELECT 1 UNION (SELECT 2)", "SELECT U&'d\\0061'",
    "SELECT $1", "SELECT 1 /* ( */", "SELECT 1;;", "", "INSERT INTO t VALUES (1)", "SELECT 0x1F",
    # DuckDB refuses a window function in a window definition (found by the generated test)
    "SELECT f(a) OVER (PARTITION BY a ORDER BY f(a) OVER ())", "SELECT f(a) OVER (PARTITION BY a + g(b) OVER ())",
    "SELECT f(a) OVER (ORDER BY (SELECT g(a) OVER ()))",
    # DuckDB refuses these (or reads them otherwise): the reader gives up
    "SELECT INTERVAL '1' DAY TO SECOND", "SELECT INTERVAL '1' DAY day", "SELECT INTERVAL '1' epoch",
    "SELECT INTERVAL E'\\\\' DAY", "SELECT INTERVAL E'1\\tday'",  # DuckDB keeps these escapes as written
    "SELECT substring(a FOR 3 FROM 2)", "SELECT substring(DISTINCT a, 2)", "SELECT substring(a FROM 2) OVER ()",
    "SELECT substring(a SIMILAR b ESCAPE c)", "SELECT substring(a FROM 2 FOR 3 FOR 4)", "SELECT substring()",
    "SELECT substring(a := 1)", "SELECT substring(a ORDER BY b)",
    "SELECT f(a) WITHIN GROUP (ORDER BY x)", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x, y)",
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) OVER ()", "SELECT count(*) WITHIN GROUP (ORDER BY x)",
    "SELECT percentile_cont(DISTINCT 0.5) WITHIN GROUP (ORDER BY x)", "SELECT mode(x) WITHIN GROUP (ORDER BY x)",
    "SELECT percentile_cont(0.5, 1) WITHIN GROUP (ORDER BY x)", "SELECT s.percentile_cont(0.5) WITHIN GROUP (ORDER BY x)",
    "SELECT percentile_cont(0.5) FILTER (WHERE y) WITHIN GROUP (ORDER BY x)",
    # grouping sets over anything but column references, names DuckDB may merge, () where refused
    "SELECT 1 FROM t GROUP BY ROLLUP ()", "SELECT 1 FROM t GROUP BY CUBE (a + 1)", "SELECT 1 FROM t GROUP BY ROLLUP (a, A)",
    "SELECT 1 FROM t GROUP BY GROUPING SETS ((a) + 1)", "SELECT 1 FROM t GROUP BY GROUPING SETS ()",
    "SELECT 1 FROM t GROUP BY CUBE ((a, b), ())", "SELECT 1 FROM t GROUP BY a, ()",
    # group expressions DuckDB merges though written otherwise (a, A: found by the generated
    # test), and ones of the same names and values, which it may merge
    "SELECT 1 FROM t GROUP BY a, A", "SELECT 1 FROM t GROUP BY a::int, CAST(a AS int)", "SELECT 1 FROM t GROUP BY x AND y, y AND x",
    "SELECT 1 FROM t GROUP BY a + 1, a + 01", "SELECT 1 FROM t GROUP BY a + 1, a + 1.0",
    # frames PostgreSQL's grammar refuses, and unfinished ones
    "SELECT sum(a) OVER (ROWS UNBOUNDED FOLLOWING)", "SELECT sum(a) OVER (ROWS BETWEEN CURRENT ROW AND 1 PRECEDING)",
    "SELECT sum(a) OVER (RANGE 2 FOLLOWING)", "SELECT sum(a) OVER (GROUPS BETWEEN 2 FOLLOWING AND CURRENT ROW)",
    "SELECT sum(a) OVER (ROWS BETWEEN 1 PRECEDING AND UNBOUNDED PRECEDING)", "SELECT sum(a) OVER (ROWS)",
    "SELECT sum(a) OVER (ROWS 1 PRECEDING EXCLUDE)",
    # a slice with a step, or of a list written where a bound is (DuckDB's tree of a[[]:1] is
    # a[:1]'s but placed)
    "SELECT a[1:2:3]", "SELECT a[[]:1]", "SELECT a[1:", "SELECT a[:1:]",
])
def test_gives_up(text):
    assert read_query(text) is None


def test_deep_texts_are_given_up_and_refused_as_before():
    # Nesting past MAX_DEPTH goes DuckDB's way, which refuses what it refused before.
    deep = "SELECT " + "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1)
    assert read_query(deep) is None
    assert parse_tree(deep) == read_tree(deep)
    chain = "SELECT " + " + ".join(["1"] * 400)
    assert read_query(chain) is None
    with pytest.raises(UnsupportedSQL):
        read_tree(chain)
    with pytest.raises(UnsupportedSQL):
        parse_tree(chain)
    casts = "SELECT x" + "::int" * (MAX_DEPTH + 1)
    assert read_query(casts) is None


# ----------------------------------------------------------------------- generated texts

_COLUMNS = st.sampled_from(["a", "b", "t.c", '"Q"', '"a""b"', "key", "name", "x1", "é"])
_NUMBERS = st.sampled_from(["0", "1", "42", "007", "1.5", ".5", "1.", "1e5", "1E-3", "2.5e+10", "1_000",
                            "9223372036854775808", "12345678901234567890.5", "1e400"])
_STRINGS = st.one_of(
    st.text(alphabet=st.sampled_from("ab'\\\" é😀$%_\n"), max_size=6).map(lambda s: "'" + s.replace("'", "''") + "'"),
    st.text(alphabet=st.sampled_from("ab' n\\"), max_size=5).map(
        lambda s: "E'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"),
    st.sampled_from(["E'\\n\\t'", "E'\\x41'", "E'it''s'", "E'\\q'", "$$a'b$$", "$t$x$$y$t$", "$$$$"]),
)
_ATOMS = st.one_of(_COLUMNS, _NUMBERS, _STRINGS,
                   st.sampled_from(["TRUE", "false", "NULL", "DATE '2020-01-01'", "TIMESTAMP '2020-01-01 00:00'",
                                    "INTERVAL '1 day'", "count(*)", "now()", "*", "INTERVAL '1' DAY",
                                    "INTERVAL '2.5' seconds", "INTERVAL '-1' Month", "INTERVAL '1' YEAR TO MONTH",
                                    "INTERVAL 'x' MICROSECOND"]))
_BINARY = st.sampled_from(["+", "-", "*", "/", "%", "||", "->>", "=", "<>", "!=", "<", "<=", ">", ">=",
                           "AND", "OR", "^", "//", "<<", "~", "IS DISTINCT FROM", "IS NOT DISTINCT FROM",
                           "LIKE", "NOT ILIKE", "->", "**", "&", "~", "~*", "!~", "!~*", "@>", "#"])
_TYPES = st.sampled_from(["int", "INT8", "text", "numeric(10,2)", "double precision", "varchar(3)", "int[]",
                          "timestamp with time zone", "jsonb", "date", "interval", "float(24)", '"Char"'])
_SPACE = st.sampled_from([" ", "  ", "\n", " /* c */ ", " -- c\n", "\t"])


_FORMS = [
    "{0}{s}{op} {1}", "({0})", "-{0}", "- {0}", "+{0}", "NOT {0}", "{0}::{t}", "CAST({0} AS {t})",
    "{0} {isn}", "{0} BETWEEN {1} AND {2}", "{0} NOT BETWEEN {1} AND {2}", "{0} IN ({1})", "{0} NOT IN ({1}, {2})",
    "CASE WHEN {0} THEN {1} ELSE {2} END", "CASE {0} WHEN {1} THEN {2} END", "{f}({0})", "{f}({0}, {1})",
    "{f}(DISTINCT {0})", "{f}()", "({0}, {1})", "EXISTS (SELECT {0})", "(SELECT {0} FROM t)",
    "{0} IN (SELECT a FROM t)", "ARRAY[{0}, {1}]", "ARRAY[]", "{0}[{1}]", "{0}[{1}:{2}]", "{f}({0} ORDER BY {1} DESC)",
    "{f}({0}) FILTER (WHERE {1})", "extract({field} FROM {0})", "greatest({0}, {1})", "least({0})",
    "{f}({0}) OVER ()", "{f}({0}) OVER (PARTITION BY {1} ORDER BY {2})", "{f}() OVER (ORDER BY {0} ROWS 1 PRECEDING)",
    "{f}(*) OVER (PARTITION BY {0})", "{0} = ANY (SELECT 1)", "{0} > ALL (SELECT {1})", "{0} <> SOME (ARRAY[{1}])",
    "substring({0} FROM {1} FOR {2})", "substring({0} FROM {1})", "SUBSTRING({0} FOR {1})", "substring({0}, {1})",
    "substring({0} FOR {1} FROM {2})", "INTERVAL {0} DAY", "percentile_cont({0}) WITHIN GROUP (ORDER BY {1})",
    "mode() WITHIN GROUP (ORDER BY {0} DESC)", "{f}({0}) WITHIN GROUP (ORDER BY {1}) FILTER (WHERE {2})",
    "percentile_disc({0}) WITHIN GROUP (ORDER BY {1}) OVER ()",
    "{f}({0}) OVER (PARTITION BY {1} ORDER BY {2} RANGE BETWEEN {0} PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE TIES)",
    "{f}() OVER (GROUPS BETWEEN CURRENT ROW AND {0} FOLLOWING)", "{f}() OVER (ROWS {0} FOLLOWING)",
    "{f}({0}) OVER (ORDER BY {1} ROWS BETWEEN UNBOUNDED PRECEDING AND {2} PRECEDING EXCLUDE NO OTHERS)",
    # each infix operator beside each other (precedence), prefixes stacked, postfixes chained
    "{0} {op} {1} {op2} {2}", "NOT {0} {op} {1}", "- - {0}", "-{0}::{t}", "{0}::{t}[{1}]", "({0})::{t}::{t}",
    "{0} {isn} {op} {1}", "{0} NOT LIKE {1} {op} {2}", "{0} ISNULL AND {1} NOTNULL", "{0} IS NOT NULL OR {1}",
    "{f}({0}) FILTER (WHERE {1}) OVER (ORDER BY {2} ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING EXCLUDE GROUP)",
    "{0} COLLATE x", "{0} = ALL (VALUES ({1}))", "{0} NOT IN (SELECT {1} UNION SELECT {2})",
]


@st.composite
def _expressions(draw, depth: int = 3):
    """An expression text: an atom, or (``depth`` levels) a form of PostgreSQL's grammar
    around smaller expressions, with any operator, type, spacing and comment."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(_ATOMS)
    form = draw(st.sampled_from(_FORMS))
    parts = [draw(_expressions(depth - 1)) for _ in range(3)]
    return form.format(*parts, s=draw(_SPACE), op=draw(_BINARY), op2=draw(_BINARY), t=draw(_TYPES),
                       isn=draw(st.sampled_from(["IS NULL", "IS NOT NULL", "ISNULL", "NOTNULL", "IS TRUE"])),
                       f=draw(st.sampled_from(["f", "upper", "coalesce", "nullif", "s.g", "count", "left", "sum",
                                               "row_number", "lag", "first", "dense_rank", "unnest", "ifnull"])),
                       field=draw(st.sampled_from(["year", "YEAR", "epoch", "Foo", '"x"', "'day'"])))


_EXPRESSIONS = _expressions()
_GROUP_COLUMNS = st.sampled_from(["a", "b", "t.a", "A", '"a"', "c", "a + 1", "(a)", "()", "(a, b)", "(b, a)"])


@st.composite
def _groupings(draw, depth: int = 2):
    """GROUP BY items: columns, (lists), ROLLUP, CUBE and GROUPING SETS, nested."""
    def item(d):
        kind = draw(st.sampled_from(["col", "col", "rollup", "cube", "sets"] if d else ["col"]))
        if kind == "col":
            return draw(_GROUP_COLUMNS)
        parts = ", ".join(item(d - 1) for _ in range(draw(st.integers(0 if kind == "sets" else 1, 3))))
        return {"rollup": "ROLLUP", "cube": "CUBE", "sets": "GROUPING SETS"}[kind] + f" ({parts})"

    return ", ".join(item(depth) for _ in range(draw(st.integers(1, 3))))



@st.composite
def _queries(draw):
    items = draw(st.lists(st.tuples(_EXPRESSIONS, st.sampled_from(["", " AS x", " y", " AS \"Z\"", " AS select"])),
                          min_size=1, max_size=3))
    text = "SELECT " + draw(st.sampled_from(["", "DISTINCT ", "DISTINCT ON (a, 1) ", "ALL "])) + ", ".join(e + a for e, a in items)
    if draw(st.booleans()):
        text += draw(st.sampled_from([" FROM t", " FROM t AS u", " FROM t, u", " FROM t JOIN u ON t.a = u.a",
                                      " FROM (SELECT 1 AS a) s LEFT JOIN u USING (a)", " FROM generate_series(1, 3) AS g(a)",
                                      " FROM (VALUES (1, 'x'), (2, NULL)) v(a, b)", " FROM t u(a), range(2) r",
                                      " FROM t FULL JOIN (VALUES (1)) v ON true CROSS JOIN unnest(ARRAY[1]) x",
                                      " FROM t NATURAL JOIN u", " FROM t, LATERAL (SELECT 1) l",
                                      " FROM t JOIN LATERAL (SELECT t.a) l ON true", " FROM t, LATERAL unnest(t.a) u"]))
        if draw(st.booleans()):
            text += " WHERE " + draw(_EXPRESSIONS)
        if draw(st.booleans()):
            text += " GROUP BY " + draw(st.one_of(_EXPRESSIONS, _groupings()))
    if draw(st.booleans()):
        text = draw(st.sampled_from(["", "WITH w AS (SELECT 1) ", "WITH w(x) AS (SELECT 1), v AS (SELECT 2) ",
                                     "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) ",
                                     "WITH RECURSIVE r AS (SELECT 1 UNION SELECT 2 UNION SELECT 3) "])) + text + draw(
            st.sampled_from([" UNION SELECT 1", " UNION ALL SELECT 2 UNION ALL SELECT 3", " EXCEPT SELECT 1",
                             " INTERSECT SELECT 1", ""]))
    if draw(st.booleans()):
        text += " ORDER BY 1" + draw(st.sampled_from(["", " DESC", " NULLS FIRST"])) + draw(
            st.sampled_from(["", " LIMIT 3", " LIMIT 1 OFFSET 2", " OFFSET 1"]))
    return text


def _check_generated(text: str) -> None:
    mine = read_query(text)
    if mine is None:
        return
    try:
        theirs = read_tree(text)
    except (SQLError, UnsupportedSQL) as e:
        pytest.fail(f"read {text!r}, which DuckDB's path refuses: {e}")
    assert mine == theirs, text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_queries())
def test_generated_queries_read_as_duckdb(text):
    _check_generated(text)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_queries())
def test_generated_queries_read_as_duckdb_many(text):
    _check_generated(text)
