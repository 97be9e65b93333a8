"""The mirror of a durable catalog's record: what the record holds, as a handle last loaded
or committed it.

Design
------
A durable :class:`colmz.catalog.Catalog` builds each commit on its :class:`Mirror` and
replaces the mirror only once the commit succeeded (with the engine and store handle it
loaded through, on a reload), so a failed commit leaves nothing of itself behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colmz.arrangement.collection import ArrangementCollection
from colmz.catalog.objects import Key
from colmz.frontier import Frontier
from colmz.sql import DEFAULT_DATABASE, DEFAULT_SCHEMA

__all__ = ["Mirror", "ViewStates"]


@dataclass
class Mirror:
    """What the catalog record holds, as this handle last loaded or committed it: changed
    only once a commit succeeded, so the next commit builds on it."""

    #: The definitions the record holds.
    defs: list[dict] = field(default_factory=list)
    #: The databases and schemas the record holds.
    schemas: dict[str, list[str]] = field(default_factory=lambda: {DEFAULT_DATABASE: [DEFAULT_SCHEMA]})
    #: Each arrangement's own (physical) upper once the record's intent is applied (by
    #: storage key): where the next intent entry for it starts. It lags :attr:`upper` for an
    #: arrangement no commit wrote since (``colmz.catalog.store``, "Lazy uppers").
    uppers: dict[str, Frontier] = field(default_factory=dict)
    #: The record's catalog-wide upper: every arrangement it names is logically there (None:
    #: a record without one).
    upper: int | None = None
    #: The arrangements (by storage key) written since maintenance last compacted them.
    unmaintained: set[str] = field(default_factory=set)
    #: Each object's arrangement (by catalog key).
    arrangements: dict[Key, ArrangementCollection] = field(default_factory=dict)
    #: The record's entries of views' operator states (``colmz.catalog.durable``), in order.
    state_defs: list[dict] = field(default_factory=list)
    #: Each view's operator states kept in the record (by the view's storage key).
    states: dict[str, ViewStates] = field(default_factory=dict)
    #: The record's entries of shared arrangements' states (``colmz.catalog.durable``), in order.
    shared_defs: list[dict] = field(default_factory=list)
    #: The shared arrangements kept in the record (``colmz.catalog.durable``), by their
    #: relation's storage key and key columns: one state each (named by its arrangement id).
    shared: dict[tuple[str, tuple[str, ...]], ViewStates] = field(default_factory=dict)
    #: The key columns of the shared arrangements kept in the record, by their relation's
    #: storage key (:attr:`shared` indexed: a commit finds the changed relations' ones).
    shared_by: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    #: What the commits built on this mirror examined (cumulative; a work counter, not the
    #: record's): the ``objects_examined`` for changes, the ``views_examined`` for operator
    #: states, the ``shared_examined`` arrangements.
    work: dict[str, int] = field(default_factory=lambda: {"objects_examined": 0, "views_examined": 0,
                                                          "shared_examined": 0})

    def index_shared(self) -> None:
        """Rebuild :attr:`shared_by` from :attr:`shared`."""
        by: dict[str, list[tuple[str, ...]]] = {}
        for rel, key in self.shared:
            by.setdefault(rel, []).append(key)
        self.shared_by = by


@dataclass
class ViewStates:
    """A view's operator states as the record keeps them: each state's name in the pipeline
    (``colmz.dataflow.state``), its arrangement's storage key, and the runs it held when last
    committed (the marks the next commit's change is taken from)."""

    names: tuple[str, ...]
    keys: tuple[str, ...]
    marks: dict[str, tuple]
