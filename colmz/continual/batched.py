"""A continual task's statements evaluated in DuckDB: per time, per time in one union, and
over a batch of times in one query per statement.

Design
------
:mod:`colmz.continual.model` holds upstream's semantics -- collections, the sink state
machine, the time loop -- and asks this module for the statements' rows. Here:

* :class:`TaskDuckDB` is one task's DuckDB side: its connection (``colmz.sql.session()``
  unless one is given), the names its collections are registered under
  (:func:`colmz.sql.relation_name`: DuckDB folds identifiers' case, so ``"T"`` and ``t``
  would be one table), the array columns of its collections that every statement is
  translated with (:func:`task_relations`: a slice or subscript of one is PostgreSQL's, as
  in a catalog's queries), and the Arrow tables left registered between steps on a
  connection of its own (:class:`RegisteredTables`). Every SQL text of a statement is
  translated whole with them: a ``DELETE``'s predicate inside its ``SELECT * FROM output
  WHERE (...)``, so the output's columns it names resolve to the output's.
* :class:`CompiledStatement` is one statement ready to run: SQL translated and bound once,
  or a callable. :func:`infer_columns` and :func:`check_statements` run them once on empty
  tables at creation (the plan-time check).
* :func:`union_query` / :func:`evaluate_union`: at one time, every statement in one query
  (a ``UNION ALL`` tagged by statement) when that is exact.
* :func:`lift` / :class:`Lifted`: every statement once over a batch of consecutive times
  (``LATERAL`` per time), when the statements allow it; :meth:`Lifted.evaluate` gives
  ``ΔO`` at every time of the batch, and the proof that it equals the time-by-time loop.

Every SQL text comes from :mod:`colmz.sql` (:mod:`colmz.sql.lift` writes the lifted and
union queries); this module concatenates none. Whatever fails here is the caller's signal
to run the time-by-time loop, the reference semantics, which raises what it raises.
"""

from __future__ import annotations

import bisect
import re
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from colmz.dataflow.sqlmap import array_relations
from colmz.frontier import MAX_TIME
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec
from colmz.rows import at_time, conform, empty_table, expand, relation_rows, storable
from colmz.sql import (
    RESERVED_PREFIX,
    QualifiedName,
    SQLError,
    bind_relations_as,
    check_expression,
    reading_names,
    referenced_names,
    relation_name,
    relation_word,
    rename_like_postgres,
    resolve_item,
    run_query,
    select_list_is_empty,
    select_where,
    session,
    task_statement,
    tokenize,
    translate,
    uses_now,
)
from colmz.sql import lift as sql_lift
from colmz.sql.write import arity_message, as_jsonb, assignment_query, jsonb_select
from colmz.updates import SchemaError, Updates

if TYPE_CHECKING:
    from colmz.continual.model import ContinualTask

__all__ = [
    "BATCH_ROWS",
    "BATCH_ROWS_LINEAR",
    "CompiledStatement",
    "Lifted",
    "RegisteredTables",
    "TaskDuckDB",
    "check_statements",
    "evaluate_union",
    "infer_columns",
    "lift",
    "task_relations",
    "union_query",
]

#: A batch of times evaluated together holds at most this many input rows (more in one time)
#: when some DELETE tests every candidate row at every time of the batch (its cost grows with
#: the square of the batch's length) ...
BATCH_ROWS = 1 << 16
#: ... and at most this many otherwise (the cost then grows with the matches, not with every
#: candidate at every time; the cap bounds memory and the matches of often repeated rows).
BATCH_ROWS_LINEAR = 1 << 17

#: A registered relation's name in DuckDB's messages (mapped back to the user's name).
_RELATION = re.compile(re.escape(RESERVED_PREFIX) + r"r\d+")


