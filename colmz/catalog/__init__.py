"""The catalog: named tables, materialized views and continual tasks at logical times,
queried and maintained with SQL, in memory or durable.

Design
------
A file per concept, each layer using only those below it:

* :mod:`colmz.catalog.objects` -- an object (:class:`CatalogObject`), its :data:`Key`, its
  stored definition and the checks a definition passes;
* :mod:`colmz.catalog.engine` -- the engine: objects in memory, read, queried and written at
  logical times, a failed call rolled back (``colmz.rollback``); its DDL in
  :mod:`colmz.catalog.ddl`, the batches ``append`` takes in :mod:`colmz.catalog.frames`;
  write planning (``INSERT``/``UPDATE`` target columns, literals, assignment casts) is the
  SQL layer's, :mod:`colmz.sql.write`;
* :mod:`colmz.catalog.store` -- the store: the catalog record (definitions and the last
  transaction's intent) beside each object's arrangement, the txn-wal way;
  :mod:`colmz.catalog.location` says where a catalog may be created;
* :mod:`colmz.catalog.durable` -- :class:`Catalog`, what users open: an engine, driven
  durably through the store when given a path (commit by compare-and-set, apply, refresh
  and retry a lost race, reload by building a new engine and swapping it in).

Examples
--------
>>> from colmz.catalog import Catalog
>>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1)")
>>> cat.sql("SELECT k FROM t").to_pylist()
[{'k': 1}]
"""

from colmz.arrangement.collection import ArrangementCollection, CompactedAway
from colmz.catalog.durable import RETRIES, RETRY_BACKOFF, Catalog
from colmz.catalog.engine import AppendOnlyViolation, Engine
from colmz.catalog.location import NestedStore, check_catalog_location
from colmz.catalog.mirror import Mirror
from colmz.catalog.objects import RESERVED_COLUMNS, CatalogObject, Key, check_columns
from colmz.catalog.store import (
    INTENT_PREFIX,
    LEGACY_INTENT_KEY,
    LEGACY_RECORD_KEY,
    CatalogStore,
    MissingDefinitions,
    StoreChanged,
    UnverifiedIntent,
)

#: The blob key of the previous layout's definitions (converted on open; no longer written).
RECORD_KEY = LEGACY_RECORD_KEY
#: The consensus key of the previous layout's intent (converted on open; no longer written).
INTENT_KEY = LEGACY_INTENT_KEY

__all__ = [
    "INTENT_KEY",
    "INTENT_PREFIX",
    "RECORD_KEY",
    "RESERVED_COLUMNS",
    "RETRIES",
    "RETRY_BACKOFF",
    "AppendOnlyViolation",
    "ArrangementCollection",
    "Catalog",
    "CatalogObject",
    "CatalogStore",
    "CompactedAway",
    "Engine",
    "Key",
    "MissingDefinitions",
    "Mirror",
    "NestedStore",
    "StoreChanged",
    "UnverifiedIntent",
    "check_catalog_location",
    "check_columns",
]
