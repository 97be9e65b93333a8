"""Events with validity intervals: the input of the ``colmz sink`` job.

Design
------
An *events table* has key columns, a value column and two integer times ``valid_from`` and
``valid_to``. The materialized view is a temporal filter: at time ``t`` it holds the
multiset of rows ``(keys..., value)`` whose ``valid_from <= t < valid_to``. As updates that is
``(row, valid_from, +1)`` and ``(row, valid_to, -1)`` (:func:`desired_updates`) -- the
retraction is scheduled at the end of the interval, often far in the future, which is the
case Materialize's correction buffer was redesigned for.

Everything that can be wrong with the events is found by :func:`check_events` before the job
writes anything: missing columns and wrong types from the schema, then NULL, negative and
inverted (``valid_to < valid_from``) times with one aggregation over the data.

:func:`view_sql` evaluates the view directly in Spark SQL at sample ticks; the job checks the
store against it (:func:`verify`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from colmz.spark.schemas import (
    SPARK_MAX_TIME,
    ColumnMissingError,
    InputError,
    check_rows,
    spark_types,
)

__all__ = [
    "EventsSpec", "check_event_values", "check_events", "desired_updates", "event_problems",
    "example_events", "example_events_table", "verify", "verify_local", "view_sql",
]

#: Output column names of the updates (so data columns may not use them).
TIME, DIFF = "time", "diff"


@dataclass(frozen=True)
class EventsSpec:
    """Which columns of an events table play which role.

    >>> EventsSpec(keys=("k",), value="v").data
    ['k', 'v']
    """

    keys: tuple[str, ...]
    value: str
    valid_from: str = "valid_from"
    valid_to: str = "valid_to"

    @property
    def data(self) -> list[str]:
        """The data columns of the view: keys, then the value."""
        return [*self.keys, self.value]


def _q(name: str) -> str:
    """A column name quoted for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def check_schema(schema, spec: EventsSpec) -> None:
    """Raise for missing, clashing or mistyped columns (no data is read).

    Raises
    ------
    ColumnMissingError, TypeError, ValueError
    """
    T, integers, supported = spark_types()
    fields = {f.name: f for f in schema.fields}
    names = list(fields)
    if not spec.keys:
        raise ValueError("keys must name at least one key column")
    roles = [*(("key", k) for k in spec.keys), ("value", spec.value),
             ("valid_from", spec.valid_from), ("valid_to", spec.valid_to)]
    seen: dict[str, str] = {}
    for role, col in roles:
        if col in seen:
            raise ValueError(f"column {col!r} is both the {seen[col]} and the {role} column")
        seen[col] = role
        if col not in fields:
            raise ColumnMissingError(f"{role} column {col!r} is not in the events; columns are {names}")
    for role, col in roles[:-2]:
        if col in (TIME, DIFF):
            raise ValueError(f"{role} column {col!r} clashes with the output's {col!r} column; rename it")
        t = fields[col].dataType
        if not isinstance(t, supported):
            raise TypeError(
                f"{role} column {col!r} has type {t.simpleString()}; colmz takes integers, floats, "
                "boolean, string, binary, date and timestamp columns"
            )
    for role, col in roles[-2:]:
        t = fields[col].dataType
        if not isinstance(t, integers):
            raise TypeError(
                f"{role} column {col!r} has type {t.simpleString()}; it must be an integer "
                "time (byte/short/int/long)"
            )


def check_events(df, spec: EventsSpec) -> int:
    """Validate an events DataFrame; return its row count.

    Checks the schema (:func:`check_schema`), then with one aggregation: NULL ``valid_from``
    or ``valid_to``, negative times, and ``valid_to < valid_from``. All problems found are
    reported together, each with its count and one offending row.

    Raises
    ------
    InputError
        Bad values (the message lists every problem).
    ColumnMissingError, TypeError, ValueError
        Bad schema.
    """
    from pyspark.sql import functions as F

    check_schema(df.schema, spec)
    problems = event_problems(spec, F.col(spec.valid_from), F.col(spec.valid_to),
                              lambda c: c.isNull(), lambda a, b: a < b)
    return check_rows(df, problems, "bad events")


