"""The worked example in ``examples/continual_tasks.py`` runs and shows what the docs say."""

from __future__ import annotations

import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "examples", "continual_tasks.py")


def test_example_runs_and_its_outputs_hold():
    spec = importlib.util.spec_from_file_location("continual_example", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    shown = mod.main()
    assert sorted(shown) == [10, 20, 30]
    for t, view in shown.items():
        # one ledger row per distinct key; RETAIN keeps the last 10 ticks (4 events each)
        assert view["payments"] == view["events"]["keys"]
        assert (view["recent"]["oldest"], view["recent"]["newest"], view["recent"]["n"]) == (t - 9, t, 40)
        assert sum(b["total"] for b in view["balances"]) > 0
    assert [shown[t]["events"]["n"] for t in (10, 20, 30)] == [40, 80, 120]
