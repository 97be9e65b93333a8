"""The one typing pass of the column-type rules (:mod:`colmz.sql.column_rules`): the same
text as the rules applied one after another (each reading the previous one's output), over
every corpus query as the catalog binds it and over texts where rules meet; the text read
again only where a rule reads another's output (a work counter of readings).
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("duckdb")

import colmz  # noqa: E402
from colmz.sql import column_rules  # noqa: E402
from colmz.sql.column_rules import RULES, column_type_rules, rules_applied  # noqa: E402

T = (("t", (("k", "exact", "bigint"), ("r", "real", "real"), ("d", "interval", "interval"),
            ("j", "jsonb", "jsonb"), ("a", "array", None), ("s", "text", "text"))),)


def one_by_one(text, relations):
    # each rule alone, in order, reading the previous one's output
    for rule in RULES:
        text = column_type_rules(text, relations, (rule,))
    return text


@pytest.fixture(scope="module")
def corpus_catalog():
    from sql_corpus import QUERIES, SETUP

    cat = colmz.Catalog()
    for s in SETUP:
        cat.execute(s)
    return cat, QUERIES


def test_every_corpus_query_as_the_rules_one_by_one(corpus_catalog):
    cat, queries = corpus_catalog
    engine = cat._engine  # (white-box: the relations the catalog's bound_query types)
    compared = 0
    for _, sql in queries:
        try:
            text, bound = colmz.sql.bind_relations(cat.translated(sql), frozenset(engine._objects))
        except colmz.sql.SQLError:
            continue
        rels = engine._typed_relations(bound)
        try:
            want = one_by_one(text, rels)
        except colmz.sql.SQLError as e:
            with pytest.raises(type(e), match="^" + re.escape(str(e)) + "$"):
                column_type_rules(text, rels)
            continue
        assert column_type_rules(text, rels) == want, sql
        compared += 1
    assert compared > 1500


@pytest.mark.parametrize("text", [
    "SELECT extract(epoch FROM d / 2) * r FROM t",  # an interval rule inside a float check
    "SELECT x * 2 FROM (SELECT r AS x FROM t UNION ALL SELECT '1.5') s",  # a cast the float rule reads
    "SELECT __colmz_text(a) || __colmz_text(k), d / 2, j > '1.0' FROM t",  # three rules, disjoint nodes
    "SELECT sum(d), r + 1 FROM t GROUP BY r",
    "SELECT k FROM t UNION SELECT '7' ORDER BY 1",
])
def test_rules_that_meet_as_one_by_one(text):
    assert column_type_rules(text, T) == one_by_one(text, T)


def test_the_text_is_read_again_only_where_a_rule_reads_anothers_output(monkeypatch):
    readings = []
    real = column_rules.typed_text

    def counted(text, *args, **kwargs):
        readings.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(column_rules, "typed_text", counted)
    column_rules._apply.cache_clear()
    # jsonb, interval and array rules edit disjoint nodes: one reading
    text, fired = rules_applied("SELECT __colmz_text(a) || __colmz_text(k), d / 2, j > '1.0' FROM t", T)
    assert fired == {"jsonb", "interval", "array"} and len(readings) == 1
    # the float rule's edits retype what the jsonb rule reads: read again after them
    readings.clear()
    text, fired = rules_applied("SELECT r * 2, j > '1.0' FROM t", T)
    assert fired == {"float", "jsonb"} and len(readings) == 2
    # no rule edits: one reading
    readings.clear()
    assert rules_applied("SELECT k FROM t", T) == ("SELECT k FROM t", frozenset())
    assert len(readings) == 1
