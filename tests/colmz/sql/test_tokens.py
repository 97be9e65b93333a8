"""``colmz.sql.tokens``: the tokenizer, and what one expression is."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from colmz.sql import SQLError, check_expression, tokenize


def test_tokenizer_keeps_strings_comments_and_quoted_names_apart():
    toks = tokenize("SELECT 'a;''b', \"We;ird\" /* ; */ FROM t -- ;\n WHERE x->>'k' = E'\\'' AND $$;$$ <> y")
    kinds = [(t.kind, t.text) for t in toks]
    assert ("string", "'a;''b'") in kinds and ("qident", '"We;ird"') in kinds
    assert ("op", "->>") in kinds and ("string", "$$;$$") in kinds and ("op", "<>") in kinds
    assert not any(t.text == ";" for t in toks)
    assert toks[3].name == "We;ird"
    with pytest.raises(SQLError, match="unterminated string"):
        tokenize("SELECT 'open")
    with pytest.raises(SQLError, match="unterminated comment"):
        tokenize("/* open")


@given(st.text(alphabet="abc ;'\"()-\n*/$", max_size=30))
def test_tokenizer_never_fails_otherwise(text):
    try:
        toks = tokenize(text)
    except SQLError:
        return
    for a, b in zip(toks, toks[1:]):
        assert a.end <= b.start


def test_check_expression_takes_one_expression_only():
    assert [t.text for t in check_expression("k IN (SELECT k FROM u) AND v = ';'", "p")][-1] == "';'"
    assert check_expression('"select" = 1 AND "from" < 2', "p")  # quoted names are names
    for ok in ["k IS DISTINCT FROM 3", "k IS NOT DISTINCT FROM v", "substring(v FROM 2) = 'x'",
               "extract(year FROM ts) > 2000", "v > (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY k) FROM u)",
               "k = ANY(ARRAY[1, 2]) AND v::TEXT LIKE 'a%'"]:
        check_expression(ok, "p")
    for bad, what in [
        ("", "empty"), ("1=0); COPY (SELECT 1) TO 'f'; SELECT (1", "unbalanced"),
        ("(k = 1", "unclosed"), ("k = 1; SELECT 1", "no ';'"), ("k = 1 UNION SELECT 1", "UNION"),
        ("k = 1 ORDER BY k", "ORDER"), ("1 = 1) OR (1 = 1", "unbalanced"), ("a[1)", "unbalanced"),
        ("copy = 1", "copy cannot stand"),
    ]:
        with pytest.raises(SQLError, match=f"DELETE FROM t: predicate: .*{what}"):
            check_expression(bad, "DELETE FROM t: predicate")


@given(st.text(alphabet="ab ;'\"()=\n", max_size=24))
def test_an_expression_never_holds_a_top_level_semicolon(text):
    # Whatever check_expression accepts, wrapped in parentheses, is one expression: no ';'
    # outside a string, every parenthesis paired.
    try:
        toks = check_expression(text, "p")
    except SQLError:
        return
    assert not any(t.kind == "op" and t.text == ";" for t in toks)
    depth = 0
    for t in toks:
        depth += (t.kind == "op" and t.text == "(") - (t.kind == "op" and t.text == ")")
        assert depth >= 0
    assert depth == 0


def test_long_texts_are_not_held_by_the_caches():
    from colmz.sql import CACHED_CHARS, bind_relations, clear_caches, connect, run_query

    clear_caches()
    long = "SELECT " + ", ".join(["1"] * CACHED_CHARS)
    assert len(tokenize(long)) > CACHED_CHARS
    run_query(connect(), long, 0)
    bind_relations(long, frozenset({"t"}))
    assert tokenize.cache_info().currsize == 0 and bind_relations.cache_info().currsize == 0
    tokenize("SELECT 1")
    assert tokenize.cache_info().currsize == 1
