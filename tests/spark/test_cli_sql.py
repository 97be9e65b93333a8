"""``colmz sql``: the catalog shell, run as a user runs it -- the real ``colmz`` entry point,
at a pseudo-terminal (prompt, multi-line statements, history, ``\\d``) and with ``-c`` / ``-f``.
No Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from colmz.spark.cli.sql import aligned, command_tag, split_statements

EXE = Path(sys.executable).parent / "colmz"


def colmz(*args: str, stdin: str | None = None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(EXE), *args], input=stdin, capture_output=True, text=True,
                          timeout=300, env=env)


def test_split_statements_reads_as_the_tokenizer_does():
    assert split_statements("SELECT 1; SELECT ';' AS x;") == (["SELECT 1;", "SELECT ';' AS x;"], "")
    assert split_statements("SELECT 1 -- ; not an end\n") == ([], "SELECT 1 -- ; not an end\n")
    assert split_statements("SELECT $$a;b$$;") == (["SELECT $$a;b$$;"], "")
    assert split_statements("SELECT /* ; */ 2; SELECT") == (["SELECT /* ; */ 2;"], " SELECT")
    assert split_statements(";;") == ([], "")
    assert command_tag("CREATE MATERIALIZED VIEW v AS SELECT 1") == "CREATE MATERIALIZED VIEW"
    assert command_tag("drop table t") == "DROP TABLE"


def test_aligned_is_psqls_format():
    text = aligned(["n", "word"], [(3, "x"), (-10, "longer")], [True, False])
    assert text.splitlines() == [
        "  n  |  word",
        "-----+--------",
        "   3 | x",
        " -10 | longer",
        "(2 rows)",
    ]
    assert aligned(["a"], [], [False]).splitlines()[-1] == "(0 rows)"


def test_script_file_and_commands(tmp_path):
    cat = tmp_path / "cat"
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE t (k INT, s TEXT);\n"
                      "INSERT INTO t VALUES (1, 'a;b'),\n"  # a statement over two lines
                      "  (22, NULL);\n"
                      "\\d\n"
                      "SELECT k, s FROM t ORDER BY k;\n")
    r = colmz("sql", str(cat), "--create", "-f", str(script))
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[:2] == ["CREATE TABLE", "INSERT"]
    assert " public | t    | table" in out
    assert out[-5:] == [" k  |  s", "----+-----", "  1 | a;b", " 22 |", "(2 rows)"]
    # durable: a second process sees it; -c is one transaction (both rows or none)
    r = colmz("sql", str(cat), "-c", "INSERT INTO t VALUES (3, 'c'); SELECT count(*) AS n FROM t")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [" n", "---", " 3", "(1 row)"]
    r = colmz("sql", str(cat), "-c", "\\d t")
    assert "integer" in r.stdout and "text" in r.stdout
    # statements from standard input, as `colmz sql CAT < file`
    r = colmz("sql", str(cat), stdin="SELECT max(k) AS m FROM t;\n")
    assert r.returncode == 0 and r.stdout.splitlines()[2] == " 22"


@pytest.mark.parametrize("args, needle", [
    (["-c", "SELECT nosuch FROM t"], "ERROR:"),
    (["-c", "SELEC 1"], "ERROR:"),
    (["-c", "\\dx"], "invalid command"),
    (["-f", "no/such/file.sql"], "is not a file"),
])
def test_errors_are_one_line_and_exit_2(tmp_path, args, needle):
    cat = tmp_path / "cat"
    assert colmz("sql", str(cat), "--create", "-c", "CREATE TABLE t (k INT)").returncode == 0
    r = colmz("sql", str(cat), *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("colmz sql: ") and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_a_mistyped_catalog_is_not_created(tmp_path):
    r = colmz("sql", str(tmp_path / "typo"), "-c", "SELECT 1")
    assert r.returncode == 2 and "use --create" in r.stderr
    assert not (tmp_path / "typo").exists()
    (tmp_path / "afile").write_text("x")
    r = colmz("sql", str(tmp_path / "afile"), "-c", "SELECT 1")
    assert r.returncode == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr


def test_the_prompt_multi_line_history_and_describe(tmp_path):
    """At a terminal: a statement over lines (the prompt changes while it goes on), an error
    that does not end the session, \\d, \\q; a second session recalls the first one's
    statement with the up arrow."""
    env = {**os.environ, "COLMZ_SQL_HISTORY": str(tmp_path / "history"), "TERM": "dumb"}
    cat = str(tmp_path / "cat")
    sh = pexpect.spawn(str(EXE), ["sql", cat, "--create"], env=env, encoding="utf-8", timeout=120)
    sh.expect_exact("colmz=> ")
    sh.sendline("CREATE TABLE t (k INT,")
    sh.expect_exact("colmz-> ")  # the statement goes on
    sh.sendline("  v TEXT);")
    sh.expect_exact("CREATE TABLE")
    sh.expect_exact("colmz=> ")
    sh.sendline("INSERT INTO t VALUES (7, 'seven');")
    sh.expect_exact("INSERT")
    sh.sendline("SELECT nosuch FROM t;")
    sh.expect_exact("ERROR:")
    sh.expect_exact("colmz=> ")  # still running
    sh.sendline("\\d t")
    sh.expect_exact('table "t"')
    sh.expect_exact("(2 rows)")
    sh.sendline("SELECT v FROM t;")
    sh.expect_exact("seven")
    sh.expect_exact("(1 row)")
    sh.sendline("\\q")
    sh.expect(pexpect.EOF)
    sh.close()
    assert sh.exitstatus == 0
    assert "SELECT v FROM t;" in (tmp_path / "history").read_text()
    # a new session: the up arrow brings back the last statement
    sh = pexpect.spawn(str(EXE), ["sql", cat], env=env, encoding="utf-8", timeout=120)
    sh.expect_exact("colmz=> ")
    # previous-history twice (C-p, readline's one-byte key for the up arrow, so no escape
    # sequence can be split under load): past the \\q that ended the first session to the last
    # statement, shown on the line before it runs
    sh.send("\x10")
    sh.expect_exact("\\q")
    sh.send("\x10")
    sh.expect_exact("SELECT v FROM t;")
    sh.send("\r")
    sh.expect_exact("seven")
    sh.expect_exact("(1 row)")
    # end of input at the next prompt: a Ctrl-D sent before readline reads the line again
    # reaches the terminal in its cooked mode and can be lost when readline takes it over
    sh.expect_exact("colmz=> ")
    sh.sendeof()
    sh.expect(pexpect.EOF)
    sh.close()
    assert sh.exitstatus == 0


def test_columns_sharing_a_name_are_both_printed(tmp_path):
    """PostgreSQL names both columns of `count(*), count(s)` count; the shell prints both
    (by position), as `to_pandas()` keeps both."""
    r = colmz("sql", "-c", "CREATE TABLE t (k INT, s TEXT)", "-c", "INSERT INTO t VALUES (1, 'a'), (2, NULL)",
              "-c", "SELECT count(*), count(s) FROM t")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-4:] == [" count | count", "-------+-------", "     2 |     1", "(1 row)"]


def test_subscribe_from_a_fresh_process_reads_the_stored_history(tmp_path):
    cat = tmp_path / "cat"
    assert colmz("sql", str(cat), "--create", "-c", "CREATE TABLE t (k INT); INSERT INTO t VALUES (1)").returncode == 0
    assert colmz("sql", str(cat), "-c", "DELETE FROM t; INSERT INTO t VALUES (2)").returncode == 0
    r = colmz("sql", str(cat), "-c", "SUBSCRIBE t WITH (PROGRESS) AS OF 1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        " mz_timestamp | mz_progressed | mz_diff | k",
        "--------------+---------------+---------+---",
        "            1 | f             |       1 | 1",
        "            2 | t             |         |",
        "            2 | f             |      -1 | 1",
        "            2 | f             |       1 | 2",
        "            3 | t             |         |",
        "(5 rows)",
    ]
    r = colmz("sql", str(cat), "-c", "SUBSCRIBE nosuch")
    assert r.returncode == 2 and "unknown catalog item 'nosuch'" in r.stderr
