"""PostgreSQL as the oracle of ``Catalog.sql``: the dialect corpus, run in both.

Every query of ``tests/sql_corpus.py`` (Materialize's SQL as its documentation writes it:
CASE, COALESCE/NULLIF, string functions, ``date_trunc``, intervals and timestamp arithmetic,
``jsonb`` operators, LIKE/ILIKE, DISTINCT ON, window functions, lateral joins, CTEs) runs in
an in-memory ``colmz.Catalog`` and in the machine's PostgreSQL 15 (started by the tests, see
``tests/storage_servers.py``) over the same rows. Each query ends as one of:

* **match** -- the same output column names and the same values (in order when a top-level
  ``ORDER BY`` fixes it, else as multisets; floats within 1e-9, PostgreSQL ``numeric`` read
  as a float, intervals as ``psycopg`` reads them: a year is 365 days, a month 30);
* **refused** -- colmz raises ``UnsupportedSQL`` (an honest "not supported", never an answer);
* **both fail** -- PostgreSQL raises too (division by zero), and so does colmz;
* **wrong** -- a different answer; **raw** -- an error that is not ``UnsupportedSQL`` while
  PostgreSQL answers.

The disagreements colmz's SQL translation has today are listed in :data:`KNOWN_WRONG` and
:data:`KNOWN_RAW`, each with its reason. The test asserts the lists are exact: a change that
makes another query disagree fails, and so does one that fixes a listed query without taking
it off the list (so the lists shrink as the SQL front end learns PostgreSQL's semantics).

The oracle never skips silently in CI: when the ``CI`` environment variable is set (``.ci/run``
sets it; ``scripts/test`` installs PostgreSQL when missing), a missing ``psycopg`` or a server
that cannot start fails the test instead of skipping it. The server is the process's one
PostgreSQL test server (``storage_servers.postgres_url``), shared with every other test.
"""

from __future__ import annotations

import pytest
import sql_oracle  # tests/ is on sys.path
import storage_servers
from sql_oracle import oracle_url, outcome, require

require("duckdb", "Catalog needs duckdb (pip install 'colmz[sql]')")
require("psycopg", "the PostgreSQL oracle needs psycopg")

from sql_corpus import QUERIES  # noqa: E402

#: Queries whose colmz answer differs from PostgreSQL's today, and why.
KNOWN_WRONG: dict[str, str] = {}

#: Queries PostgreSQL answers where colmz raises DuckDB's own error, not UnsupportedSQL.
KNOWN_RAW: dict[str, str] = {}


@pytest.fixture(scope="module")
def both():
    conn, cat = sql_oracle.open_both()
    yield conn, cat
    conn.close()


def test_corpus_is_large_and_named_once():
    names = [n for n, _ in QUERIES]
    assert len(names) >= 500 and len(set(names)) == len(names)
    assert set(KNOWN_WRONG) <= set(names) and set(KNOWN_RAW) <= set(names)


def test_corpus_against_postgres(both):
    conn, cat = both
    outcomes = {name: outcome(conn, cat, sql) for name, sql in QUERIES}
    wrong = {n for n, (kind, _) in outcomes.items() if kind == "wrong"}
    raw = {n for n, (kind, _) in outcomes.items() if kind == "raw"}
    counts = {k: sum(1 for kind, _ in outcomes.values() if kind == k)
              for k in ("match", "refused", "both fail", "wrong", "raw")}
    print(f"\ndialect corpus against PostgreSQL: {counts}")
    new_wrong = {n: outcomes[n][1] for n in wrong - set(KNOWN_WRONG)}
    assert not new_wrong, f"colmz answers differently from PostgreSQL: {new_wrong}"
    new_raw = {n: outcomes[n][1] for n in raw - set(KNOWN_RAW)}
    assert not new_raw, f"raw errors where UnsupportedSQL (or an answer) is due: {new_raw}"
    fixed = (set(KNOWN_WRONG) - wrong) | (set(KNOWN_RAW) - raw)
    assert not fixed, (
        f"no longer disagree: {sorted(fixed)} -- take them off KNOWN_WRONG / KNOWN_RAW "
        f"({ {n: outcomes[n][0] for n in fixed} })"
    )
    assert counts["match"] >= 500


