"""Maintenance of :class:`colmz.arrangement.Arrangement`: drain, trim and compaction steps,
:class:`CompactionJob` and the compaction policies.

Design
------
:meth:`Maintenance.maintain` drains, evicts, trims and compacts in steps. Each step writes its
parts first and is then one command handed to the machine (``colmz.arrangement.machine``):
it applies the step's response to the state when the response still fits and commits it. A
compare-and-set lost to another writer reloads the state and applies the same response
there; a response that no longer fits is dropped with its parts.

Compaction policies
-------------------
``trace_next_compact_req`` keeps the upstream level rule exactly: the oldest adjacent pair
with equal levels whose newer upper is at or before the since; the merged batch's level is one
more iff it holds more updates than each parent. colmz compares **update counts**, not
encoded bytes: counts do not depend on Parquet's encoding, so the rule is deterministic.
:meth:`Maintenance.maintain` uses by default a wider-fan-in geometric policy
(``policy="geometric"``): when ``fan_in`` adjacent batches share a level they merge into one
of the next level, whether or not the since has passed them (their times advance to the
current since, which is what any merge may do). Each update is then rewritten about
``log_fan_in(batches)`` times instead of ``log2``; ``policy="levels"`` runs the upstream rule.

The default fan-in, 4, is the widest that keeps the trace within ``2 log2(batches
drained)`` batches from the first seals on; wider fan-ins write less but exceed that bound
early. The write amplification and trace length of the policies are measured by
``asv_benchmarks/bench_arrangement.py`` (``Trickle``) and reported in ``docs/arrangement.md``.

A drain whose interval holds exactly one unsealed batch, entirely inside it, hands that
batch's parts to the trace instead of rewriting them (they are already sorted and
consolidated), so a trickle of write-seal-maintain writes each update once before compaction.
"""

from __future__ import annotations

from colmz.arrangement.core import ArrangementCore
from colmz.arrangement.errors import (
    LeaseExpired,
    MissingPart,
    NonContiguousMerge,
    SinceBehindInput,
)
from colmz.arrangement.machine import STALE
from colmz.arrangement.merge import chunks_filtered, stream_merge
from colmz.arrangement.meta import (
    CompactTraceReq,
    CompactTraceRes,
    Description,
    DrainUnsealedReq,
    DrainUnsealedRes,
    TraceBatchMeta,
    UnsealedBatchMeta,
)
from colmz.frontier import check_time, frontier_le, frontier_lt
from colmz.progress import ProgressCallback, check_progress

__all__ = ["CompactionJob", "Maintenance"]


_POLICIES = ("geometric", "levels")


class CompactionJob:
    """A compaction of ``req`` done in budgeted steps (:meth:`Arrangement.compact_trace` is
    one that runs to the end).

    ``step(budget)`` merges on until about ``budget`` more input updates have been read (all
    of them with ``None``) and says whether the merge is complete; ``result()`` is then the
    :class:`CompactTraceRes`; ``abort()`` deletes the parts written so far. The job changes
    no arrangement state; between steps it holds about one part per input.
    """

    def __init__(self, arrangement: ArrangementCore, req: CompactTraceReq):
        batches = req.batches
        if len(batches) < 2:
            raise NonContiguousMerge(f"a compaction needs at least two batches, got {len(batches)}")
        for a, b in zip(batches, batches[1:]):
            if a.desc.upper != b.desc.lower:
                raise NonContiguousMerge(
                    f"cannot merge non-consecutive batches {a.desc.to_list()} and {b.desc.to_list()}"
                )
        since = check_time(req.since, "since")
        for b in batches:
            if since < b.desc.since:
                raise SinceBehindInput(
                    f"output since {since} is before input since {b.desc.since} of batch {b.desc.to_list()}"
                )
        self.req = req
        self.arrangement = arrangement
        self.desc = Description(batches[0].desc.lower, batches[-1].desc.upper, since)
        self.writer, self._steps = arrangement.trace_merge(batches, self.desc)
        self.rows_read = 0
        self._read: list[int] | None = None

    @property
    def done(self) -> bool:
        return self._read is not None

    def step(self, budget: int | None) -> bool:
        start = self.rows_read
        try:
            while self._read is None and (budget is None or self.rows_read - start < budget):
                try:
                    self.rows_read = next(self._steps)
                except StopIteration as finished:
                    self._read = finished.value
                    self.rows_read = sum(self._read)
                    self.writer.finish()
        except BaseException:
            self.abort()
            raise
        return self.done

    def result(self) -> CompactTraceRes:
        if self._read is None:
            raise RuntimeError("the compaction has not finished: step() it to the end first")
        w, batches = self.writer, self.req.batches
        self.arrangement.count_write(w)
        if len(batches) == 2:
            grew = all(w.rows > r for r in self._read)
            level = batches[0].level + 1 if grew else batches[0].level
        else:
            level = batches[0].level + 1
        merged = TraceBatchMeta(self.desc, level, tuple(w.keys), w.rows, w.size_bytes, tuple(w.checks))
        return CompactTraceRes(self.req, merged)

    def abort(self) -> None:
        self._steps.close()
        self.writer.abort()


