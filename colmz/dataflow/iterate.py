"""``Iterate``: a ``WITH RECURSIVE`` query kept by its delta rules, one instance per iteration.

Design
------
PostgreSQL evaluates ``WITH RECURSIVE c AS (base UNION [ALL] step)`` by iterating a
working table: ``W0 = base``, ``W(i+1) = step(Wi)``, the result the sum of every ``Wi``,
stopping at the first empty one; with ``UNION`` each ``Wi`` is distinct and ``W(i+1)`` drops
the rows of ``W0 + ... + Wi`` (the rows produced so far, ``Ri``). Each ``Wi`` is a function
of the tables, so a change of the tables changes each ``Wi`` by a delta -- differential
dataflow's ``iterate``, whose state is indexed by (time, iteration): here each iteration
``i`` has an *instance* of the recursive term's operators of its own (rendered by
``colmz.dataflow.render``, a :class:`~colmz.dataflow.render.Pipeline` reading the working
table as a table named :func:`~colmz.dataflow.plan_nodes.variable_key`), holding the state
of ``step`` applied to ``Wi``. At a commit, instance ``i`` is fed the changes of the tables
it reads, ``ΔWi`` (and ``ΔRi``) and gives ``ΔW(i+1)``; the view's change is ``Σ ΔWi``. So
a deletion is a delta like an insertion: rows derived through it are retracted at the
iterations they were derived at, and a row still derived otherwise stays.

For ``UNION`` the planner makes the recursive term ``Threshold(Distinct(step(W)) −
R)`` (``colmz.dataflow.plan_setops``): ``W(i+1) = distinct(step(Wi)) − Ri`` exactly,
each instance keeping its distinct's and threshold's counts.

Depth. Instances are made when an iteration is first reached and never dropped. Invariant
after each step: with ``n`` instances, ``Wn`` is empty, hence every later ``Wi`` too (the
planner admits only recursive terms giving no row over an empty working table). A step
feeds instances ``0, 1, ...`` in turn and goes on while ``i < n`` or ``ΔWi`` is not empty;
an instance whose inputs did not change is skipped (its output does not change), and once
nothing changes below ``i`` -- no ``ΔWi``, no ``ΔRi``, no table change -- nothing changes
above. A new instance ``i`` (``Wi`` was empty before) is fed the contents of the tables it
reads (kept here, one arrangement per table) and ``Wi``, ``Ri`` whole: its output is
``W(i+1)`` whole, its state that of an instance that had seen every commit.

Bound. PostgreSQL iterates forever when the recursion does not converge; here an
iteration past ``limit`` (:data:`RECURSION_LIMIT` by default) raises
:class:`RecursionLimitExceeded` naming it, and the step changes nothing (a catalog's
commit, or ``CREATE``, is rolled back).

Work. A change of a table the recursive term reads is fed to every instance (each holds
its own arrangement of it), so a one-row change costs ``O(depth)`` lookups plus the rows it
derives -- not the graph -- as long as it reaches no iteration deeper than any before: a new
iteration's instance is fed the tables whole (``O(tables)`` once per new depth; differential
shares one arrangement of a table across iterations, which these instances do not). Memory:
each instance's arrangements, ``O(depth × tables)``. ``rows_touched`` counts the rows into and out of the instances
stepped (cumulative), ``instances_stepped`` the instances stepped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from colmz.dataflow.keyed import KeyedArrangement
from colmz.dataflow.state import prepare_states
from colmz.dataflow.step import Clock, as_schema, check_delta
from colmz.errors import SQLError
from colmz.ops import concat, consolidate
from colmz.rollback import covered, undone_on_error
from colmz.updates import Updates

__all__ = ["RECURSION_LIMIT", "Iterate", "RecursionLimitExceeded"]

#: Iterations a recursion may take at one commit before :class:`RecursionLimitExceeded`
#: (PostgreSQL has no bound and loops forever; Materialize's ``WITH MUTUALLY RECURSIVE``
#: takes one as ``ERROR AT RECURSION LIMIT``).
RECURSION_LIMIT = 10_000


class RecursionLimitExceeded(SQLError):
    """A recursion did not reach its fixed point within its iteration bound."""


class Iterate:
    """The operator of a ``LetRec`` plan node (module docstring).

    ``schema`` the recursion's columns; ``instance()`` renders a fresh instance of the
    recursive term (a ``Pipeline`` reading ``work`` -- and ``all`` when ``distinct`` -- and
    the tables ``tables``, name -> columns); ``limit`` the iteration bound.

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> from colmz.dataflow.plan import plan, render
    >>> p = plan("WITH RECURSIVE c(n) AS (SELECT k FROM t UNION ALL SELECT n + 1 FROM c WHERE n < 3) "
    ...          "SELECT n FROM c", {"t": {"k": pa.int64()}})
    >>> pipe = render(p)
    >>> sorted(pipe.step(1, {"t": colmz.Updates({"k": [1]}, time=[1], diff=[1])}).to_pylist())
    [(1, 1, 1), (2, 1, 1), (3, 1, 1)]
    >>> sorted(pipe.step(2, {"t": colmz.Updates({"k": [1, 2]}, time=[2, 2], diff=[-1, 1])}).to_pylist())
    [(1, 2, -1)]
    >>> [op for op in pipe.operators if isinstance(op, Iterate)][0].strategy
    '3 iterations reached (iteration 0 shown)'
    """

    ROLLBACK_FIELDS = ("_instances", "_contents", "_total", "_clock")

    #: The rendered step hands this operator the tables' deltas as well as its input's.
    reads_deltas = True

    def __init__(self, schema, name: str, distinct: bool, tables: Mapping[str, object],
                 instance: Callable[[], object], work: str, all_rows: str | None,
                 limit: int = RECURSION_LIMIT):
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        self.schema = as_schema(schema, "schema")
        self.name = name
        self.distinct = bool(distinct)
        self.limit = limit
        self.tables = {t: as_schema(s, f"tables[{t!r}]") for t, s in tables.items()}
        self._instance = instance
        self._work = work
        self._all = all_rows
        self._instances: list = [instance()]
        self._contents = {t: KeyedArrangement(s, ()) for t, s in self.tables.items()}
        self._total = KeyedArrangement(self.schema, ()) if distinct else None
        self._clock = Clock()
        #: rows into and out of the instances stepped (cumulative, a work counter)
        self.rows_touched = 0
        #: instances stepped (cumulative) and at the last step
        self.instances_stepped = 0
        self.last_instances_stepped = 0

    @property
    def depth(self) -> int:
        """The iterations reached so far: instances made (never fewer than one)."""
        return len(self._instances)

    @property
    def strategy(self) -> str:
        """What EXPLAIN notes: the iterations reached, the first one's operators shown."""
        return f"{self.depth} iteration{'s' if self.depth != 1 else ''} reached (iteration 0 shown)"

    @property
    def instances(self) -> list:
        """The instances of the recursive term, iteration 0 first (for inspection)."""
        return list(self._instances)

    @property
    def arrangements(self) -> list[KeyedArrangement]:
        """The contents this operator keeps itself (the tables the recursive term reads,
        the rows produced so far for ``UNION``); the instances' state is theirs."""
        own = list(self._contents.values())
        return own + ([self._total] if self._total is not None else [])

    def grow_to_states(self, names) -> None:
        """Make as many instances as the state names ``names`` (relative to this operator:
        ``instances.<i>.…``) number, so that a fresh operator's states match a snapshot's
        (``colmz.dataflow.state.prepare_states``); an instance's own recursions grow in turn.
        Only before the first step; instances made so that no restore fills are dropped at
        the first step."""
        if self._clock.last is not None:
            raise ValueError("grow_to_states: the operator has stepped; only a fresh one grows")
        wanted = {int(n.split(".")[1]) for n in names if n.startswith("instances.") and n.split(".")[1].isdigit()}
        while len(self._instances) < max(wanted, default=-1) + 1:
            self._instances.append(self._instance())
        for k, inst in enumerate(self._instances):
            prefix = f"instances.{k}.operators."
            prepare_states(inst, [n[len(prefix):] for n in names if n.startswith(prefix)])

    def step(self, time, base: Updates, *, deltas: Mapping[str, Updates]) -> Updates:
        """The recursion's change at ``time`` for the non-recursive term's change ``base``
        and the tables' changes ``deltas`` (name -> ``Updates``; others: none)."""
        if self._clock.last is None:
            # never stepped nor restored: instances grown for a restore that did not happen
            # hold nothing; they would be taken for iterations reached
            del self._instances[1:]
        time = self._clock.check(time)
        base = consolidate(check_delta(base, self.schema, time))
        changed = {t: consolidate(d) for t, d in deltas.items() if t in self.tables and len(d)}
        with undone_on_error(self), covered():
            out = self._iterate(time, base, changed)
            for t, d in changed.items():
                self._contents[t].insert(time, d)
            if self._total is not None and len(out):
                self._total.insert(time, out)
            self._clock.advance(time)
        return out

    def _iterate(self, time: int, base: Updates, changed: dict[str, Updates]) -> Updates:
        reached = len(self._instances)
        work, so_far, outs = base, base, [base]  # so_far: ΔR(i), or R(i) whole once `whole`
        whole = False
        stepped = 0
        i = 0
        while True:
            if i >= reached and not len(work):
                break  # W(i) empty now and before: so is every later one
            if not len(work) and not changed and not (self.distinct and len(so_far)):
                break  # nothing changed at or below i: nothing changes above
            if i >= self.limit:
                raise RecursionLimitExceeded(
                    f"WITH RECURSIVE {self.name}: no fixed point within {self.limit} iterations "
                    f"(colmz.dataflow.iterate.RECURSION_LIMIT); PostgreSQL would iterate forever")
            if i < reached:
                feed = dict(changed)
            else:
                # a new iteration: its instance sees the tables whole, W(i) (empty before) and
                # R(i) whole, as if it had stepped at every commit
                self._instances.append(self._instance())
                feed = {t: self._whole(t, time, changed.get(t)) for t in self.tables}
                if self._total is not None and not whole:
                    so_far = consolidate(concat([_at(self._total.snapshot(), time), so_far]))
                    whole = True
            feed[self._work] = work
            if self._all is not None:
                feed[self._all] = so_far
            nxt = self._instances[i].step(time, feed)
            stepped += 1
            self.rows_touched += sum(len(d) for d in feed.values()) + len(nxt)
            outs.append(nxt)
            work = nxt
            if self._all is not None and len(nxt):
                so_far = consolidate(concat([so_far, nxt]))
            i += 1
        self.instances_stepped += stepped
        self.last_instances_stepped = stepped
        return consolidate(concat(outs)) if len(outs) > 1 else outs[0]

    def _whole(self, table: str, time: int, change: Updates | None) -> Updates:
        """The table's contents at ``time``: as of the last step, plus this step's ``change``."""
        before = _at(self._contents[table].snapshot(), time)
        return before if change is None else consolidate(concat([before, change]))


def _at(u: Updates, time: int) -> Updates:
    """``u`` with every update at ``time``."""
    return Updates({n: u.column(n) for n in u.column_names}, np.full(len(u), time, np.uint64), u.diff, copy=False)
