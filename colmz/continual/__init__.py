"""Continual tasks: Materialize's SQL triggers over collections at logical times.

Design
------
The package keeps upstream's model apart from its evaluation:

* :mod:`colmz.continual.model` -- upstream's semantics (``src/compute/src/render/
  continual_task.rs``): the sink state machine (:class:`SinkState`), and :class:`ContinualTask` with its time loop,
  the reference evaluation every other path is checked against.
* :mod:`colmz.continual.batched` -- the statements evaluated in DuckDB: per time, in one
  union per time, and lifted over batches of times (one query per statement per batch).
  Its SQL texts come from :mod:`colmz.sql` (:mod:`colmz.sql.lift`).
* Collections (the protocol, :class:`MemoryCollection`, :class:`RowCounts`,
  :class:`UpperMismatch`) are :mod:`colmz.collection`, beside the durable arrangement and
  below this package; they are re-exported here, where users imported them first.
* Rows <-> ``Updates`` conversions are :mod:`colmz.rows`, shared with the catalog.

The names users import (``from colmz.continual import ContinualTask, MemoryCollection,
...``) are re-exported here.

>>> from colmz.continual import ContinualTask, MemoryCollection
>>> ContinualTask.__module__
'colmz.continual.model'
"""

from __future__ import annotations

from colmz.collection import MemoryCollection, RowCounts, UpperMismatch
from colmz.continual.batched import BATCH_ROWS, BATCH_ROWS_LINEAR
from colmz.continual.model import (
    ContinualTask,
    Delete,
    Insert,
    SinkState,
    Statement,
)
from colmz.errors import NegativeMultiplicity
from colmz.rows import EXPAND_LIMIT, conform, expand, rows_to_updates

__all__ = [
    "BATCH_ROWS",
    "BATCH_ROWS_LINEAR",
    "EXPAND_LIMIT",
    "ContinualTask",
    "Delete",
    "Insert",
    "MemoryCollection",
    "NegativeMultiplicity",
    "RowCounts",
    "SinkState",
    "Statement",
    "UpperMismatch",
    "conform",
    "expand",
    "rows_to_updates",
]