class Maintenance:
    """Drain, trim and compaction steps and :meth:`maintain` (module docstring); a base of
    :class:`colmz.arrangement.Arrangement`."""

    def unsealed_step(self) -> bool:
        """Evict, then rewrite the first unsealed batch that holds times before the trace's
        upper, keeping only the updates at or after it (same seqnos, new parts). Returns
        whether a batch was rewritten."""
        evicted, _ = self._state.unsealed_evict()
        tu = evicted.trace_ts_upper()
        for b in evicted.unsealed:
            if b.ts_lower < tu:
                new = self._trim(b, tu)  # raises with the state as it was: nothing evicted
                evicted, _ = self._state.unsealed_evict()  # (the trim may have read the schema)
                self._state = evicted.unsealed_replace(b, new)
                return True
        self._state = evicted
        return False

    def _trim(self, b: UnsealedBatchMeta, tu: int) -> UnsealedBatchMeta:
        schema = self._read_schema()
        writer = self._writer(schema, {"kind": "unsealed", "seqnos": list(b.seqnos)})
        lo = hi = None
        try:
            for u in self._batch_parts(b.parts, schema):
                for enc in chunks_filtered([u], tu, None):
                    writer.add(enc)
                    lo = int(enc.time.min()) if lo is None else min(lo, int(enc.time.min()))
                    hi = int(enc.time.max()) if hi is None else max(hi, int(enc.time.max()))
            writer.finish()
        except BaseException:
            writer.abort()
            raise
        self.count_write(writer)
        if lo is None:  # nothing left at or after the upper: an empty batch, evicted later
            lo = hi = b.ts_upper
        return UnsealedBatchMeta(b.seqnos, lo, hi, tuple(writer.keys), writer.rows, writer.size_bytes,
                                 tuple(writer.checks))

    def drain_unsealed(self, req: DrainUnsealedReq) -> DrainUnsealedRes:
        """Do a drain request: merge the snapshot's updates into a new level-0 trace batch.

        Changes no state (hand the result to :meth:`unsealed_handle_drain_response`). When
        the snapshot holds no update in the interval there is no batch; when it holds some
        that cancel out, the batch has no parts and still advances the trace's upper.
        """
        snap, desc = req.snap, req.desc
        if not snap.batches:
            return DrainUnsealedRes(req, None)
        if len(snap.batches) == 1:
            b = snap.batches[0]
            inside = desc.lower <= b.ts_lower and (desc.upper is None or b.ts_upper < desc.upper)
            if inside:
                if not b.keys:
                    return DrainUnsealedRes(req, None)
                # Already sorted and consolidated: the trace takes the parts as they are.
                return DrainUnsealedRes(req, TraceBatchMeta(desc, 0, b.keys, b.len, b.size_bytes, b.checks))
        schema = self._read_schema()
        writer = self._writer(schema, {"kind": "trace", "desc": desc.to_list()})
        runs = [self._run_chunks(b.parts, schema, desc.lower, desc.upper) for b in snap.batches]
        try:
            read = stream_merge(runs, None, writer.add, self._counters)
            writer.finish()
        except BaseException:
            writer.abort()
            raise
        if not sum(read):
            writer.abort()
            return DrainUnsealedRes(req, None)
        self.count_write(writer)
        return DrainUnsealedRes(req, TraceBatchMeta(desc, 0, tuple(writer.keys), writer.rows, writer.size_bytes,
                                                    tuple(writer.checks)))

    def drain(self) -> bool:
        """Request, do and apply one drain; whether the trace grew."""
        req = self.unsealed_next_drain_req()
        if req is None:
            return False
        n = len(self._trace)
        self.unsealed_handle_drain_response(self.drain_unsealed(req))
        return len(self._trace) > n

    def compact_trace(self, req: CompactTraceReq) -> CompactTraceRes:
        """Merge ``req``'s batches into one, times advanced to ``req.since``; changes no
        state (see :meth:`trace_handle_compact_response`).

        The merged description is ``[first.lower, last.upper)`` at ``req.since``. With two
        inputs the level is ``b0.level + 1`` iff the merged batch holds more updates than each
        parent, else ``b0.level``; a wider merge (the geometric policy) is one level up.
        Raises :class:`NonContiguousMerge` and :class:`SinceBehindInput`.
        (:class:`CompactionJob` is the same merge done a budget at a time.)
        """
        job = CompactionJob(self, req)
        job.step(None)
        return job.result()

    def compact(self, req: CompactTraceReq | None = None) -> list[TraceBatchMeta]:
        """Request (unless given), do and apply one compaction; the replaced batches."""
        if req is None:
            req = self.trace_next_compact_req()
            if req is None:
                return []
        return self.trace_handle_compact_response(self.compact_trace(req))

    def geometric_compact_req(self) -> CompactTraceReq | None:
        """:meth:`maintain`'s default policy: the oldest ``fan_in`` adjacent batches of one
        level (levels are non-increasing, so same-level batches are adjacent), merged at the
        current since, or None."""
        n, f = len(self._trace), self.fan_in
        i = 0
        while i < n:
            j = i
            while j < n and self._trace[j].level == self._trace[i].level:
                j += 1
            if j - i >= f:
                return CompactTraceReq(tuple(self._trace[i:i + f]), self._since)
            i = j
        return None

    def maintain(self, fuel: int | None = None, *, policy: str = "geometric",
                 conflict_retries: int = 3, progress: ProgressCallback | None = None) -> dict:
        """Drain, evict, trim and compact in steps, each its own commit, until nothing is
        left to do or ``fuel`` updates (read by the steps) are spent.

        A merge is itself done within the fuel: one that needs more is kept half done
        (``report["merging"]``) and resumed by the next call, so each call costs about
        ``fuel`` and writes are never held up behind a long merge; its parts are committed
        when it completes.

        ``policy`` chooses the compaction: ``"geometric"`` (default, fan-in ``fan_in``) or
        ``"levels"`` (upstream's pairwise rule). A step that loses its compare-and-set to
        another writer reloads the state and applies its result there when it still fits
        (up to ``conflict_retries`` times per step, then ``CommitConflict``). Returns counts
        of what was done.

        ``progress(done, total, label)`` (``colmz.progress``) is called as the steps go, in
        updates read (the fuel's unit): ``label`` is ``"drain"``, ``"trim"`` or
        ``"compact"``; ``total`` is the work known so far (the step under way, capped by
        the fuel) and grows as compactions follow each other; a merge is stepped in about
        twenty slices so long merges report too. The last call has ``done == total`` and
        label ``"done"`` (``"merging"`` when a merge is left half done).

        Examples
        --------
        >>> import colmz
        >>> a = colmz.Arrangement.open("mem://maintain-doc")
        >>> for t in range(4):
        ...     a.write(colmz.Updates({"k": [t]}, time=[t], diff=[1])); a.seal(t + 1)
        >>> r = a.maintain()
        >>> r["drains"], r["compactions"], [b.level for b in a.trace_batches]
        (1, 0, [0])
        """
        if policy not in _POLICIES:
            raise ValueError(f"policy must be one of {_POLICIES}, got {policy!r}")
        if fuel is not None and (isinstance(fuel, bool) or not isinstance(fuel, int) or fuel < 0):
            raise ValueError(f"fuel must be a non-negative int or None, got {fuel!r}")
        if isinstance(conflict_retries, bool) or not isinstance(conflict_retries, int) or conflict_retries < 0:
            raise ValueError(f"conflict_retries must be a non-negative int, got {conflict_retries!r}")
        check_progress(progress)
        report = {"drains": 0, "trims": 0, "evictions": 0, "compactions": 0, "rows": 0,
                  "conflicts": 0, "expired": 0, "merging": False}
        self._maintain(fuel, policy, report, conflict_retries, progress)
        report["merging"] = self._job is not None
        if progress is not None:
            # a merge restarted after a conflict read some updates twice: never report less
            done = max(report["rows"], report.pop("progress_shown", 0))
            progress(done, done, "merging" if report["merging"] else "done")
        return report

    def _still_adjacent(self, batches) -> bool:
        k = len(batches)
        return any(tuple(self._trace[i:i + k]) == tuple(batches) for i in range(len(self._trace) - k + 1))

    def _maintain(self, fuel, policy, report, retries, progress=None) -> None:

        def commit_step(apply, new_keys) -> bool:
            # A step's response applied to the state and committed through the machine.
            # ``apply(state)`` is the state with the response applied, or None when it no
            # longer fits (a response is stale once another commit changed what it was
            # computed from).
            # A lost compare-and-set reloads the state and applies the same response again --
            # its parts (``new_keys``) are already written, so a long compaction is never
            # thrown away because a small write landed meanwhile. A response that no longer
            # fits has its parts deleted.
            def cmd(state):
                new = apply(state)
                return STALE if new is None else new

            out = self._apply(cmd, written=new_keys, attempts=retries + 1)
            report["conflicts"] += out.conflicts
            return out.applied

        def spent() -> bool:
            return fuel is not None and report["rows"] >= fuel

        def tell(label: str, pending: int, done: int | None = None) -> None:
            # total: what is done plus what the step under way still reads, within the fuel;
            # never less done than shown before (a merge restarted after a conflict re-reads)
            if progress is None:
                return
            done = max(report["rows"] if done is None else done, report.get("progress_shown", 0))
            report["progress_shown"] = done
            if fuel is not None:
                pending = min(pending, max(fuel - done, 0))
            progress(done, done + max(pending, 0), label)

        # 1. drain, and evict what the drain covered, in one commit
        tu, seal = self.trace_ts_upper(), self._seal
        if seal != tu and tu is not None and frontier_lt(tu, seal) and not spent():
            tell("drain", sum(b.len or 0 for b in self._unsealed))
            res = self.drain_unsealed(self.unsealed_next_drain_req())
            d = res.drained
            if d is not None:
                def apply_drain(state, d=d, res=res):
                    # still the next interval, and still sealed (no revert since)
                    if state.trace_ts_upper() != d.desc.lower or not frontier_le(d.desc.upper, state.seal):
                        return None
                    return state.handle_drain_response(res).unsealed_evict()[0]
                if commit_step(apply_drain, set(d.keys)):
                    report["drains"] += 1
                    report["rows"] += d.len or 0

        # 2. evict, then trim unsealed batches, one per commit
        def apply_evict(state):
            new, gone = state.unsealed_evict()
            return new if gone else None
        if commit_step(apply_evict, ()):
            report["evictions"] += 1
        while not spent():
            tu = self.trace_ts_upper()
            old = next((b for b in self._unsealed if tu is not None and b.ts_lower < tu), None)
            if old is None:
                break
            tell("trim", old.len or 0)
            new = self._trim(old, tu)

            def apply_trim(state, old=old, new=new, tu=tu):
                if old not in state.unsealed or state.trace_ts_upper() != tu:
                    return None
                return state.unsealed_replace(old, new)
            if not commit_step(apply_trim, set(new.keys)):
                continue
            report["trims"] += 1
            report["rows"] += old.len or 0

        # 3. compaction, one merge per commit; a merge that outlasts the fuel is kept and
        #    resumed by the next call (dropped if its inputs left the trace meanwhile)
        while not spent():
            job = self._job
            if job is not None and not self._still_adjacent(job.req.batches):
                job.abort()
                job = self._job = None
            if job is None:
                req = self.geometric_compact_req() if policy == "geometric" else self.trace_next_compact_req()
                if req is None:
                    break
                job = self._job = CompactionJob(self, req)
            before = job.rows_read
            budget = None if fuel is None else fuel - report["rows"]
            try:
                if progress is None:
                    finished = job.step(budget)
                else:
                    # the same budget in slices, reporting after each
                    job_rows = sum(b.len or 0 for b in job.req.batches)
                    piece = max(job_rows // 20, 1)
                    while True:
                        read = job.rows_read - before
                        tell("compact", job_rows - job.rows_read, report["rows"] + read)
                        left = None if budget is None else budget - read
                        if left is not None and left <= 0:
                            finished = job.done
                            break
                        finished = job.step(piece if left is None else min(piece, left))
                        if finished:
                            break
            except MissingPart:
                # another writer's commit replaced the inputs (and collected their parts)
                # since the merge started: reload and choose again
                self._job = None
                if self._log is None:
                    raise
                self.refresh()
                continue
            except BaseException:
                self._job = None
                raise
            report["rows"] += job.rows_read - before
            if not finished:
                break
            self._job = None
            res = job.result()

            def apply_compaction(state, res=res):
                new, replaced = state.handle_compact_response(res)
                return new if replaced else None
            try:
                if commit_step(apply_compaction, set(res.merged.keys)):
                    report["compactions"] += 1
            except LeaseExpired:
                # the merge ran so long that gc may take its first parts: they are dropped
                # and the merge starts over
                report["expired"] += 1
