"""``SUBSCRIBE``: a catalog object's or a query's snapshot, then each later change, in time order.

Design
------
Materialize's ``SUBSCRIBE`` (``src/adapter/src/coord/sequencer/inner/subscribe.rs`` and
``src/compute/src/sink/subscribe.rs`` upstream): the result as of the ``AS OF`` time
(default: the latest complete time), every row at that time with ``mz_diff`` its count, then
each change at each later time ``t`` with ``mz_timestamp = t``, in time order. A
:class:`Subscription` is that stream over a :class:`colmz.Catalog`:

* **an object** (``SUBSCRIBE v``): a table, materialized view or continual task is a
  collection with its history since its ``since``; the snapshot is its contents as of
  ``as_of`` and the changes are its updates at each time after it, read as they were
  written -- nothing is recomputed.
* **a query** (``SUBSCRIBE (SELECT ...)``): the query's own changes at each time some input
  changed. When the query's plan (:func:`colmz.dataflow.plan.plan`) holds no Fallback, and
  its rendering answers the snapshot exactly as the catalog's query does, the inputs'
  changes are stepped through the rendered operators (a transient view: each change costs
  what it touches, :attr:`Subscription.strategy` is ``"dataflow"``); otherwise the query is
  evaluated over the inputs at each such time and the difference from the previous result
  is the change (``"recompute: <reason>"``), as the catalog's recompute path does. The query
  is evaluated as the catalog's queries are (:meth:`colmz.Catalog.bound_query`: the rules of
  float and jsonb columns applied); one whose answer hangs on which columns are jsonb (a jsonb
  column compared with a string literal) always takes the recompute path, since the operators
  read jsonb columns as text. A query
  calling ``mz_now()`` changes at every time, not only where an input changed: it is
  refused (subscribe to a materialized view of it instead).

Reading. A subscription holds ``frontier``: every change at a time below it has been handed
out (Materialize's progress). A read takes the changes at times in ``[frontier, now]`` --
on a durable catalog after one look at the store's head, so commits of other handles and
processes are seen -- and advances the frontier to ``now + 1``. Changes at times before
``now + 1`` are sealed, so what a read returns never changes later. Iterating
(``for batch in sub``) yields the batches ready now and stops; :meth:`Subscription.follow`
waits for new commits (polling, with a timeout); :meth:`Subscription.poll` returns the
ready batches without waiting; :meth:`Subscription.fetch` returns them as one Arrow table
with Materialize's columns (``mz_timestamp``, ``mz_progressed`` with ``PROGRESS``,
``mz_diff``, then the data), which is what the SQL statement returns (its finite part).

A durable catalog's memory holds history only from its last reopen or refresh; older
contents and changes are read from the object's durable arrangement, which keeps them until
the catalog compacts (every ``maintain_every`` commits, up to ``now``). A subscription that falls behind
a compaction raises :class:`colmz.arrangement.collection.CompactedAway`, as Materialize
fails a subscription whose as-of was compacted; one over an object dropped raises a
``KeyError`` naming it, and one over an object dropped and created again under its name a
``ValueError`` saying so (:meth:`colmz.Catalog.identity` tells the two apart).

Invariants: batches come in strictly increasing time order, each consolidated, at one time;
the snapshot batch (first, at ``as_of``; possibly empty) plus every later batch sums to the
contents at the frontier minus one; a call that raises hands out nothing and leaves the
frontier where it was.
"""

from __future__ import annotations

import time as _clock
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from colmz.frontier import check_time
from colmz.ops import concat, consolidate
from colmz.rollback import roll_back, save
from colmz.rows import at_time, cast_to, conform, expand, rows_to_updates, schema_of, storable
from colmz.sql import (
    UnsupportedSQL,
    display_name,
    parse,
    relation_name,
    rename_like_postgres,
    run_query,
    session,
    uses_now,
)
from colmz.sql.parse import Query
from colmz.updates import Updates

if TYPE_CHECKING:
    from colmz.catalog import Catalog

__all__ = ["Subscription", "subscription_table"]

#: The names of the columns a subscription's table puts before the data (Materialize's).
TIMESTAMP, PROGRESSED, DIFF = "mz_timestamp", "mz_progressed", "mz_diff"


