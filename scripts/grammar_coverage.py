"""How many of the texts colmz meets :mod:`colmz.sql.grammar` reads itself, the rest going
to DuckDB's parser (``json_serialize_sql``): a count that does not depend on the machine.

The texts: the dialect corpus (``tests/sql_corpus.py``), the benchmark's queries
(``asv_benchmarks/bench_sql.py``), the view bodies of the planner's tests (the ``SELECT``
and ``WITH`` string constants of ``tests/colmz/dataflow/test_*.py``), and every text colmz's
translation parses while translating the corpus and the benchmark's queries. Each text is
counted once. ``tests/colmz/sql/test_grammar.py`` asserts a floor on these counts; run
against another checkout by putting it first on the path::

    PYTHONPATH=/work/main NUMBA_CACHE_DIR=/work/main/.numba_cache .venv/bin/python scripts/grammar_coverage.py
"""

from __future__ import annotations

import ast
import contextlib
import pathlib
import sys

_ROOT = pathlib.Path(__file__).resolve().parent.parent


def _string_queries(path: pathlib.Path) -> list[str]:
    return [node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.lstrip()[:7].upper().startswith(("SELECT", "WITH "))]


def texts() -> dict[str, list[str]]:
    """The texts by source: ``corpus``, ``bench``, ``views`` and ``translated``."""
    from colmz.sql import SQLError, UnsupportedSQL, clear_caches, grammar, translate

    for sub in ("tests", "asv_benchmarks"):
        sys.path.insert(0, str(_ROOT / sub))
    try:
        import bench_sql
        from sql_corpus import QUERIES
    finally:
        for sub in ("tests", "asv_benchmarks"):
            sys.path.remove(str(_ROOT / sub))
    corpus = [q for _, q in QUERIES]
    bench = list(bench_sql.QUERIES)
    views = [q for p in sorted((_ROOT / "tests/colmz/dataflow").glob("test_*.py")) for q in _string_queries(p)]
    seen: list[str] = []
    real = grammar.read_query

    def recording(text):
        seen.append(text)
        return real(text)

    clear_caches()
    grammar.read_query = recording
    try:
        for q in corpus + bench:
            with contextlib.suppress(SQLError, UnsupportedSQL, ValueError):
                translate(q)
    finally:
        grammar.read_query = real
        clear_caches()
    return {"corpus": corpus, "bench": bench, "views": views, "translated": seen}


def coverage() -> dict[str, tuple[int, int]]:
    """``{source: (read by colmz, distinct texts)}``, and ``all`` over every source's texts."""
    from colmz.sql.grammar import read_query

    by = texts()
    by["all"] = [t for ts in by.values() for t in ts]
    out = {}
    for source, ts in by.items():
        distinct = list(dict.fromkeys(ts))
        out[source] = (sum(read_query(t) is not None for t in distinct), len(distinct))
    return out


if __name__ == "__main__":
    import colmz.sql.grammar

    print(f"colmz.sql.grammar from {colmz.sql.grammar.__file__}")
    for source, (read, total) in coverage().items():
        print(f"  {source:10s} read {read:5d} of {total:5d} ({read / total:.1%}); DuckDB parses {total - read}")
