"""``colmz.sql.shapes``: a text of a known shape gets the tree DuckDB would give it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from colmz.sql import SQLError, UnsupportedSQL, clear_caches, shapes
from colmz.sql.shapes import remap_tree, shape_of
from colmz.sql.tree import duckdb_parses, parse_tree, prefetch_trees, read_tree


@pytest.fixture(autouse=True)
def _duckdb_reads_every_text(monkeypatch):
    # Shapes serve the texts colmz's own reader (colmz.sql.grammar) gives up on: here every
    # text goes the DuckDB way, so what these tests count is the shapes' work.
    monkeypatch.setattr("colmz.sql.grammar.read_query", lambda text: None)


class Slot:
    """A literal of one form in a generated skeleton."""

    def __init__(self, form: str) -> None:
        self.form = form


_CHARS = st.sampled_from(list("ab z'\"é😀\\%_\n\t;()*/-$") + ["/*", "*/", "--", "''", "ß"])
_STRING = st.lists(_CHARS, max_size=6).map(lambda cs: "'" + "".join(cs).replace("'", "''") + "'")
_FILLS = {
    "int": st.integers(0, 10**9 - 1).map(str),
    "big": st.integers(10**9, 10**18 - 1).map(str),
    "huge": st.integers(10**18, 10**40).map(str),  # kept as written: a new shape each
    "dec": st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(["{a}.{b}", ".{b}", "{a}."]))
    .map(lambda t: t[2].format(a=t[0], b=t[1])),
    "exp": st.tuples(st.integers(0, 999), st.sampled_from(["e", "E", "e-", "e+"]), st.integers(0, 30))
    .map(lambda t: f"{t[0]}{t[1]}{t[2]}"),
    "str": _STRING,
    "estr": st.lists(st.sampled_from(["a", "\\n", "\\'", "é", "''"]), max_size=4).map(lambda cs: "E'" + "".join(cs) + "'"),
    "dollar": st.lists(st.sampled_from(["a", "'", "é", " "]), max_size=4).map(lambda cs: "$$" + "".join(cs) + "$$"),
    "odd": st.sampled_from(["0x1F", "1_000", "00012", "0", "x'AB'"]),
}
_SEPS = st.sampled_from([" ", " ", " ", "\n", "\t", " /* c */ ", " /* a /* 'b */ c */ ", " -- c'\n"])


@st.composite
def _expressions(draw, depth: int = 0) -> list:
    sep = draw(_SEPS)
    leaf = st.one_of(
        st.sampled_from(["int", "big", "dec", "exp", "str", "str", "str", "huge", "estr", "dollar", "odd"]).map(
            lambda f: [Slot(f)]),
        st.sampled_from(["k", "v", "t.k", '"Q v"', "NULL", "true"]).map(lambda c: [c]),
        st.sampled_from(["int", "dec", "exp"]).flatmap(lambda f: st.sampled_from([["-", Slot(f)], ["- ", Slot(f)],
                                                                                   ["-(", Slot(f), ")"]])),
        st.sampled_from(["DATE", "TIMESTAMP", "INTERVAL", "TIMESTAMPTZ"]).map(lambda w: [w, " ", Slot("str")]),
        st.just(["INTERVAL ", Slot("str"), " SECOND"]),
    )
    if depth >= 3:
        return draw(leaf)
    sub = _expressions(depth + 1)
    kind = draw(st.integers(0, 11))
    if kind <= 2:
        return draw(leaf)
    a = draw(sub)
    if kind == 3:
        op = draw(st.sampled_from(["+", "-", "*", "/", "||", "=", "<", "<>", "AND", "OR", "LIKE", "->>"]))
        return [*a, sep, op, draw(_SEPS), *draw(sub)]
    if kind == 4:
        return [draw(st.sampled_from(["f", "coalesce", "upper", "sum"])), "(", *a, ",", sep, *draw(sub), ")"]
    if kind == 5:
        return ["CAST(", *a, " AS ", draw(st.sampled_from(["INT", "TEXT", "DECIMAL(10, 2)", "VARCHAR(3)"])), ")"]
    if kind == 6:
        return ["(", *a, ")::", draw(st.sampled_from(["INT8", "JSONB", "TEXT[]", "NUMERIC"]))]
    if kind == 7:
        return ["CASE WHEN ", *a, " THEN ", *draw(sub), sep, "ELSE ", *draw(sub), " END"]
    if kind == 8:
        return [*a, " IN (", *draw(sub), ", ", *draw(sub), ")"]
    if kind == 9:
        return [*a, " BETWEEN ", *draw(sub), " AND ", *draw(sub)]
    if kind == 10:
        return ["(SELECT ", *a, " FROM u WHERE k =", sep, *draw(sub), ")"]
    return ["ARRAY[", *a, ",", *draw(sub), "]"]


@st.composite
def _skeletons(draw) -> list:
    sep = draw(_SEPS)
    e1, e2 = draw(_expressions()), draw(_expressions())
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return ["SELECT ", *e1, " AS x,", sep, *e2, " FROM t WHERE ", *draw(_expressions()), sep, "ORDER BY ",
                *draw(_expressions()), " LIMIT ", Slot("int")]
    if kind == 1:
        return ["VALUES (", *e1, ",", sep, *e2, "), (", *draw(_expressions()), ", ", *draw(_expressions()), ")"]
    if kind == 2:
        return ["SELECT (", *e1, ")"]  # as check_expression wraps a predicate
    return ["SELECT k, sum(", *e1, ") FROM t GROUP BY k HAVING ", *e2, sep, "OFFSET ", Slot("int")]


@st.composite
def _fills(draw, skeleton: list) -> str:
    return "".join(draw(_FILLS[p.form]) if isinstance(p, Slot) else p for p in skeleton)


def _fresh(text: str):
    try:
        return read_tree(text)
    except (SQLError, UnsupportedSQL) as e:
        return type(e)


def _remapped_is_duckdbs(data) -> None:
    # The shape's first text is the template; every other text of the same skeleton (same
    # forms of literals, other values) remapped from it equals DuckDB's own parse of it --
    # the remapping itself, without the cache's confirmation.
    skeleton = data.draw(_skeletons())
    texts = [data.draw(_fills(skeleton)) for _ in range(4)]
    first = _fresh(texts[0])
    if not isinstance(first, tuple):
        return
    for text in texts[1:]:
        got = remap_tree(text, texts[0], first)
        if got is not None:
            assert got == _fresh(text), text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_remapped_tree_is_what_duckdb_gives(data):
    _remapped_is_duckdbs(data)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_remapped_tree_is_what_duckdb_gives_many(data):
    _remapped_is_duckdbs(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_parse_tree_through_shapes_is_what_duckdb_gives(data):
    # Through the cache (confirmation included): each text's tree, or its error, is DuckDB's.
    skeleton = data.draw(_skeletons())
    clear_caches()
    for _ in range(4):
        text = data.draw(_fills(skeleton))
        want = _fresh(text)
        if isinstance(want, tuple):
            assert parse_tree(text) == want, text
        else:
            with pytest.raises(want):
                parse_tree(text)


@pytest.mark.parametrize("texts", [
    ["INSERT_VALUES (1, 'a;b', '2023-11-14 22:13:20+00'), (2, 'it''s', NULL)".replace("INSERT_", ""),
     "VALUES (17, 'x', '2024-01-01 00:00:00+00'), (-0, '''', NULL)".replace("-0", "30"),
     "VALUES (123456, 'é😀', '1999-12-31'), (9, '', NULL)"],
    ["SELECT * FROM t WHERE k = 5 AND v = 'a' ORDER BY -1 LIMIT 3",
     "SELECT * FROM t WHERE k = 500000 AND v = 'it''s /* no */' ORDER BY -22 LIMIT 10",
     "SELECT * FROM t WHERE k = 0 AND v = '' ORDER BY -0 LIMIT 0"],
    ["SELECT (ts + INTERVAL '2s' > DATE '2024-01-01' - 1.5 /* c */ * 2e3)",
     "SELECT (ts + INTERVAL '20 minutes' > DATE '1999-12-31' - 22.75 /* other */ * 7e-1)",
     "SELECT (ts + INTERVAL 'é' > DATE 'x' - .5 /* */ * 1E10)"],
])
def test_a_resent_shape_is_parsed_twice_then_remapped(texts):
    # The first text is parsed, the second confirms the template, every later one is
    # remapped without DuckDB: counted at DuckDB's serialization.
    clear_caches()
    before = duckdb_parses()
    got = [parse_tree(t) for t in texts]
    assert duckdb_parses() == (before[0] + 2, before[1] + 2)
    for t, g in zip(texts, got, strict=True):
        assert g == read_tree(t)
    assert len({shape_of(t).key for t in texts}) == 1


def test_what_no_constant_holds_is_part_of_the_key():
    # A table named by a string, a parameter's number: pinned, so another value is another
    # template (parsed by DuckDB), never a remapped wrong name.
    clear_caches()
    for a, b in [("SELECT * FROM 'a.csv' WHERE k = 1", "SELECT * FROM 'b.csv' WHERE k = 2"),
                 ("SELECT $1, 5", "SELECT $2, 6"),
                 ("SELECT 'a'\n'b'", "SELECT 'c'\n'd'")]:
        assert shape_of(a).key == shape_of(b).key
        assert remap_tree(b, a, read_tree(a)) is None
        for _ in range(3):
            assert parse_tree(a) == read_tree(a) and parse_tree(b) == read_tree(b)
            parse_tree.cache_clear()  # the shapes stay


def test_apart_on_a_line_and_across_lines_are_two_shapes():
    # PostgreSQL's lexer joins 'a' and 'b' apart across a line break into one string.
    one, two = "SELECT 'a'\n'b'", "SELECT 'a' 'b'"
    assert shape_of(one).key != shape_of(two).key
    assert parse_tree(one)[0].items[0].literal.text == "ab"
    with pytest.raises(SQLError):
        parse_tree(two)


def test_prefetch_parses_several_texts_in_one_call():
    clear_caches()
    calls, parsed = duckdb_parses()
    texts = ["SELECT (v || '!')", "SELECT (k + 1)", "SELECT (k BETWEEN 3 AND 7)", "SELECT (1"]
    prefetch_trees(texts)
    assert duckdb_parses() == (calls + 1, parsed + 4)
    assert [parse_tree(t)[0].items[0].type for t in texts[:3]] == ["FUNCTION", "FUNCTION", "COMPARE_BETWEEN"]
    assert duckdb_parses() == (calls + 1, parsed + 4)
    with pytest.raises(SQLError, match="syntax error"):  # refused when asked for
        parse_tree(texts[3])
    assert shapes.shapes_held() >= 3


def test_an_update_checks_its_values_and_predicate_in_one_duckdb_call():
    from colmz.sql import parse

    clear_caches()
    calls, parsed = duckdb_parses()
    parse("UPDATE t SET v = v || '!', k = k + 1 WHERE k BETWEEN 3 AND 7")
    assert duckdb_parses() == (calls + 1, parsed + 3)
    calls, parsed = duckdb_parses()
    parse("CREATE CONTINUAL TASK retain FROM RETAIN events WHILE (ts + INTERVAL '2s' > mz_now())")
    assert duckdb_parses() == (calls + 1, parsed + 1)  # the predicate; its negation is known from it