class Subscription:
    """The snapshot of an object or query as of ``as_of``, then its changes at each later time.

    Made by :meth:`colmz.Catalog.subscribe` (see there for the parameters).

    Attributes
    ----------
    as_of : int
        The snapshot's time.
    frontier : int
        Every change at a time below it has been handed out (``as_of`` before the first read).
    schema : tuple of ColumnSpec
        The columns of each batch.
    strategy : str
        ``"collection"`` (an object's own history), ``"dataflow"`` (a query's rendered
        operators) or ``"recompute: <reason>"``.
    stats : dict
        Work counters: ``evaluations`` (the query run over its inputs whole: the snapshot,
        and each time on the recompute path), ``steps`` (dataflow steps), ``updates_read``
        (input updates read after the snapshot).

    Examples
    --------
    >>> import colmz
    >>> cat = colmz.Catalog()
    >>> cat.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1), (2)")
    >>> sub = cat.subscribe("t")
    >>> [b.to_pylist() for b in sub]            # the snapshot at now = 1
    [[(1, 1, 1), (2, 1, 1)]]
    >>> cat.execute("DELETE FROM t WHERE k = 1; INSERT INTO t VALUES (3)")
    >>> [b.to_pylist() for b in sub]            # then the change at time 2
    [[(1, 2, -1), (3, 2, 1)]]
    >>> sub.frontier
    3
    """

    def __init__(self, catalog: Catalog, target, as_of: int | None = None, *, snapshot: bool = True,
                 up_to: int | None = None, sync: bool = True):
        if not isinstance(snapshot, bool):
            raise TypeError(f"snapshot must be a bool, got {snapshot!r}")
        self._cat = catalog
        self._sync = sync
        self.stats = {"evaluations": 0, "steps": 0, "updates_read": 0}
        now = catalog.catch_up() if sync else catalog.now
        if as_of is not None:
            as_of = check_time(as_of, "as_of")
            if as_of > now:
                raise ValueError(f"as_of {as_of} is after the catalog's now {now}: not yet complete "
                                 f"(a subscription starts at a complete time)")
        self.as_of: int = now if as_of is None else as_of
        if up_to is not None:
            up_to = check_time(up_to, "up_to")
            if up_to < self.as_of:
                raise ValueError(f"up_to {up_to} is before as_of {self.as_of}: nothing to subscribe to")
        self.up_to = up_to
        self._ready: list[Updates] = []
        if isinstance(target, tuple) or _is_name(target):
            self._init_object(target)
        elif isinstance(target, str):
            self._init_query(target)
        else:
            raise TypeError(f"subscribe takes an object name or a query (str), got {type(target).__name__}")
        self._identity = {k: catalog.identity(k) for k in self._inputs}
        self.frontier: int = self.as_of + 1
        if snapshot:
            self._ready.append(self._snapshot)
        del self._snapshot

    # ------------------------------------------------------------------ set-up

    def _init_object(self, name) -> None:
        obj = self._cat.object(name)
        self._key = obj.name
        self.name = display_name(obj.name)
        self.strategy = "collection"
        self.schema = obj.schema
        self._inputs = (obj.name,)
        self._snapshot = at_time(self._cat.contents(obj.name, self.as_of), self.as_of)

    def _init_query(self, text: str) -> None:
        stmts = parse(text)
        if len(stmts) != 1 or not isinstance(stmts[0], Query) or stmts[0].as_of is not None:
            raise ValueError(f"subscribe takes one query (SELECT, WITH, VALUES, TABLE) without AS OF "
                             f"(give as_of=) or an object's name, got {text!r}")
        self.name = None
        self._query = stmts[0].sql
        self._translated = self._cat.translated(self._query)
        if uses_now(self._translated):
            raise UnsupportedSQL("SUBSCRIBE to a query calling mz_now() is not supported by colmz (it "
                                 "changes at every time): subscribe to a materialized view of it")
        # bound as the catalog's queries are, with the same rules of float and jsonb columns
        self._bound_text, bound = self._cat.bound_query(self._translated)
        self._inputs = tuple(bound)
        contents = {k: self._cat.contents(k, self.as_of) for k in self._inputs}
        self._con = session(external_access=False)
        rows = self._evaluate(contents, self.as_of)
        # A query's result types as a materialized view stores them (colmz.rows.storable).
        self.schema = schema_of([(f.name, storable(f.type, "SUBSCRIBE")) for f in rows.schema])
        rows = conform(rows, self.schema, "SUBSCRIBE")
        snapshot = consolidate(rows_to_updates(rows, self.as_of, 1))
        self._pipeline, self.strategy = self._dataflow(contents, snapshot)
        self._contents = None if self._pipeline is not None else contents
        self._result = None if self._pipeline is not None else snapshot
        self._snapshot = snapshot

    def _dataflow(self, contents: Mapping, snapshot: Updates):
        """The query's rendered operators fed the inputs' snapshot, when the plan holds no
        Fallback and they answer ``snapshot`` exactly; else ``None`` and why not."""
        from colmz.dataflow.plan import plan, render

        if not all(isinstance(k, str) for k in self._inputs):
            return None, "recompute: the query names an object outside the default schema"
        try:
            p = plan(self._query, {k: self._cat.object(k).schema for k in self._inputs},
                     kinds={k: self._cat.column_kinds(k) for k in self._inputs})
            if p.fallbacks():
                return None, f"recompute: {p.fallbacks()[0].reason}"
            pipe = render(p)
            names = [c.name for c in pipe.schema]
            if names != [c.name for c in self.schema]:
                return None, f"recompute: the plan's columns {names} are not the query's"
            out = pipe.step(self.as_of, {k: at_time(contents[k], self.as_of) for k in self._inputs
                                         if k in pipe.tables})
            out = consolidate(cast_to(out, self.schema))
        except Exception as e:  # noqa: BLE001 - any refusal of the plan path means: recompute
            return None, f"recompute: {type(e).__name__}: {e}"
        if sorted(out.to_pylist(), key=repr) != sorted(snapshot.to_pylist(), key=repr):
            return None, "recompute: the plan's snapshot differs from the query's"
        return pipe, "dataflow"

    def _evaluate(self, contents: Mapping, t: int) -> pa.Table:
        """The query's rows over ``contents`` (each input's contents as of ``t``), as the
        catalog runs a query: translated, each input registered under its bound name."""
        registered = []
        self.stats["evaluations"] += 1
        try:
            for i, k in enumerate(self._inputs):
                name = relation_name(i)
                self._con.register(name, expand(contents[k], f"{display_name(k)!r}"))
                registered.append(name)
            return rename_like_postgres(run_query(self._con, self._bound_text, t)[0], self._query)
        finally:
            for name in registered:
                self._con.unregister(name)

    # ------------------------------------------------------------------ reading

    def _advance(self) -> None:
        """Read the changes at times in ``[frontier, now]`` into the ready batches."""
        now = self._cat.catch_up() if self._sync else self._cat.now
        hi = now + 1
        if self.up_to is not None:
            hi = min(hi, self.up_to)
        lo = self.frontier
        if hi <= lo:
            return
        for k, ident in self._identity.items():
            if self._cat.identity(k) != ident:
                raise ValueError(f"{display_name(k)!r} was dropped and created again since the subscription "
                                 "started: its changes are another object's (subscribe again)")
        changes = {k: self._cat.changes(k, lo, hi) for k in self._inputs}
        self.stats["updates_read"] += sum(len(u) for u in changes.values())
        times = sorted({int(x) for u in changes.values() for x in np.unique(u.time)})
        if self.strategy == "collection":
            batches = [_at(changes[self._key], t) for t in times]
        else:
            batches = self._query_changes(changes, times)
        self._ready.extend(b for b in batches if len(b))
        self.frontier = hi

    def _query_changes(self, changes: Mapping, times: list[int]) -> list[Updates]:
        # Computed on copies: a raise hands out nothing and leaves the state as it was.
        out = []
        if self._pipeline is not None:
            saved = save(self._pipeline)
            try:
                for t in times:
                    deltas = {k: _at(changes[k], t) for k in self._inputs if k in self._pipeline.tables}
                    out.append(consolidate(cast_to(self._pipeline.step(t, deltas), self.schema)))
                    self.stats["steps"] += 1
            except BaseException:
                roll_back(self._pipeline, saved)
                raise
            return out
        contents, result = dict(self._contents), self._result
        for t in times:
            for k in self._inputs:
                d = _at(changes[k], t)
                if len(d):
                    contents[k] = consolidate(concat([contents[k], d]), since=t)
            rows = self._evaluate(contents, t)
            new = consolidate(rows_to_updates(conform(rows, self.schema, "SUBSCRIBE"), t, 1))
            out.append(consolidate(concat([result.negated(), new]), since=t) if len(result) else new)
            result = new
        self._contents, self._result = contents, result
        return out

    def poll(self) -> list[Updates]:
        """The batches ready now (the snapshot first, then one per time with changes, up to
        the catalog's now), without waiting; ``[]`` when there is none."""
        self._advance()
        out, self._ready = self._ready, []
        return out

    def __iter__(self) -> Iterator[Updates]:
        """The batches ready now, then stop (a later ``for`` continues from there)."""
        yield from self.poll()

    @property
    def done(self) -> bool:
        """Whether ``up_to`` is reached: no batch will come."""
        return self.up_to is not None and self.frontier >= self.up_to and not self._ready

    def follow(self, timeout: float | None = None, interval: float = 0.05) -> Iterator[Updates]:
        """Yield batches as they are committed -- on a durable catalog by any handle or
        process -- looking every ``interval`` seconds; stop after ``timeout`` seconds without a
        new batch (``None``: never), or when ``up_to`` is reached.

        >>> import colmz
        >>> cat = colmz.Catalog(); cat.execute("CREATE TABLE t (k INT)")
        >>> [len(b) for b in cat.subscribe("t").follow(timeout=0)]   # an empty snapshot
        [0]
        """
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout < 0):
            raise ValueError(f"timeout must be a non-negative number of seconds or None, got {timeout!r}")
        if not isinstance(interval, (int, float)) or interval <= 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        last = _clock.monotonic()
        while True:
            batches = self.poll()
            yield from batches
            if self.done:
                return
            if batches:
                last = _clock.monotonic()
            elif timeout is not None and _clock.monotonic() - last >= timeout:
                return
            else:
                _clock.sleep(interval)

    def fetch(self, progress: bool = False) -> pa.Table:
        """The batches ready now as one Arrow table: ``mz_timestamp`` (``uint64``),
        ``mz_progressed`` (with ``progress``), ``mz_diff``, then the data columns -- what
        ``SUBSCRIBE`` returns through :meth:`colmz.Catalog.execute`. With ``progress``, a row
        with ``mz_progressed`` true (the other columns NULL) follows each time's rows, its
        ``mz_timestamp`` the time after it, and a last one gives the frontier."""
        return subscription_table(self.poll(), self.schema, progress, self.frontier if progress else None)

    def __repr__(self) -> str:
        what = f"object {self.name!r}" if self.name is not None else f"query {self._query!r}"
        return f"Subscription({what}, as_of={self.as_of}, frontier={self.frontier}, {self.strategy})"