def event_problems(spec: EventsSpec, vf, vt, is_null: Callable, less: Callable) -> dict:
    """The events' value problems, description to condition, in the caller's expression kind
    (Spark Columns or pyarrow arrays): one list, so every check of events (:func:`check_events`,
    :func:`check_event_values`, the streaming sink's per-batch check) reports the same words.

    ``vf`` and ``vt`` are the ``valid_from`` and ``valid_to`` expressions, ``is_null(x)`` and
    ``less(a, b)`` build a condition of that kind.

    >>> import pyarrow as pa, pyarrow.compute as pc
    >>> vf, vt = pa.array([0, -1]), pa.array([1, None])
    >>> p = event_problems(EventsSpec(("k",), "v"), vf, vt, pc.is_null, pc.less)
    >>> {desc: cond.to_pylist() for desc, cond in p.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'NULL valid_from': [False, False], 'NULL valid_to': [False, True],
     'negative valid_from': [False, True], 'negative valid_to': [False, None],
     'valid_to < valid_from': [False, None]}
    """
    return {
        f"NULL {spec.valid_from}": is_null(vf),
        f"NULL {spec.valid_to}": is_null(vt),
        f"negative {spec.valid_from}": less(vf, 0),
        f"negative {spec.valid_to}": less(vt, 0),
        f"{spec.valid_to} < {spec.valid_from}": less(vt, vf),
    }


def check_event_values(table, spec: EventsSpec) -> int:
    """:func:`check_events`' value checks over a ``pyarrow.Table`` of events in this process
    (no Spark job); return its row count.

    The same problems, counted the same way and reported in the same words: NULL, negative
    and inverted times, each with its count and one offending row. The schema is checked
    separately (:func:`check_schema` on the Spark DataFrame made of the table).

    Raises
    ------
    InputError
        Bad values (the message lists every problem).

    >>> import pyarrow as pa
    >>> check_event_values(pa.table({"valid_from": [0, 2], "valid_to": [1, 5]}), EventsSpec(("k",), "v"))
    2
    """
    import json

    import numpy as np
    import pyarrow.compute as pc

    problems = event_problems(spec, table.column(spec.valid_from), table.column(spec.valid_to),
                              pc.is_null, pc.less)
    found = []
    for desc, cond in problems.items():
        hit = np.flatnonzero(cond.to_numpy(zero_copy_only=False) == True)  # noqa: E712 - NULL is not a hit
        if len(hit):
            # Spark's to_json leaves NULL fields out; so does this.
            row = {k: v for k, v in table.slice(int(hit[0]), 1).to_pylist()[0].items() if v is not None}
            found.append(f"{len(hit)} row(s) with {desc}, e.g. {json.dumps(row, separators=(',', ':'), default=str)}")
    if found:
        raise InputError("bad events: " + "; ".join(found))
    return table.num_rows


def desired_updates(df, spec: EventsSpec):
    """The view's updates: ``(keys..., value, valid_from, +1)`` and ``(..., valid_to, -1)``.

    >>> desired_updates(events, EventsSpec(("k",), "v")).columns  # doctest: +SKIP
    ['k', 'v', 'time', 'diff']
    """
    from pyspark.sql import functions as F

    data = [F.col(c) for c in spec.data]
    plus = df.select(*data, F.col(spec.valid_from).cast("long").alias(TIME), F.lit(1).cast("long").alias(DIFF))
    minus = df.select(*data, F.col(spec.valid_to).cast("long").alias(TIME), F.lit(-1).cast("long").alias(DIFF))
    return plus.unionByName(minus)


#: Odd 64-bit multipliers of the example's hash (splitmix64's, and two large primes).
_GOLDEN, _SEED_MUL, _SALT_MUL = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _mix(x):
    """splitmix64's finalizer over a uint64 array (wrapping arithmetic)."""
    import numpy as np

    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(_SEED_MUL)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(_SALT_MUL)
    return x ^ (x >> np.uint64(31))


#: The example log's time scale: ``n`` events per this many ticks, however many ticks are run.
EXAMPLE_SPAN = 1000


