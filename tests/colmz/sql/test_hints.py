"""Query hints (``colmz.sql.hints``): the ``OPTIONS (...)`` clause blanked with every other
offset kept, each hint given to the ``SELECT`` it follows, and bad clauses refused."""

from __future__ import annotations

import pytest

from colmz.sql.hints import InvalidHint, QueryHint, strip_hints
from colmz.sql.translate import translate


def test_the_clause_is_blanked_and_offsets_kept():
    text = ("SELECT k, (SELECT max(w) FROM u GROUP BY w OPTIONS (AGGREGATE INPUT GROUP SIZE = 9)) AS x\n"
            "FROM t GROUP BY k options (\n  aggregate input group size = 10, LIMIT INPUT GROUP SIZE = 4) HAVING true")
    out, hints = strip_hints(text)
    assert len(out) == len(text) and out.count("\n") == text.count("\n")
    assert "OPTIONS" not in out.upper() and out.index("HAVING") == text.index("HAVING")
    inner, outer = text.index("SELECT max"), 0
    assert hints == (QueryHint("AGGREGATE INPUT GROUP SIZE", 9, inner),
                     QueryHint("AGGREGATE INPUT GROUP SIZE", 10, outer), QueryHint("LIMIT INPUT GROUP SIZE", 4, outer))
    assert translate(text) == translate(out)


@pytest.mark.parametrize("text", [
    "SELECT options(x) FROM t",
    "SELECT a, options (b) FROM t",
    "SELECT k FROM t GROUP BY options(k)",
    "SELECT 'OPTIONS (AGGREGATE INPUT GROUP SIZE = 1)' FROM t",
    'SELECT "options" FROM t',
])
def test_other_uses_of_the_word_are_left(text):
    assert strip_hints(text) == (text, ())


@pytest.mark.parametrize("clause, message", [
    ("OPTIONS (AGGREGATE INPUT GROUP SIZE = 0)", "takes a positive integer, got '0'"),
    ("OPTIONS (DISTINCT ON INPUT GROUP SIZE = x)", "DISTINCT ON INPUT GROUP SIZE takes a positive integer, got 'x'"),
    ("OPTIONS (EXPECTED GROUP SIZE = 5)", "unknown query hint 'EXPECTED GROUP SIZE = 5'"),
    ("OPTIONS (LIMIT INPUT GROUP SIZE = 1, LIMIT INPUT GROUP SIZE = 1)", "LIMIT INPUT GROUP SIZE is given twice"),
])
def test_bad_clauses_are_refused_by_name(clause, message):
    with pytest.raises(InvalidHint, match=message):
        strip_hints(f"SELECT k FROM t GROUP BY k {clause}")
    with pytest.raises(InvalidHint, match=message):
        translate(f"SELECT k FROM t GROUP BY k {clause}")
