"""The continual-task model: the sink state machine and the time loop.

Design
------
A continual task watches one *input* collection. At every time ``T`` where the input
receives inserts, it evaluates its *statements* -- ``INSERT`` and ``DELETE`` against its own
*output* -- with all reads at ``T``, and commits the change ``ΔO(T)`` at ``T``. Unlike a
materialized view it never revisits the past when a reference changes later, and restarting
it costs nothing proportional to the input's history. The model is the one of
``src/compute/src/render/continual_task.rs`` upstream:

* The input's name, inside the statements, means the rows **inserted** at ``T`` (each
  repeated by its multiplicity); deletions in the input are dropped.
* Any other collection is a *reference*, read with its full contents as of ``T``.
* The output's own name reads the output as of ``T - 1`` (empty before the first time).
* Statements are evaluated **independently** against ``O@(T-1)`` and their contributions
  summed: ``INSERT INTO o q`` adds ``+q``, ``DELETE FROM o WHERE p`` adds ``-(rows of
  O@(T-1) satisfying p)``. ``statements="sequential"`` (an explicit option, not upstream's
  behaviour) lets each statement see the previous statements' changes instead.
* Writes happen only at *append times*: times where the input has a positive diff and some
  statement reads the input. At other times the output's upper advances with empty writes.
* On creation at ``I`` with ``snapshot=True`` (the default, as upstream) the input's
  contents at ``I`` are presented as inserts at ``I``; with ``snapshot=False`` processing
  starts at ``I + 1``. A task given an output that already has history *restarts*: with
  ``A = upper - 1`` it never replays a snapshot, reads the output once as of ``A`` and the
  input's changes from ``A + 1`` on, and first writes at ``A + 1``.

Batches. Statements run in DuckDB, whose fixed cost per query (planning, registering the
Arrow tables) dwarfs a small time's work, so when ``run`` has several consecutive times to
process it hands them to :mod:`colmz.continual.batched`, which evaluates them together when
that provably gives the same output (:attr:`ContinualTask.batchable`: independent SQL
statements, no ``INSERT`` reading the output, every ``DELETE`` predicate reading the output
only through the row it tests), one query per statement per batch. This module writes each
batch's ``ΔO`` in one compare-and-append. Whatever fails in a batch -- a guard rail, a SQL
error at one time, a racing writer -- leaves it unwritten and the time-by-time loop here,
the reference semantics, takes over from its first time, so errors surface exactly where
the loop raises them. ``batch=False`` always uses the loop.

The write path is upstream's sink state machine, :class:`SinkState`: append times and the
accumulated task output are fed in, and ``process`` says what to write next (an empty write
advancing the upper, or the consolidated updates at one time); each write is a
compare-and-append against the output, so two tasks racing on one output write each time once.

Storage sits behind the collection protocol of :mod:`colmz.collection` (``schema``,
``since``, ``upper``, ``compare_and_append``, ``snapshot``, ``updates``), whose in-memory
:class:`~colmz.collection.MemoryCollection` is the default output; a durable collection
(``colmz.arrangement.collection.ArrangementCollection``) provides the same members.
``MemoryCollection``, ``RowCounts`` and ``UpperMismatch`` are re-exported here (and from
:mod:`colmz.continual`), beside the tasks that take them.

Guard rails (each raises before anything is written): the output may not be the input
(``ValueError``); an ``INSERT`` whose result types differ from the task's columns is
converted inside its own query by PostgreSQL's assignment casts (:mod:`colmz.sql.assign`), and
one whose columns do not match the task's (their number, or a type without an assignment cast)
raises :class:`colmz.SchemaError`; a ``DELETE`` that would leave a multiplicity negative raises
:class:`colmz.errors.NegativeMultiplicity`; a write at time ``2**64 - 1``, whose upper would be past the
last time, raises ``OverflowError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from colmz.collection import MemoryCollection, RowCounts, UpperMismatch, as_collection
from colmz.continual import batched
from colmz.continual.batched import CompiledStatement, TaskDuckDB
from colmz.errors import NegativeMultiplicity
from colmz.frontier import (
    MAX_TIME,
    Frontier,
    check_time,
    frontier_le,
    frontier_lt,
    meet,
)
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec
from colmz.rows import at_time, expand, relation_rows, rows_to_updates, schema_of
from colmz.sql.column_rules import column_type, rules_applied
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.names import display_name
from colmz.sql.write import check_jsonb_values, is_json, is_jsonb, varchar_lengths
from colmz.updates import SchemaError, Updates

__all__ = [
    "ContinualTask",
    "Delete",
    "Insert",
    "MemoryCollection",
    "RowCounts",
    "SinkState",
    "Statement",
    "UpperMismatch",
]

Statement = Callable[[Mapping[str, pa.Table], Mapping[str, pa.Table], pa.Table], object]


# ----------------------------------------------------------------------------- sink state


class SinkState:
    """The continual-task sink's decisions: what to write next, and up to which upper.

    Fed with the times at which the task must write (``append_times``, complete below
    ``append_times_progress``), the accumulated task output (``to_append``, complete below
    ``to_append_progress``) and what is known written (``output_progress``), :meth:`process`
    returns ``(new_upper, updates)`` -- an empty write that only advances the upper, or the
    consolidated output at the next append time -- or ``None`` when nothing can be written.
    A task writes only at append times; every other time is covered by empty writes.

    >>> s = SinkState()
    >>> s.append_times.add(0); s.append_times_progress = 2; s.to_append_progress = 2
    >>> s.to_append.append(Updates({"k": ["a"]}, time=[0], diff=[1]))
    >>> new_upper, u = s.process(); new_upper, u.to_pylist()
    (1, [('a', 0, 1)])
    """

    #: Everything: a failed task call rolls the sink's decisions back (``colmz.rollback``).
    ROLLBACK_FIELDS = ("append_times", "append_times_progress", "to_append",
                       "to_append_progress", "output_progress")

    def __init__(self) -> None:
        self.append_times: set[int] = set()
        self.append_times_progress: Frontier = 0
        self.to_append: list[Updates] = []
        self.to_append_progress: Frontier = 0
        self.output_progress: Frontier = 0

    def process(self) -> tuple[Frontier, Updates | None] | None:
        # Times already written (by us or a racing writer) need nothing more.
        for t in sorted(self.append_times):
            if frontier_le(self.output_progress, t):
                break
            self.append_times.discard(t)
        pending = [t for t in self.append_times if not frontier_le(self.append_times_progress, t)]
        if not pending:
            # No append time in [output_progress, append_times_progress): an empty write
            # may advance the upper that far.
            if frontier_lt(self.output_progress, self.append_times_progress):
                return self.append_times_progress, None
            return None
        w = min(pending)
        if frontier_le(self.to_append_progress, w):
            # Not all the output at w is known yet; the upper can still move up to w.
            if self.output_progress is not None and self.output_progress < w:
                return w, None
            return None
        if w == MAX_TIME:
            raise OverflowError(f"a write at time {w} needs an upper past 2**64-1")
        if not self.to_append:
            return w + 1, None
        acc = consolidate(concat(self.to_append), since=w)
        self.to_append = [acc]
        k = int(np.searchsorted(acc.time, np.uint64(w), side="right"))
        return w + 1, acc.slice(0, k)


# ----------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Insert:
    """``INSERT INTO output <query>``: ``query`` is SQL text or a callable.

    A callable is called as ``query(inputs, refs, self_view)`` with Arrow tables (``inputs``
    and ``refs`` map names to tables) and returns the rows to insert.
    """

    query: str | Statement


@dataclass(frozen=True)
class Delete:
    """``DELETE FROM output WHERE <predicate>``: SQL predicate text (``None`` for all rows), or
    a callable returning the rows of ``self_view`` to delete."""

    predicate: str | Statement | None = None


class ContinualTask:
    """A continual task: statements run at every time its input receives inserts.

    Parameters
    ----------
    name : str
        The output's name (how statements refer to it: as of ``T - 1``).
    input : mapping of one name to a collection (or ``colmz.Updates``)
        The input; inside statements its name is the rows inserted at ``T``.
    body : sequence of statements
        Each an :class:`Insert`, a :class:`Delete`, or SQL text ``INSERT INTO <name> ...`` /
        ``DELETE FROM <name> [WHERE ...]`` (SQL needs the ``sql`` extra: DuckDB).
    references : mapping of names to collections (or ``Updates``), optional
        Other collections statements read, as of ``T``.
    columns : mapping of column name to Arrow type (or SQL type), optional
        The output's columns; inferred from the first SQL ``INSERT`` when omitted. A column
        given as SQL type ``jsonb`` holds PostgreSQL's jsonb text: what an ``INSERT``
        writes there is read as jsonb (keys sorted, spacing normalised); one given as
        ``json`` keeps the text written, once it reads as JSON (else PostgreSQL's
        ``invalid input syntax for type json``).
    snapshot : bool, default True
        On a first start, present the input's contents at ``as_of`` as inserts at ``as_of``.
    statements : ``"independent"`` (default, as upstream) or ``"sequential"``
        Whether each statement sees ``O@(T-1)`` or also the earlier statements' changes.
    output : collection, optional
        Where to write. One with history (upper > 0, and past ``as_of`` when given) is
        resumed: no snapshot, first write at its upper. A new in-memory collection when
        omitted.
    as_of : int, optional
        The initial as-of ``I``; defaults to the input's last complete time on a first start.
    connection : DuckDB connection, optional
        Where SQL statements run (a new ``colmz.sql.session()`` when omitted: replacement
        scans off, configuration locked). A connection given here is used as it is.
    batch : bool, default True
        Evaluate a run of consecutive times in one query per statement when the statements
        allow it (see :attr:`batchable`), and a single time's statements in one query when
        that is exact; ``False`` runs every statement on its own at every time -- the
        reference, which gives the same output.
    column_kinds : mapping of name to a sequence of kinds, optional
        The SQL kind (``"jsonb"``, ``"json"``, ``"text"``, ``"string"``: a string of none of
        these known, or ``None``: not a string or not known) of each
        column, in schema order, of the collections named (the input, references, the
        output). colmz holds jsonb, json and text alike as strings; with the kinds known,
        the SQL statements follow PostgreSQL's rules that hang on them, as a catalog's
        queries do (:mod:`colmz.sql.jsonbcols`: a jsonb column compared with a string
        literal compares jsonb, ``||`` of jsonb columns merges them, a jsonb operator of a
        text column is PostgreSQL's error). The output's columns given as SQL type ``jsonb``
        or ``json`` in ``columns`` are known without it.

    Examples
    --------
    >>> events = MemoryCollection({"k": pa.int64()})
    >>> task = ContinualTask("seen", {"events": events},
    ...                      [Insert(lambda ins, refs, me: ins["events"])],
    ...                      columns={"k": pa.int64()})
    >>> events.compare_and_append(Updates({"k": [1, 1]}, time=[1, 1], diff=[1, 1]), 0, 2)
    >>> task.run()
    >>> task.output.snapshot(1).to_pylist(), task.output.upper
    ([(1, 1, 2)], 2)
    """

    #: The task's progress, for ``colmz.rollback``: the sink's decisions (rolled back in
    #: place), the output view, the next time, the pending snapshot and the stats (a
    #: rolled-back run did not happen: its times are processed again). Not its collections:
    #: whoever owns them (a catalog) rolls them back.
    ROLLBACK_FIELDS = ("_sink", "_view", "_next", "_pending_snapshot_as_of", "stats")

    def __init__(
        self,
        name: str,
        input: Mapping[str, object],
        body: Sequence[Insert | Delete | str],
        *,
        references: Mapping[str, object] | None = None,
        columns=None,
        snapshot: bool = True,
        statements: str = "independent",
        output=None,
        as_of: int | None = None,
        connection=None,
        batch: bool = True,
        column_kinds: Mapping[str, Sequence[str | None]] | None = None,
    ):
        # A name is a str, or (a catalog's object outside its default schema) a qualified
        # name: a tuple of str parts, colmz.sql.QualifiedName, which statements may write
        # qualified or, as the relation's own name, by its last part.
        if not (isinstance(name, str) and name) and not (
            isinstance(name, tuple) and name and all(isinstance(p, str) and p for p in name)
        ):
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if not isinstance(input, Mapping) or len(input) != 1:
            raise ValueError(
                f"input must map exactly one name to a collection (a continual task has one "
                f"input), got {type(input).__name__} of {len(input) if isinstance(input, Mapping) else '?'}"
            )
        (input_name, input_coll), = input.items()
        if input_name == name:
            raise ValueError(f"continual task output {name!r} is not allowed to be its input")
        if statements not in ("independent", "sequential"):
            raise ValueError(f"statements must be 'independent' or 'sequential', got {statements!r}")
        if not isinstance(snapshot, bool):
            raise TypeError(f"snapshot must be a bool, got {snapshot!r}")
        if not isinstance(batch, bool):
            raise TypeError(f"batch must be a bool, got {batch!r}")
        refs = dict(references or {})
        if name in refs:
            raise ValueError(f"references name the output {name!r}: it is read as of T-1 already")
        if input_name in refs:
            raise ValueError(f"references name the input {input_name!r}: within the task it is the inserts at T")
        self.name = name
        self.input_name = input_name
        self.input = as_collection(input_coll, "input")
        if output is not None and output is self.input:
            raise ValueError(f"continual task output {name!r} is not allowed to be its input")
        self.references = {k: as_collection(v, f"references[{k!r}]") for k, v in refs.items()}
        self.statements = statements
        self.snapshot = snapshot
        # each relation's own columns (the output's when known)
        schemas = {input_name: self.input.schema, **{k: v.schema for k, v in self.references.items()}}
        if columns is not None or output is not None:
            schemas[name] = schema_of(columns) if columns is not None else output.schema
        # Each collection a statement names is registered with DuckDB under a name of colmz's
        # (DuckDB folds identifiers' case; "T" and t are two collections here); statements are
        # translated told the collections' array columns. An output of columns not given is
        # read only by a self-referencing task, whose columns are its input's (infer_columns).
        self.duckdb = TaskDuckDB([name, input_name, *refs], connection, batched.task_relations(
            {**schemas, name: schemas.get(name, self.input.schema)}))
        self.compiled = [self._compile(s, i) for i, s in enumerate(body)]
        # PostgreSQL's rules that hang on column types (colmz.sql.column_rules: a set
        # operation's string literal, float, jsonb and text, interval and array columns'), in
        # one typing pass over each statement, typed by the columns of every relation a
        # statement may read: the input, the references and the output (its columns given,
        # else the input's, which are a self-referencing task's: infer_columns)
        self._column_rules(dict(column_kinds or {}), columns,
                           {**schemas, name: schemas.get(name, tuple(self.input.schema))})
        # the columns of every relation a statement may read (the output's when given)
        read_schemas = [*self.input.schema, *(c for v in self.references.values() for c in v.schema)]
        if columns is not None:
            read_schemas.extend(schema_of(columns))
        elif output is not None:
            read_schemas.extend(output.schema)
        # Append times come from the input only if some statement reads it.
        self.reads_input = any(b.reads(input_name) for b in self.compiled)
        if columns is not None:
            _check_varchar(columns)
            schema = schema_of(columns)
        elif output is not None:
            schema = tuple(output.schema)
        else:
            schema = batched.infer_columns(self)
        self.schema = schema
        self._check_kinds(dict(column_kinds or {}), schemas)
        for b in self.compiled:
            b.jsonb = _jsonb_positions(columns)
            b.json = _jsonb_positions(columns, is_json)
            if b.kind == "insert" and b.jsonb and b.text:
                # PostgreSQL's type error of a text expression written to a jsonb column;
                # only a visibly text one here: a string column read may be json or jsonb
                # (the collections do not say), so none is taken for text
                names = [c.name for c in schema]
                strings = frozenset(c.name.lower() for c in (*read_schemas, *schema)
                                    if pa.types.is_string(c.type) or pa.types.is_large_string(c.type))
                try:
                    check_jsonb_values(b.text, [n if i in b.jsonb else None for i, n in enumerate(names)],
                                       frozenset(), strings)
                except SQLError as e:
                    raise SQLError(f"{b.label}: {e}") from None
        if output is None:
            output = MemoryCollection(schema)
        elif [c.name for c in output.schema] != [c.name for c in schema]:
            raise SchemaError(
                f"output has columns {[c.name for c in output.schema]}, the task {[c.name for c in schema]}"
            )
        self.output = output
        batched.check_statements(self)
        # One DuckDB query per time for all statements, where that is exact (else None).
        self._union = batched.union_query(self) if batch else None
        self.stats = {"times_processed": 0, "writes": 0, "skipped_writes": 0,
                      "batches": 0, "batched_times": 0, "batch_fallbacks": 0,
                      "union_times": 0}
        # The statements lifted to evaluate many times in one query each (None: the task is
        # not batchable and always runs time by time).
        self._lifted = batched.lift(self) if batch else None
        self._sink = SinkState()
        self._view: Updates | None = None
        if as_of is not None:
            as_of = check_time(as_of, "as_of")
        if output.upper is not None and output.upper > 0 and (as_of is None or output.upper > as_of):
            # Restart: resume at the output's upper; the snapshot is never replayed. (An
            # output not yet past the initial as-of given has not written it: a first start.)
            self.initial_as_of = None
            self.as_of = output.upper - 1
            self._next = output.upper
            self._pending_snapshot_as_of = None
            self._sink.output_progress = output.upper
        elif output.upper is None:
            raise ValueError(f"output {name!r} is sealed (upper is the empty frontier)")
        else:
            if as_of is None:
                up = self.input.upper
                as_of = self.input.since if up is None else max(up - 1, self.input.since)
            as_of = check_time(as_of, "as_of")
            self.initial_as_of = self.as_of = as_of
            self._next = as_of if snapshot else as_of + 1
            # the as-of of the input's snapshot still to present as inserts, or None
            self._pending_snapshot_as_of = as_of if snapshot else None
            # Bootstrap: the empty output becomes readable below the first write.
            if output.upper < as_of:
                output.compare_and_append(Updates.empty(schema), output.upper, as_of)
            self._sink.output_progress = as_of
            self._view = Updates.empty(schema)  # O@(I-1) is empty

    # ------------------------------------------------------------------ setup

    def _column_rules(self, kinds: dict, columns, schemas: dict) -> None:
        # the rules of column types (colmz.sql.column_rules) over every statement; a string
        # column's kind is the one ``kinds`` (column_kinds=) gives, the output's from its
        # jsonb / json SQL types in ``columns`` otherwise (a kind not of one per column is
        # refused once the task's columns are known: _check_kinds)
        if self.name not in kinds and columns is not None:
            declared = dict.fromkeys(_jsonb_positions(columns), "jsonb")
            declared.update(dict.fromkeys(_jsonb_positions(columns, is_json), "json"))
            kinds[self.name] = [declared.get(i) for i in range(len(schemas[self.name]))]
        relations = []
        for k, v in schemas.items():
            told = kinds.get(k)
            told = told if told is not None and len(told) == len(v) else [None] * len(v)
            relations.append((self.duckdb.registered_as[k], tuple(
                (c.name.lower(), *column_type(c.type, kind)) for c, kind in zip(v, told))))
        for b in self.compiled:
            if b.sql is not None:
                try:
                    b.sql, fired = rules_applied(b.sql, tuple(relations))
                except SQLError as e:
                    raise type(e)(f"{b.label}: {e}") from None  # an UnsupportedSQL stays one
                # (a query rebuilt from the statement's text would lose these rules; the float
                # rules' are not counted, as they never were)
                b.kind_rules = bool(fired - {"float"})

    def _check_kinds(self, kinds: dict, schemas: dict) -> None:
        # column_kinds= gives a kind for each column of a relation the task reads (none
        # checked when no kind is told)
        if not any(k for ks in kinds.values() for k in ks):
            return
        schemas = {**schemas, self.name: self.schema}
        for k, ks in kinds.items():
            if k not in schemas or len(ks) != len(schemas[k]):
                raise ValueError(f"column_kinds[{k!r}] must give a kind for each of the {len(schemas.get(k, ()))} "
                                 f"columns of a relation the task reads, got {list(ks)!r}")

    def _compile(self, s, i: int) -> CompiledStatement:
        if isinstance(s, str):
            from colmz.sql import (
                DeleteStatement,
                InsertStatement,
                as_qualified,
                parse,
                resolve_item,
                sql_name,
            )

            parsed = parse(s)
            if len(parsed) != 1 or not isinstance(parsed[0], (InsertStatement, DeleteStatement)):
                raise ValueError(f"body[{i}] must be one INSERT or DELETE statement, got {s!r}")
            p = parsed[0]
            # Names resolve as Materialize's: INSERT INTO x.t does not write a task named t.
            if resolve_item((*p.qualifier, p.table)) != as_qualified(self.name):
                written = sql_name((*p.qualifier, p.table)) if p.qualifier else p.table
                raise ValueError(f"body[{i}] writes {written!r}; a continual task writes only its output {display_name(self.name)!r}")
            if isinstance(p, InsertStatement):
                if p.columns is not None:
                    raise ValueError(f"body[{i}]: a column list in a continual task INSERT is not supported")
                s = Insert(p.query)
            else:
                s = Delete(p.where)
        if isinstance(s, Insert):
            return CompiledStatement("insert", s.query, i, self.name, self.duckdb)
        if isinstance(s, Delete):
            return CompiledStatement("delete", s.predicate, i, self.name, self.duckdb)
        raise TypeError(f"body[{i}] must be Insert, Delete or SQL text, got {type(s).__name__}")

    def bind(self, translated: str) -> str:
        """Translated SQL with the collections it names bound to their registered names."""
        return self.duckdb.bind(translated)

    # ------------------------------------------------------------------ running

    @property
    def frontier(self) -> Frontier:
        """Times below this are complete in the input and every reference."""
        return meet(self.input.upper, *(r.upper for r in self.references.values()))

    def run(self) -> None:
        """Process every complete time not yet processed, then advance the output's upper.

        A call that raises writes nothing for the time that failed (earlier times stay
        written) and can be retried.
        """
        frontier = self.frontier
        if not frontier_lt(self._next, frontier):
            return
        todo: list[tuple[int, Updates]] = []
        if self.reads_input:
            snap_as_of = self._pending_snapshot_as_of
            if snap_as_of is not None and snap_as_of == self._next:
                snap = self.input.snapshot(snap_as_of)
                todo.append((snap_as_of, _positives(snap)))
                lower = snap_as_of + 1
            else:
                lower = self._next
            if frontier is None or lower < frontier:
                changes = _positives(self.input.updates(lower, frontier))
                todo.extend(_by_time(changes))
        todo = [(t, u) for t, u in todo if len(u)]
        done = self._run_batched(todo) if self._lifted is not None and len(todo) > 1 else 0
        for t, inserts in todo[done:]:
            if frontier_lt(t, self.output.upper) or self.output.upper is None:
                # Already written (by a racing task on the same output): nothing to do.
                self._view = None
                continue
            self._step(t, inserts)
        self._pending_snapshot_as_of = None
        self._sink.append_times_progress = frontier
        self._sink.to_append_progress = frontier
        self._drain()
        self._next = frontier

    # ------------------------------------------------------------------ batches

    @property
    def batchable(self) -> bool:
        """Whether runs of consecutive times are evaluated in one query per statement.

        They are when statements are independent (the default), all are SQL, no ``INSERT``
        reads the output, and every ``DELETE`` predicate reads the output only through the
        row it tests (``name.column``, or bare columns): then ``ΔO(T)`` depends on the
        output only through which earlier rows are still there, and a batch computes, for
        each row, the first time a ``DELETE`` matches it (the proof is in ``_run_batched``).
        """
        return self._lifted is not None

    def _run_batched(self, todo: list[tuple[int, Updates]]) -> int:
        """Evaluate and write ``todo``'s times batch by batch; returns how many were done.

        Each batch's ``ΔO`` comes from :meth:`colmz.continual.batched.Lifted.evaluate`
        (which proves it equal to the time-by-time loop's) and is written in one
        compare-and-append covering the batch's times.

        Any failure (a SQL error at some time, a guard rail, a racing writer) leaves the
        failing batch unwritten and returns its start: the time-by-time loop then takes over
        and raises, or skips, exactly where it would have.
        """
        done = 0
        try:
            segments = self._lifted.segments(self, todo)
        except Exception:  # e.g. a reference whose changes were compacted away: the loop reads
            self.stats["batch_fallbacks"] += 1  # it as of each time instead
            return 0
        for seg in segments:
            if len(seg) < 2:
                return done
            t0 = seg[0][0]
            s = self._sink
            s.append_times_progress = t0
            s.to_append_progress = t0
            self._drain()
            if self.output.upper != t0:
                return done  # a racing writer is ahead: the loop skips what it wrote
            try:
                view = self._self_view(t0)
                delta = self._lifted.evaluate(self, seg, view)
            except Exception:
                self.stats["batch_fallbacks"] += 1
                return done
            if delta is None:
                self.stats["batch_fallbacks"] += 1
                return done
            t_last = seg[-1][0]
            try:
                self.output.compare_and_append(delta, t0, t_last + 1)
            except UpperMismatch:
                self._view = None
                return done
            self.stats["writes"] += 1
            self.stats["batches"] += 1
            self.stats["batched_times"] += len(seg)
            self.stats["times_processed"] += len(seg)
            s.output_progress = self.output.upper
            self._view = consolidate(concat([at_time(view, t_last), delta]), since=t_last) if len(delta) else at_time(view, t_last)
            done += len(seg)
        return done

    def _step(self, t: int, inserts: Updates) -> None:
        if t == MAX_TIME:
            raise OverflowError(
                f"continual task {display_name(self.name)!r}: a write at time {t} needs an upper past 2**64-1"
            )
        s = self._sink
        # Everything below t is settled: the output's upper may move to t first, which
        # makes O@(t-1) readable.
        s.append_times_progress = t
        s.to_append_progress = t
        self._drain()
        view = self._self_view(t)
        delta, after = self._evaluate(t, inserts, view)
        s.append_times.add(t)
        s.to_append.append(delta)
        s.append_times_progress = t + 1
        s.to_append_progress = t + 1
        self._view = after
        self._drain()
        # As upstream, the inserts of T are retracted at T + 1, so the sink's accumulated
        # output holds only the current time's change.
        if len(delta):
            s.to_append.append(at_time(delta, t + 1).negated())
        self.stats["times_processed"] += 1

    def _self_view(self, t: int) -> Updates:
        """``O@(t-1)``: kept from the previous step, or read once (on start or restart)."""
        if self._view is None:
            if t == 0 or t - 1 < self.output.since:
                self._view = Updates.empty(self.schema)
            else:
                self._view = self.output.snapshot(t - 1)
        return self._view

    def _drain(self) -> None:
        s = self._sink
        while (r := s.process()) is not None:
            new_upper, data = r
            data = data if data is not None else Updates.empty(self.schema)
            expected = self.output.upper
            wrote = False
            while frontier_lt(expected, new_upper):
                try:
                    self.output.compare_and_append(data, expected, new_upper)
                    wrote = True
                    break
                except UpperMismatch as e:
                    expected = e.current
            if wrote:
                self.stats["writes"] += 1
            elif len(data):
                # Someone else (a racing task) wrote this time: trust their output.
                self.stats["skipped_writes"] += 1
                self._view = None
            s.output_progress = self.output.upper

    def _evaluate(self, t: int, inserts: Updates, view: Updates) -> tuple[Updates, Updates]:
        """``ΔO(t)`` and ``O@t``; raises before anything is written."""
        inputs = {self.input_name: expand(inserts, f"input {self.input_name!r}")}
        refs_cache: dict[str, pa.Table] = {}

        def ref(name):
            if name not in refs_cache:
                refs_cache[name] = relation_rows(self.references[name], t, f"reference {name!r}")
            return refs_cache[name]

        view_t = at_time(view, t)
        view_tbl = expand(view_t, f"output {display_name(self.name)!r}")
        parts = []
        if self._union is not None:
            parts = batched.evaluate_union(self, self._union, t, inputs, ref, view_tbl)
        with self.duckdb.registered() as reg:
            for b in self.compiled if not parts else ():
                needed = {k: ref(k) for k in self.references if b.reads(k)}
                rows = b.rows(reg, t, inputs, needed, view_tbl, self.schema)
                if b.kind == "delete" and b.sql is None:
                    _check_subset(rows, view_t, b.label)
                contrib = rows_to_updates(rows, t, 1 if b.kind == "insert" else -1)
                parts.append(contrib)
                if self.statements == "sequential":
                    view_t = consolidate(concat([view_t, contrib]))
                    _check_nonnegative(view_t, display_name(self.name), b.index)
                    view_tbl = expand(view_t, f"output {display_name(self.name)!r}")
        if not parts:
            return Updates.empty(self.schema), view
        delta = consolidate(concat(parts))
        if self.statements == "sequential":
            return delta, view_t
        after = consolidate(concat([at_time(view, t), delta])) if len(delta) else view
        _check_nonnegative(after, display_name(self.name), None)
        return delta, after

    # ------------------------------------------------------------------ display

    def __repr__(self) -> str:
        refs = f", references={sorted(self.references)}" if self.references else ""
        kinds = ", ".join(kind for kind, _ in self._statement_texts())
        return (f"ContinualTask({display_name(self.name)!r} ON INPUT {self.input_name!r}{refs}, frontier="
                f"{'[]' if self.frontier is None else self.frontier}, statements=[{kinds}], "
                f"columns={[s.name for s in self.schema]})")

    def _repr_html_(self) -> str:
        from colmz.display import continual_task_html

        return continual_task_html(self, self._statement_texts())

    def _statement_texts(self) -> list[tuple[str, str]]:
        """Each statement's kind and text (a callable's name), in body order."""
        out = []
        for b in self.compiled:
            if b.fn is not None:
                text = f"<callable {getattr(b.fn, '__name__', type(b.fn).__name__)}>"
            elif b.kind == "delete" and b.text is None:
                text = "(all rows)"
            else:
                text = b.text or ""
            out.append((b.kind.upper(), text))
        return out



def _jsonb_positions(columns, kind=is_jsonb) -> tuple[int, ...]:
    # The positions of the columns given as SQL type jsonb (``kind=is_json``: json; colmz
    # holds both as text).
    if columns is None:
        return ()
    items = list(columns.items()) if isinstance(columns, Mapping) else [
        (c.name, c.type) if isinstance(c, ColumnSpec) else tuple(c) for c in columns]
    return tuple(i for i, (_, t) in enumerate(items) if isinstance(t, str) and kind(t))


def _check_varchar(columns) -> None:
    # A varchar(n) output column would hold longer text: an INSERT's values are not measured
    # against n here (a catalog table's are: colmz.sql.write.fit_lengths).
    items = list(columns.items()) if isinstance(columns, Mapping) else [
        (c.name, c.type) if isinstance(c, ColumnSpec) else tuple(c) for c in columns]
    for name, t in items:
        if isinstance(t, str) and varchar_lengths([t]):
            raise UnsupportedSQL(f"continual task column {name!r} of type {t} is not supported by colmz (its "
                                 "length is not enforced on INSERT): use TEXT or VARCHAR")


def _check_nonnegative(contents: Updates, name: str, index: int | None) -> None:
    d = contents.diff
    if len(d) and d.min() < 0:
        i = int(np.argmax(d < 0))
        row = contents.slice(i, i + 1).to_pylist()[0][:-2]
        where = f" after statement {index + 1}" if index is not None else ""
        raise NegativeMultiplicity(
            f"continual task {name!r}: DELETE would leave row {row} with multiplicity "
            f"{int(d[i])}{where} (statements are evaluated independently against the output as "
            "of T-1; two DELETEs of one row retract it twice)"
        )


def _check_subset(rows: pa.Table, view: Updates, what: str) -> None:
    if rows.num_rows == 0:
        return
    t = int(view.time[0]) if len(view) else 0
    both = consolidate(concat([view, rows_to_updates(rows, t, -1)]))
    if len(both) and both.diff.min() < 0:
        i = int(np.argmax(both.diff < 0))
        row = both.slice(i, i + 1).to_pylist()[0][:-2]
        raise NegativeMultiplicity(f"{what} returned row {row} that the output does not hold")



def _positives(u: Updates) -> Updates:
    d = u.diff
    if len(d) == 0 or d.min() > 0:
        return u
    return u.take(np.flatnonzero(d > 0))


def _by_time(u: Updates) -> Iterable[tuple[int, Updates]]:
    if len(u) == 0:
        return []
    order = np.argsort(u.time, kind="stable")
    if not np.all(order[:-1] < order[1:]):
        u = u.take(order)
    times = u.time
    cuts = np.flatnonzero(np.diff(times)) + 1
    bounds = [0, *cuts.tolist(), len(u)]
    return [(int(times[a]), u.slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]
