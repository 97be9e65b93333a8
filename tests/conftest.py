"""Shared test configuration: Hypothesis profiles and the ``slow`` marker.

* Hypothesis runs without a deadline (a first call may load or compile a Numba kernel).
  ``HYPOTHESIS_PROFILE=thorough`` raises the example counts of the property tests that use
  :func:`updates_strategies.examples` tenfold.
* Tests marked ``slow`` are skipped unless the marker expression names them
  (``pytest -m slow`` or ``-m "slow or not slow"``).
* Under pytest-xdist (``.ci/run``: ``-n 2 --dist loadgroup``) the Spark tests share one
  worker and its one SparkSession, every other file runs whole on one worker, and the
  controller starts the PostgreSQL and S3 servers once for all workers (:func:`worker_groups.group_for_workers`,
  ``storage_servers.share_servers``).
* The installed ``colmz`` is imported first, with ``tests/`` off ``sys.path``: pytest puts
  ``tests/`` on ``sys.path`` for this file, and there the folder ``tests/colmz`` (no
  ``__init__.py``) would be taken for a namespace package ``colmz`` whenever the repository
  root is not on ``sys.path`` too (``.venv/bin/pytest``, or pytest run from another folder).
"""

from __future__ import annotations

import os
import sys


def _import_installed_colmz() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    sys.path[:] = [
        p for p in sys.path
        if not (os.path.abspath(p or os.curdir) + os.sep).startswith(here + os.sep)
    ]
    try:
        if getattr(sys.modules.get("colmz"), "__file__", None) is None:
            sys.modules.pop("colmz", None)
        import colmz  # noqa: F401
    finally:
        sys.path[:] = saved


_import_installed_colmz()


def _alias_source_packages() -> None:
    """Make ``kernels.x`` and ``spark.x`` the installed ``colmz.kernels.x`` / ``colmz.spark.x``.

    ``--doctest-modules kernels spark`` collects those folders by path, and pytest would import
    each file a second time under its folder's name (``kernels.consolidate``): two copies of
    every class, and Numba cache entries written under a module name that no installed program
    can import (a later load from the shared cache fails with ``No module named 'kernels'``).
    Registering the installed modules under the folder names first (at configuration, when
    doctests are collected) makes pytest find them.
    """
    import importlib
    import pkgutil

    for folder in ("kernels", "spark"):
        try:
            package = importlib.import_module(f"colmz.{folder}")
        except ImportError:  # an extra that is not installed: its doctests skip anyway
            continue
        sys.modules.setdefault(folder, package)
        # Subpackages too (spark/cli/): else ``spark.cli.sink`` is imported a second time and,
        # set as the attribute ``sink`` of the one package object, replaces the installed
        # module there -- a test patching ``colmz.spark.cli.sink`` then patches the copy.
        for info in pkgutil.walk_packages(package.__path__, prefix=f"colmz.{folder}."):
            if info.name.endswith(".__main__"):  # running it is the command line itself
                continue
            try:
                module = importlib.import_module(info.name)
            except ImportError:
                continue
            sys.modules.setdefault(folder + info.name[len(f"colmz.{folder}"):], module)


import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# The real PostgreSQL and S3 (moto) servers of the storage tests, as session fixtures. They
# start on first use only. (One conftest for the whole tree: a second conftest.py in a
# folder without __init__.py clashes with this one under --doctest-modules.)
from sql_oracle import pg  # noqa: E402, F401 (the view tests' PostgreSQL oracle)
from storage_servers import location_factory, pg_url, s3_endpoint  # noqa: E402, F401
from worker_groups import group_for_workers, loadgroup_worker  # noqa: E402

settings.register_profile(
    "colmz",
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", parent=settings.get_profile("colmz"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "colmz"))


def distributed(config) -> bool:
    """Whether pytest-xdist spreads this run over worker processes (``-n N``, N > 0)."""
    return (config.pluginmanager.hasplugin("xdist") and bool(config.getoption("numprocesses", None))
            and config.getoption("dist", "no") != "no")


def pytest_configure(config):
    # Only doctest collection imports the source folders by path; importing every kernel and
    # Spark module costs a plain test run more than half a second.
    if config.getoption("doctestmodules", False):
        _alias_source_packages()
    # Under pytest-xdist the controller (the process without ``workerinput``) starts the
    # servers and the workers use them: each server still starts once per run.
    if distributed(config) and not hasattr(config, "workerinput"):
        import storage_servers

        storage_servers.share_servers()


def pytest_collection_modifyitems(config, items):
    if loadgroup_worker(config):
        group_for_workers(items)
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