def task_relations(schemas) -> tuple:
    """:func:`colmz.sql.translate`'s ``relations`` for a task's collections: ``schemas``
    maps each collection's name (a ``str``, or a qualified name's parts) to its columns
    (:class:`colmz.order.ColumnSpec`). A collection holding an array column is told under
    every name a statement may write it by, as a catalog's queries tell theirs (its full name;
    ``schema.item`` in the default database; its item in the default schema). A name two
    collections fold to (DuckDB folds case: ``"T"`` and ``t``) tells neither's columns, so a
    slice there is refused by name rather than read as the wrong one's.

    >>> task_relations({"o": [ColumnSpec("a", pa.list_(pa.int64()))], "i": [ColumnSpec("k", pa.int64())]})
    (('materialize.public.o', (('a', 'array'),)), ('public.o', (('a', 'array'),)), ('o', (('a', 'array'),)))
    """
    told: dict[str, tuple] = {}
    folded: set[str] = set()
    for name, schema in schemas.items():
        q = name if isinstance(name, QualifiedName) else resolve_item(name)
        arrays = array_relations(q.item, ((c.name, c.type) for c in schema))
        for n in reading_names(q):
            if n in folded:
                told.pop(n, None)  # a second collection of this name: neither is told
            elif arrays:
                told[n] = arrays[0][1]
            folded.add(n)
    return tuple(told.items())


class TaskDuckDB:
    """One continual task's DuckDB connection, the names its collections are registered
    under (the output, the input, then the references, in that order) and the array columns
    its statements are translated with (``relations``, from :func:`task_relations`).

    >>> d = TaskDuckDB(["seen", "events"])
    >>> d.registered_as
    {'seen': '__colmz_r0', 'events': '__colmz_r1'}
    >>> d.bind(d.translate("SELECT k FROM events"))
    'SELECT k FROM "__colmz_r1"'
    """

    def __init__(self, names, connection=None, relations: tuple = ()):
        self.registered_as = {n: relation_name(i) for i, n in enumerate(names)}
        #: The array columns of the task's collections, for :func:`colmz.sql.translate`.
        self.relations = relations
        self._con = connection
        #: A connection given by the caller (a catalog's) is shared: nothing stays registered.
        self.shared = connection is not None
        #: Tables left registered on the task's own connection, by registered name.
        self.kept: dict[str, pa.Table] = {}

    def connection(self):
        """The connection statements run on (opened on first use)."""
        if self._con is None:
            self._con = session()
        return self._con

    def translate(self, sql: str) -> str:
        """``sql`` translated (:func:`colmz.sql.translate`) told the collections' array
        columns (a text of a task without arrays shares everyone's translation)."""
        return translate(sql, self.relations) if self.relations else translate(sql)

    def bind(self, translated: str) -> str:
        """Translated SQL with the collections it names bound to their registered names."""
        return bind_relations_as(translated, tuple(self.registered_as.items()))

    def user_names(self, message: str) -> str:
        """``message`` (DuckDB's) with registered names replaced by the collections' names."""
        names = {r: n for n, r in self.registered_as.items()}
        return _RELATION.sub(lambda m: names.get(m.group(0), m.group(0)), message)

    def registered(self, transient: bool = False) -> RegisteredTables:
        """The tables of one step (``transient``: a batch's, never kept)."""
        return RegisteredTables(self, transient)


class RegisteredTables:
    """The Arrow tables registered in a DuckDB connection for one step, each registered
    once. On a connection the task shares (with a catalog) they are unregistered at the end;
    on its own connection they stay until replaced, saving an unregister and a register of
    every table that is the same object next step."""

    def __init__(self, duck: TaskDuckDB, transient: bool = False):
        self.duck = duck
        self._con = None
        # A batch's tables are large and used once: never kept.
        self.shared = duck.shared or transient
        self.tables: dict[str, pa.Table] = {} if self.shared else duck.kept

    @property
    def con(self):
        if self._con is None:
            self._con = self.duck.connection()
        return self._con

    def ensure(self, name: str, table: pa.Table) -> None:
        name = self.duck.registered_as.get(name, name)  # a collection's registered name
        if self.tables.get(name) is not table:
            self.con.register(name, table)
            self.tables[name] = table

    def __enter__(self) -> RegisteredTables:
        return self

    def __exit__(self, *exc) -> None:
        if self.shared:
            for name in self.tables:
                self._con.unregister(name)
                self.duck.kept.pop(name, None)
            self.tables.clear()


