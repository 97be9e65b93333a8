"""``GroupRecompute``: a SQL query recomputed by DuckDB over the groups a delta touches.

Design
------
Materialize's *basic* reductions (``string_agg``, ``array_agg``, ``DISTINCT`` aggregates)
and its window functions "defer to Differential's reduce operator": the affected keys are
re-reduced from the input arranged by key (``src/compute-types/src/plan/reduce.rs``). Here
the re-reduction is a SQL query run by DuckDB through ``colmz.sql.translate`` (so every
PostgreSQL meaning colmz honours holds), over the affected groups' rows only.

The query must be *group-local*: its answer over the rows of several groups is the union of
its answers over each group, and each output row carries its group's key columns under the
input's names (``SELECT g, string_agg(x, ',') FROM input_rows GROUP BY g``; ``SELECT *,
row_number() OVER (PARTITION BY g ORDER BY x) FROM input_rows``). A global group (no key
columns) is one group: its query runs over the whole input, and a global aggregate has its
row from the first step on, over an empty input too.

State: the input arranged by the group key, and the output arranged by the same key (what
was emitted for each group, so the retraction of a group's old rows is exactly what was
written -- a query whose ties DuckDB breaks arbitrarily never retracts rows it did not
emit). A step inserts the delta, reads the affected groups' rows as words (sorted and
consolidated only when some run holds a retraction: rows of positive diffs in several runs
add up as they are), decodes them once into the Arrow table the query reads (each row
repeated by its multiplicity), runs the query once over all of them, and emits ``new − old``
of those groups, found on the words of the output arrangement's rows and of the answer
(``colmz.dataflow.gather``; only the changed rows are decoded); the output arrangement takes
that change's consolidated words as a run (no second sort). Work: the affected groups' rows
(``rows_recomputed``), one DuckDB call per step with a non-empty delta (``queries``). Given
``arranged`` (a :class:`~colmz.dataflow.shared.SharedInput`: the catalog's shared arrangement
of the input by the group key, fed the step's changes before the step), the input is that
arrangement and a step inserts nothing into it (it reads only the groups' rows after the
change).

Ranking windows. A query that is only ``row_number()``, ``rank()`` or ``dense_rank()`` over
the group key (``SELECT *, f() OVER (PARTITION BY <key> ORDER BY <columns>) AS name FROM
input_rows``, found on DuckDB's parse tree: ``colmz.dataflow.ranking``) is computed
natively: the affected partitions' rows and the delta's are ranked in one sort, and each row
emits the numbers it leaves and takes -- no DuckDB call, no output arrangement (the answer
is a function of the input, ties broken by colmz's order on the row); a change that comes
in its consolidated order says so (``Updates.assume_consolidated``), so the view's sink
writes it without sorting it again. ``rows_recomputed``
counts the partitions' rows after the change, ``rows_ranked`` the entries sorted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.gather import Found, gather_words
from colmz.dataflow.keyed import KeyedArrangement, consolidate_words
from colmz.dataflow.ranking import ranked_change, recognize
from colmz.dataflow.regroup import affected_groups
from colmz.dataflow.step import Clock, as_schema, check_columns, check_delta, consolidated_at
from colmz.errors import NegativeMultiplicity
from colmz.order import decode_columns, encode_columns, pad_keys, search_rows, unify_layouts
from colmz.rollback import undone_on_error
from colmz.rows import cast_to, expand, storable
from colmz.updates import Updates

__all__ = ["INPUT_RELATION", "GroupRecompute", "output_schema"]

#: The name the input's rows are registered under for the query.
INPUT_RELATION = "input_rows"


def _run(translated: str, rows: pa.Table, time: int) -> pa.Table:
    from colmz.sql.run import run_query, session

    cur = session(external_access=False)
    try:
        cur.register(INPUT_RELATION, rows)
        table, _ = run_query(cur, translated, time)
    finally:
        cur.close()
    return table


def output_schema(schema, translated: str):
    """The columns ``translated`` answers over an empty input of ``schema``, as colmz holds
    them (``colmz.rows.storable``, as a materialized view's: a ``DECIMAL`` of scale 0 is
    ``bigint``, a scaled one refused), as ``ColumnSpec`` s."""
    schema = as_schema(schema, "schema")
    empty = pa.table({c.name: pa.array([], c.type) for c in schema})
    out = _run(translated, empty, 0)
    return as_schema({f.name: storable(f.type, "the per-group query") for f in out.schema}, "the query's answer")


class GroupRecompute:
    """The answer of a group-local query, kept by recomputing the groups each delta touches.

    Parameters
    ----------
    schema : the input's columns
    group_by : sequence of column names (empty: one global group)
    translated : str
        The query as DuckDB runs it (``colmz.sql.translate`` of the user's text), reading the
        input as :data:`INPUT_RELATION`; each output row holds its group's key under the
        input's column names.

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> from colmz.sql import translate
    >>> q = translate("SELECT g, string_agg(x, ',' ORDER BY x) AS xs FROM input_rows GROUP BY g")
    >>> r = GroupRecompute({"g": pa.int64(), "x": pa.string()}, ["g"], q)
    >>> r.step(1, colmz.Updates({"g": [1, 1, 2], "x": ["b", "a", "c"]}, time=[1] * 3, diff=[1] * 3)).to_pylist()
    [(1, 'a,b', 1, 1), (2, 'c', 1, 1)]
    >>> r.step(2, colmz.Updates({"g": [1], "x": ["a"]}, time=[2], diff=[-1])).to_pylist()
    [(1, 'a,b', 2, -1), (1, 'b', 2, 1)]
    """

    ROLLBACK_FIELDS = ("_input", "_output", "_clock")

    def __init__(self, schema, group_by: Sequence[str], translated: str, arranged=None):
        self.input_schema = as_schema(schema, "schema")
        self.group_by = check_columns(group_by, self.input_schema, "group_by")
        if not isinstance(translated, str):
            raise TypeError(f"translated must be SQL text (str), got {type(translated).__name__}")
        self.translated = translated
        self.schema = output_schema(self.input_schema, translated)
        names = [c.name for c in self.schema]
        missing = [g for g in self.group_by if g not in names]
        if missing:
            raise ValueError(f"the query's answer has columns {names}: it must hold the group key {missing}")
        types = {c.name: c.type for c in self.schema}
        for g in self.group_by:
            have = next(c.type for c in self.input_schema if c.name == g)
            if types[g] != have:
                raise ValueError(f"the query answers group column {g!r} as {types[g]}, the input holds {have}")
        self._shared = arranged is not None
        if self._shared and (tuple(arranged.key) != self.group_by or tuple(arranged.schema) != self.input_schema):
            raise ValueError(f"arranged is keyed by {list(arranged.key)} over {[c.name for c in arranged.schema]}; "
                             f"the query needs {list(self.group_by)} over {[c.name for c in self.input_schema]}")
        self._input = arranged if self._shared else KeyedArrangement(self.input_schema, self.group_by)
        # the input's payload: the columns not in the key, in schema order (the arrangement's)
        self._in_val_specs = tuple(c for c in self.input_schema if c.name not in self.group_by)
        self.ranking = recognize(translated, self.input_schema, self.group_by, self.schema) \
            if self._payload_in_order() else None
        # A ranking's changed rows come in (key, payload) order, the consolidated order of its
        # answer (no NULL word laid out, one ranking column), when the key leads the input
        # and the ORDER BY items past the key are the leading payload columns, ascending.
        if self.ranking is not None:
            order = [o for o in self.ranking.order if o.column not in self.group_by]
            self._ranked_in_order = (
                tuple(c.name for c in self.input_schema[:len(self.group_by)]) == self.group_by
                and [o.column for o in order] == [c.name for c in self._in_val_specs[:len(order)]]
                and not any(o.descending for o in order))
        # a ranking query is computed from the input alone: no output arrangement
        self._output = None if self.ranking is not None else KeyedArrangement(self.schema, self.group_by)
        # the output arrangement's payload: the columns not in the key, in schema order
        self._group_specs = tuple(c for g in self.group_by for c in self.schema if c.name == g)
        self._val_specs = tuple(c for c in self.schema if c.name not in self.group_by)
        self._empty_layout = (0,) * (len(self._val_specs) + 1)
        self._key_leads = tuple(c.name for c in self.schema[:len(self.group_by)]) == self.group_by
        self._clock = Clock()
        self.rows_recomputed = 0
        self.queries = 0
        self.rows_ranked = 0
        #: rows of the input read that were sorted to consolidate them (only when a run holds a retraction)
        self.rows_consolidated = 0

    @property
    def strategy(self) -> str | None:
        """What EXPLAIN names beside the node: ``'ranked natively (no DuckDB call)'`` for a
        ranking query (module docstring), ``None`` for DuckDB's recompute."""
        if self.ranking is None:
            return None
        return f"ranked natively: {', '.join(dict.fromkeys(self.ranking.functions))} (no DuckDB call)"

    def _payload_in_order(self) -> bool:
        """Whether the input arrangement's payload words are the input's non-key columns in
        schema order (a shared arrangement's columns may be renamed, never reordered here)."""
        if not self._shared:
            return True
        base, rename = self._input.base, dict(self._input.columns)
        got = [rename.get(c.name) for c in base.schema if c.name not in base.key]
        return got == [c.name for c in self._in_val_specs]

    @property
    def arrangements(self) -> tuple[KeyedArrangement, ...]:
        """The input and (unless :attr:`ranking`) the output, each arranged by the group key
        (work counters)."""
        return (self._input,) if self._output is None else (self._input, self._output)

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time`` for the input's change ``delta``."""
        first = self._clock.last is None
        time = self._clock.check(time)
        delta = check_delta(delta, self.input_schema, time)
        if not len(delta) and not (first and not self.group_by):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        keys, layout = affected_groups(delta, self.group_by, not self.group_by)
        if self.ranking is not None:
            with undone_on_error(self):
                result = self._ranked(keys, layout, delta, time)
                self._clock.advance(time)
            return result
        with undone_on_error(self):
            if not self._shared:  # a shared arrangement holds the delta already
                self._input.insert_checked(time, delta)
            table = self._affected_rows(keys, layout)
            self.rows_recomputed += table.num_rows
            self.queries += 1
            answer = _run(self.translated, table, time)
            if answer.column_names != [c.name for c in self.schema]:
                raise ValueError(f"the query answered columns {answer.column_names}, first "
                                 f"{[c.name for c in self.schema]}")
            n = answer.num_rows
            # a checked cast (a DECIMAL(38,0) sum beyond bigint raises, never wraps)
            new = cast_to(Updates({c.name: answer.column(c.name).cast(c.type) for c in self.schema},
                                  np.full(n, time, np.uint64), np.ones(n, np.int64), copy=False), self.schema)
            result, words = self._change(keys, layout, new, time)
            self._output.insert_words(time, *words, consolidated=True)
            self._clock.advance(time)
        return result

    def _ranked(self, keys: np.ndarray, layout, delta: Updates, time: int) -> Updates:
        """A :attr:`ranking` query's change (``colmz.dataflow.ranking``): the affected
        partitions' rows read as words (an own arrangement before the delta enters), ranked
        with the delta's in one sort; only the changed rows are decoded."""
        base = self._input.base if self._shared else self._input
        searched, found = base.keys_searched, base.rows_found
        w = base.lookup_encoded(keys, layout, keys=False)  # a row's key: its query position's
        if self._shared:
            self._input.keys_searched += base.keys_searched - searched
            self._input.rows_found += base.rows_found - found
        else:
            self._input.insert_checked(time, delta)
        n = len(delta)
        kw, _ = encode_columns([delta.column(g) for g in self.group_by], n=n)
        dv, dvl = encode_columns([delta.column(c.name) for c in self._in_val_specs], n=n)
        read = Found(w.query, w.vals, w.val_layout, w.diff)
        added = Found(search_rows(keys, kw, "left"), dv, dvl, np.asarray(delta.diff, np.int64))
        self.rows_ranked += len(read.diff) + n
        change, values, order, after = ranked_change(self.ranking, self._in_val_specs, read, added, self._shared)
        self.rows_recomputed += after
        m = len(change.diff)
        if not m:
            return Updates.empty(self.schema)
        in_order = self._ranked_in_order and not layout[-1] and not change.val_layout[-1] and len(values) == 1
        # (order None: the change comes by row then number, in that order already)
        merge = in_order and order is not None
        if merge:
            # the rows' order is (key, payload) here; with the one ranking value after it,
            # that is the consolidated order: the pieces, each sorted, merged by a stable sort
            top = int(values[0].max()) + 2
            in_order = merge = int(order.max()) < (1 << 62) // top
        if merge:
            perm = np.argsort(order * top + values[0], kind="stable")
            change = Found(change.query[perm], change.vals[perm], change.val_layout, change.diff[perm])
            values = [values[0][perm]]
        cols = dict(zip(self.group_by, decode_columns(np.ascontiguousarray(keys[change.query]), layout,
                                                      self._group_specs)))
        cols |= dict(zip((c.name for c in self._in_val_specs),
                         decode_columns(change.vals, change.val_layout, self._in_val_specs)))
        cols |= {name: pa.array(v, pa.int64()) for name, v in zip(self.ranking.names, values)}
        out = Updates({c.name: cols[c.name] for c in self.schema}, np.full(m, time, np.uint64), change.diff,
                      copy=False)
        # in order: consolidated by construction (each (row, number) once, no zero diff, in
        # the order of the answer's words), and said so -- the sink takes it without a sort
        return out.assume_consolidated("time") if in_order else consolidated_at(out, time)

    def _affected_rows(self, keys: np.ndarray, layout) -> pa.Table:
        """The affected groups' rows (after the delta), each repeated by its multiplicity, as
        the Arrow table the query reads. Read as words; consolidated (sorted) only when some
        run holds a retraction -- rows of positive diffs in several runs add up as they are."""
        if self._shared:
            base = self._input.base
            searched, found = base.keys_searched, base.rows_found
            w = base.lookup_encoded(keys, layout)
            self._input.keys_searched += base.keys_searched - searched
            self._input.rows_found += base.rows_found - found
        else:
            base = self._input
            w = base.lookup_encoded(keys, layout)
        kw, vw, diff = w.keys, w.vals, w.diff
        if len(diff) and diff.min() < 0:
            width = kw.shape[1]
            self.rows_consolidated += len(diff)
            words, diff = consolidate_words(np.hstack([kw, vw]), diff)
            kw, vw = np.ascontiguousarray(words[:, :width]), np.ascontiguousarray(words[:, width:])
        rows = base.decode_words(kw, w.key_layout, vw, w.val_layout, diff)
        if self._shared:
            rows = Updates({n: rows.column(src) for src, n in self._input.columns}, rows.time, rows.diff, copy=False)
        if len(diff) and diff.min() < 0:
            i = int(np.argmin(diff))
            row = {c.name: rows.column(c.name)[i].as_py() for c in self.input_schema}
            raise NegativeMultiplicity(f"the input retracts rows it does not hold: row {row} would have "
                                       f"multiplicity {int(diff[i])}")
        names = [c.name for c in self.input_schema]
        return expand(Updates({n: rows.column(n) for n in names}, rows.time, rows.diff, copy=False),
                      "the affected groups")

    def _change(self, keys: np.ndarray, layout, new: Updates, time: int) -> tuple[Updates, tuple]:
        """``new − old`` of the affected groups, ``old`` what the output arrangement holds for
        them: found and consolidated as words (``colmz.order``), only the changed rows decoded;
        and the same change as the output arrangement's words ``(keys, key layout, payload,
        payload layout, diff)``, sorted and consolidated (inserted without sorting again)."""
        old = gather_words(self._output, keys, layout, self._empty_layout)
        n = len(new)
        kw, kl = encode_columns([new.column(g) for g in self.group_by], n=n)
        vw, vl = encode_columns([new.column(c.name) for c in self._val_specs], n=n)
        kl2, vl2 = unify_layouts(kl, layout), unify_layouts(vl, old.val_layout)
        words = np.vstack([
            np.hstack([pad_keys(keys[old.query], layout, kl2), pad_keys(old.vals, old.val_layout, vl2)]),
            np.hstack([pad_keys(kw, kl, kl2), pad_keys(vw, vl, vl2)])])
        words, diff = consolidate_words(words, np.concatenate([-old.diff, np.ones(n, np.int64)]))
        width = sum(kl2)
        kw, vw = np.ascontiguousarray(words[:, :width]), np.ascontiguousarray(words[:, width:])
        cols = dict(zip(self.group_by, decode_columns(kw, kl2, self._group_specs)))
        cols |= dict(zip((c.name for c in self._val_specs), decode_columns(vw, vl2, self._val_specs)))
        out = Updates({c.name: cols[c.name] for c in self.schema}, np.full(len(diff), time, np.uint64), diff,
                      copy=False)
        # Sorted as words of (group key, rest): the order of a consolidated delta when the key
        # leads the columns and no NULL word is laid out (else sorted again).
        if not (self._key_leads and not kl2[-1] and not vl2[-1]):
            out = consolidated_at(out, time)
        return out, (kw, kl2, vw, vl2, diff)

    def __repr__(self) -> str:
        return f"GroupRecompute(group_by={list(self.group_by)}, {self.translated!r})"
