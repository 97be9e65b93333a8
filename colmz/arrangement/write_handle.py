"""The write side of :class:`colmz.arrangement.Arrangement`, after persist-client's
``WriteHandle`` (``src/persist-client/src/write.rs``): ``write``, ``append_runs`` (persist's
``compare_and_append``), ``seal`` and ``advance_since``.

Design
------
Each call validates its arguments, writes its parts, then hands one *command* -- a pure
function of the machine's state, which checks what it needs and returns the state with the
call applied, naming the parts already written -- to the machine
(``colmz.arrangement.machine``, through ``Arrangement._apply``), which commits it with one
compare-and-set and re-applies it to the newer head when the compare-and-set is lost. On any
failure the state is as it was (a command changes nothing it is given) and the parts written
for the call are deleted, so nothing is visible; each call is durable when it returns.

Several arrangements' appends in one step (:meth:`WriteHandle.append_runs_together`) go
through each arrangement's own internal API, not its private fields: :meth:`~WriteHandle.
prepare_append` builds an append on the arrangement's committed state (its checks and its
parts' lease run there) and returns it uncommitted as a :class:`PreparedAppend`, whose
``version`` a caller commits together with others' (``colmz.storage.state.commit_together``);
:meth:`~WriteHandle.landed_append` then takes the state it committed. ``consensus`` names
the store a handle commits to, so a step can refuse arrangements of different stores.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from colmz.arrangement.errors import (
    MissingPart,
    SchemaMismatch,
    SealMismatch,
    SealRegression,
    SinceRegression,
    TimeBeforeSeal,
    TimeBeforeTraceUpper,
)
from colmz.arrangement.machine import STALE, PreparedCommand
from colmz.arrangement.meta import (
    UnsealedBatchMeta,
    check_properties,
)
from colmz.arrangement.schema import describe_schema
from colmz.frontier import Frontier, check_frontier, frontier_le
from colmz.ops import order_data
from colmz.order import ColumnSpec

__all__ = ["KEEP", "PreparedAppend", "WriteHandle"]


KEEP = object()  # append_runs: leave the seal as it is


@dataclass(frozen=True)
class PreparedAppend:
    """An :meth:`~WriteHandle.append_runs` built on an arrangement's committed state and not
    committed (:meth:`WriteHandle.prepare_append`): its ``arrangement``, the machine's
    prepared command (``colmz.arrangement.machine.PreparedCommand``), the runs' part
    ``keys`` and the ``runs``. :attr:`version` is what commits it."""

    arrangement: Any
    command: PreparedCommand
    keys: tuple[str, ...]
    runs: tuple

    @property
    def version(self):
        """The log version that commits this append (``colmz.storage.state.Prepared``)."""
        return self.command.version


class WriteHandle:
    """The write side of the handle (module docstring); a base of
    :class:`colmz.arrangement.Arrangement`."""

    def _read_schema_of(self, key: str) -> tuple[ColumnSpec, ...]:
        import pyarrow.parquet as pq

        data = self._store.get(key)
        if data is None:
            raise MissingPart(f"part {key!r} is missing from the blob store")
        s = pq.read_schema(pa.BufferReader(data))
        return tuple(ColumnSpec(f.name, f.type) for f in s if f.name not in ("time", "diff"))

    def write(self, updates) -> None:
        """Add ``updates`` durably (one unsealed batch, one commit).

        ``updates`` is a :class:`colmz.Updates`, an Arrow table or a pandas DataFrame (with
        ``time`` and ``diff`` columns; the others are data).

        Raises :class:`SchemaMismatch` for other columns and :class:`TimeBeforeSeal` for a
        time before the seal. Updates that consolidate to nothing write nothing.
        """
        updates = self._conform(updates)
        if not len(updates):
            return
        lo = int(updates.time.min())

        def check(seal: Frontier) -> None:
            if seal is None or lo < seal:
                raise TimeBeforeSeal(f"updates hold time {lo}, before the seal {seal}")

        check(self._seal)
        normal = order_data(updates)
        if not len(normal[0] if normal[1] is None else normal[1]):
            return
        upper = self.unsealed_seqno_upper()
        batch, schema = self._write_unsealed(self._state, updates, normal, (upper, upper + 1))

        def cmd(state):
            # on a retry the state is another writer's: its seal and schema are checked again
            check(state.seal)
            if state.schema is not None and tuple(state.schema) != schema:
                raise SchemaMismatch(f"updates have columns {describe_schema(schema)} but the "
                                     f"arrangement's schema is now {describe_schema(state.schema)}")
            upper = state.unsealed_seqno_upper()
            return state.with_schema(schema).unsealed_append(replace(batch, seqnos=(upper, upper + 1)))

        self._apply(cmd, written=batch.keys)

    def append_runs(self, runs, *, seal: Frontier | object = KEEP, properties: dict | None = None,
                    expect: Frontier | object = KEEP, expect_properties: dict | None = None,
                    keep_runs: bool = False) -> None:
        """Commit runs of parts written by other processes as unsealed batches, one per run,
        in one compare-and-set; with ``seal``, advance the seal in the same commit, and with
        ``properties`` (a dict of str to str or int; None removes a key) update
        :meth:`properties` in it too. With ``expect``, the commit happens only if the seal is
        ``expect``, and with ``expect_properties`` only if the properties are exactly those
        (else :class:`SealMismatch`): the runs land at most once, right after ``expect``
        (persist's ``compare_and_append``). A handle whose seal is not ``expect`` is
        refreshed once before it refuses (it may be behind); a compare-and-set lost to another
        writer refreshes and applies the call again to the newer state, where its checks run
        again (``colmz.arrangement.machine``, at most ``ATTEMPTS`` compare-and-sets, then
        ``CommitConflict``).

        ``runs`` are :class:`colmz.arrangement.runs.WrittenRun` (or their dicts), written with
        :func:`colmz.arrangement.runs.write_run` under this arrangement's :attr:`prefix` --
        e.g. by Spark executors while the driver commits. Everything is checked before
        anything changes: times at or after the seal (:class:`TimeBeforeSeal`), keys under the
        prefix, present in the blob store (:class:`MissingPart`) and not referenced yet, a seal
        not before the current one (:class:`SealRegression`), properties of the right types
        (``TypeError``); the lease check of every commit applies too (:class:`LeaseExpired`).
        On any failure nothing is committed and memory -- the properties too -- is as before
        (or, after a lost compare-and-set, the state another writer committed). The runs'
        parts are the caller's until the call commits them; a call that refused them after a
        lost compare-and-set (or lost it ``ATTEMPTS`` times) deleted them -- unless
        ``keep_runs``: then the call never deletes them (another record names them and applies
        them again: a durable catalog's committed intent, ``colmz.catalog.store``).

        >>> import colmz
        >>> from colmz.arrangement.runs import write_run
        >>> a = colmz.Arrangement.open("mem://append-runs-doc", schema={"k": pa.int64()})
        >>> u = colmz.Updates({"k": [1, 2]}, time=[0, 3], diff=[1, 1])
        >>> run = write_run(a.store, a.schema, u, prefix=a.prefix)
        >>> a.append_runs([run], seal=4)
        >>> a.read(as_of=3).to_pylist()
        [(1, 3, 1), (2, 3, 1)]
        """
        cmd, keys, runs = self._runs_command(runs, seal, properties, expect, expect_properties)
        if not self._apply(cmd, written=keys, keep=keys if keep_runs else ()).applied:
            return
        self._counters["parts_written"] += len(keys)
        self._counters["blob_bytes_written"] += sum(r.size_bytes for r in runs)

    def _runs_command(self, runs, seal, properties, expect, expect_properties):
        """The command of :meth:`append_runs` -- its arguments checked, the parts found in
        the blob store, the handle refreshed once when it is behind ``expect`` -- with the
        runs' part keys and the runs."""
        from colmz.arrangement.runs import WrittenRun

        runs = [r if isinstance(r, WrittenRun) else WrittenRun.from_dict(r) for r in runs]
        if expect is not KEEP:
            expect = check_frontier(expect, "expect")
        if expect_properties is not None:
            expect_properties = check_properties(expect_properties, {})
        if properties is not None:
            check_properties(properties, {})
        if seal is not KEEP:
            seal = check_frontier(seal, "seal")
        keys = [k for r in runs for k in r.keys]
        for k in keys:
            if not k.startswith(self.prefix):
                raise ValueError(f"part {k!r} is not under this arrangement's prefix {self.prefix!r}")
        if len(set(keys)) != len(keys):
            raise ValueError("runs name a part twice, or a part the arrangement already holds")

        def check(state) -> dict:
            # what depends on the state: run again on a retry, against another writer's state
            if expect is not KEEP and expect != state.seal:
                raise SealMismatch(f"append_runs expected the seal at {expect}, it is at {state.seal}")
            if expect_properties is not None and expect_properties != state.properties:
                raise SealMismatch(f"append_runs expected the properties {expect_properties}, "
                                   f"they are {dict(state.properties)}")
            new_properties = (state.properties if properties is None
                              else check_properties(properties, state.properties))
            if seal is not KEEP and not frontier_le(state.seal, seal):
                raise SealRegression(f"seal {seal} is before the current seal {state.seal}")
            if set(keys) & state.referenced_keys():
                raise ValueError("runs name a part twice, or a part the arrangement already holds")
            for r in runs:
                if state.seal is None or r.ts_lower < state.seal:
                    raise TimeBeforeSeal(f"a run holds time {r.ts_lower}, before the seal {state.seal}")
            return new_properties

        def expected(state) -> bool:
            return ((expect is KEEP or expect == state.seal)
                    and (expect_properties is None or expect_properties == state.properties))

        if not expected(self._state) and self.durable and self._machine.state == self._machine.committed:
            self.refresh()  # this handle may be behind the seal it is told to expect
        check(self._state)
        if keys:
            present = set(self._store.list_keys(self.prefix))
            missing = [k for k in keys if k not in present]
            if missing:
                raise MissingPart(f"part {missing[0]!r} of a run is missing from the blob store")

        def cmd(state):
            new_properties = check(state)
            if not runs and (seal is KEEP or seal == state.seal) and new_properties == state.properties:
                return STALE  # nothing to commit
            tu = state.trace_ts_upper()
            for r in runs:
                if tu is None or r.ts_lower < tu:
                    raise TimeBeforeTraceUpper(f"a run holds time {r.ts_lower} before the trace upper {tu}")
                upper = state.unsealed_seqno_upper()
                state = state.unsealed_append(UnsealedBatchMeta((upper, upper + 1), r.ts_lower, r.ts_upper,
                                                                tuple(r.keys), r.len, r.size_bytes, r.checks))
            if seal is not KEEP:
                state = state.update_seal(seal)
            return state.with_properties(new_properties)

        return cmd, keys, runs

    @staticmethod
    def append_runs_together(calls) -> bool:
        """:meth:`append_runs` on several arrangements of one store, committed in one step:
        ``calls`` are ``(arrangement, runs, seal, expect)``, each arrangement once, every
        one opened on the same consensus. Each call is checked as :meth:`append_runs`
        checks it (and its parts' lease), then all their compare-and-sets are one
        ``compare_and_set_many`` (``colmz.arrangement.machine``: several machines, one
        step): all of them land, or none.

        Returns True when they landed. The runs' parts are never deleted here (their
        caller's record names them: a durable catalog's intent), and a step that did not
        land is not retried: a lost compare-and-set raises ``CommitConflict``, a check
        what it raises, each arrangement left as it was; an indeterminate failure may
        have landed all of them (refresh to know). The caller then applies the calls one
        by one (:meth:`append_runs`), which refreshes and retries.

        >>> import colmz
        >>> from colmz.arrangement.runs import write_run
        >>> from colmz.storage.url import open_location
        >>> loc = open_location("mem://append-together-doc")
        >>> a = colmz.Arrangement.open(loc, schema={"k": pa.int64()}, name="a")
        >>> b = colmz.Arrangement.open(loc, schema={"k": pa.int64()}, name="b")
        >>> run = write_run(a.store, a.schema, colmz.Updates({"k": [1]}, time=[0], diff=[1]), prefix=a.prefix)
        >>> colmz.Arrangement.append_runs_together([(a, [run], 1, 0), (b, [], 1, 0)])
        True
        >>> a.read(as_of=0).to_pylist(), b.get_seal()
        ([(1, 0, 1)], 1)
        """
        from colmz.storage.state import commit_together

        calls = list(calls)
        if len({id(arr) for arr, *_ in calls}) != len(calls):
            raise ValueError("append_runs_together: an arrangement is named twice")
        if any(not arr.durable for arr, *_ in calls):
            raise ValueError("append_runs_together: every arrangement must be durable (opened by Arrangement.open)")
        if len({id(arr.consensus) for arr, *_ in calls}) > 1:
            raise ValueError("append_runs_together: the arrangements are on different consensus stores")
        steps = [p for arr, runs, seal, expect in calls
                 if (p := arr.prepare_append(runs, seal, expect)) is not None]
        commit_together([p.version for p in steps])
        for p in steps:
            p.arrangement.landed_append(p)
        return True

    def prepare_append(self, runs, seal=KEEP, expect=KEEP) -> PreparedAppend | None:
        """:meth:`append_runs` of ``runs`` with ``seal`` and ``expect``, checked as it checks
        them (the parts' lease too) and built on this durable arrangement's committed state,
        not committed: the internal step of :meth:`append_runs_together`. None when there
        is nothing to commit. Changes nothing; raises what :meth:`append_runs` raises before
        its compare-and-set (and ``ValueError`` for a handle that is not durable or holds
        changes not committed)."""
        cmd, keys, runs = self._runs_command(runs, seal, None, expect, None)
        self._check_lease(frozenset(keys) - self._machine.committed.referenced_keys())
        prepared = self._machine.prepare(cmd)
        if prepared is STALE:
            return None
        return PreparedAppend(self, prepared, tuple(keys), tuple(runs))

    def landed_append(self, prepared: PreparedAppend) -> None:
        """Take the state of ``prepared`` (this arrangement's :meth:`prepare_append`) once
        its :attr:`~PreparedAppend.version` was committed, counting its parts as written."""
        if prepared.arrangement is not self:
            raise ValueError("landed_append: the append was prepared on another arrangement")
        self._machine.landed(prepared.command)
        self._counters["parts_written"] += len(prepared.keys)
        self._counters["blob_bytes_written"] += sum(r.size_bytes for r in prepared.runs)

    def seal(self, upper: Frontier, *, properties: dict | None = None) -> None:
        """Close the times before ``upper`` durably (a metadata commit; no part is written);
        with ``properties`` (a dict of str to str or int; None removes a key), update
        :meth:`properties` in the same commit.

        Raises :class:`SealRegression` for an upper before the current seal and
        ``TypeError`` for bad properties, committing nothing.
        """
        def cmd(state):
            # checked on the state found: a retry after a lost compare-and-set checks again
            if not frontier_le(state.seal, checked):
                raise SealRegression(f"seal {checked} is before the current seal {state.seal}")
            new_properties = state.properties if properties is None else check_properties(properties, state.properties)
            if checked == state.seal and new_properties == state.properties:
                return STALE  # nothing to commit
            return state.update_seal(checked).with_properties(new_properties)

        self.validate_seal(upper)
        checked = check_frontier(upper, "seal")
        if properties is not None:
            check_properties(properties, self._properties)
        self._apply(cmd)

    def advance_since(self, since: int) -> None:
        """Allow compaction up to ``since`` durably (:meth:`validate_allow_compaction` first)."""
        def cmd(state):
            if checked < state.since:
                raise SinceRegression(f"since {checked} is before the current since {state.since}")
            if checked == state.since:
                return STALE  # nothing to commit
            return state.allow_compaction(checked)

        self.validate_allow_compaction(since)
        checked = self._check_since(since)
        self._apply(cmd)