class CompiledStatement:
    """One statement of task ``task_name`` ready to run: SQL translated and bound once
    (``sql``), or a callable (``fn``). ``kind`` is ``"insert"`` or ``"delete"``; ``q`` the
    query, the predicate (``None``: every row) or the callable."""

    def __init__(self, kind: str, q, index: int, task_name: str, duck: TaskDuckDB):
        self.kind = kind
        self.index = index
        self.task_name = task_name
        self.duck = duck
        self.fn = None
        self.sql = None
        self.names: set[str] | None = None
        self.raw_types: list | None = None  # the SQL result's Arrow types (plan-time check)
        self.text = q if isinstance(q, str) else None
        #: The positions of the task's jsonb columns (an INSERT stores jsonb's text there).
        self.jsonb: tuple[int, ...] = ()
        #: The positions of its json columns (an INSERT's text there must read as JSON).
        self.json: tuple[int, ...] = ()
        self.now_form: str | None = None
        #: Whether ``sql`` holds rules of its relations' column types (colmz.sql.column_rules:
        #: a set operation's, jsonb's, interval's, array's) that a query rebuilt from ``text``
        #: would not.
        self.kind_rules = False
        #: How errors name the statement: its number and construct (Materialize's wording).
        self.label = task_statement(task_name, index, kind, predicate=bool(q) and kind == "delete")
        if callable(q):
            self.fn = q
        elif q is None or isinstance(q, str):
            if kind == "insert":
                if not q:
                    raise ValueError(f"body[{index}]: INSERT needs a query")
                if select_list_is_empty(q):
                    # PostgreSQL's zero-column SELECT, which DuckDB cannot parse: an INSERT
                    # into the task's (one or more) columns has too few expressions.
                    raise SchemaError(f"{self.label} query columns did not match: "
                                      f"{arity_message(0, 1)}")
                self.sql = duck.bind(duck.translate(q))
                self.names = referenced_names(q)
            else:
                if q:
                    check_expression(q, f"{self.label}: predicate")
                # (the predicate translated inside its query: its columns are the output's)
                rows = select_where(task_name, q or None)
                self.sql = duck.bind(duck.translate(rows) if q else rows)
                self.names = referenced_names(q or "") | {relation_word(task_name)}
        else:
            raise TypeError(f"body[{index}] must hold SQL text or a callable, got {type(q).__name__}")

    def reads(self, name) -> bool:
        # The words of the text: a superset of the relations it reads (a qualified name is
        # looked for by its last part).
        return self.names is None or relation_word(name) in self.names

    def assign_to(self, raw: pa.Table, schema) -> bool:
        """Convert this INSERT's result to the task's column types by PostgreSQL's
        assignment casts, inside its own query (:func:`colmz.sql.write.assignment_query`,
        as every writer plans them); whether the query changed. ``raw`` is the query's
        result (its types); a column without an assignment cast raises ``SchemaError``
        naming the statement and PostgreSQL's message."""
        if raw.num_columns != len(schema):
            return False  # conform says how the columns do not match
        sel = assignment_query(f"({self.sql})", [f.type for f in raw.schema], schema,
                               f"{self.label} query columns did not match")
        if sel is None:
            return False
        self.sql = sel
        return True

    def run_sql(self, reg: RegisteredTables, t: int, inputs, refs, view_tbl) -> pa.Table:
        for k, v in (*inputs.items(), *refs.items()):
            reg.ensure(k, v)
        if view_tbl is not None:
            reg.ensure(self.task_name, view_tbl)
        try:
            # mz_now()'s form is settled by the first evaluation (the plan-time check).
            table, self.now_form = run_query(reg.con, self.sql, t, self.now_form)
        except SQLError as e:
            # DuckDB names the registered tables: say the user's names.
            msg = self.duck.user_names(str(e))
            raise SQLError(f"{self.label}: {msg}") from None
        return table

    def rows(self, reg: RegisteredTables, t: int, inputs, refs, view_tbl, schema) -> pa.Table:
        """The statement's rows at ``t``, conformed to the task's columns ``schema``."""
        what = self.label
        if self.fn is not None:
            out = self.fn(dict(inputs), dict(refs), view_tbl)
            if self.kind == "insert" and (self.jsonb or self.json):
                out = as_jsonb(out, self.jsonb, self.json)
        else:
            out = self.run_sql(reg, t, inputs, refs, view_tbl)
        return conform(out, schema, what)