def subscription_table(batches: list[Updates], schema, progress: bool = False,
                       frontier: int | None = None) -> pa.Table:
    """``batches`` (each at one time) as Materialize's subscribe output table (see
    :meth:`Subscription.fetch`); ``frontier`` adds a last progress row when it is past the
    last one written.

    >>> import colmz, pyarrow as pa
    >>> b = colmz.Updates({"k": [5]}, time=[2], diff=[-1])
    >>> subscription_table([b], (colmz.ColumnSpec("k", pa.int64()),)).to_pylist()
    [{'mz_timestamp': 2, 'mz_diff': -1, 'k': 5}]
    """
    schema = tuple(schema)
    cols: dict[str, list] = {TIMESTAMP: [], PROGRESSED: [], DIFF: []}
    data: dict[str, list] = {c.name: [] for c in schema}
    last = None

    def add_progress(t: int) -> None:
        cols[TIMESTAMP].append(pa.array([t], pa.uint64()))
        cols[PROGRESSED].append(pa.array([True]))
        cols[DIFF].append(pa.nulls(1, pa.int64()))
        for c in schema:
            data[c.name].append(pa.nulls(1, c.type))

    for b in batches:
        if not len(b):
            continue
        n = len(b)
        cols[TIMESTAMP].append(pa.array(np.asarray(b.time, np.uint64)))
        cols[PROGRESSED].append(pa.array(np.zeros(n, bool)))
        cols[DIFF].append(pa.array(np.asarray(b.diff, np.int64)))
        for c in schema:
            data[c.name].append(b.column(c.name))
        last = int(b.time[0]) + 1
        if progress:
            add_progress(last)
    if progress and frontier is not None and (last is None or frontier > last):
        add_progress(frontier)
    names = [TIMESTAMP, PROGRESSED, DIFF] if progress else [TIMESTAMP, DIFF]
    types = {TIMESTAMP: pa.uint64(), PROGRESSED: pa.bool_(), DIFF: pa.int64()}
    out = {n: pa.concat_arrays(cols[n]) if cols[n] else pa.array([], types[n]) for n in names}
    for c in schema:
        parts = [p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p for p in data[c.name]]
        out[c.name] = pa.concat_arrays([p.cast(c.type) for p in parts]) if parts else pa.array([], c.type)
    return pa.table(out)


def _at(u: Updates, t: int) -> Updates:
    """The consolidated updates of ``u`` at time ``t``."""
    if not len(u):
        return u
    idx = np.flatnonzero(np.asarray(u.time) == t)
    return consolidate(u.take(idx)) if len(idx) else Updates.empty(u.schema)


def _is_name(target) -> bool:
    """Whether a ``str`` target names an object rather than holding a query: a query starts
    with a query word or a parenthesis."""
    if not isinstance(target, str):
        return not isinstance(target, (bytes, int, float))
    head = target.lstrip().split(None, 1)[0].upper() if target.strip() else ""
    return head not in ("SELECT", "WITH", "VALUES", "TABLE") and not target.lstrip().startswith("(")
