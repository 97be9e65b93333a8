"""Snapshot of colmz's SQL translation, to compare a change of ``colmz.sql`` against.

Records, per text, what :func:`colmz.sql.translate` gives (the DuckDB text, or the
exception's type and message) for every query of the dialect corpus (``tests/sql_corpus.py``)
and every string literal of ``tests/colmz/sql/test_translate*.py`` and
``tests/colmz/sql/test_transforms.py``; and, per corpus query, what ``Catalog.sql`` answers
over the corpus tables (column names and rows, or the exception).

``python scripts/translate_snapshot.py write FILE`` records; ``python
scripts/translate_snapshot.py compare FILE`` records again and prints "N of M identical" and
each difference. ``SNAPSHOT_COLMZ=DIR`` records the colmz package in DIR instead of this
checkout's.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the checkout's colmz (the script runs from scripts/), or the tree in $SNAPSHOT_COLMZ (an
# older colmz, e.g. ``git archive HEAD~3 colmz | tar -x -C DIR``: its outcomes over the texts
# harvested here)
sys.path[:0] = [os.environ.get("SNAPSHOT_COLMZ", str(ROOT))]
sys.path.append(str(ROOT / "tests"))  # after the package: tests/colmz is not colmz


def harvested() -> list[str]:
    """String literals of the translation tests (each distinct text once, in file order)."""
    texts: dict[str, None] = {}
    files = sorted((ROOT / "tests/colmz/sql").glob("test_translate*.py"))
    files.append(ROOT / "tests/colmz/sql/test_transforms.py")
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
                texts[node.value] = None
    return list(texts)


def outcome(call, *args) -> str:
    try:
        return "ok: " + repr(call(*args))
    except Exception as exc:  # the snapshot records every outcome, raising ones too
        return f"raise {type(exc).__name__}: {exc}"


def snapshot() -> dict[str, str]:
    from sql_corpus import QUERIES, SETUP
    from sql_oracle import ordered

    import colmz
    from colmz.sql import translate

    out: dict[str, str] = {}
    for name, sql in QUERIES:
        out[f"translate corpus {name}"] = outcome(translate, sql)
    for text in harvested():
        out[f"translate literal {text!r}"] = outcome(translate, text)
    cat = colmz.Catalog()
    for stmt in SETUP:
        cat.execute(stmt)

    def answer(sql):
        table = cat.sql(sql)
        rows = table.to_pylist()
        if not ordered(sql):  # rows in DuckDB's order of the moment: compared as a multiset
            rows.sort(key=repr)
        return table.column_names, [str(t) for t in table.schema.types], rows

    for name, sql in QUERIES:
        out[f"catalog corpus {name}"] = outcome(answer, sql)
    return out


def main() -> None:
    mode, path = sys.argv[1], pathlib.Path(sys.argv[2])
    snap = snapshot()
    if mode == "write":
        path.write_text(json.dumps(snap, indent=0, sort_keys=True))
        print(f"{len(snap)} outcomes written to {path}")
        return
    before = json.loads(path.read_text())
    keys = sorted(set(before) | set(snap))
    same = [k for k in keys if before.get(k) == snap.get(k)]
    for k in keys:
        if before.get(k) != snap.get(k):
            print(f"DIFF {k}\n  before: {before.get(k)}\n  after:  {snap.get(k)}")
    print(f"{len(same)} of {len(keys)} identical")


if __name__ == "__main__":
    main()