# ----------------------------------------------------------------------------- plan time


def infer_columns(task: ContinualTask) -> tuple[ColumnSpec, ...]:
    """The task's columns: a self-referencing task's (an SQL ``INSERT`` reads the output,
    or a ``DELETE`` removes from it: either names the output, whose columns are what is
    being decided) are its input's, as Materialize gives a task without a column list
    (its ``ct_errors.slt``: ``DELETE FROM nope; INSERT INTO nope SELECT *, 'bar' FROM foo``
    fails as an INSERT of more expressions than target columns); any other's are the
    result of its first SQL ``INSERT``, run on empty tables, named as PostgreSQL names them."""
    me = task.duckdb.registered_as[task.name]  # the bound text names the output so, exactly
    if any(b.kind == "delete" or (b.kind == "insert" and b.sql is not None
           and any(t.kind == "qident" and t.name == me for t in tokenize(b.sql)))
           for b in task.compiled):
        return tuple(task.input.schema)
    for b in task.compiled:
        if b.kind == "insert" and b.sql is not None and not b.reads(task.name):
            empty = {task.input_name: empty_table(task.input.schema)}
            refs = {k: empty_table(v.schema) for k, v in task.references.items()}
            with task.duckdb.registered() as reg:
                table = rename_like_postgres(b.run_sql(reg, 0, empty, refs, None), b.text)
            return tuple(ColumnSpec(f.name, storable(f.type)) for f in table.schema)
    raise ValueError(
        f"continual task {task.name!r}: columns= is required (no SQL INSERT to infer them from)"
    )


def check_statements(task: ContinualTask) -> None:
    """Plan-time check: every SQL statement runs, and its columns match the task's."""
    empty = {task.input_name: empty_table(task.input.schema)}
    refs = {k: empty_table(v.schema) for k, v in task.references.items()}
    view = empty_table(task.schema)
    with task.duckdb.registered() as reg:
        for b in task.compiled:
            if b.sql is not None:
                b_refs = {k: v for k, v in refs.items() if b.reads(k)}
                raw = b.run_sql(reg, 0, empty, b_refs, view)
                if b.kind == "insert" and b.assign_to(raw, task.schema):
                    raw = b.run_sql(reg, 0, empty, b_refs, view)
                if b.kind == "insert" and (b.jsonb or b.json) and raw.num_columns == len(task.schema):
                    # jsonb columns hold PostgreSQL's jsonb text (a string literal, a json value);
                    # json columns the text written, once it reads as JSON
                    b.sql = jsonb_select(f"({b.sql})", [c.name for c in task.schema], b.jsonb, b.json)
                    raw = b.run_sql(reg, 0, empty, b_refs, view)
                b.raw_types = [f.type for f in raw.schema]
                message = arity_message(raw.num_columns, len(task.schema)) if b.kind == "insert" else None
                if message is not None:
                    raise SchemaError(
                        f"{b.label} query columns did not match: {message} (the task "
                        f"has {len(task.schema)} column(s) {[c.name for c in task.schema]}, the "
                        f"query gives {raw.num_columns} {raw.column_names})")
                conform(raw, task.schema, b.label)