@pytest.mark.parametrize("prefix, least", [("jn_fail", 8), ("oname_fail", 7), ("tn_fail", 1), ("tj_fail", 3),
                                           ("gap_fail", 16), ("mzf_fail", 7), ("mzf2_fail", 8),
                                           ("aggarr_fail", 3), ("err_fail", 10), ("flagg_fail", 9),
                                           ("hunt3_fail", 16), ("wrongt_fail", 15), ("wrongc_fail", 16),
                                           ("hunt4_fail", 21), ("edges_fail", 19),
                                           ("hunt5_fail", 25), ("bc_fail", 7), ("pgonly_fail", 36),
                                           ("odds_fail", 7)])
def test_errors_are_postgresqls(both, prefix, least):
    # The corpus's jn_fail_* queries (a cast of ->> / #>> text that PostgreSQL refuses),
    # oname_fail_* (an output name where PostgreSQL sees none), tn_fail_* (a text column read
    # as numeric) and tj_fail_* (a text function of a jsonb or json column): colmz raises
    # SQLError with PostgreSQL's own message, not only "an error"; gap_fail_* (subscripts
    # PostgreSQL's grammar or types refuse, ragged ARRAY[a, b], jsonb non-numbers to numeric) too;
    # mzf_fail_* (date_bin's strides, interval / 0, an interval out of range, decode's input) too,
    # mzf2_fail_* (regular expression flags and patterns, get_byte's range, convert_from's input) too,
    # aggarr_fail_* (array_agg of arrays of different shapes, NULL or empty) and err_fail_*
    # (division by zero, colmz's checked math, a scalar subquery of several rows, 'inf' as a date),
    # flagg_fail_* (a float overflow in an aggregate or over one) and hunt3_fail_* (extract's and
    # date_trunc's units a type lacks, casts PostgreSQL has not, nth_value's position) too,
    # wrongt_fail_* (a bare string literal read as the type of the values beside it),
    # wrongc_fail_* (a boolean to a float or numeric, jsonb to boolean or past an integer's
    # range, a date as a time, extract's keyword dec) and hunt4_fail_* (integer overflow under
    # a comparison with a constant, gcd/lcm and lengths as integers, max/min of json and jsonb) too,
    # edges_fail_* (a date or timestamp of year zero, signed or 'inf' with blanks; a quoted name no
    # type has; an integer's text past its range, the boolean's text) too, hunt5_fail_* (SELECT
    # DISTINCT ordered by what it does not select, DISTINCT ON not leading ORDER BY, an
    # aggregate's DISTINCT or ORDER BY over a window, GROUPS without ORDER BY, a window's
    # PARTITION BY over a named one, a percentile outside [0, 1], IGNORE NULLS among a window
    # call's arguments, a RANGE offset of a type the ORDER BY key's in_range has not) too,
    # bc_fail_* (make_date and make_timestamp of year zero, a float sum or variance overflowing
    # in every order) too, pgonly_fail_* (DuckDB's own functions, operators, syntax and type
    # names) too, odds_fail_* (string_agg of a value a literal or cast shows is not text, an integer
    # series' int4 overflow) too.
    import psycopg

    from colmz.sql import SQLError

    conn, cat = both
    failing = [(n, q) for n, q in QUERIES if n.startswith(prefix)]
    assert len(failing) >= least
    for name, sql in failing:
        with pytest.raises(psycopg.Error) as pg:
            conn.execute(sql).fetchall()
        with pytest.raises(SQLError) as ours:
            cat.sql(sql)
        assert str(ours.value) == str(pg.value).splitlines()[0], name


def test_oracle_fails_in_ci_when_no_server_can_start(monkeypatch):
    # No cached server and no initdb: outside CI the oracle skips, with CI set it fails.
    monkeypatch.setattr(storage_servers, "_SERVERS", {})
    monkeypatch.setattr(storage_servers, "pg_bin", lambda tool: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        oracle_url()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI is set, so the PostgreSQL oracle must run"):
        oracle_url()
