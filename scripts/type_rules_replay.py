"""Before/after check of the rules that hang on a column's type (``colmz.sql.floatcols``,
``colmz.sql.jsonbcols``): record every call they get, then replay the record against another
version of the code and count the calls whose output (text, kinds or error) is identical.

Recording: this module is also a pytest plugin (``-p type_rules_replay`` with ``scripts/`` on
``PYTHONPATH``) and, run with ``record``, runs every corpus query (``tests/sql_corpus.py``)
through a ``Catalog``. Either way each distinct call of ``float_column_rules``,
``jsonb_column_rules`` and ``column_ref_kinds`` is written to ``$TYPE_RULES_RECORD`` (a
pickle) at exit::

    TYPE_RULES_RECORD=/tmp/corpus.pkl PYTHONPATH=scripts:. .venv/bin/python scripts/type_rules_replay.py record
    TYPE_RULES_RECORD=/tmp/tests.pkl PYTHONPATH=scripts:. .venv/bin/python -m pytest -q -p type_rules_replay tests/...
    .venv/bin/python scripts/type_rules_replay.py replay /tmp/corpus.pkl /tmp/tests.pkl
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import sys

CALLS: dict = {}
NAMES = ("float_column_rules", "jsonb_column_rules", "column_ref_kinds")


def _result(f, args, kw) -> tuple:
    # a call's outcome as compared: its output (a dict as sorted pairs) or its error
    try:
        out = f(*args, **kw)
    except Exception as e:  # noqa: BLE001 - an error is an outcome, compared by type and message
        return ("err", type(e).__name__, str(e))
    return ("ok", sorted(out.items()) if isinstance(out, dict) else out)


def _functions() -> dict:
    import colmz.sql.floatcols as fc
    import colmz.sql.jsonbcols as jc

    return {"float_column_rules": fc.float_column_rules, "jsonb_column_rules": jc.jsonb_column_rules,
            "column_ref_kinds": jc.column_ref_kinds}


def install() -> None:
    """Wrap the rules (and every module's imported name of them) to record their calls."""
    for name, f in _functions().items():
        def wrapper(*args, _f=f, _name=name, **kw):
            CALLS.setdefault((_name, args, tuple(sorted(kw.items()))), _result(_f, args, kw))
            return _f(*args, **kw)
        for m in list(sys.modules.values()):
            if getattr(m, name, None) is f:
                setattr(m, name, wrapper)
    atexit.register(_dump)


def _dump() -> None:
    with open(os.environ["TYPE_RULES_RECORD"], "wb") as fh:
        pickle.dump(CALLS, fh)


def record_corpus() -> None:
    """Every corpus query through a Catalog (the rules' calls recorded)."""
    sys.path.insert(0, "tests")
    from sql_corpus import QUERIES, SETUP

    import colmz

    cat = colmz.Catalog()
    for s in SETUP:
        cat.execute(s)
    for _, sql in QUERIES:
        with contextlib.suppress(Exception):  # (a refusal is recorded as the rules' outcome)
            cat.sql(sql)
    print(f"{len(QUERIES)} queries, {len(CALLS)} distinct calls")


def replay(paths: list[str], show: int = 8) -> tuple[int, int]:
    """``(identical, total)`` over the recorded calls of ``paths``; the first ``show``
    differences printed."""
    funcs = _functions()
    same = total = 0
    for path in paths:
        with open(path, "rb") as fh:
            calls = pickle.load(fh)  # noqa: S301 - a record this script wrote
        for (name, args, kw), want in calls.items():
            got = _result(funcs[name], args, dict(kw))
            total += 1
            if got == want:
                same += 1
            elif show > 0:
                show -= 1
                print(f"--- {name} {args[0][:300]!r}\n  before: {want!r:.300}\n  after:  {got!r:.300}")
    print(f"{same} of {total} identical")
    return same, total


if __name__ == "__main__":
    if sys.argv[1:2] == ["record"]:
        install()
        record_corpus()
    elif sys.argv[1:2] == ["replay"]:
        replay(sys.argv[2:])
    else:
        raise SystemExit(__doc__)
elif "pytest" in sys.modules and os.environ.get("TYPE_RULES_RECORD"):
    install()  # loaded as a pytest plugin
