"""Work counters for colmz's shared thread pools (``colmz.threads``) in tests.

``count_submissions(monkeypatch, module, name)`` replaces ``module.shared_pool`` (the name a
module imported) so that tasks submitted to the pool ``name`` -- or to any pool, with
``name=None`` -- are recorded before they run on the real pool; it returns the list of
``(fn, args)`` recorded::

    submitted = count_submissions(monkeypatch, first_column, "sort")
    first_column.sort_keys(keys)
    assert len(submitted) == 1
"""

from __future__ import annotations


class _Counting:
    def __init__(self, pool, record: list) -> None:
        self.pool = pool
        self.record = record

    def submit(self, fn, *args):
        self.record.append((fn, args))
        return self.pool.submit(fn, *args)


def count_submissions(monkeypatch, module, name: str | None) -> list:
    shared = module.shared_pool
    record: list = []

    def pool(pool_name: str, workers: int):
        real = shared(pool_name, workers)
        return _Counting(real, record) if name is None or pool_name == name else real

    monkeypatch.setattr(module, "shared_pool", pool)
    return record
