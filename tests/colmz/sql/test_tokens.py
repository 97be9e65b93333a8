"""``colmz.sql.tokens``: the tokenizer, and what one expression is."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
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


def test_a_dot_before_a_digit_that_is_no_number_is_an_operator():
    # "²" is a digit to str.isdigit but no number's digit: the tokenizer once crashed on
    # ".²" (AttributeError); it is the operator "." and the word "²", as elsewhere.
    assert [(t.kind, t.text) for t in tokenize("SELECT .² + .5")] == [
        ("word", "SELECT"), ("op", "."), ("word", "²"), ("op", "+"), ("number", ".5")]


def test_check_expression_takes_one_expression_only():
    assert check_expression("k IN (SELECT k FROM u) AND v = ';'", "p").type == "CONJUNCTION_AND"
    assert check_expression('"select" = 1 AND "from" < 2', "p")  # quoted names are names
    for ok in ["k IS DISTINCT FROM 3", "k IS NOT DISTINCT FROM v", "substring(v FROM 2) = 'x'",
               "extract(year FROM ts) > 2000", "v > (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY k) FROM u)",
               "k = ANY(ARRAY[1, 2]) AND v::TEXT LIKE 'a%'", "((k = 1)) /* c */", "copy = 1"]:
        check_expression(ok, "p")
    for bad, what in [
        ("", "empty"), ("1=0); COPY (SELECT 1) TO 'f'; SELECT (1", "other than a query"),
        ("(k = 1", "cannot parse"), ("k = 1; SELECT 1", "cannot parse"), ("k = 1 UNION SELECT 1", "cannot parse"),
        ("k = 1 ORDER BY k", "cannot parse"), ("1 = 1) UNION (SELECT 1", "set operation"), ("a[1)", "cannot parse"),
        ("1) FROM t WHERE (1", "FROM"), ("1), (2", "2 expressions"), ("1) AS x --", "alias"),
        ("1) WINDOW w AS (", "'WINDOW"),
    ]:
        with pytest.raises(SQLError, match=f"DELETE FROM t: predicate: not one expression.*{what}|DELETE FROM t: predicate: {what}"):
            check_expression(bad, "DELETE FROM t: predicate")


@given(st.text(alphabet="ab ;'\"()=\n\r-*/", max_size=24))
def test_an_expression_never_holds_a_top_level_semicolon(text):
    # Whatever check_expression accepts, wrapped in parentheses, is one expression: no ';'
    # outside a string or comment, as colmz's tokenizer (DuckDB's lexer) reads it.
    try:
        check_expression(text, "p")
    except SQLError:
        return
    assert not any(t.kind == "op" and t.text == ";" for t in tokenize(text))


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


def test_comments_end_where_duckdbs_lexer_ends_them():
    # Before: a block comment ended at the first */ and -- only at \n.
    assert [t.text for t in tokenize("a /* x /* y */ ) UNION */ b")] == ["a", "b"]
    assert [t.text for t in tokenize("a --x\r) b")] == ["a", ")", "b"]
    assert [t.text for t in tokenize("a /*/ b */ c")] == ["a", "c"]
    with pytest.raises(SQLError, match="unterminated comment"):
        tokenize("a /* /* */ b")
    # Only PostgreSQL's whitespace separates; other characters above ASCII are letters.
    assert [t.text for t in tokenize("a\u00a0b\x0bc")] == ["a\u00a0b", "c"]


_DUCK_KINDS = {"word": ("identifier", "keyword"), "qident": ("identifier",), "string": ("string_const",),
               "number": ("numeric_const",)}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b1", " ", " ", "\n", "\r", "\r", "/*", "/*", "*/", "*/", "--", "--", "'x'",
                                 "'", "''", "E'", "\\'", "$$", "$q$", "(", ")", "1", "-", "*", "/", '"', ";"]),
                max_size=16).map("".join))
def test_tokenizer_reads_what_duckdbs_lexer_reads(text):
    # Every name, string and number colmz reads starts where DuckDB's lexer starts one, and
    # colmz reads one wherever DuckDB does: the same text is code, string or comment for both.
    import duckdb

    try:
        toks = tokenize(text)
    except SQLError:
        return
    ours = []
    for i, t in enumerate(toks):
        if t.kind == "op":
            continue
        if (t.kind == "string" and i and toks[i - 1].end == t.start and toks[i - 1].text in ("x", "X", "b", "B", "n", "N")
                and t.text.startswith("'")):
            ours[-1] = (toks[i - 1].start, "string")  # x'..', b'..', n'..': one string to DuckDB
            continue
        ours.append((t.start, t.kind))
    duck = [(at, kind.name) for at, kind in duckdb.tokenize(text) if kind.name not in ("operator", "comment")]
    assert [at for at, _ in ours] == [at for at, _ in duck], text
    for (_, mine), (_, theirs) in zip(ours, duck):
        assert theirs in _DUCK_KINDS[mine], text


_SLICED = [
    "INSERT INTO t SELECT k /* ( */, E'x\\'y' || $q$;)$q$ FROM u WHERE v::int::text = '1'",
    "INSERT INTO t (a, b) VALUES (1, 'a;b'), (2, NULL)",
    "CREATE MATERIALIZED VIEW v AS SELECT x.\"We;ird\", 1.5e3 FROM t x -- tail",
    "CREATE CONTINUAL TASK c (k INT) ON INPUT t AS (INSERT INTO c SELECT k FROM t; INSERT INTO c SELECT (k) FROM t)",
    "CREATE CONTINUAL TASK c FROM TRANSFORM t USING (SELECT k::text::int FROM t)",
    "SELECT ((k)) FROM t; WITH a AS (SELECT 1) SELECT * FROM a",
]


@pytest.mark.parametrize("text", _SLICED)
def test_a_query_cut_from_a_statement_shares_its_tokens(text, monkeypatch):
    # parse hands each query's tokens, cut from the statement's, to tokenize: they must be
    # the tokens the text lexes to alone, and its nesting no deeper than measured alone.
    from colmz.sql import clear_caches, parse
    from colmz.sql.tokens import nesting_depth

    clear_caches()
    alone = tokenize.__wrapped__
    queries = []
    for stmt in parse(text):
        body = getattr(stmt, "body", None) or [stmt]
        queries += [getattr(b, "query", None) or getattr(b, "sql", None) for b in body]
    assert queries and all(queries)
    import importlib

    tokens = importlib.import_module("colmz.sql.tokens")
    with monkeypatch.context() as m:
        m.setattr(tokens, "_PAIRS", None)  # the lexer unusable: each query's tokens come from its cut
        shared = [tokenize(q) for q in queries]
    for q, got in zip(queries, shared):
        assert [(t.kind, t.text, t.start, t.end, t.upper) for t in got] == [
            (t.kind, t.text, t.start, t.end, t.upper) for t in alone(q)], q
        assert nesting_depth(got) == nesting_depth(alone(q))


_EDIT_ALPHABET = "ab e1.+-5 ;'\"()-\n*/$:<>#E_"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_EDIT_ALPHABET, max_size=40), st.integers(0, 40), st.integers(0, 40),
       st.text(alphabet=_EDIT_ALPHABET, max_size=8))
def test_tokens_of_an_edit_are_the_tokens_of_the_edited_text(old, a, b, piece):
    # share_edit lexes only what an edit may change; what it hands tokenize must be what
    # lexing the whole edited text gives (or nothing, where that raises).
    from colmz.sql.tokens import share_edit

    try:
        toks = tokenize(old)
    except SQLError:
        return
    a, b = sorted((min(a, len(old)), min(b, len(old))))
    new = old[:a] + piece + old[b:]
    tokenize.cache_clear()
    share_edit(old, toks, new)
    lex = tokenize.__wrapped__  # uncached: the first call takes what share_edit handed over
    try:
        shared = [(t.kind, t.text, t.start, t.end, t.upper) for t in lex(new)]
    except SQLError:
        shared = None
    try:
        fresh = [(t.kind, t.text, t.start, t.end, t.upper) for t in lex(new)]
    except SQLError:
        fresh = None
    assert shared == fresh


_LONG_EDIT_PIECES = [*_EDIT_ALPHABET, "/*", "*/", "--", "1e+", "$t$", "E'", "''", "é", "SELECT ", "x1 "]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_LONG_EDIT_PIECES), max_size=60).map("".join), st.integers(0, 200),
       st.integers(0, 200), st.lists(st.sampled_from(_LONG_EDIT_PIECES), max_size=30).map("".join))
def test_tokens_of_a_long_edit_are_the_tokens_of_the_edited_text(old, a, b, piece):
    # A long stretch to lex again is read with one findall up to where the old tokens may
    # resume, less its last tokens (the lexer looks past a token's end): the same tokens as
    # lexing the whole edited text, or nothing where that raises.
    test_tokens_of_an_edit_are_the_tokens_of_the_edited_text.hypothesis.inner_test(old, a, b, piece)


def test_an_edit_keeps_a_number_the_edit_extends():
    # the lexer looks past a token's end (1e+ is 1 until a digit follows): tokens ending
    # within three characters of the edit are lexed again
    from colmz.sql.tokens import share_edit

    old, new = "SELECT 1e+x FROM t", "SELECT 1e+5 FROM t"
    share_edit(old, tokenize(old), new)
    assert [t.text for t in tokenize(new)] == ["SELECT", "1e+5", "FROM", "t"]


def _one_match_at_a_time(text):
    # The reference reading: one regular-expression match per token, comments by depth.
    from colmz.sql.tokens import scan

    return list(scan(text))


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["a", "E", "e'", "x1", " ", "\n", "/*", "*/", "/", "*", "--", "'", "''", '"', "$", "$t$",
                                 "$$", "1", ".5", "1e", "+", "-", "::", "(", ")", "é", "\\", ";", "#", "`"]),
                max_size=24).map("".join))
def test_one_pass_tokenizer_reads_as_one_match_at_a_time(text):
    # tokenize reads runs of tokens in one finditer pass (a comment without a nested "/*" and
    # a dollar-quoted string each one match): same tokens, or the same error, as the loop
    # reading one token per match.
    from colmz.sql import clear_caches

    clear_caches()
    try:
        want = _one_match_at_a_time(text)
    except SQLError as e:
        with pytest.raises(SQLError) as got:
            tokenize(text)
        assert str(got.value) == str(e)
        return
    assert list(tokenize(text)) == want


def test_a_plain_text_is_tokenized_in_one_findall(monkeypatch):
    # Work counter: tokenize's common path reads a text of strings, names, numbers,
    # operators and comments with one findall (no match object, no method call per token);
    # the match-at-a-time readers are left for what it cannot decide alone.
    import colmz.sql.tokens as tokens
    from colmz.sql import clear_caches

    class Counting:  # counts the match-at-a-time passes
        def __init__(self, pattern):
            self.pattern, self.calls = pattern, 0

        def findall(self, *args):
            return self.pattern.findall(*args)

        def match(self, *args):
            self.calls += 1
            return self.pattern.match(*args)

    text = ("SELECT e.id, 'it''s' AS s, \"Q\"\"x\" /* c */, $t$a$t$, E'\\'', 1.5e3, .5 -- c\n"
            "FROM events e WHERE e.ts + 30000 > mz_now() AND x::INT8 ->> 'k' <> 'é'")
    want = _one_match_at_a_time(text)
    clear_caches()
    scan = Counting(tokens._PAIRS)
    monkeypatch.setattr(tokens, "_PAIRS", scan)
    assert list(tokenize(text)) == want
    assert scan.calls == 0
    # what the common path cannot decide is read one match at a time: a nested comment
    # (a match for each of "a", "/*" and "b", and one finding nothing after them)
    clear_caches()
    assert [t.text for t in tokenize("a /* x /* y */ */ b")] == ["a", "b"] and scan.calls == 4
    with pytest.raises(SQLError, match="unterminated string"):
        tokenize("SELECT 'open")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=_EDIT_ALPHABET, max_size=12), min_size=1, max_size=4))
@example(["--", " 1"])  # a piece that is only a comment runs on into the next
def test_tokens_of_a_concatenation_are_the_tokens_of_its_text(pieces):
    # share_concat hands tokenize each piece's tokens, moved: they must be what the joined
    # text lexes to alone (or nothing is handed, and tokenize lexes it).
    from colmz.sql import clear_caches
    from colmz.sql.tokens import share_concat

    clear_caches()
    text = "".join(pieces)
    try:
        want = [(t.kind, t.text, t.start, t.end, t.upper) for t in tokenize.__wrapped__(text)]
    except SQLError:
        want = None
    assert share_concat(pieces) == text
    if want is None:
        with pytest.raises(SQLError):
            tokenize(text)
    else:
        assert [(t.kind, t.text, t.start, t.end, t.upper) for t in tokenize(text)] == want


def count_lexing(monkeypatch) -> tuple[list[str], object]:
    """Record every text colmz's lexer reads from now on (a slice when it lexes a part):
    ``(the list it fills, the real lexer to put back)``."""
    import colmz.sql.tokens as tokens

    lexed: list[str] = []
    real = tokens._tokens_at_once

    def counting(text, *args):
        lexed.append(text if not args else text[args[0]:args[1]])
        return real(text, *args)

    monkeypatch.setattr(tokens, "_tokens_at_once", counting)
    return lexed, real


def test_a_delete_query_shares_its_predicates_tokens(monkeypatch):
    # Work counter: the SELECT colmz writes for a DELETE (and an UPDATE) is not lexed where
    # it holds the statement's own text: the predicate's and the values' tokens, cut from
    # the statement's, are moved into it; only colmz's own pieces are lexed.
    import colmz.sql.tokens as tokens
    from colmz.sql import clear_caches, parse, select_where, update_select

    clear_caches()
    (d,) = parse("DELETE FROM t WHERE k IN (SELECT k FROM events WHERE kind = 'gone') AND v < 100")
    (u,) = parse("UPDATE t SET v = v || '!', k = k + 1 WHERE k BETWEEN 3 AND 7")
    lexed, real = count_lexing(monkeypatch)
    q1 = select_where(d.table, d.where)
    q2 = update_select(u.table, ["k", "v"], dict(u.assignments), u.where)
    got = [list(tokenize(q)) for q in (q1, q2)]
    monkeypatch.setattr(tokens, "_tokens_at_once", real)
    assert all(d.where not in t and "k BETWEEN" not in t and "v || '!'" not in t for t in lexed), lexed
    for q, toks in zip((q1, q2), got):
        assert [(t.kind, t.text, t.start, t.end, t.upper) for t in toks] == [
            (t.kind, t.text, t.start, t.end, t.upper) for t in tokenize.__wrapped__(q)]


def test_a_translation_is_lexed_only_where_the_trees_rules_changed_it(monkeypatch):
    # Work counter: a query the tree's rules rewrite, with no token pass after (no mz_now(),
    # sum, VALUES, ...), hands bind_relations the tokens of its translation: only the text
    # around the rewritten node is lexed again, never the whole translation, and the tokens
    # bind_relations reads are tokenize's own.
    import colmz.sql.tokens as tokens
    from colmz.sql import bind_relations, clear_caches, translate

    q = "SELECT o.region, o.amount || o.note AS label, o.status FROM orders o JOIN users u ON o.user_id = u.id"
    clear_caches()
    tokenize(q)
    lexed, real = count_lexing(monkeypatch)
    out = translate(q)
    assert out != q  # (|| of a non-text operand: a rule of the tree rewrote it)
    got = list(tokenize(out))
    bound, _ = bind_relations(out, frozenset({"orders", "users"}))
    monkeypatch.setattr(tokens, "_tokens_at_once", real)
    assert all(len(t) < len(out) // 2 for t in lexed), lexed
    assert "o.user_id = u.id" not in "".join(lexed), lexed  # the common ending kept, moved
    assert [(t.kind, t.text, t.start, t.end, t.upper) for t in got] == [
        (t.kind, t.text, t.start, t.end, t.upper) for t in tokenize.__wrapped__(out)]
    assert 'FROM "__colmz_r0" o JOIN "__colmz_r1" u ON' in bound


def test_a_shallow_text_is_not_measured_token_by_token(monkeypatch):
    # Work counter: a text holding at most MAX_NESTING of "(", "[" and "::" nests no deeper,
    # so check_nesting passes it without nesting_depth's pass over the tokens; a deeper one
    # is still measured and refused, parentheses inside strings not counted as levels.
    import colmz.sql.tokens as tokens
    from colmz.sql import UnsupportedSQL

    calls = []
    real = tokens.nesting_depth
    monkeypatch.setattr(tokens, "nesting_depth", lambda toks: calls.append(1) or real(toks))
    q = "SELECT " + "(" * 64 + "1" + ")" * 64
    tokens.check_nesting(tokenize(q), q)
    assert calls == []
    q = "SELECT '" + "(" * 70 + "', " + "(" * 64 + "1" + ")" * 64
    tokens.check_nesting(tokenize(q), q)  # more "(" characters than levels: measured, passes
    assert calls == [1]
    q = "SELECT " + "(" * 60 + "x::a::b::c::d::e" + ")" * 60
    with pytest.raises(UnsupportedSQL, match="nested 65 deep"):
        tokens.check_nesting(tokenize(q), q)


def _naive_closing(toks, open_at):
    # The reference: count depth from the opening bracket to where it returns to zero.
    depth = 0
    for j in range(open_at, len(toks)):
        if toks[j].kind == "op" and toks[j].text in "([":
            depth += 1
        elif toks[j].kind == "op" and toks[j].text in ")]":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _naive_top_level(toks, lo, hi):
    depth = 0
    for k in range(lo, hi):
        t = toks[k]
        if t.kind == "op" and t.text in "([":
            depth += 1
        elif t.kind == "op" and t.text in ")]":
            if depth == 0:
                return
            depth -= 1
        elif depth == 0:
            yield k


def _naive_balance(toks):
    # The reference: a stack of the brackets' own kinds; the first ")"/"]" it cannot pair,
    # else the innermost bracket left open, else None.
    stack = []
    for t in toks:
        if t.kind == "op" and t.text in "([":
            stack.append(t)
        elif t.kind == "op" and t.text in ")]":
            if not stack or (stack[-1].text == "(") != (t.text == ")"):
                return ("unbalanced", t.start)
            stack.pop()
    return ("unclosed", stack[-1].start) if stack else None


_BRACKET_TEXTS = st.lists(st.sampled_from(["(", ")", "[", "]", "a", ",", "'(' ", "/* ) */", "f(", "x::t"]),
                          max_size=30).map(" ".join)


@settings(max_examples=300)
@given(_BRACKET_TEXTS, st.integers(0, 40), st.integers(0, 40))
def test_bracket_pairs_answer_as_depth_counting_does(text, lo, hi):
    # The one bracket index (kept with the tokens) against depth counting from scratch:
    # closing at each opening bracket, top-level runs from any token, the balance check.
    from colmz.sql.tokens import NOT_BRACKET, bracket_pairs, check_balanced, closing, top_level

    toks = tokenize(text)
    pairs = bracket_pairs(toks)
    assert bracket_pairs(toks) is pairs  # computed once per token list
    for i, t in enumerate(toks):
        if t.kind == "op" and t.text in "([":
            assert closing(toks, i) == _naive_closing(toks, i)
            if pairs[i] >= 0:
                assert pairs[pairs[i]] == i
        elif not (t.kind == "op" and t.text in ")]"):
            assert pairs[i] == NOT_BRACKET
    lo, hi = sorted((min(lo, len(toks)), min(hi, len(toks))))
    assert list(top_level(toks, lo, hi)) == list(_naive_top_level(toks, lo, hi))
    want = _naive_balance(toks)
    if want is None:
        check_balanced(toks, text)
    else:
        with pytest.raises(SQLError, match=f"{want[0]} .* at offset {want[1]} "):
            check_balanced(toks, text)


@settings(max_examples=200)
@given(_BRACKET_TEXTS, st.integers(0, 40))
def test_select_offset_passes_parenthesised_groups_whole(text, i):
    # select_offset reads the bracket index backwards: the nearest SELECT at token i's own
    # parenthesis level, as counting depth back from i finds it.
    from colmz.sql.hints import select_offset

    toks = tokenize(text.replace("a", "SELECT", 2))
    i = min(i, len(toks))
    depth, want = 0, -1
    for j in range(i - 1, -1, -1):
        t = toks[j]
        if t.kind == "op" and t.text == ")":
            depth += 1
        elif t.kind == "op" and t.text == "(":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and t.upper == "SELECT":
            want = t.start
            break
    if not any(t.text in "[]" for t in toks):  # (brackets are no parenthesis level there)
        assert select_offset(toks, i) == want


def test_the_bracket_index_is_kept_with_the_tokens(monkeypatch):
    # Work counter: every bracket question about one token list reads one index, made (and
    # stored) at the first question; tokenize's cache clear forgets it.
    import colmz.sql.tokens as tokens
    from colmz.sql.tokens import bracket_pairs, closing, top_level

    class Counting(dict):
        made = 0

        def __setitem__(self, key, value):
            Counting.made += 1
            super().__setitem__(key, value)

    monkeypatch.setattr(tokens, "_PAIRS_OF", Counting())
    toks = tokenize("SELECT f(a, (b)[1]), g(c) FROM t WHERE (x)")
    assert [closing(toks, i) for i in (2, 5, 14, 20)] == [11, 7, 16, 22]
    assert len(list(top_level(toks, 0))) == 7
    assert bracket_pairs(toks) is bracket_pairs(toks) and Counting.made == 1
    tokenize.cache_clear()
    assert not tokens._PAIRS_OF