def example_events_table(n: int = 20_000, ticks: int = 1000, seed: int = 0):
    """A generated events log as a ``pyarrow.Table``: subscriptions ``(customer, region,
    plan)`` valid for a while.

    ``n`` is the log's density -- events per :data:`EXAMPLE_SPAN` (1000) ticks -- and ``ticks``
    how far it runs: the table holds the events starting before ``ticks``. The log does not
    depend on ``ticks``: a longer run extends the same log (its first rows are a shorter run's
    rows), so a store kept by ``colmz sink`` over 1000 ticks goes on over 1200 with the same
    events. Built in this process with numpy (no Spark job): event ``i`` starts at tick
    ``i * 1000 // n``, and its values are 64-bit hashes of ``i``, the seed and a per-column
    salt, so the log is deterministic for a given ``(n, seed)``. Nine intervals in ten last
    1..50 ticks, the rest up to 550, so some end after the last tick (their retractions stay
    in the buffer). Customers are drawn from ``n // 4`` ids.

    Returns a table ``customer int64, region string, plan string, valid_from int64,
    valid_to int64``.

    >>> t = example_events_table(1000, ticks=50, seed=1)
    >>> t.num_rows, t.column_names
    (50, ['customer', 'region', 'plan', 'valid_from', 'valid_to'])
    >>> longer = example_events_table(1000, ticks=80, seed=1)
    >>> longer.slice(0, t.num_rows).equals(t)
    True
    """
    import numpy as np
    import pyarrow as pa

    for name, v in (("n", n), ("ticks", ticks)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    # events starting before `ticks`: i * SPAN // n < ticks  <=>  i < ceil(ticks * n / SPAN)
    count = -(-ticks * n // EXAMPLE_SPAN)
    index = np.arange(count, dtype=np.uint64)
    base = index * np.uint64(_GOLDEN) + np.uint64((seed * _SEED_MUL) % 2**64)

    def h(salt: int):
        return _mix(base + np.uint64((salt * _SALT_MUL) % 2**64))

    def pick(salt: int, options):
        codes = (h(salt) % np.uint64(len(options))).astype(np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(options)).cast(pa.string())

    start = (index * np.uint64(EXAMPLE_SPAN) // np.uint64(n)).astype(np.int64)
    long_ = (h(6) % np.uint64(10)) == 0
    length = 1 + (h(5) % np.uint64(50)).astype(np.int64) + np.where(
        long_, (h(7) % np.uint64(500)).astype(np.int64), 0)
    return pa.table({
        "customer": (h(1) % np.uint64(max(n // 4, 1))).astype(np.int64),
        "region": pick(2, ["eu", "us", "ap", "sa"]),
        "plan": pick(3, ["free", "pro", "team", "enterprise"]),
        "valid_from": start,
        "valid_to": start + length,
    })


def example_events(spark, n: int = 20_000, ticks: int = 1000, seed: int = 0):
    """:func:`example_events_table` as a Spark DataFrame (the same rows).

    Returns a DataFrame ``customer long, region string, plan string, valid_from long,
    valid_to long``.
    """
    return spark.createDataFrame(example_events_table(n, ticks, seed))


def view_sql(spark, events, spec: EventsSpec, ticks: Sequence[int]):
    """The view at each of ``ticks``, evaluated directly in Spark SQL.

    Returns a DataFrame ``_colmz_tick, keys..., value, _colmz_n`` (``_colmz_n`` = multiplicity).
    """
    tag = uuid.uuid4().hex[:8]
    ev, tk = f"colmz_events_{tag}", f"colmz_ticks_{tag}"
    events.createOrReplaceTempView(ev)
    spark.createDataFrame([(int(t),) for t in ticks], "_colmz_tick long").createOrReplaceTempView(tk)
    cols = ", ".join(f"e.{_q(c)}" for c in spec.data)
    return spark.sql(
        f"SELECT t._colmz_tick, {cols}, COUNT(*) AS _colmz_n FROM {ev} e JOIN {tk} t "
        f"ON e.{_q(spec.valid_from)} <= t._colmz_tick AND t._colmz_tick < e.{_q(spec.valid_to)} "
        f"GROUP BY t._colmz_tick, {cols}"
    )


def state_sql(spark, updates, data: Sequence[str], ticks: Sequence[int]):
    """What a DataFrame of updates accumulates to at each of ``ticks``, in Spark SQL."""
    tag = uuid.uuid4().hex[:8]
    up, tk = f"colmz_updates_{tag}", f"colmz_ticks_{tag}"
    updates.createOrReplaceTempView(up)
    spark.createDataFrame([(int(t),) for t in ticks], "_colmz_tick long").createOrReplaceTempView(tk)
    cols = ", ".join(f"u.{_q(c)}" for c in data)
    return spark.sql(
        f"SELECT t._colmz_tick, {cols}, SUM(u.{DIFF}) AS _colmz_n FROM {up} u JOIN {tk} t "
        f"ON u.{TIME} <= t._colmz_tick GROUP BY t._colmz_tick, {cols} HAVING SUM(u.{DIFF}) <> 0"
    )


def _check_ticks(ticks: Sequence[int]) -> None:
    for t in ticks:
        if not 0 <= int(t) < SPARK_MAX_TIME:
            raise ValueError(f"verification tick must be in [0, 2**63-1), got {t}")


def verify(spark, events, updates, spec: EventsSpec, ticks: Sequence[int]) -> dict[int, dict[str, int]]:
    """Compare what ``updates`` accumulate to with the view, at each of ``ticks``.

    Returns ``{tick: {"rows": view rows (with multiplicity), "mismatches": differing
    (row, count) pairs}}``; all mismatches 0 means the updates are right at those ticks. A row
    whose count differs is two pairs (the view's and the state's), a row on one side only is
    one: the multiset difference taken both ways.

    One Spark action: the view's and the state's counts meet in one aggregation per
    ``(tick, row)``, then one per tick (a pair of ``exceptAll`` would evaluate each side twice).
    """
    from pyspark.sql import functions as F

    _check_ticks(ticks)
    keys = ["_colmz_tick", *spec.data]
    view = view_sql(spark, events, spec, ticks).select(
        *keys, F.col("_colmz_n").alias("_colmz_v"), F.lit(0).cast("long").alias("_colmz_s"))
    state = state_sql(spark, updates, spec.data, ticks).select(
        *keys, F.lit(0).cast("long").alias("_colmz_v"), F.col("_colmz_n").cast("long").alias("_colmz_s"))
    # NULLs in the data are one group each, as exceptAll compares them (groupBy treats NULL = NULL).
    rows = view.unionByName(state).groupBy(*keys).agg(
        F.sum("_colmz_v").alias("_colmz_v"), F.sum("_colmz_s").alias("_colmz_s"))
    v, s = F.col("_colmz_v"), F.col("_colmz_s")
    pairs = F.when(v != s, (v != 0).cast("int") + (s != 0).cast("int")).otherwise(0)
    per_tick = rows.groupBy("_colmz_tick").agg(F.sum(v).alias("rows"), F.sum(pairs).alias("mismatches"))
    found = {r["_colmz_tick"]: r for r in per_tick.collect()}
    return {
        int(t): {"rows": int((found[t]["rows"] if t in found else 0) or 0),
                 "mismatches": int((found[t]["mismatches"] if t in found else 0) or 0)}
        for t in ticks
    }


def verify_local(events, updates, spec: EventsSpec, ticks: Sequence[int]) -> dict[int, dict[str, int]]:
    """:func:`verify` evaluated in this process with pyarrow, for inputs that fit in memory.

    ``events`` is a ``pyarrow.Table`` with the spec's columns, ``updates`` one with the data
    columns, ``time`` and ``diff``. At each tick the view is counted straight from the events
    (rows with ``valid_from <= t < valid_to``, grouped) and the state by summing the updates
    at times ``<= t``; neither uses colmz's correction or consolidation code, so this checks
    the sink independently. Same result as :func:`verify` (NULLs in the data are one group,
    a differing count is two mismatched pairs, a row on one side only one).

    >>> import pyarrow as pa
    >>> ev = pa.table({"k": ["a", "b"], "v": [1, 1], "valid_from": [0, 1], "valid_to": [2, 3]})
    >>> up = pa.table({"k": ["a", "a"], "v": [1, 1], "time": [0, 2], "diff": [1, -1]})
    >>> verify_local(ev, up, EventsSpec(("k",), "v"), [0, 1])
    {0: {'rows': 1, 'mismatches': 0}, 1: {'rows': 2, 'mismatches': 1}}
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    _check_ticks(ticks)
    # Positional names: no data column can clash with the counts' or the aggregates' names.
    types = [events.schema.field(c).type for c in spec.data]
    data = [f"_colmz_d{i}" for i in range(len(types))]
    ev = events.select([*spec.data, spec.valid_from, spec.valid_to]).rename_columns([*data, "_colmz_f", "_colmz_t"])
    up = updates.select([*spec.data, TIME, DIFF]).rename_columns([*data, "_colmz_time", "_colmz_diff"])
    out = {}
    for t in ticks:
        t = int(t)
        live = ev.filter(pc.and_(pc.less_equal(ev.column("_colmz_f"), t), pc.greater(ev.column("_colmz_t"), t)))
        view = live.group_by(data, use_threads=False).aggregate([([], "count_all")])
        seen = up.filter(pc.less_equal(up.column("_colmz_time"), t))
        state = seen.group_by(data, use_threads=False).aggregate([("_colmz_diff", "sum")])
        n = len(view), len(state)
        def col(table, name, ty):
            return table.column(name).cast(ty).combine_chunks()

        both = pa.table({
            **{c: pa.chunked_array([col(view, c, ty), col(state, c, ty)], ty) for c, ty in zip(data, types)},
            "_colmz_v": pa.chunked_array([col(view, "count_all", pa.int64()), pa.nulls(n[1], pa.int64())]),
            "_colmz_s": pa.chunked_array([pa.nulls(n[0], pa.int64()), col(state, "_colmz_diff_sum", pa.int64())]),
        })
        # NULLs in the data are one group each, as in verify(); a zero state sum counts as absent.
        rows = both.group_by(data, use_threads=False).aggregate([("_colmz_v", "sum"), ("_colmz_s", "sum")])
        v = pc.fill_null(rows.column("_colmz_v_sum"), 0)
        s = pc.fill_null(rows.column("_colmz_s_sum"), 0)
        differ = pc.not_equal(v, s)
        pairs = pc.add(pc.cast(pc.not_equal(v, 0), pa.int64()), pc.cast(pc.not_equal(s, 0), pa.int64()))
        out[t] = {"rows": int(pc.sum(v).as_py() or 0),
                  "mismatches": int(pc.sum(pc.if_else(differ, pairs, 0)).as_py() or 0)}
    return out
