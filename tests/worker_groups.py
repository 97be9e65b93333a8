"""How tests are grouped for pytest-xdist workers under ``-n N --dist loadgroup``.

The controller schedules by the text after the last ``@`` of each node id a worker reports;
the workers collect, so the grouping is decided there (``tests/conftest.py`` calls
:func:`group_for_workers` when :func:`loadgroup_worker` holds). A module of its own, not
the conftest, so that its test (``tests/test_worker_groups.py``) imports it by one name
whichever ``conftest`` module a run loaded last.
"""

from __future__ import annotations


def loadgroup_worker(config) -> bool:
    """Whether this process is a pytest-xdist worker of a ``--dist loadgroup`` run.

    The workers collect, and the controller schedules by the node ids they report. pytest-xdist
    resets a worker's ``dist``/``numprocesses`` options (to ``"no"``/``None``) and keeps
    ``loadgroup`` for it: the grouping must be decided on that, in the worker.
    """
    return hasattr(config, "workerinput") and bool(config.getoption("loadgroup", False))


def group_for_workers(items) -> None:
    """Under ``-n N --dist loadgroup``: what must share a process runs in one worker.

    Every test that uses the ``spark`` fixture or is marked ``spark`` goes to one group, so one
    worker runs them all on the run's one SparkSession (a second session in another worker
    costs a JVM start, and a docs block's ``colmz.spark.session`` must find the fixture's).
    Every other test is grouped by its file, as ``--dist loadfile`` would: a module's
    fixtures are built once, and tests of a file run in their written order.
    """
    for item in items:
        if item.get_closest_marker("spark") or "spark" in getattr(item, "fixturenames", ()):
            group = "spark"
        else:
            group = item.nodeid.split("::", 1)[0]
        set_group(item, group)


def set_group(item, group: str) -> None:
    """Give ``item`` the node id ``<id>@<group>``: what ``--dist loadgroup`` schedules by.

    pytest-xdist's own ``xdist_group`` marker does this by assigning ``item._nodeid``, which
    pytest 9 no longer reads (it keeps the id as ``item._id``, a parsed ``NodeId``): there the
    marker is silently ignored and every test is scheduled alone. Setting the id here works
    on both, and the controller's scope is the text after the last ``@``.
    """
    nodeid = f"{item.nodeid}@{group}"
    if hasattr(item, "_id"):
        item._id = type(item._id).parse(nodeid)
    else:
        item._nodeid = nodeid
    assert item.nodeid == nodeid, (item.nodeid, nodeid)
