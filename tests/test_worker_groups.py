"""The grouping of tests for pytest-xdist workers (``tests/worker_groups.py``) reaches the scheduler.

``--dist loadgroup`` schedules by the text after the last ``@`` of each node id a worker
reports. These tests build real items (pytest's ``pytester``), group them as a worker does,
and read the scope back with pytest-xdist's own scheduler function: a grouping that only
adds a marker pytest no longer turns into a node id would leave every test its own scope.
"""

from __future__ import annotations

import types

import pytest
import worker_groups

pytest_plugins = ["pytester"]

xdist_loadgroup = pytest.importorskip("xdist.scheduler.loadgroup")


def scope(nodeid: str) -> str:
    # _split_scope reads nothing from the instance: the controller's own rule, on a node id
    return xdist_loadgroup.LoadGroupScheduling._split_scope(None, nodeid)


def test_items_of_one_file_share_a_scope_and_spark_tests_share_one(pytester):
    pytester.makepyfile(
        test_a="""
        import pytest

        def test_one():
            pass

        @pytest.mark.parametrize("x", ["p@q", "r"])
        def test_two(x):
            pass

        @pytest.mark.spark
        def test_three():
            pass
        """,
        test_b="""
        import pytest

        @pytest.fixture
        def spark():
            return None

        def test_four(spark):
            pass

        def test_five():
            pass
        """,
    )
    items = pytester.getitems(pytester.path)
    before = [item.nodeid for item in items]
    worker_groups.group_for_workers(items)
    scopes = {b: scope(item.nodeid) for b, item in zip(before, items)}
    assert [item.nodeid.rsplit("@", 1)[0] for item in items] == before  # the id itself is kept
    assert scopes == {
        "test_a.py::test_one": "test_a.py",
        "test_a.py::test_two[p@q]": "test_a.py",
        "test_a.py::test_two[r]": "test_a.py",
        "test_a.py::test_three": "spark",
        "test_b.py::test_four": "spark",
        "test_b.py::test_five": "test_b.py",
    }


def test_only_a_loadgroup_worker_groups():
    def config(worker: bool, loadgroup: bool):
        c = types.SimpleNamespace(getoption=lambda name, default=None: loadgroup if name == "loadgroup" else default)
        if worker:
            c.workerinput = {}
        return c

    assert worker_groups.loadgroup_worker(config(True, True))
    assert not worker_groups.loadgroup_worker(config(True, False))  # -n 2 --dist load
    assert not worker_groups.loadgroup_worker(config(False, True))  # the controller: it does not collect