# ----------------------------------------------------------------------------- one time


def union_query(task: ContinualTask) -> tuple[str, str] | None:
    """All statements as one query (a ``UNION ALL`` tagged by statement), with its
    ``mz_now()`` form, when that is exact: independent SQL statements whose results
    already have the task's column types (so the union coerces nothing)."""
    body = task.compiled
    if task.statements != "independent" or len(body) < 2 or any(b.sql is None for b in body):
        return None
    types = [c.type for c in task.schema]
    if any(b.raw_types != types for b in body):
        return None
    forms = {b.now_form for b in body if uses_now(b.sql)}
    if len(forms) > 1:
        return None
    return sql_lift.tagged_union([b.sql for b in body]), (forms.pop() if forms else "uint64")


def evaluate_union(task: ContinualTask, union: tuple[str, str], t: int, inputs, ref,
                   view_tbl) -> list[Updates]:
    """Every statement's contribution at ``t`` from the one union query; ``[]`` when it
    fails (the statements then run one by one and raise what they raise)."""
    sql, form = union
    body = task.compiled
    try:
        with task.duckdb.registered() as reg:
            for k, v in inputs.items():
                reg.ensure(k, v)
            for k in task.references:
                if any(b.reads(k) for b in body):
                    reg.ensure(k, ref(k))
            reg.ensure(task.name, view_tbl)
            out, _ = run_query(reg.con, sql, t, form)
        stmt = out.column(0).to_numpy()
        rows = conform(out.drop_columns([out.column_names[0]]), task.schema, f"CONTINUAL TASK {task.name}")
    except Exception:
        return []
    task.stats["union_times"] += 1
    sign = np.array([1 if b.kind == "insert" else -1 for b in body], np.int64)
    u = Updates({c.name: rows.column(i) for i, c in enumerate(task.schema)},
                time=np.full(len(stmt), t, np.uint64), diff=sign[stmt.astype(np.int64)], copy=False)
    return [u]


# ----------------------------------------------------------------------------- batches


def lift(task: ContinualTask) -> Lifted | None:
    """Each statement as one DuckDB query over all the times of a batch, or ``None`` when
    the task is not batchable (see :attr:`colmz.continual.ContinualTask.batchable`).

    The times are a table :data:`colmz.sql.lift.TIMES`; for each time a ``LATERAL``
    subquery binds the input's name to that time's inserts and (for a ``DELETE``) the
    output's name to the candidate rows born before that time, then runs the statement as
    written. ``mz_now()`` is the lateral time (:mod:`colmz.sql.lift`).
    """
    body = task.compiled
    if task.statements != "independent" or not body:
        return None
    if any(b.sql is None for b in body):
        return None
    cols = [c.name for c in task.schema]
    in_rel = task.duckdb.registered_as[task.input_name]
    out_rel = task.duckdb.registered_as[task.name]
    in_cols = [c.name for c in task.input.schema]
    queries = []
    quadratic = False  # some DELETE tests every candidate at every time
    for b in body:
        if b.kind == "insert":
            if b.reads(task.name):
                return None
            queries.append(sql_lift.lifted_insert(b.sql, in_rel, in_cols, b.now_form))
            continue
        text = b.text or ""
        # Only ``name.column`` (the tested row's own column) is row-local.
        if not sql_lift.row_local(text, relation_word(task.name), cols):
            return None
        # (a subquery translated again from the text would lose the rules of column kinds)
        semi = None if b.kind_rules else sql_lift.in_subquery(text, relation_word(task.name), cols)
        if semi is not None:
            # ``(columns) IN (subquery)``: the subquery per time, joined with the
            # candidates on the columns -- only the matching pairs are formed.
            lhs, sub = semi
            queries.append(sql_lift.lifted_semijoin(task.duckdb.bind(task.duckdb.translate(sub)), lhs, in_rel,
                                                    in_cols, b.now_form))
            continue
        quadratic = True
        # b.sql is SELECT * FROM <output> WHERE (predicate), bound: over the candidates'
        # CTE its * carries the candidate id.
        queries.append(sql_lift.lifted_delete(b.sql, in_rel, in_cols, out_rel, cols, b.now_form))
    return Lifted(queries, quadratic)


