"""Shared test configuration: Hypothesis profiles and the ``slow`` marker.

* Hypothesis runs without a deadline (a first call may load or compile a Numba kernel).
  ``HYPOTHESIS_PROFILE=thorough`` raises the example counts of the property tests that use
  :func:`updates_strategies.examples` tenfold.
* Tests marked ``slow`` are skipped unless the marker expression names them
  (``pytest -m slow`` or ``-m "slow or not slow"``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "colmz",
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", parent=settings.get_profile("colmz"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "colmz"))


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
