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
from collections.abc import Sequence
from dataclasses import dataclass

from colmz.spark.schemas import SPARK_MAX_TIME, ColumnMissingError, check_rows, spark_types

__all__ = ["EventsSpec", "check_events", "desired_updates", "example_events", "verify", "view_sql"]

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
    vf, vt = F.col(spec.valid_from), F.col(spec.valid_to)
    problems = {
        f"NULL {spec.valid_from}": vf.isNull(),
        f"NULL {spec.valid_to}": vt.isNull(),
        f"negative {spec.valid_from}": vf < 0,
        f"negative {spec.valid_to}": vt < 0,
        f"{spec.valid_to} < {spec.valid_from}": vt < vf,
    }
    return check_rows(df, problems, "bad events")


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


def example_events(spark, n: int = 20_000, ticks: int = 1000, seed: int = 0):
    """A generated events log: subscriptions ``(customer, region, plan)`` valid for a while.

    Deterministic for a given ``(n, ticks, seed)`` whatever the partitioning (values are
    hashes of the row id). Intervals start in ``[0, ticks)`` and last ``1 .. ticks/2``
    times, so some end after the last tick (their retractions stay in the buffer).

    Returns a DataFrame ``customer long, region string, plan string, valid_from long,
    valid_to long``.
    """
    from pyspark.sql import functions as F

    for name, v in (("n", n), ("ticks", ticks)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")

    def h(salt: int):
        return F.xxhash64(F.col("id"), F.lit(seed), F.lit(salt))

    def pick(salt: int, options: Sequence[str]):
        arr = F.array(*[F.lit(o) for o in options])
        return F.element_at(arr, (F.pmod(h(salt), F.lit(len(options))) + 1).cast("int"))

    start = F.pmod(h(4), F.lit(ticks))
    return spark.range(n).select(
        F.pmod(h(1), F.lit(max(n // 4, 1))).alias("customer"),
        pick(2, ["eu", "us", "ap", "sa"]).alias("region"),
        pick(3, ["free", "pro", "team", "enterprise"]).alias("plan"),
        start.alias("valid_from"),
        (start + 1 + F.pmod(h(5), F.lit(max(ticks // 2, 1)))).alias("valid_to"),
    )


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

    for t in ticks:
        if not 0 <= int(t) < SPARK_MAX_TIME:
            raise ValueError(f"verification tick must be in [0, 2**63-1), got {t}")
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