class Lifted:
    """A task's statements lifted over the times of a batch (built by :func:`lift`).

    ``queries`` holds one query per statement, in body order; ``quadratic`` says whether
    some ``DELETE`` tests every candidate row at every time (its cost grows with the square
    of the batch's length, so batches are cut at :data:`BATCH_ROWS` input rows, else at
    :data:`BATCH_ROWS_LINEAR`).
    """

    def __init__(self, queries: list[str], quadratic: bool):
        self.queries = queries
        self.quadratic = quadratic

    def segments(self, task: ContinualTask, todo: list[tuple[int, Updates]]) -> list[list[tuple[int, Updates]]]:
        """``todo`` cut where a reference the statements read changes (so each batch reads
        every reference at one content) and before the last time (a write there would
        overflow; the time-by-time path raises it)."""
        times = [t for t, _ in todo]
        cuts = set()
        for name, r in task.references.items():
            if not any(b.reads(name) for b in task.compiled):
                continue
            ch = r.updates(times[0] + 1, times[-1] + 1)
            for s in np.unique(ch.time).tolist() if len(ch) else []:
                # A change at s is first seen by the first time >= s.
                cuts.add(bisect.bisect_left(times, s))
        if times[-1] == MAX_TIME:
            cuts.add(len(times) - 1)
        # A row-local DELETE is tested against every candidate at every later time of its
        # batch, so a batch costs (output + its inserts) x its times: long batches are cut at
        # BATCH_ROWS input rows (one query's fixed cost is then spread over enough times).
        # Without one, costs follow the matches and a larger cap bounds them and memory.
        cap = BATCH_ROWS if self.quadratic else BATCH_ROWS_LINEAR
        n = 0
        for i, (_, u) in enumerate(todo):
            n += len(u)
            if n > cap and i > 0:
                cuts.add(i)
                n = len(u)
        bounds = [0, *sorted(c for c in cuts if 0 < c < len(times)), len(times)]
        return [todo[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def evaluate(self, task: ContinualTask, seg: list[tuple[int, Updates]], view: Updates) -> Updates | None:
        """``ΔO`` at every time of ``seg`` (one batch, from :meth:`segments`) given ``view``,
        the output as of the time before it; ``None`` when the loop must run the batch.

        Equality with the time-by-time loop. Let the batch be times ``t1 < ... < tk``
        (the only times where statements run; references constant over the batch). An
        ``INSERT`` reads neither the output nor other statements' changes, so its rows at
        ``ti`` are a function of the inserts at ``ti``, the references and ``ti``: the
        lifted query computes exactly them. A ``DELETE`` with a row-local predicate ``p``
        removes at ``ti`` every copy in ``O@(ti-1)`` whose value satisfies ``p(ti)``. A copy
        is *born* before the batch (in ``O@(t1-1)``) or inserted at some ``tj``; by induction
        over ``i`` it is in ``O@(ti-1)`` exactly when it was born before ``ti`` and no
        ``DELETE`` matched it at a batch time in between. So each copy leaves at the first
        batch time after its birth where some ``DELETE`` matches it, contributing ``-1`` per
        matching statement there. When two statements match a copy at that time the copy
        model no longer holds (the loop raises :class:`colmz.errors.NegativeMultiplicity`
        unless inserts of the same value at that time make up for it), so the batch is
        handed to the loop (``None``). Copies of one value born at one time share their
        fate, so they are one candidate row with a multiplicity. Summing inserts and
        removals per time gives each ``ΔO(ti)``, consolidated as the loop's.
        """
        lf = sql_lift
        times = np.array([t for t, _ in seg], np.uint64)
        t0 = int(times[0])
        ins = concat([u for _, u in seg])
        inputs = expand(ins, f"input {task.input_name!r}")
        rep = ins.time if np.all(ins.diff == 1) else np.repeat(ins.time, ins.diff)
        inputs = inputs.append_column(lf.TIME, pa.array(rep, pa.uint64()))
        refs = {k: relation_rows(r, t0, f"reference {k!r}") for k, r in task.references.items()
                if any(b.reads(k) for b in task.compiled)}
        names = [c.name for c in task.schema]
        what = f"CONTINUAL TASK {task.name}"
        with task.duckdb.registered(transient=True) as reg:
            reg.ensure(lf.TIMES, pa.table({lf.TIME: pa.array(times, pa.uint64())}))
            reg.ensure(lf.INPUT_ROWS, inputs)
            for k, v in refs.items():
                reg.ensure(k, v)
            inserted = []
            for b, q in zip(task.compiled, self.queries):
                if b.kind == "insert":
                    out, _ = run_query(reg.con, q, t0, "uint64")
                    rows = conform(out.drop_columns([lf.TIME]), task.schema, what)
                    inserted.append((rows, out.column(lf.TIME).to_numpy().astype(np.uint64)))
            parts = [Updates({n: r.column(n) for n in names}, time=tt, diff=np.ones(len(tt), np.int64),
                             copy=False) for r, tt in inserted if r.num_rows]
            deletes = [q for b, q in zip(task.compiled, self.queries) if b.kind == "delete"]
            if deletes:
                # Candidates: the output before the batch (born 0) and every inserted copy.
                old = at_time(view, t0)
                cand_rows = [pa.Table.from_arrays([old.column(n) for n in names], names=names)]
                born = [pa.array(np.zeros(len(old), np.uint64))]
                mult = [np.asarray(old.diff, np.int64)]
                for r, tt in inserted:
                    cand_rows.append(r)
                    born.append(pa.array(tt + np.uint64(1), pa.uint64()))
                    mult.append(np.ones(len(tt), np.int64))
                cand = pa.concat_tables(cand_rows)
                mult = np.concatenate(mult)
                cand = cand.append_column(lf.BORN, pa.concat_arrays(born))
                cand = cand.append_column(lf.CANDIDATE_ID, pa.array(np.arange(len(cand), dtype=np.int64)))
                reg.ensure(lf.CANDIDATES, cand)
                hit_t, hit_c = [], []
                for q in deletes:
                    # Each statement's first matching time per candidate.
                    out, _ = run_query(reg.con, lf.first_match(q), t0, "uint64")
                    hit_t.append(out.column(lf.TIME).to_numpy().astype(np.uint64))
                    hit_c.append(out.column(lf.CANDIDATE_ID).to_numpy().astype(np.int64))
                ht, hc = np.concatenate(hit_t), np.concatenate(hit_c)
                if len(hc):
                    if len(deletes) > 1:
                        order = np.lexsort((ht, hc))
                        ht, hc = ht[order], hc[order]
                        first = np.ones(len(hc), bool)
                        first[1:] = hc[1:] != hc[:-1]
                        # Two statements first matching one copy at one time: only the loop
                        # knows what follows (it may raise there).
                        if np.any((ht[1:] == ht[:-1]) & ~first[1:]):
                            return None
                        ht, hc = ht[first], hc[first]
                    cid, when = hc, ht
                    gone = cand.select(names).take(pa.array(cid))
                    parts.append(Updates({n: gone.column(n) for n in names}, time=when,
                                         diff=-mult[cid], copy=False))
        if not parts:
            return Updates.empty(task.schema)
        return consolidate(concat(parts))
